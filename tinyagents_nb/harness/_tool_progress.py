"""Tool progress: ``ToolDelta`` and the ``ToolReporter`` a long tool reports it through.

A tool that takes a while (a crawl, a build, a sub-query batch) declares a parameter annotated
``ToolReporter``; the loop injects a reporter bound to that very call, so each report becomes a
``tool.delta`` event (the ``tools`` stream mode shows it) and reaches every middleware's
``on_tool_delta``. The binding lives in a context variable set around the call, so concurrent
calls of one turn each report under their own call id, and a tool called outside a run (a unit
test) gets a reporter that drops its reports. A reporter is closed when its call returns: one kept
(stored, or handed to a background thread) reports nothing after the tool ended, so no
``tool.delta`` follows its ``tool.completed`` or the run's end.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._errors import ConfigurationError
from ._events import ToolDeltaEvent

if TYPE_CHECKING:
    from ._context import RunContext
    from ._messages import ToolCall

__all__ = ["OnToolDelta", "ToolDelta", "ToolReporter", "bind_reporter", "current_reporter", "unbind_reporter"]


@dataclass(frozen=True, slots=True)
class ToolDelta:
    """One progress report of a running tool.

    Attributes:
        message: What the tool is doing now (``"page 2 of 5"``).
        progress: How far along, from 0 to 1, when the tool knows.
        data: Any JSON-able detail for a consumer (partial results, counters).
    """

    message: str = ""
    progress: float | None = None
    data: Any = None

    def __post_init__(self) -> None:
        message: object = self.message
        if not isinstance(message, str):
            raise ConfigurationError(f"ToolDelta.message must be a str, got {type(message).__name__}")
        p: object = self.progress
        if p is not None and (
            isinstance(p, bool) or not isinstance(p, int | float) or not math.isfinite(p) or not 0 <= p <= 1
        ):
            raise ConfigurationError(f"ToolDelta.progress must be a number from 0 to 1, got {p!r}")


OnToolDelta = Callable[["RunContext[Any]", "ToolCall", ToolDelta], None]
"""What a report runs after its event: the middleware stack's ``on_tool_delta`` in a run."""


class ToolReporter:
    """Reports progress for one tool call; injected into a tool parameter annotated ``ToolReporter``.

    Call it (``report("half way", progress=0.5)``) or pass a ``ToolDelta`` to ``send``. Reporting is
    synchronous and cheap: one event and the ``on_tool_delta`` hooks, on the calling thread.
    """

    __slots__ = ("_call", "_closed", "_ctx", "_on_delta", "sent")

    def __init__(self, ctx: RunContext[Any] | None, call: ToolCall | None, on_delta: OnToolDelta | None) -> None:
        self._ctx = ctx
        self._call = call
        self._on_delta = on_delta
        self._closed = False
        self.sent = 0
        """How many reports this call made."""

    @property
    def call_id(self) -> str | None:
        """The call it reports for (``None`` outside a run)."""
        return None if self._call is None else self._call.id

    def __call__(self, message: str = "", *, progress: float | None = None, data: Any = None) -> None:
        self.send(ToolDelta(message=message, progress=progress, data=data))

    def send(self, delta: ToolDelta) -> None:
        """Emit ``tool.delta`` and run the ``on_tool_delta`` hooks (nothing outside a run or after the call)."""
        ctx, call = self._ctx, self._call
        if ctx is None or call is None or self._closed:
            return
        self.sent += 1
        ctx.emit(
            ToolDeltaEvent,
            call_id=call.id,
            tool_name=call.name,
            message=delta.message,
            progress=delta.progress,
            data=delta.data,
        )
        if self._on_delta is not None:
            self._on_delta(ctx, call, delta)

    def __repr__(self) -> str:
        return f"ToolReporter(call_id={self.call_id!r}, sent={self.sent})"


_DETACHED = ToolReporter(None, None, None)
_CURRENT: ContextVar[ToolReporter] = ContextVar("tinyagents_tool_reporter", default=_DETACHED)


def current_reporter() -> ToolReporter:
    """The reporter of the tool call running in this task (a detached one outside a run)."""
    return _CURRENT.get()


def bind_reporter(ctx: RunContext[Any], call: ToolCall, on_delta: OnToolDelta | None) -> Any:
    """Bind a reporter for ``call`` in this task; returns the token to ``unbind_reporter`` with.

    ``on_delta`` is the middleware stack's ``on_tool_delta`` (a callable, so tools need not know middleware).
    """
    return _CURRENT.set(ToolReporter(ctx, call, on_delta))


def unbind_reporter(token: Any) -> None:
    """Close the reporter ``bind_reporter`` bound (the call has ended) and restore the previous one."""
    _CURRENT.get()._closed = True
    _CURRENT.reset(token)
