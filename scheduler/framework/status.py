"""Status: what every plugin hook returns, as kube-scheduler's `framework.Status`.

The code steers the framework (UNSCHEDULABLE lets preemption try, UNSCHEDULABLE_AND_UNRESOLVABLE rules
it out); reasons are short, name no node, and are meant for users. `until` is ours: a victim filter that
protects a unit for a while says until when, so the simulator's clock can jump there.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from datetime import datetime


class Code(enum.Enum):
    SUCCESS = "Success"
    ERROR = "Error"
    UNSCHEDULABLE = "Unschedulable"
    UNSCHEDULABLE_AND_UNRESOLVABLE = "UnschedulableAndUnresolvable"
    SKIP = "Skip"


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""
    until: datetime | None = None

    @property
    def is_success(self) -> bool:
        return self.code in (Code.SUCCESS, Code.SKIP)

    def message(self) -> str:
        return "; ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        return replace(self, plugin=plugin)


SUCCESS = Status()


def unschedulable(*reasons: str, until: datetime | None = None) -> Status:
    return Status(Code.UNSCHEDULABLE, reasons, until=until)


def unresolvable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)


def error(*reasons: str) -> Status:
    return Status(Code.ERROR, reasons)
