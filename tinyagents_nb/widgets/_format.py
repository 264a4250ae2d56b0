"""Small text formatters shared by the panes: numbers, money, durations, escaping, previews.

Kept free of widget imports so the panes' HTML can be built (and tested) as plain strings.
"""

from __future__ import annotations

import html
import json
import re
from decimal import Decimal
from typing import Any, Final

__all__ = [
    "code_span",
    "esc",
    "format_duration",
    "format_int",
    "format_usd",
    "json_preview",
    "plural",
    "truncate",
]

_MICRO: Final = Decimal("0.000001")


def esc(text: object) -> str:
    """HTML-escape any value's ``str`` (quotes too, so it is safe inside attributes)."""
    return html.escape(str(text), quote=True)


def format_int(value: int) -> str:
    return f"{value:,}"


def plural(count: int, noun: str) -> str:
    """``"1 tool call"``, ``"2 tool calls"``."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def format_usd(value: Decimal | None) -> str:
    """Dollars to the micro-dollar, always six places (``$0.000409``, ``$1,234.500000``); ``None`` is ``unknown``.

    One shape everywhere (header, panes, the record, ``%agent`` tables): agent calls often cost
    fractions of a cent, and ``$0.00`` beside ``$0.000000`` reads like two different amounts. An
    unknown price is never shown as ``$0``: a partial sum would understate the cost.
    """
    if value is None:
        return "unknown"
    return f"${value.quantize(_MICRO):,.6f}"


def format_duration(seconds: float, *, precise: bool = True) -> str:
    """``"0.42 s"``, ``"12.3 s"``, ``"2 min 05 s"``; ``precise=False`` rounds to whole seconds.

    The live header uses whole seconds so it changes (and is resent) at most once a second.
    """
    seconds = max(seconds, 0.0)
    if seconds >= 60:
        minutes, rest = divmod(int(seconds), 60)
        return f"{minutes} min {rest:02d} s"
    if not precise:
        return f"{int(seconds)} s"
    return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"


def truncate(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters with an ellipsis and the size of what was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… (+{len(text) - limit:,} chars)"


def json_preview(value: Any, limit: int = 300) -> str:
    """Compact JSON of tool arguments (``repr`` for what JSON cannot encode), truncated."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=repr)
        except (TypeError, ValueError):  # circular or otherwise unencodable
            text = repr(value)
    return truncate(text, limit)


def code_span(text: str) -> str:
    """A Markdown inline code span holding any text (more backticks than it contains); never typeset as math."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"
