"""AdmissionReview v1 in, AdmissionReview v1 out: the only place that decides a response's shape.

Source of the shape: controller-runtime `pkg/webhook/admission/response.go` (allowed, denied, patched,
errored) and kopf's single response builder. Patches are never written by hand: the original JSON is
diffed with the defaulted JSON by jsonpatch (`make_patch`'s `from_diff`, see `patch_for`), so only
changed paths appear and fields we do not model survive. The uid is echoed whenever the request carried
one, even on a 400.

The wire format is typed, after kopf's `_cogs/structs/reviews.py`: the review in is a pydantic model, so
a malformed one is refused with every field that does not fit, named as the apiserver names fields
(`request.operation: Unsupported value: "PATCH": supported values: ...`); the review out is TypedDicts.
The objects inside stay raw JSON here: `webhook.admission` decodes them by kind.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

import jsonpatch
import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from webhook.admission import KindRules, kind_of, mutate, validate, warn
from webhook.errors import BadRequest, Denied, LookupFailed
from webhook.field import aggregate
from webhook.rules.decode import JsonObject, field_errors
from webhook.rules.lookups import Lookups
from webhook.rules.pod import PodSettings

log = structlog.get_logger(__name__)

API_VERSION = "admission.k8s.io/v1"
MAX_BODY_BYTES = 7 * 1024 * 1024

Endpoint = Literal["mutate", "validate"]


class _Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)


class GroupVersionKind(_Wire):
    group: str = ""
    version: str = ""
    kind: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


class AdmissionRequest(_Wire):
    """The fields of `request` we read; the apiserver sends more (userInfo, options, dryRun...)."""

    uid: str = Field(min_length=1)
    kind: GroupVersionKind
    operation: Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
    sub_resource: str | None = None
    object: Any = None
    old_object: Any = None


class AdmissionReview(_Wire):
    api_version: Literal["admission.k8s.io/v1"]
    kind: Literal["AdmissionReview"]
    request: AdmissionRequest


class StatusCause(TypedDict):
    reason: str
    message: str
    field: str


class StatusDetails(TypedDict):
    causes: list[StatusCause]


class Status(TypedDict):
    """A `metav1.Status` of a refused request."""

    status: Literal["Failure"]
    code: int
    reason: str
    message: str
    details: NotRequired[StatusDetails]


class Response(TypedDict):
    uid: str
    allowed: bool
    status: NotRequired[Status]
    patchType: NotRequired[Literal["JSONPatch"]]
    patch: NotRequired[str]
    warnings: NotRequired[list[str]]


class ReviewOut(TypedDict):
    apiVersion: str
    kind: Literal["AdmissionReview"]
    response: Response


@dataclass(frozen=True, slots=True)
class Reply:
    """HTTP status, JSON body, and the labels metrics count it under."""

    status: int
    body: ReviewOut
    kind: str = "unknown"
    operation: str = "unknown"
    outcome: str = "allowed"


def _review(response: Response) -> ReviewOut:
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def _uid_of(review: Any) -> str:
    request = review.get("request") if isinstance(review, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    return uid if isinstance(uid, str) else ""


def _refused(uid: str, code: int, reason: str, message: str, causes: list[StatusCause] | None = None) -> Response:
    status: Status = {"status": "Failure", "code": code, "reason": reason, "message": message}
    if causes:
        status["details"] = {"causes": causes}
    return {"uid": uid, "allowed": False, "status": status}


def too_large(size: int) -> Reply:
    """The answer to a body over the limit, which is never parsed (so no uid can be echoed)."""
    message = f"request body is {size} bytes: must be at most {MAX_BODY_BYTES} bytes (7 MiB)"
    return Reply(400, _review(_refused("", 400, "BadRequest", message)))


def _parse(body: bytes) -> AdmissionRequest:
    """The review's request, or `BadRequest` naming every field that is wrong with it."""
    try:
        review = json.loads(body)
    except (ValueError, RecursionError) as err:
        raise BadRequest(f"request body is not valid JSON: {err}") from None
    if not isinstance(review, dict):
        raise BadRequest("request body must be a JSON object (an AdmissionReview)")
    try:
        return AdmissionReview.model_validate(review).request
    except ValidationError as err:
        raise BadRequest(aggregate(field_errors(err))) from None


def _rules(request: AdmissionRequest) -> KindRules[Any] | None:
    return kind_of(request.kind.api_version, request.kind.kind)


