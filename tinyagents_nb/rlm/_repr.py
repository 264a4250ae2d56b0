"""``bounded_repr``: a block's last-expression value as text, never built whole.

The in-process environment shows the model a block's last expression the way a REPL does, and its
output keeps only the first ``OUTPUT_HEAD`` characters. ``repr`` of a 1 GB string (or of a list of
ten million items) would build the whole text first, then be cut: a second gigabyte in the
notebook process. This builds the text of strings, bytes and the built-in containers piece by
piece against a character budget and stops when it is spent; below the budget it equals ``repr``.

Other objects are asked for their own ``repr`` and then cut: their authors decide its size (numpy
and pandas bound theirs; a class whose ``__repr__`` returns a gigabyte is not bounded here).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

__all__ = ["bounded_repr"]

_DEPTH: Final = 50  # deeper nesting is shown as "…" (repr itself would recurse until RecursionError)
_CUT: Final = "…"
_BRACKETS: Final[dict[type, tuple[str, str]]] = {
    list: ("[", "]"),
    tuple: ("(", ")"),
    set: ("{", "}"),
    frozenset: ("frozenset({", "})"),
}


def bounded_repr(value: object, limit: int) -> tuple[str, bool]:
    """``(text, complete)``: ``repr(value)`` when it fits in ``limit`` characters, else its first ``limit`` or so.

    ``complete`` is False when the text was cut (it then ends with ``…``).
    """
    out: list[str] = []
    room = _Room(limit)
    _write(value, out, room, 0, set())
    return "".join(out), not room.cut


class _Room:
    __slots__ = ("cut", "left")

    def __init__(self, limit: int) -> None:
        self.left = limit
        self.cut = False

    def take(self, out: list[str], text: str) -> bool:
        """Append ``text`` (cut to the room left); False once the room is spent."""
        if self.cut:
            return False
        if len(text) > self.left:
            out.append(text[: self.left] + _CUT)
            self.left, self.cut = 0, True
            return False
        out.append(text)
        self.left -= len(text)
        return True


def _write(value: object, out: list[str], room: _Room, depth: int, active: set[int]) -> bool:
    kind = type(value)
    if isinstance(value, str | bytes | bytearray) and kind in (str, bytes, bytearray):
        return room.take(out, repr(value[: room.left + 1]))  # a slice: never the whole text
    if not isinstance(value, list | tuple | set | frozenset | dict) or kind not in (*_BRACKETS, dict):
        return room.take(out, repr(value))  # not a built-in container (a subclass may have its own repr)
    if id(value) in active:  # a container holding itself, as repr shows it
        return room.take(out, "[...]" if kind is list else "{...}")
    if depth >= _DEPTH:
        return room.take(out, _CUT)
    active.add(id(value))
    try:
        if isinstance(value, dict):
            return _items(value.items(), "{", "}", out, room, depth, active)
        if isinstance(value, set | frozenset) and not value:
            return room.take(out, f"{kind.__name__}()")
        opening, closing = _BRACKETS[kind]
        if isinstance(value, tuple) and len(value) == 1:
            closing = ",)"
        return _items(((item,) for item in value), opening, closing, out, room, depth, active)
    finally:
        active.discard(id(value))


def _items(
    items: Iterable[tuple[object, ...]],
    opening: str,
    closing: str,
    out: list[str],
    room: _Room,
    depth: int,
    active: set[int],
) -> bool:
    """Items of one container: each a 1-tuple (a sequence's or set's item) or a 2-tuple (a dict's key and value)."""
    if not room.take(out, opening):
        return False
    for index, item in enumerate(items):
        if index and not room.take(out, ", "):
            return False
        if len(item) == 2 and not (_write(item[0], out, room, depth + 1, active) and room.take(out, ": ")):
            return False
        if not _write(item[-1], out, room, depth + 1, active):
            return False
    return room.take(out, closing)
