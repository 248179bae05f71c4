"""Name syntax checks with the apiserver's own messages.

Source: `k8s.io/apimachinery/pkg/util/validation/validation.go` (`IsQualifiedName`, `IsDNS1123Label`).
"""

from __future__ import annotations

import re

_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME = re.compile(f"^{_NAME_FMT}$")
_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL = re.compile(f"^{_LABEL_FMT}$")
_SUBDOMAIN_FMT = _LABEL_FMT + r"(\." + _LABEL_FMT + ")*"
_SUBDOMAIN = re.compile(f"^{_SUBDOMAIN_FMT}$")

_NAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an"
    " alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is"
    f" '{_NAME_FMT}')"
)
_QUALIFIED_MSG = (
    "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an"
    " alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is"
    f" '{_NAME_FMT}') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must"
    " start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is"
    f" '{_SUBDOMAIN_FMT}')"
)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and"
    f" end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '{_LABEL_FMT}')"
)


def qualified_name_errors(value: str) -> list[str]:
    """Problems with a qualified name such as `example.com/my-gate` (empty when valid)."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
        if len(prefix) > 253:
            return ["prefix part must be no more than 253 characters"]
        if not _SUBDOMAIN.match(prefix):
            return ["prefix part " + _SUBDOMAIN_MSG]
    else:
        return [_QUALIFIED_MSG]
    if not name:
        return ["name part must be non-empty"]
    errors = []
    if len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if not _NAME.match(name):
        errors.append(_NAME_MSG)
    return errors


def dns_label_errors(value: str) -> list[str]:
    """Problems with an RFC 1123 label such as a template name (empty when valid)."""
    errors = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not _LABEL.match(value):
        errors.append(_LABEL_MSG)
    return errors
