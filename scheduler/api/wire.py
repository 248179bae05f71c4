"""What of an object's JSON our models read: the rest is dropped before a model is built from a server's answer.

`managedFields` is about a third of a real server's Pod, and the kubelet's part of a Pod's status (container
states, IPs, QoS class) changes all the time; neither is read by the scheduler or by `kubectl phalanx`.
A Pod or Node keeps only the fields its model declares (a container's image, command, env, probes, ports and
mounts, a Node's images and addresses are never read), and a Pod only the conditions a pass reads. Dropping
them first means less to validate and less to keep in memory: at 50,000 pods, each byte a pod keeps is 50 kB.
A model read this way is never written back whole (every write is a patch built from a few fields), so
nothing is lost.

The strings of the filtered levels (a pod's scheduler name, node, phase, priority class, ...) and namespaces are
interned: they repeat across most objects, and 50,000 pods then share one copy of each instead of holding one each.
"""

from __future__ import annotations

import sys
import types
import typing
from typing import Any

from pydantic import BaseModel

from scheduler.api.meta import DISRUPTION_TARGET
from scheduler.api.node import Node
from scheduler.api.pod import Pod

POD_CONDITIONS_READ = frozenset({"PodScheduled", DISRUPTION_TARGET})
"""The Pod conditions anything reads (`Pod.condition`, `view.SCHEDULING_CONDITIONS`, the condition writes, which
merge only the one type they write); the kubelet's (Ready, Initialized, ...) are dropped."""

DESCENDED = frozenset({"spec", "status", "containers", "initContainers"})
"""Where the fields no model reads are (a Pod's status, a container's command, env, probes, mounts; a Node's
images, addresses and conditions): only these are filtered key by key, the rest of an object (metadata,
tolerations, affinity, resources, volumes) is kept whole, as it is nearly all read. Every dict filtered
costs a pass over it for each event decoded."""

Shape = dict[str, "Shape | None"]
"""The JSON keys a model reads, each with the shape of its value when that is filtered too."""


def shape(model: type[BaseModel]) -> Shape:
    """The keys `model` declares (by alias), and the shape of those in `DESCENDED`."""
    keys: Shape = {}
    for name, field in model.model_fields.items():
        alias = field.alias or name
        keys[alias] = _model_shape(field.annotation) if alias in DESCENDED else None
    return keys


def _model_shape(annotation: Any) -> Shape | None:
    """The shape of the model `annotation` names (alone, optional, or in a list or tuple)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return shape(annotation)
    if typing.get_origin(annotation) in (list, tuple, typing.Union, types.UnionType):
        return next((s for arg in typing.get_args(annotation) if (s := _model_shape(arg)) is not None), None)
    return None


SHAPES: dict[str, Shape] = {"pods": shape(Pod), "nodes": shape(Node)}


def _kept(raw: dict[str, Any], keys: Shape) -> dict[str, Any]:
    kept = {key: value for key, value in raw.items() if key in keys}
    for key, value in kept.items():
        nested = keys[key]
        if nested is None:
            if type(value) is str:
                kept[key] = sys.intern(value)
        elif isinstance(value, dict):
            kept[key] = _kept(value, nested)
        elif isinstance(value, list):
            kept[key] = [_kept(item, nested) if isinstance(item, dict) else item for item in value]
    return kept


def prune(kind: str, raw: dict[str, Any]) -> dict[str, Any]:
    """`raw` without the fields no reader needs: managedFields, and for a Pod or Node all its model does not read."""
    meta = raw.get("metadata")
    if meta is not None:
        meta.pop("managedFields", None)
    keys = SHAPES.get(kind)
    if keys is None:
        return raw
    kept = _kept(raw, keys)
    status = kept.get("status")
    if kind == "pods" and status and status.get("conditions"):
        status["conditions"] = [c for c in status["conditions"] if c.get("type") in POD_CONDITIONS_READ]
    if meta is not None and isinstance(namespace := meta.get("namespace"), str):
        meta["namespace"] = sys.intern(namespace)
    return kept
