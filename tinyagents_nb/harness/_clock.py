"""Where the loop gets the time and fresh ids, so a test can make both deterministic.

The loop never calls ``time.time()`` or ``RunId.new()`` directly: it takes a ``Clock`` and an
``IdSource`` (``clock=`` / ``ids=``), defaulting to ``SYSTEM_CLOCK`` and ``RANDOM_IDS``. The testkit's
``DeterministicClock`` and ``DeterministicIds`` plug in the same way, which makes event timestamps,
durations and run ids reproducible in snapshots and asserts.
"""

from __future__ import annotations

import time as _time
from typing import Final, Protocol, runtime_checkable

from ._ids import CallId, RunId

__all__ = ["RANDOM_IDS", "SYSTEM_CLOCK", "Clock", "IdSource"]


@runtime_checkable
class Clock(Protocol):
    """A source of time: wall clock for timestamps, monotonic clock for durations and deadlines."""

    def time(self) -> float:
        """Wall-clock time in seconds since the epoch (event ``ts``)."""
        ...

    def monotonic(self) -> float:
        """A clock that never goes backwards, for durations and deadlines; its origin is arbitrary."""
        ...


@runtime_checkable
class IdSource(Protocol):
    """A source of fresh run and call identifiers."""

    def run_id(self) -> RunId:
        """A new, unique run id."""
        ...

    def call_id(self) -> CallId:
        """A new, unique model- or tool-call id."""
        ...


class _SystemClock:
    """The real clocks; the builtins are bound directly so a call costs no Python frame."""

    __slots__ = ()
    time = staticmethod(_time.time)
    monotonic = staticmethod(_time.monotonic)

    def __repr__(self) -> str:
        return "SYSTEM_CLOCK"


class _RandomIds:
    """Globally unique ids from ``RunId.new()`` / ``CallId.new()``."""

    __slots__ = ()
    run_id = staticmethod(RunId.new)
    call_id = staticmethod(CallId.new)

    def __repr__(self) -> str:
        return "RANDOM_IDS"


SYSTEM_CLOCK: Final[Clock] = _SystemClock()
"""The process's real wall and monotonic clocks (``time.time`` / ``time.monotonic``)."""

RANDOM_IDS: Final[IdSource] = _RandomIds()
"""Unique, roughly time-sorted ids (``RunId.new()`` / ``CallId.new()``)."""
