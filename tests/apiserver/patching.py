"""The three PATCH content types kube-apiserver accepts (apply patches are not served).

Strategic merge covers what schedulers and kubectl send: maps merge, lists named in
`MERGE_KEYS` merge by their key (conditions by `type`, containers by `name`), items carrying
`$patch: delete` are removed, other lists are replaced.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

MERGE_KEYS = {
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "ownerReferences": "uid",
    "schedulingGates": "name",
    "tolerations": "key",
    "env": "name",
    "ports": "containerPort",
    "volumes": "name",
}


class PatchFailed(Exception):
    """A JSON patch operation (a `test`, or a path that does not exist) failed: HTTP 422."""


class BadPatch(Exception):
    """The patch body is not valid for its content type: HTTP 400."""


def apply_patch(content_type: str, original: dict[str, Any], patch: Any) -> dict[str, Any]:
    kind = content_type.split(";")[0].strip()
    if kind == JSON_PATCH:
        if not isinstance(patch, list):
            raise BadPatch("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
        try:
            result = jsonpatch.JsonPatch(patch).apply(original)
        except jsonpatch.JsonPatchTestFailed as exc:
            raise PatchFailed(f"testing value {_test_path(patch)} failed: test failed") from exc
        except (jsonpatch.JsonPatchConflict, jsonpatch.JsonPointerException) as exc:
            raise PatchFailed(str(exc)) from exc
        except jsonpatch.InvalidJsonPatch as exc:
            raise BadPatch(str(exc)) from exc
        if not isinstance(result, dict):
            raise BadPatch("patch result is not an object")
        return result
    if not isinstance(patch, dict):
        raise BadPatch("patch body must be a JSON object")
    if kind == MERGE_PATCH:
        return _merge(original, patch)
    if kind == STRATEGIC_MERGE_PATCH:
        return _strategic(original, patch)
    raise BadPatch(f"unsupported patch type {content_type!r}")


def _test_path(patch: list[Any]) -> str:
    tests = [op.get("path", "") for op in patch if isinstance(op, dict) and op.get("op") == "test"]
    return tests[0] if tests else ""


def _merge(original: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(original) if isinstance(original, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


def _strategic(original: Any, patch: Any, field: str = "") -> Any:
    if isinstance(patch, dict):
        result = dict(original) if isinstance(original, dict) else {}
        for key, value in patch.items():
            if key.startswith("$"):
                continue
            if value is None:
                result.pop(key, None)
            else:
                result[key] = _strategic(result.get(key), value, key)
        return result
    if isinstance(patch, list) and field in MERGE_KEYS and isinstance(original, list):
        merge_key = MERGE_KEYS[field]
        merged = [copy.deepcopy(item) for item in original]
        for item in patch:
            if not isinstance(item, dict) or merge_key not in item:
                merged.append(copy.deepcopy(item))
                continue
            index = next((i for i, old in enumerate(merged) if old.get(merge_key) == item[merge_key]), None)
            if item.get("$patch") == "delete":
                if index is not None:
                    merged.pop(index)
            elif index is None:
                merged.append(_strategic({}, item))
            else:
                merged[index] = _strategic(merged[index], item)
        return merged
    return copy.deepcopy(patch)
