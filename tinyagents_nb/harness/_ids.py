"""Typed identifiers that thread lineage through every layer.

Each identifier is a ``str`` subclass, so it serializes as a plain string, compares with strings and
costs nothing to pass around, yet a ``RunId`` cannot be handed where a ``ThreadId`` is expected
without the type checker noticing. Constructing one validates it; ``new()`` generates one that is
unique across concurrent runs, threads and processes (time prefix, process-wide counter, random
suffix), and sorts roughly by creation time.
"""

from __future__ import annotations

import itertools
import os
import re
import time
from typing import ClassVar, Self

from ._errors import InvalidIdError

__all__ = [
    "CallId",
    "CellId",
    "EventId",
    "Identifier",
    "RunId",
    "SessionId",
    "ThreadId",
]

_VALID = re.compile(r"[^\s\x00-\x1f\x7f]{1,200}")
_counter = itertools.count()  # next() on itertools.count is atomic under the GIL


class Identifier(str):
    """Base of the typed identifiers; validates on construction."""

    __slots__ = ()
    prefix: ClassVar[str] = "id"

    def __new__(cls, value: str) -> Self:
        if isinstance(value, cls):
            return value
        if not isinstance(value, str):
            raise InvalidIdError(f"{cls.__name__} must be a string, got {type(value).__name__}")
        if not _VALID.fullmatch(value):
            shown = value if len(value) <= 40 else value[:37] + "..."
            raise InvalidIdError(
                f"invalid {cls.__name__} {shown!r}: use 1 to 200 characters without whitespace or control characters"
            )
        return super().__new__(cls, value)

    @classmethod
    def new(cls) -> Self:
        """Generate a fresh identifier, e.g. ``run-0193a1b2c3d4-000001-9f3e2a1b``."""
        stamp = time.time_ns() // 1_000_000
        text = f"{cls.prefix}-{stamp:012x}-{next(_counter) & 0xFFFFFF:06x}-{os.urandom(4).hex()}"
        return str.__new__(cls, text)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"


class RunId(Identifier):
    """One run of an agent loop (a node in the recursion tree)."""

    __slots__ = ()
    prefix = "run"


class ThreadId(Identifier):
    """One conversation; runs in the same thread share history and provider caches."""

    __slots__ = ()
    prefix = "thr"


class CallId(Identifier):
    """One model or tool call inside a run."""

    __slots__ = ()
    prefix = "call"


class EventId(Identifier):
    """One event in an event stream."""

    __slots__ = ()
    prefix = "evt"


class SessionId(Identifier):
    """One notebook session (one kernel) or one long-lived sub-agent session."""

    __slots__ = ()
    prefix = "sess"


class CellId(Identifier):
    """One notebook cell execution."""

    __slots__ = ()
    prefix = "cell"
