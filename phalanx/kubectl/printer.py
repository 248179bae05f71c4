"""kubectl's output habits: `kubectl get` tables, human ages, `-o json|yaml`.

Tables are kubectl's (`k8s.io/cli-runtime/pkg/printers.tabwriter` with its settings): uppercase headers,
columns padded to the widest cell plus three spaces, the last column not padded. Ages follow
`k8s.io/apimachinery/pkg/util/duration.HumanDuration`: `45s`, `5m12s`, `47m`, `3h`, `4d3h`, `2y`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import yaml

GAP = 3
NONE = "<none>"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], no_headers: bool = False) -> str:
    lines = [list(headers)] if not no_headers else []
    lines += [list(row) for row in rows]
    if not lines:
        return ""
    widths = [max(len(line[c]) for line in lines) for c in range(len(lines[0]))]
    out = []
    for line in lines:
        cells = [cell.ljust(width + GAP) for cell, width in zip(line[:-1], widths[:-1], strict=True)]
        out.append(("".join(cells) + line[-1]).rstrip())
    return "\n".join(out) + "\n"


def age(since: datetime | None, now: datetime) -> str:
    """kubectl's `HumanDuration` of `now - since`; `<unknown>` without a time."""
    if since is None:
        return "<unknown>"
    seconds = int((now - since).total_seconds())
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def document(data: dict[str, Any], output: str) -> str:
    """`-o json` (indented as kubectl indents) or `-o yaml`."""
    if output == "yaml":
        return str(yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=1_000_000))
    return json.dumps(data, indent=4) + "\n"
