"""What of an object's JSON our models read: the rest is dropped before a model is built from a server's answer.

`managedFields` is about a third of a real server's Pod, and the kubelet's part of a Pod's status (container
states, IPs, QoS class) changes all the time; neither is read by the scheduler or by `kubectl phalanx`.
Dropping them first means less to validate and less to keep in memory. A model read this way is never written
back whole (every write is a patch built from a few fields), so nothing is lost.
"""

from __future__ import annotations

from typing import Any

POD_STATUS_READ = frozenset({"phase", "conditions", "startTime", "nominatedNodeName"})
"""The Pod status fields the scheduler reads (`scheduler.api.pod.PodStatus`); the kubelet's others are dropped."""


def prune(kind: str, raw: dict[str, Any]) -> dict[str, Any]:
    """`raw` without the fields no reader needs (in place): managedFields, and most of a Pod's status."""
    meta = raw.get("metadata")
    if meta is not None:
        meta.pop("managedFields", None)
    if kind == "pods":
        status = raw.get("status")
        if status:
            raw["status"] = {k: v for k, v in status.items() if k in POD_STATUS_READ}
    return raw
