"""``{name}`` and ``{expr}`` in a ``%%agent`` cell body, evaluated in the notebook's namespace.

IPython expands variables in a magic's *line* but never in a cell body, so the prompt needs its own
pass. The syntax is an f-string's: ``{expr}``, ``{expr!r}``, ``{expr:spec}``; ``{{`` and ``}}`` are
literal braces. A field is found by bracket matching (strings and nested ``()[]{}`` respected), so
``{d["a"]}`` and ``{len(df)}`` work. Every failure is a ``InterpolationError`` naming the field,
because a prompt with a silently unexpanded ``{x}`` costs a model call and misleads it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["InterpolationError", "interpolate"]

_CLOSE = {"(": ")", "[": "]", "{": "}"}
_CONVERSIONS: dict[str, Callable[[object], str]] = {"r": repr, "s": str, "a": ascii}
_ESCAPE_HINT = "write {{ and }} for literal braces, or use %%agent --raw"


class InterpolationError(ValueError):
    """A ``{field}`` of the prompt could not be filled in; the message names it and says why."""


def interpolate(template: str, namespace: Mapping[str, Any]) -> str:
    """Fill every ``{expr}`` of ``template`` from ``namespace``; ``{{``/``}}`` become ``{``/``}``.

    Raises:
        InterpolationError: An unbalanced brace, an undefined name, or an expression that fails.
    """
    out: list[str] = []
    i, n = 0, len(template)
    while i < n:
        ch = template[i]
        if ch == "}":
            if template.startswith("}}", i):
                out.append("}")
                i += 2
                continue
            raise InterpolationError(f"single '}}' at offset {i} in the prompt; {_ESCAPE_HINT}")
        if ch != "{":
            j = _next_brace(template, i)
            out.append(template[i:j])
            i = j
            continue
        if template.startswith("{{", i):
            out.append("{")
            i += 2
            continue
        end = _field_end(template, i + 1)
        out.append(_render(template[i + 1 : end], namespace))
        i = end + 1
    return "".join(out)


def _next_brace(text: str, start: int) -> int:
    positions = [p for p in (text.find("{", start), text.find("}", start)) if p >= 0]
    return min(positions) if positions else len(text)


def _field_end(text: str, start: int) -> int:
    """The index of the ``}`` closing the field that starts at ``start`` (just after its ``{``)."""
    stack: list[str] = []
    quote: str | None = None
    i = start
    while i < len(text):
        ch = text[i]
        if quote is not None:
            if ch == "\\":
                i += 2
                continue
            if text.startswith(quote, i):
                i += len(quote)
                quote = None
                continue
        elif ch in "'\"":
            quote = ch * 3 if text.startswith(ch * 3, i) else ch
            i += len(quote)
            continue
        elif ch in _CLOSE:
            stack.append(_CLOSE[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
        elif ch == "}" and not stack:
            return i
        i += 1
    snippet = text[start - 1 : start + 30].split("\n", 1)[0]
    raise InterpolationError(f"unclosed '{{' in the prompt near {snippet!r}; {_ESCAPE_HINT}")


def _split_field(field: str) -> tuple[str, str | None, str]:
    """``expr!conv:spec`` → (expr, conv, spec), splitting only outside brackets and strings."""
    depth = 0
    quote: str | None = None
    for i, ch in enumerate(field):
        if quote is not None:
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and ch == "!" and field[i + 1 : i + 2] in _CONVERSIONS and field[i + 2 : i + 3] in ("", ":"):
            return field[:i], field[i + 1], field[i + 3 :]
        elif depth == 0 and ch == ":":
            return field[:i], None, field[i + 1 :]
    return field, None, ""


def _render(field: str, namespace: Mapping[str, Any]) -> str:
    expr, conversion, spec = _split_field(field)
    if not expr.strip():
        raise InterpolationError(f"empty {{}} in the prompt; {_ESCAPE_HINT}")
    source = expr.strip()
    shown = "{" + source + "}"
    globals_ = namespace if isinstance(namespace, dict) else dict(namespace)
    try:
        code = compile(source, "<prompt>", "eval")
    except SyntaxError:
        raise InterpolationError(f"{shown} in the prompt is not a Python expression; {_ESCAPE_HINT}") from None
    try:
        value = eval(code, globals_)  # the user's own notebook expression, like an f-string
    except NameError as exc:
        name = getattr(exc, "name", None) or source
        raise InterpolationError(
            f"name {name!r} in {shown} is not defined; define it in a cell above, or {_ESCAPE_HINT}"
        ) from None
    except Exception as exc:
        raise InterpolationError(f"{shown} failed: {type(exc).__name__}: {exc}") from None
    if conversion is not None:
        value = _CONVERSIONS[conversion](value)
    try:
        return format(value, spec)
    except (TypeError, ValueError) as exc:
        raise InterpolationError(f"{shown} cannot be formatted with {spec!r}: {exc}; {_ESCAPE_HINT}") from None
