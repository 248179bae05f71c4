"""A cached model's per-object bookkeeping made shared: what 50,000 cached pods would otherwise each hold.

pydantic gives every model instance a set of the fields that were set (`__pydantic_fields_set__`) and, for a model
that keeps unknown keys, a dict of them (`__pydantic_extra__`). A Pod is about ten model instances, and a set of
five or more names takes 728 bytes: at 50,000 pods, 170 MiB of identical sets, more than the fields themselves
(issue 23, tracemalloc of the scheduler). A cached object is read-only (every write is a patch built from a few
fields, and a changed copy comes from `model_copy`, which copies both first), so equal sets can be one set, and
an empty extra dict can be None, which pydantic reads as no extra keys (and compares equal to `{}`).
Assigning to a cached model's field would now change the set of every model sharing it: nothing does.
"""

from __future__ import annotations

import typing
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_SETS: dict[frozenset[str], set[str]] = {}
"""One set per distinct combination of field names (a few dozen in all)."""

_NESTED: dict[type[BaseModel], tuple[str, ...]] = {}
"""Per model class, the fields that may hold models, or lists or maps of them (its other fields hold none)."""


def compact(model: M) -> M:
    """`model`, and every model inside it, with shared field sets and no empty extra dicts (in place)."""
    _share(model)
    return model


def _share(model: BaseModel) -> None:
    fields = model.__pydantic_fields_set__
    object.__setattr__(model, "__pydantic_fields_set__", _SETS.setdefault(frozenset(fields), fields))
    if model.__pydantic_extra__ == {}:
        object.__setattr__(model, "__pydantic_extra__", None)
    cls = type(model)
    names = _NESTED.get(cls)
    if names is None:
        names = _NESTED[cls] = tuple(name for name, f in cls.model_fields.items() if _may_hold_models(f.annotation))
    values = model.__dict__
    for name in names:
        value = values[name]
        if isinstance(value, list | tuple):
            for item in value:
                _share(item)
        elif isinstance(value, dict):  # a map of models: a device's attributes and capacities
            for item in value.values():
                _share(item)
        elif value is not None:
            _share(value)


def _may_hold_models(annotation: Any) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_may_hold_models(arg) for arg in typing.get_args(annotation))
