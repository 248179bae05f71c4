"""CycleState: per-cycle data plugins share, keyed by plugin name (kube-scheduler's CycleState).

Between cycles a plugin keeps only configuration. Values stored here are frozen or implement
`clone()`, because preemption dry-runs clone the state and must not leak changes back.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar


class Cloneable(Protocol):
    def clone(self) -> Cloneable: ...


T = TypeVar("T")


class CycleState:
    __slots__ = ("_data",)

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}

    def write(self, key: str, value: object) -> None:
        self._data[key] = value

    def read(self, key: str, kind: type[T]) -> T | None:
        value = self._data.get(key)
        return value if isinstance(value, kind) else None

    def clone(self) -> CycleState:
        copy = CycleState()
        for key, value in self._data.items():
            copy._data[key] = value.clone() if hasattr(value, "clone") else value
        return copy
