"""The one entry to the admission rules, shared by the webhook and `phalanx simulate`.

`mutate` and `validate` dispatch on the kind the way the apiserver calls the two webhooks; `admit` runs
both on a new object, as a CREATE would, so the simulator refuses exactly what a cluster would. `warn`
gives the validating webhook's warnings: what is admitted but will not work as written yet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, TypeVar, overload

from scheduler.api.meta import ApiModel
from scheduler.api.pod_group import API_VERSION, GROUP, NATIVE_API_VERSION
from webhook.errors import Denied
from webhook.field import FieldError
from webhook.rules.defaulted import Defaulted
from webhook.rules.lookups import Lookups
from webhook.rules.pod import DEFAULT_SETTINGS, PodSettings, default_pod, validate_pod_create, validate_pod_update
from webhook.rules.pod_group import default_pod_group, validate_pod_group_create, validate_pod_group_update
from webhook.rules.priority_class import validate_priority_class_create, validate_priority_class_update
from webhook.rules.queue import queue_warnings, validate_queue_create, validate_queue_update
from webhook.rules.workload import default_workload, validate_workload_create, validate_workload_update

T = TypeVar("T")
M = TypeVar("M", bound=ApiModel)


class Kind(Enum):
    POD = "Pod"
    POD_GROUP = "PodGroup"
    WORKLOAD = "Workload"
    PRIORITY_CLASS = "PriorityClass"
    QUEUE = "Queue"


_NATIVE_GROUP, _NATIVE_VERSION = NATIVE_API_VERSION.split("/")
_VERSION = API_VERSION.split("/")[1]

KINDS: dict[tuple[str, str, str], Kind] = {
    ("", "v1", "Pod"): Kind.POD,
    (GROUP, _VERSION, "PodGroup"): Kind.POD_GROUP,
    (_NATIVE_GROUP, _NATIVE_VERSION, "PodGroup"): Kind.POD_GROUP,
    (GROUP, _VERSION, "Workload"): Kind.WORKLOAD,
    (_NATIVE_GROUP, _NATIVE_VERSION, "Workload"): Kind.WORKLOAD,
    ("scheduling.k8s.io", "v1", "PriorityClass"): Kind.PRIORITY_CLASS,
    (GROUP, _VERSION, "Queue"): Kind.QUEUE,
}

Creator = Callable[[dict[str, Any], Lookups], list[FieldError]]
Updater = Callable[[dict[str, Any], dict[str, Any], Lookups], list[FieldError]]

VALIDATORS: dict[Kind, tuple[Creator, Updater]] = {
    Kind.POD: (validate_pod_create, validate_pod_update),
    Kind.POD_GROUP: (validate_pod_group_create, validate_pod_group_update),
    Kind.WORKLOAD: (validate_workload_create, validate_workload_update),
    Kind.PRIORITY_CLASS: (validate_priority_class_create, validate_priority_class_update),
    Kind.QUEUE: (validate_queue_create, validate_queue_update),
}


def kind_of(api_version: str, kind: str) -> Kind | None:
    """The kind we handle for an `apiVersion`/`kind` pair, or None for kinds we let through."""
    group, _, version = api_version.rpartition("/")
    return KINDS.get((group, version, kind))


Warner = Callable[[dict[str, Any], Lookups], list[str]]

WARNERS: dict[Kind, Warner] = {Kind.QUEUE: queue_warnings}


@dataclass(frozen=True, slots=True)
class Admitted(Generic[T]):
    object: T
    warnings: tuple[str, ...] = ()


def mutate(
    kind: Kind | None, operation: str, obj: dict[str, Any], lookups: Lookups, settings: PodSettings = DEFAULT_SETTINGS
) -> Defaulted:
    """Defaulting, on CREATE only: updates keep what the user stored."""
    if operation != "CREATE":
        return Defaulted(obj)
    if kind is Kind.POD:
        return default_pod(obj, lookups, settings)
    if kind is Kind.POD_GROUP:
        return default_pod_group(obj, lookups)
    if kind is Kind.WORKLOAD:
        return default_workload(obj, lookups)
    return Defaulted(obj)


def validate(
    kind: Kind | None, operation: str, obj: dict[str, Any], old: dict[str, Any] | None, lookups: Lookups
) -> list[FieldError]:
    """Every rule broken by a CREATE or UPDATE; other operations and unknown kinds have none."""
    if kind is None:
        return []
    create, update = VALIDATORS[kind]
    if operation == "CREATE":
        return create(obj, lookups)
    if operation == "UPDATE" and old is not None:
        return update(obj, old, lookups)
    return []


def warn(kind: Kind | None, operation: str, obj: dict[str, Any], lookups: Lookups) -> list[str]:
    """Warnings for an admitted CREATE or UPDATE, shown by kubectl as `Warning: ...`."""
    warner = WARNERS.get(kind) if kind is not None and operation in ("CREATE", "UPDATE") else None
    return warner(obj, lookups) if warner is not None else []


@overload
def admit(obj: M, lookups: Lookups, settings: PodSettings = ...) -> Admitted[M]: ...


@overload
def admit(obj: dict[str, Any], lookups: Lookups, settings: PodSettings = ...) -> Admitted[dict[str, Any]]: ...


def admit(obj: ApiModel | dict[str, Any], lookups: Lookups, settings: PodSettings = DEFAULT_SETTINGS) -> Admitted[Any]:
    """Default then validate a new object; raises `Denied` with every error, like a refused CREATE.

    A model comes back as a model of the same class, a dict as a dict; kinds we do not handle come
    back unchanged.
    """
    if isinstance(obj, ApiModel):
        api_version, kind_name = str(getattr(obj, "api_version", "")), str(getattr(obj, "kind", ""))
        raw = {**obj.to_json(), "apiVersion": api_version, "kind": kind_name}
    else:
        raw = obj
        api_version, kind_name = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    kind = kind_of(api_version, kind_name)
    defaulted = mutate(kind, "CREATE", raw, lookups, settings)
    errors = validate(kind, "CREATE", defaulted.object, None, lookups)
    if errors:
        raise Denied(errors)
    warnings = (*defaulted.warnings, *warn(kind, "CREATE", defaulted.object, lookups))
    if isinstance(obj, ApiModel):
        return Admitted(type(obj).model_validate(defaulted.object), warnings)
    return Admitted(defaulted.object, warnings)
