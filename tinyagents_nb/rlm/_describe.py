"""Describing the REPL's values to the model without sending them.

The model sees each value's type, size, shape and a short preview (a DataFrame's schema), never
the value itself: the whole point of the RLM is that the context can be far larger than the window.
Every description is bounded, whatever the value's size.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from typing import Any

__all__ = ["describe_context", "describe_value"]

_PREVIEW = 160
_COLUMNS = 30
_COLUMN_NAME = 60
_DESCRIPTION = 2_000  # one value's paragraph, whatever the value: the last word on size
_repr = reprlib.Repr()
_repr.maxstring = _PREVIEW
_repr.maxother = _PREVIEW
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 5


def _clip(text: str, limit: int = _PREVIEW) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_value(name: str, value: Any) -> str:
    """One bounded paragraph about ``value``: what it is, how big, and how it starts.

    Each part is cut (a column name, a key, a type name) and so is the whole, at ``_DESCRIPTION``
    characters: names come from the data too (a headerless ``read_csv`` names columns by their
    first row, which may be a 100,000-character line).
    """
    return _clip(_describe(_clip(name, 80), value), _DESCRIPTION)


def _describe(name: str, value: Any) -> str:
    kind = _clip(f"{type(value).__module__}.{type(value).__qualname__}".removeprefix("builtins."), 120)
    if isinstance(value, str):
        lines = value.count("\n") + 1 if value else 0
        more = "…" if len(value) > _PREVIEW else ""
        return f"- `{name}`: str, {len(value):,} characters, {lines:,} lines; starts: {value[:_PREVIEW]!r}{more}"
    if isinstance(value, bytes | bytearray):
        return f"- `{name}`: {kind}, {len(value):,} bytes; starts: {_clip(repr(bytes(value[:_PREVIEW])))}"
    shape = getattr(value, "shape", None)
    columns = getattr(value, "columns", None)
    dtypes = getattr(value, "dtypes", None)
    if shape is not None and columns is not None and dtypes is not None:  # a DataFrame, by its duck type
        pairs = zip(list(columns[:_COLUMNS]), list(dtypes[:_COLUMNS]), strict=False)
        schema = ", ".join(f"{_clip(str(c), _COLUMN_NAME)}: {_clip(str(t), 40)}" for c, t in pairs)
        more = f", … {len(columns) - _COLUMNS} more columns" if len(columns) > _COLUMNS else ""
        return f"- `{name}`: {kind}, shape {tuple(shape)}; columns: {schema}{more}"
    if shape is not None:
        dtype = getattr(value, "dtype", None)
        return f"- `{name}`: {kind}, shape {tuple(shape)}" + (f", dtype {dtype}" if dtype is not None else "")
    if isinstance(value, Mapping):
        keys = ", ".join(_clip(repr(k), 40) for k in list(value)[:10])
        more = ", …" if len(value) > 10 else ""
        return f"- `{name}`: {kind} with {len(value):,} keys; first keys: {keys}{more}"
    try:
        size = len(value)
    except Exception:
        size = None
    try:
        preview = _clip(_repr.repr(value))
    except Exception as exc:  # a broken __repr__ must not break the run
        preview = f"<repr failed: {type(exc).__name__}>"
    sized = f", {size:,} items" if size is not None else ""
    return f"- `{name}`: {kind}{sized}; preview: {preview}"


def describe_context(values: Mapping[str, Any]) -> str:
    """The description block for every named value (``(none)`` when there are none)."""
    if not values:
        return "(no context values: only the helper functions are defined)"
    return "\n".join(describe_value(name, value) for name, value in values.items())