def _pruned(src: Any, dst: Any) -> tuple[Any, Any]:
    """Both objects without the subtrees they share (`is`), so `make_patch` walks only what changed.

    Rules copy along the path they change and never edit their input in place (a patch could not see
    such an edit either), so an identical object is an unchanged one. The patch is the same as diffing
    the whole objects, at a fraction of the cost on a large pod (managedFields, containers, volumes).
    """
    if not (isinstance(src, dict) and isinstance(dst, dict)):
        return src, dst
    src_out: JsonObject = {}
    dst_out: JsonObject = {}
    for key in dict.fromkeys([*src, *dst]):
        if key in src and key in dst:
            if src[key] is dst[key]:
                continue
            src_out[key], dst_out[key] = _pruned(src[key], dst[key])
        elif key in src:
            src_out[key] = src[key]
        else:
            dst_out[key] = dst[key]
    return src_out, dst_out


def patch_for(original: JsonObject, defaulted: JsonObject) -> list[dict[str, Any]]:
    """The JSONPatch turning `original` into `defaulted`, touching only the paths that changed."""
    # `from_diff` is what `make_patch` wraps; without move detection a patch never touches an unchanged
    # path (a `move` removes one), and it is twice as fast.
    operations: list[dict[str, Any]] = jsonpatch.JsonPatch.from_diff(
        *_pruned(original, defaulted), optimization=False
    ).patch
    return operations


def _decide(endpoint: Endpoint, request: AdmissionRequest, lookups: Lookups, settings: PodSettings) -> Response:
    """The response for a well-formed request; raises `Denied` or `LookupFailed`."""
    uid, operation = request.uid, request.operation
    rules = _rules(request)
    obj, old = request.object, request.old_object
    if rules is None or request.sub_resource or operation not in ("CREATE", "UPDATE"):
        return {"uid": uid, "allowed": True}
    if not isinstance(obj, dict):
        raise BadRequest(f"request.object: Required value: a {operation} review must carry the object")
    response: Response = {"uid": uid, "allowed": True}
    if endpoint == "mutate":
        defaulted = mutate(rules, operation, obj, lookups, settings)
        patch = patch_for(obj, defaulted.object)
        if patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()
        if defaulted.warnings:
            response["warnings"] = list(defaulted.warnings)
        return response
    errors = validate(rules, operation, obj, old if isinstance(old, dict) else None, lookups)
    if errors:
        raise Denied(errors)
    warnings = warn(rules, operation, obj, lookups)
    if warnings:
        response["warnings"] = warnings
    return response


def handle(endpoint: Endpoint, body: bytes, lookups: Lookups, settings: PodSettings) -> Reply:
    """Answer one AdmissionReview; never raises, whatever the body holds."""
    if len(body) > MAX_BODY_BYTES:
        return too_large(len(body))
    try:
        request = _parse(body)
    except BadRequest as err:
        try:
            uid = _uid_of(json.loads(body))
        except (ValueError, RecursionError):
            uid = ""
        return Reply(400, _review(_refused(uid, 400, "BadRequest", str(err))), outcome="bad_request")
    uid = request.uid
    rules = _rules(request)
    kind_label, operation = rules.kind if rules else "other", request.operation
    try:
        response = _decide(endpoint, request, lookups, settings)
    except Denied as err:
        causes: list[StatusCause] = [
            {"reason": e.type.reason, "message": e.body, "field": str(e.path)} for e in err.errors
        ]
        return Reply(200, _review(_refused(uid, 403, "Forbidden", str(err), causes)), kind_label, operation, "denied")
    except BadRequest as err:
        refused = _refused(uid, 400, "BadRequest", str(err))
        return Reply(400, _review(refused), kind_label, operation, "bad_request")
    except LookupFailed as err:
        log.warning("lookup failed", uid=uid, error=str(err))
        refused = _refused(uid, 500, "InternalError", f"lookup failed: {err}")
        return Reply(200, _review(refused), kind_label, operation, "error")
    except Exception as err:
        log.exception("admission bug", uid=uid, endpoint=endpoint, kind=kind_label, operation=operation)
        message = f"internal error in the phalanx webhook ({type(err).__name__}); see its log for uid {uid}"
        return Reply(200, _review(_refused(uid, 500, "InternalError", message)), kind_label, operation, "error")
    outcome = "patched" if "patch" in response else "allowed"
    return Reply(200, _review(response), kind_label, operation, outcome)
