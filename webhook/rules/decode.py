"""Raw JSON to a typed model, with pydantic's complaints turned into field errors.

Custom resources arrive with `x-kubernetes-preserve-unknown-fields`, so the apiserver checks nothing:
`minCount: "two"` or `spec: []` reach us and must be denied with a field path, never crash us.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import ValidationError

from scheduler.api.meta import ApiModel
from webhook.errors import Denied
from webhook.field import ROOT, FieldError, Path, invalid, not_supported, required

M = TypeVar("M", bound=ApiModel)

_QUOTED = re.compile(r"'([^']*)'")


def _path(loc: tuple[int | str, ...]) -> Path:
    path = ROOT
    for part in loc:
        path = path.index(part) if isinstance(part, int) else path.child(part)
    return path


def _field_error(error: Any) -> FieldError:
    path = _path(tuple(error["loc"]))
    kind = error["type"]
    if kind == "missing":
        return required(path)
    if kind == "literal_error":
        return not_supported(path, error.get("input"), tuple(_QUOTED.findall(str(error["ctx"]["expected"]))))
    detail = str(error["msg"]).replace("Input should be", "must be", 1)
    return invalid(path, error.get("input"), detail)


def decode(model: type[M], raw: Any) -> M:
    """Parse `raw` as `model`; raises `Denied` naming every field that does not fit."""
    if not isinstance(raw, dict):
        raise Denied([invalid(ROOT, type(raw).__name__, "must be a JSON object")])
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        raise Denied([_field_error(e) for e in err.errors(include_url=False)]) from None
