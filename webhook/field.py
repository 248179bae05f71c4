"""Field paths and field errors printed the way the kube-apiserver prints them.

Source: `k8s.io/apimachinery/pkg/util/validation/field` (`path.go`, `errors.go`). A denial names the
field and the rule in the same words users already see from built-in validation, for example
`spec.priority: Invalid value: 5: must equal 100000, the value of PriorityClass "phalanx-high"`.
Values are printed as compact JSON, which is what Go prints for strings, numbers, booleans and null.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any


@dataclass(frozen=True, slots=True)
class Path:
    """A field path such as `spec.podGroupTemplates[1].name` or `metadata.labels[a/b]`."""

    text: str = ""

    def child(self, name: str) -> Path:
        return Path(f"{self.text}.{name}" if self.text else name)

    def index(self, i: int) -> Path:
        return Path(f"{self.text}[{i}]")

    def key(self, key: str) -> Path:
        return Path(f"{self.text}[{key}]")

    def __str__(self) -> str:
        return self.text or "<root>"


ROOT = Path()


class ErrorType(Enum):
    """The error types the apiserver uses, with their printed phrase and `details.causes` reason."""

    INVALID = ("Invalid value", "FieldValueInvalid")
    REQUIRED = ("Required value", "FieldValueRequired")
    FORBIDDEN = ("Forbidden", "FieldValueForbidden")
    NOT_FOUND = ("Not found", "FieldValueNotFound")
    DUPLICATE = ("Duplicate value", "FieldValueDuplicate")
    NOT_SUPPORTED = ("Unsupported value", "FieldValueNotSupported")
    TOO_MANY = ("Too many", "FieldValueTooMany")

    @property
    def phrase(self) -> str:
        return self.value[0]

    @property
    def reason(self) -> str:
        return self.value[1]


_WITH_VALUE = {ErrorType.INVALID, ErrorType.NOT_FOUND, ErrorType.DUPLICATE, ErrorType.NOT_SUPPORTED, ErrorType.TOO_MANY}


def render_value(value: Any) -> str:
    """A value as Go's field errors print it: JSON for scalars and, compactly, for objects."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=False)
    except (TypeError, ValueError):
        return repr(value)


@dataclass(frozen=True, slots=True)
class FieldError:
    path: Path
    type: ErrorType
    detail: str = ""
    value: Any = None

    @property
    def body(self) -> str:
        """The message without the field, as `details.causes[].message` carries it."""
        text = self.type.phrase
        if self.type in _WITH_VALUE:
            text += f": {render_value(self.value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.path}: {self.body}"


def invalid(path: Path, value: Any, detail: str) -> FieldError:
    return FieldError(path, ErrorType.INVALID, detail, value)


def required(path: Path, detail: str = "") -> FieldError:
    return FieldError(path, ErrorType.REQUIRED, detail)


def forbidden(path: Path, detail: str) -> FieldError:
    return FieldError(path, ErrorType.FORBIDDEN, detail)


def not_found(path: Path, value: Any, detail: str = "") -> FieldError:
    return FieldError(path, ErrorType.NOT_FOUND, detail, value)


def duplicate(path: Path, value: Any) -> FieldError:
    return FieldError(path, ErrorType.DUPLICATE, "", value)


def not_supported(path: Path, value: Any, supported: tuple[str, ...]) -> FieldError:
    detail = "supported values: " + ", ".join(f'"{s}"' for s in supported)
    return FieldError(path, ErrorType.NOT_SUPPORTED, detail, value)


def too_many(path: Path, count: int, limit: int) -> FieldError:
    return FieldError(path, ErrorType.TOO_MANY, f"must have at most {limit} items", count)


def immutable(path: Path, value: Any) -> FieldError:
    return invalid(path, value, "field is immutable")


def aggregate(errors: list[FieldError]) -> str:
    """Several errors in one line, as Go's `utilerrors.Aggregate` joins them."""
    texts = [str(e) for e in errors]
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
