"""AdmissionReview v1 in, AdmissionReview v1 out: the only place that decides a response's shape.

Source of the shape: controller-runtime `pkg/webhook/admission/response.go` (allowed, denied, patched,
errored) and kopf's single response builder. Patches are never written by hand: the original JSON is
diffed with the defaulted JSON by jsonpatch (`make_patch`'s `from_diff`, see `patch_for`), so only
changed paths appear and fields we do not model survive. The uid is echoed whenever the request carried
one, even on a 400.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Literal

import jsonpatch
import structlog

from webhook.admission import Kind, kind_of, mutate, validate, warn
from webhook.errors import BadRequest, Denied, LookupFailed
from webhook.rules.lookups import Lookups
from webhook.rules.pod import PodSettings

log = structlog.get_logger(__name__)

API_VERSION = "admission.k8s.io/v1"
MAX_BODY_BYTES = 7 * 1024 * 1024
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})

Endpoint = Literal["mutate", "validate"]


@dataclass(frozen=True, slots=True)
class Reply:
    """HTTP status, JSON body, and the labels metrics count it under."""

    status: int
    body: dict[str, Any]
    kind: str = "unknown"
    operation: str = "unknown"
    outcome: str = "allowed"


def _review(response: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def _uid_of(review: Any) -> str:
    request = review.get("request") if isinstance(review, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    return uid if isinstance(uid, str) else ""


def _status(code: int, reason: str, message: str, causes: list[dict[str, str]] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"status": "Failure", "code": code, "reason": reason, "message": message}
    if causes:
        status["details"] = {"causes": causes}
    return status


def too_large(size: int) -> Reply:
    """The answer to a body over the limit, which is never parsed (so no uid can be echoed)."""
    message = f"request body is {size} bytes: must be at most {MAX_BODY_BYTES} bytes (7 MiB)"
    return Reply(400, _review({"uid": "", "allowed": False, "status": _status(400, "BadRequest", message)}))


def _parse(body: bytes) -> dict[str, Any]:
    """The review's request, or `BadRequest` saying what is wrong with it."""
    try:
        review = json.loads(body)
    except (ValueError, RecursionError) as err:
        raise BadRequest(f"request body is not valid JSON: {err}") from None
    if not isinstance(review, dict):
        raise BadRequest("request body must be a JSON object (an AdmissionReview)")
    if review.get("apiVersion") != API_VERSION:
        got = json.dumps(review.get("apiVersion"))
        raise BadRequest(f"apiVersion: Unsupported value: {got}: must be {API_VERSION}")
    if review.get("kind") != "AdmissionReview":
        raise BadRequest(f"kind: Unsupported value: {json.dumps(review.get('kind'))}: must be AdmissionReview")
    request = review.get("request")
    if not isinstance(request, dict):
        raise BadRequest("request: Required value: an AdmissionReview must carry a request object")
    if not isinstance(request.get("uid"), str) or not request["uid"]:
        raise BadRequest("request.uid: Required value: must be a non-empty string")
    operation = request.get("operation")
    if not isinstance(operation, str) or operation not in OPERATIONS:
        raise BadRequest(f"request.operation: Unsupported value: {json.dumps(request.get('operation'))}")
    gvk = request.get("kind")
    if not isinstance(gvk, dict) or not all(isinstance(gvk.get(k, ""), str) for k in ("group", "version", "kind")):
        raise BadRequest("request.kind: Required value: must be an object with string group, version and kind")
    return request


def _kind(request: dict[str, Any]) -> Kind | None:
    gvk = request["kind"]
    group, version = gvk.get("group", ""), gvk.get("version", "")
    return kind_of(f"{group}/{version}" if group else version, gvk.get("kind", ""))


def _pruned(src: Any, dst: Any) -> tuple[Any, Any]:
    """Both objects without the subtrees they share (`is`), so `make_patch` walks only what changed.

    Rules copy along the path they change and never edit their input in place (a patch could not see
    such an edit either), so an identical object is an unchanged one. The patch is the same as diffing
    the whole objects, at a fraction of the cost on a large pod (managedFields, containers, volumes).
    """
    if not (isinstance(src, dict) and isinstance(dst, dict)):
        return src, dst
    src_out: dict[str, Any] = {}
    dst_out: dict[str, Any] = {}
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


def patch_for(original: dict[str, Any], defaulted: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSONPatch turning `original` into `defaulted`, touching only the paths that changed."""
    # `from_diff` is what `make_patch` wraps; without move detection a patch never touches an unchanged
    # path (a `move` removes one), and it is twice as fast.
    operations: list[dict[str, Any]] = jsonpatch.JsonPatch.from_diff(
        *_pruned(original, defaulted), optimization=False
    ).patch
    return operations


def _decide(endpoint: Endpoint, request: dict[str, Any], lookups: Lookups, settings: PodSettings) -> dict[str, Any]:
    """The response for a well-formed request; raises `Denied` or `LookupFailed`."""
    uid, operation = request["uid"], request["operation"]
    kind = _kind(request)
    obj, old = request.get("object"), request.get("oldObject")
    if kind is None or request.get("subResource") or operation not in ("CREATE", "UPDATE"):
        return {"uid": uid, "allowed": True}
    if not isinstance(obj, dict):
        raise BadRequest(f"request.object: Required value: a {operation} review must carry the object")
    if endpoint == "mutate":
        defaulted = mutate(kind, operation, obj, lookups, settings)
        response: dict[str, Any] = {"uid": uid, "allowed": True}
        patch = patch_for(obj, defaulted.object)
        if patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()
        if defaulted.warnings:
            response["warnings"] = list(defaulted.warnings)
        return response
    errors = validate(kind, operation, obj, old if isinstance(old, dict) else None, lookups)
    if errors:
        raise Denied(errors)
    response = {"uid": uid, "allowed": True}
    warnings = warn(kind, operation, obj, lookups)
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
        response = {"uid": uid, "allowed": False, "status": _status(400, "BadRequest", str(err))}
        return Reply(400, _review(response), outcome="bad_request")
    uid = request["uid"]
    kind = _kind(request)
    kind_label, operation = kind.value if kind else "other", str(request["operation"])
    try:
        response = _decide(endpoint, request, lookups, settings)
    except Denied as err:
        causes = [{"reason": e.type.reason, "message": e.body, "field": str(e.path)} for e in err.errors]
        response = {"uid": uid, "allowed": False, "status": _status(403, "Forbidden", str(err), causes)}
        return Reply(200, _review(response), kind_label, operation, "denied")
    except BadRequest as err:
        response = {"uid": uid, "allowed": False, "status": _status(400, "BadRequest", str(err))}
        return Reply(400, _review(response), kind_label, operation, "bad_request")
    except LookupFailed as err:
        log.warning("lookup failed", uid=uid, error=str(err))
        response = {"uid": uid, "allowed": False, "status": _status(500, "InternalError", f"lookup failed: {err}")}
        return Reply(200, _review(response), kind_label, operation, "error")
    except Exception as err:
        log.exception("admission bug", uid=uid, endpoint=endpoint, kind=kind_label, operation=operation)
        message = f"internal error in the phalanx webhook ({type(err).__name__}); see its log for uid {uid}"
        response = {"uid": uid, "allowed": False, "status": _status(500, "InternalError", message)}
        return Reply(200, _review(response), kind_label, operation, "error")
    outcome = "patched" if "patch" in response else "allowed"
    return Reply(200, _review(response), kind_label, operation, outcome)
