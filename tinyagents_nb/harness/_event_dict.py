"""``event_to_dict``: any event as a JSON-able dict (journals, exports and the OpenTelemetry sink use it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from decimal import Decimal
from typing import Any

__all__ = ["event_to_dict"]


def event_to_dict(event: Any) -> dict[str, Any]:
    """A JSON-able dict of an ``AgentEvent`` (Decimals as strings, nested dataclasses as dicts).

    ``event`` is typed ``Any`` only because the event catalogue imports this module.
    """
    return {f.name: _jsonable(getattr(event, f.name)) for f in fields(event)}


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Decimal):
        return str(value)
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _jsonable(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return repr(value)
