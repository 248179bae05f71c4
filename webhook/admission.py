"""The one entry to the admission rules, shared by the webhook and `phalanx simulate`.

Each kind we admit is one `KindRules` in `REGISTRY`: its apiVersions, how its raw JSON becomes a typed
model, and its rules. A new kind is a module in `webhook/rules/` and one entry there.
`mutate` and `validate` dispatch on the kind the way the apiserver calls the two webhooks; `admit` runs
both on a new object, as a CREATE would, so the simulator refuses exactly what a cluster would. `warn`
gives the validating webhook's warnings: what is admitted but will not work as written yet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar, overload

from scheduler.api.meta import ApiModel
from scheduler.api.pod_group import API_VERSION, NATIVE_API_VERSION, PodGroup
from scheduler.api.priority_class import PriorityClass
from scheduler.api.queue import Queue
from scheduler.api.workload import Workload
from webhook.errors import Denied
from webhook.field import FieldError
from webhook.rules.decode import Decoded, JsonObject, decode
from webhook.rules.defaulted import Defaulted
from webhook.rules.lookups import Lookups
from webhook.rules.pod import (
    DEFAULT_SETTINGS,
    PodSettings,
    decode_pod,
    default_pod,
    validate_pod_create,
    validate_pod_update,
)
from webhook.rules.pod_group import default_pod_group, validate_pod_group_create, validate_pod_group_update
from webhook.rules.priority_class import validate_priority_class_create, validate_priority_class_update
from webhook.rules.queue import queue_warnings, validate_queue_create, validate_queue_update
from webhook.rules.workload import default_workload, validate_workload_create, validate_workload_update

T = TypeVar("T")
M = TypeVar("M", bound=ApiModel)


@dataclass(frozen=True, slots=True)
class KindRules(Generic[M]):
    """Everything admission does for one kind. `decode` raises `Denied` naming the fields that do not
    fit the model; a kind with no `default` is stored as sent, one with no `warn` never warns."""

    kind: str
    api_versions: tuple[str, ...]
    decode: Callable[[JsonObject], M]
    validate_create: Callable[[Decoded[M], Lookups], list[FieldError]]
    validate_update: Callable[[Decoded[M], JsonObject, Lookups], list[FieldError]]
    default: Callable[[Decoded[M], Lookups, PodSettings], Defaulted] | None = None
    warn: Callable[[Decoded[M], Lookups], list[str]] | None = None

    def decoded(self, obj: JsonObject) -> Decoded[M]:
        return Decoded(self.decode(obj), obj)


REGISTRY: tuple[KindRules[Any], ...] = (
    KindRules("Pod", ("v1",), decode_pod, validate_pod_create, validate_pod_update, default=default_pod),
    KindRules(
        "PodGroup",
        (API_VERSION, NATIVE_API_VERSION),
        partial(decode, PodGroup),
        validate_pod_group_create,
        validate_pod_group_update,
        default=default_pod_group,
    ),
    KindRules(
        "Workload",
        (API_VERSION, NATIVE_API_VERSION),
        partial(decode, Workload),
        validate_workload_create,
        validate_workload_update,
        default=default_workload,
    ),
    KindRules(
        "PriorityClass",
        ("scheduling.k8s.io/v1",),
        partial(decode, PriorityClass),
        validate_priority_class_create,
        validate_priority_class_update,
    ),
    KindRules(
        "Queue",
        (API_VERSION,),
        partial(decode, Queue),
        validate_queue_create,
        validate_queue_update,
        warn=queue_warnings,
    ),
)

_BY_TYPE: dict[tuple[str, str], KindRules[Any]] = {
    (api_version, rules.kind): rules for rules in REGISTRY for api_version in rules.api_versions
}


def kind_of(api_version: str, kind: str) -> KindRules[Any] | None:
    """The rules for an `apiVersion`/`kind` pair, or None for kinds we let through."""
    return _BY_TYPE.get((api_version, kind))


@dataclass(frozen=True, slots=True)
class Admitted(Generic[T]):
    object: T
    warnings: tuple[str, ...] = ()


def mutate(
    rules: KindRules[Any] | None,
    operation: str,
    obj: JsonObject,
    lookups: Lookups,
    settings: PodSettings = DEFAULT_SETTINGS,
) -> Defaulted:
    """Defaulting, on CREATE only: updates keep what the user stored."""
    if operation != "CREATE" or rules is None or rules.default is None:
        return Defaulted(obj)
    return rules.default(rules.decoded(obj), lookups, settings)


def validate(
    rules: KindRules[Any] | None, operation: str, obj: JsonObject, old: JsonObject | None, lookups: Lookups
) -> list[FieldError]:
    """Every rule broken by a CREATE or UPDATE; other operations and unknown kinds have none."""
    if rules is None:
        return []
    if operation == "CREATE":
        return rules.validate_create(rules.decoded(obj), lookups)
    if operation == "UPDATE" and old is not None:
        return rules.validate_update(rules.decoded(obj), old, lookups)
    return []


def warn(rules: KindRules[Any] | None, operation: str, obj: JsonObject, lookups: Lookups) -> list[str]:
    """Warnings for an admitted CREATE or UPDATE, shown by kubectl as `Warning: ...`."""
    if rules is None or rules.warn is None or operation not in ("CREATE", "UPDATE"):
        return []
    return rules.warn(rules.decoded(obj), lookups)


@overload
def admit(obj: M, lookups: Lookups, settings: PodSettings = ...) -> Admitted[M]: ...


@overload
def admit(obj: JsonObject, lookups: Lookups, settings: PodSettings = ...) -> Admitted[JsonObject]: ...


def admit(obj: ApiModel | JsonObject, lookups: Lookups, settings: PodSettings = DEFAULT_SETTINGS) -> Admitted[Any]:
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
    rules = kind_of(api_version, kind_name)
    defaulted = mutate(rules, "CREATE", raw, lookups, settings)
    errors = validate(rules, "CREATE", defaulted.object, None, lookups)
    if errors:
        raise Denied(errors)
    warnings = (*defaulted.warnings, *warn(rules, "CREATE", defaulted.object, lookups))
    if isinstance(obj, ApiModel):
        return Admitted(type(obj).model_validate(defaulted.object), warnings)
    return Admitted(defaulted.object, warnings)
