"""Reading a tool function: its Google docstring, resolved type hints, and a compact JSON schema.

Split from ``_tools`` so the tool class stays readable; everything here runs once per decoration.
"""

from __future__ import annotations

import functools
import inspect
import re
import types
from collections.abc import Callable
from typing import Any, get_type_hints

from pydantic import ValidationError

from ._errors import ToolDefinitionError

__all__: list[str] = []


# ------------------------------------------------------------------------------------------ docstrings
_SECTION = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_ARG_SECTIONS = frozenset({"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"})
_DROPPED_SECTIONS = _ARG_SECTIONS | {"returns", "return", "yields", "yield", "raises"}
_ARG_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into the model-facing description and per-parameter descriptions.

    ``Args:``/``Returns:``/``Yields:``/``Raises:`` sections are left out of the description (the
    argument texts move into the schema, the rest is noise to a model); other sections stay.
    """
    if not doc:
        return "", {}
    kept: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    entry_indent: int | None = None
    current: str | None = None
    for line in inspect.cleandoc(doc).splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped and indent == 0:
            header = _SECTION.match(stripped)
            section = header.group(1).lower() if header and header.group(1).lower() in _DROPPED_SECTIONS else None
            entry_indent, current = None, None
            if section is not None:
                continue
        if section is None:
            kept.append(line)
        elif section in _ARG_SECTIONS and stripped:
            entry_indent = indent if entry_indent is None else entry_indent
            entry = _ARG_ENTRY.match(stripped) if indent == entry_indent else None
            if entry is not None:
                current = entry.group(1)
                params[current] = entry.group(2).strip()
            elif current is not None and indent > entry_indent:
                params[current] = f"{params[current]} {stripped}".strip()
    description = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    return description, {k: v for k, v in params.items() if v}


# ------------------------------------------------------------------------------------------ schema
_VALUE_KEYS = frozenset({"default", "const", "enum", "examples"})
_NAMED_SCHEMAS = frozenset({"properties", "$defs", "definitions", "patternProperties"})


def _strip_titles(schema: Any) -> Any:
    """Drop pydantic's generated ``title`` keys (noise for a model) without touching a property named ``title``."""
    if isinstance(schema, list):
        return [_strip_titles(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _VALUE_KEYS:
            out[key] = value
        elif key in _NAMED_SCHEMAS and isinstance(value, dict):
            out[key] = {name: _strip_titles(sub) for name, sub in value.items()}
        else:
            out[key] = _strip_titles(value)
    return out


def _hints(function: Callable[..., Any], source: Any) -> dict[str, Any]:
    """Resolved parameter annotations; an unresolvable *return* annotation is not the tool's problem."""
    try:
        return get_type_hints(source, include_extras=True)
    except Exception:
        pass
    annotations = {k: v for k, v in getattr(source, "__annotations__", {}).items() if k != "return"}
    shim = types.SimpleNamespace(__annotations__=annotations, __globals__=getattr(source, "__globals__", {}))
    try:
        return get_type_hints(shim, include_extras=True)
    except Exception as exc:
        raise ToolDefinitionError(
            f"cannot resolve the annotations of {function!r}: {exc}",
            hint="define the types used in tool signatures at module level (or in the notebook's top level)",
        ) from exc


def _hint_source(function: Callable[..., Any]) -> Any:
    if isinstance(function, functools.partial):
        return _hint_source(function.func)
    if inspect.isroutine(function):
        return function
    return type(function).__call__  # a callable object


def _is_async(function: Callable[..., Any]) -> bool:
    source = _hint_source(function)
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(source)


def _format_errors(name: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False, include_context=False):
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".") or "arguments"
        text = f"{loc}: {err['msg']}"
        if err["type"] not in ("missing", "extra_forbidden"):
            got = repr(err["input"])
            text += f" (got {got if len(got) <= 60 else got[:57] + '...'})"
        parts.append(text)
    return f"invalid arguments for tool `{name}`: " + "; ".join(parts)
