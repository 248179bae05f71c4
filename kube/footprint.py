"""A cached model's per-object bookkeeping made shared, and equal parts of cached objects made one object.

pydantic gives every model instance a set of the fields that were set (`__pydantic_fields_set__`) and, for a model
that keeps unknown keys, a dict of them (`__pydantic_extra__`). A Pod is about ten model instances, and a set of
five or more names takes 728 bytes: at 50,000 pods, 170 MiB of identical sets, more than the fields themselves
(issue 23, tracemalloc of the scheduler). A cached object is read-only (every write is a patch built from a few
fields, and a changed copy comes from `model_copy`, which copies both first), so equal sets can be one set, and
an empty extra dict can be None, which pydantic reads as no extra keys (and compares equal to `{}`).

For the same reason, equal parts of cached objects can be one object. The pods of a Job, a ReplicaSet or a gang
are made from one template: their containers, resources, tolerations and affinity are equal, and each pod held
its own copy of them, strings included (a pod's two default tolerations alone are about a kilobyte). A model of a
class that says it has no identity of its own (`shared_by_value`, a ClassVar) is looked up by its value: its class,
the fields that were set (which its JSON depends on) and its values, its parts' included. The first of the equal
ones is kept, and the others are dropped for it. The table holds its models weakly, so a part no cached object
uses any more goes with the last one; a model of any other class (a Pod, its metadata) is never looked up, as
no other would be equal to it.
Assigning to a cached model's field would now change every model sharing it: nothing does.
"""

from __future__ import annotations

import typing
import weakref
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_SETS: dict[frozenset[str], set[str]] = {}
"""One set per distinct combination of field names (a few dozen in all)."""

_NESTED: dict[type[BaseModel], tuple[str, ...]] = {}
"""Per model class, the fields that may hold models, or lists or maps of them (its other fields hold none)."""

_SHARED: weakref.WeakValueDictionary[Any, BaseModel] = weakref.WeakValueDictionary()
"""The one model kept for each distinct value of a `shared_by_value` class, by `_plain`."""

_BY_VALUE: dict[type[BaseModel], bool] = {}
"""Per model class, whether it is `shared_by_value`."""


def compact(model: M) -> M:
    """`model` with shared field sets, no empty extra dicts and its equal parts made one (in place)."""
    return _share(model)


def _by_value(cls: type[BaseModel]) -> bool:
    by_value = _BY_VALUE.get(cls)
    if by_value is None:
        by_value = _BY_VALUE[cls] = bool(getattr(cls, "shared_by_value", False))
    return by_value


def _share(model: M) -> M:
    """`model` compacted, or the model already kept that is equal to it (see the module docstring)."""
    cls = type(model)
    key = None
    if _by_value(cls):
        try:
            key = _plain(model)
        except _NotPlain:  # it holds a part of a class not shared by value: kept as it is
            pass
        else:
            kept = _SHARED.get(key)
            if kept is not None:
                return typing.cast(M, kept)
    fields = model.__pydantic_fields_set__
    object.__setattr__(model, "__pydantic_fields_set__", _SETS.setdefault(frozenset(fields), fields))
    if model.__pydantic_extra__ == {}:
        object.__setattr__(model, "__pydantic_extra__", None)
    names = _NESTED.get(cls)
    if names is None:
        names = _NESTED[cls] = tuple(name for name, f in cls.model_fields.items() if _may_hold_models(f.annotation))
    values = model.__dict__
    for name in names:
        value = values[name]
        if type(value) is tuple:
            if value:
                values[name] = tuple([_share(item) for item in value])
        elif type(value) is list:
            value[:] = [_share(item) for item in value]
        elif type(value) is dict:  # a map of models: a device's attributes and capacities
            for item_key, item in value.items():
                value[item_key] = _share(item)
        elif value is not None:
            values[name] = _share(value)
    if key is not None:
        _SHARED[key] = model
    return model


class _NotPlain(Exception):
    pass


def _plain(value: Any) -> Any:
    """`value` as hashable data, equal for equal values: a model of a `shared_by_value` class by its class, the
    fields that were set and its values (raises `_NotPlain` for a model of any other class)."""
    kind = type(value)
    if kind is str or value is None:
        return value
    if kind is tuple or kind is list:
        return (kind, *[_plain(item) for item in value])
    if kind is dict:
        return (dict, *[(name, _plain(item)) for name, item in value.items()])
    if kind is int or kind is float or kind is bool:  # by type too: 1, 1.0 and True are equal keys
        return (kind, value)
    if kind is datetime:  # by offset too: one instant in two zones is two equal datetimes
        return (kind, value, value.utcoffset())
    if isinstance(value, BaseModel) and _by_value(kind):
        extra = value.__pydantic_extra__
        return (
            kind,
            frozenset(value.__pydantic_fields_set__),
            *[_plain(item) for item in value.__dict__.values()],
            _plain(extra) if extra else None,
        )
    raise _NotPlain


def _may_hold_models(annotation: Any) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_may_hold_models(arg) for arg in typing.get_args(annotation))
