"""The result of a defaulting rule: the new raw object and the warnings for the user."""

from __future__ import annotations

from dataclasses import dataclass

from webhook.rules.decode import JsonObject


@dataclass(frozen=True, slots=True)
class Defaulted:
    object: JsonObject
    warnings: tuple[str, ...] = ()
