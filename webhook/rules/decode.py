"""Raw JSON to a typed model, with pydantic's complaints turned into field errors.

Custom resources arrive with `x-kubernetes-preserve-unknown-fields`, so the apiserver checks nothing:
`minCount: "two"` or `spec: []` reach us and must be denied with a field path, never crash us.
A rule gets both forms (`Decoded`): the model to read, and the raw JSON to default, because a patch is
the difference between two raw objects and must keep the fields no model declares.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import ValidationError

from scheduler.api.meta import ApiModel
from webhook.errors import Denied
from webhook.field import ROOT, FieldError, Path, invalid, not_supported, required

M = TypeVar("M", bound=ApiModel)

JsonObject = dict[str, Any]
"""An object as the apiserver sent it, parsed from JSON and not yet checked against a model."""

_QUOTED = re.compile(r"'([^']*)'")
_SHOULD = re.compile(r"^\w+ should")
"""The subject of pydantic's messages ("Input should be a valid integer", "String should have..."), which
the apiserver's wording replaces with "must"."""


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
    if kind in ("model_type", "dict_type"):
        return invalid(path, error.get("input"), "must be a JSON object")
    detail = _SHOULD.sub("must", str(error["msg"]), count=1)
    return invalid(path, error.get("input"), detail)


def field_errors(err: ValidationError) -> list[FieldError]:
    """Every complaint of pydantic as a field error naming the field and the rule."""
    return [_field_error(e) for e in err.errors(include_url=False)]


def decode(model: type[M], raw: Any) -> M:
    """Parse `raw` as `model`; raises `Denied` naming every field that does not fit."""
    if not isinstance(raw, dict):
        raise Denied([invalid(ROOT, type(raw).__name__, "must be a JSON object")])
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        raise Denied(field_errors(err)) from None


@dataclass(frozen=True, slots=True)
class Decoded(Generic[M]):
    """An object under admission: `model` for the rules to read, `raw` (what `model` was decoded from)
    for defaulting to copy and change and for rules that compare fields no model declares."""

    model: M
    raw: JsonObject
