"""Hooks that decide: skip a tool call with a supplied result, or stop the run with a final answer.

``before_tool`` may return ``SkipTool(result)`` instead of a call: the tool does not run and the
model sees ``result`` (a cache, a mock, a policy answer). Any hook (or a tool) may end the run with
a final answer by raising ``StopWithFinal(text)`` from ``before_model``/``after_model``/
``before_tool``/``after_tool``, or by calling ``ctx.request_stop(text)``: the round trip under way
finishes (every tool call of the turn is answered, so the transcript stays valid), then the run
completes with ``text`` instead of calling the model again. The text is not added to the transcript.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._events import ControlApplied

if TYPE_CHECKING:
    from ._context import RunContext
    from ._tools import ToolResult

__all__ = ["SkipTool", "StopWithFinal", "take_stop"]


@dataclass(frozen=True, slots=True)
class SkipTool:
    """Returned by ``before_tool``: do not run the call; answer it with ``result``.

    Later middleware's ``before_tool`` does not see the call; ``after_tool`` does, as usual.
    """

    result: ToolResult


class StopWithFinal(Exception):
    """Raised by a hook to end the run after the current round trip with ``text`` as its final answer."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def take_stop(ctx: RunContext[Any]) -> str | None:
    """The final text of a pending stop request (clearing it and emitting ``control.applied``), if any."""
    text = ctx.stop_request
    if text is None:
        return None
    ctx.stop_request = None
    ctx.emit(ControlApplied, control="stop_with_final", detail=text[:2_000])
    return text
