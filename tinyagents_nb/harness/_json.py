"""Validation and freezing of the JSON escape hatches (``metadata``, ``configurable``).

Config values are shared by every run in a tree, so they are frozen on the way in (mappings become
read-only proxies, lists become tuples): no holder can mutate what another holder sees.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, TypeAlias

from ._errors import ConfigurationError

__all__ = ["FrozenJson", "freeze_json", "freeze_json_object", "thaw_json"]

FrozenJson: TypeAlias = Any
"""A JSON value whose containers are ``MappingProxyType`` and ``tuple``."""

_MAX_DEPTH = 64


def freeze_json(value: object, *, what: str, _depth: int = 0) -> FrozenJson:
    """Validate that ``value`` is JSON (str keys, finite floats) and return a frozen copy."""
    if _depth > _MAX_DEPTH:
        raise ConfigurationError(f"{what} is nested more than {_MAX_DEPTH} levels deep")
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigurationError(f"{what} contains {value!r}, which is not valid JSON")
        return value
    if isinstance(value, Mapping):
        out: dict[str, FrozenJson] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConfigurationError(f"{what} has a non-string key {key!r}; JSON object keys must be strings")
            out[key] = freeze_json(item, what=f"{what}[{key!r}]", _depth=_depth + 1)
        return MappingProxyType(out)
    if isinstance(value, list | tuple):
        return tuple(freeze_json(item, what=f"{what}[{i}]", _depth=_depth + 1) for i, item in enumerate(value))
    raise ConfigurationError(
        f"{what} contains a {type(value).__name__}, which is not JSON-serializable",
        hint="metadata and configurable accept str, int, float, bool, None, lists and dicts with str keys",
    )


def freeze_json_object(value: Mapping[str, object] | None, *, what: str) -> Mapping[str, FrozenJson]:
    """Like ``freeze_json`` but the top level must be an object; ``None`` means empty."""
    if not value:
        return _EMPTY  # None or empty, the common case: one shared mapping, no copy per run
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{what} must be a mapping, got {type(value).__name__}")
    frozen: Mapping[str, FrozenJson] = freeze_json(value, what=what)
    return frozen


def thaw_json(value: FrozenJson) -> Any:
    """A plain, mutable JSON copy (dicts and lists) of a frozen value."""
    if isinstance(value, Mapping):
        return {key: thaw_json(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [thaw_json(item) for item in value]
    return value


_EMPTY: Mapping[str, FrozenJson] = MappingProxyType({})
