"""``middleware.started`` / ``middleware.completed``: timing each middleware hook, only when asked.

Tracing is opt-in (``RunPolicy(middleware_events=True)``) because it doubles the events of every
round trip. When it is off nothing here runs: the stack holds the middleware themselves. When it is
on, the stack holds one ``TracedHook`` per (middleware, hook) it overrides. ``on_model_delta`` is
never traced: it runs once per token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._events import MiddlewareCompleted, MiddlewareStarted
from ._messages import Message, MessageDelta, ToolCall
from ._middleware import Middleware
from ._model import ModelRequest, ModelResponse

if TYPE_CHECKING:
    from ._context import RunContext
    from ._run import AgentRun
    from ._tools import ToolResult

__all__ = ["TracedHook", "trace_hook"]


def trace_hook(mw: Middleware, hook: str) -> Middleware:
    """The ``MiddlewareStack`` wrap that emits events around ``mw``'s ``hook`` (not the per-delta hooks)."""
    return mw if hook in ("on_model_delta", "on_tool_delta") else TracedHook(mw, hook)


class TracedHook(Middleware):
    """Runs one hook of one middleware between a ``middleware.started`` and a ``middleware.completed``."""

    __slots__ = ("hook", "inner")

    def __init__(self, inner: Middleware, hook: str) -> None:
        self.inner = inner
        self.hook = hook

    @property
    def name(self) -> str:
        return self.inner.name

    async def _traced(self, ctx: RunContext[Any], *args: Any) -> Any:
        name = self.inner.name
        ctx.emit(MiddlewareStarted, middleware=name, hook=self.hook)
        started = ctx.clock.monotonic()
        try:
            result = await getattr(self.inner, self.hook)(ctx, *args)
        except BaseException as exc:
            ctx.emit(
                MiddlewareCompleted,
                middleware=name,
                hook=self.hook,
                duration_s=ctx.clock.monotonic() - started,
                error=type(exc).__name__,
            )
            raise
        ctx.emit(MiddlewareCompleted, middleware=name, hook=self.hook, duration_s=ctx.clock.monotonic() - started)
        return result

    async def before_agent(self, ctx: RunContext[Any], messages: list[Message]) -> None:
        await self._traced(ctx, messages)

    async def after_agent(self, ctx: RunContext[Any], run: AgentRun) -> None:
        await self._traced(ctx, run)

    async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
        result: ModelRequest = await self._traced(ctx, request)
        return result

    async def before_send(self, ctx: RunContext[Any], request: ModelRequest) -> None:
        await self._traced(ctx, request)

    async def after_model(self, ctx: RunContext[Any], response: ModelResponse) -> ModelResponse:
        result: ModelResponse = await self._traced(ctx, response)
        return result

    def on_model_delta(self, ctx: RunContext[Any], delta: MessageDelta) -> None:
        self.inner.on_model_delta(ctx, delta)

    async def before_tool(self, ctx: RunContext[Any], call: ToolCall) -> ToolCall:
        result: ToolCall = await self._traced(ctx, call)
        return result

    async def after_tool(self, ctx: RunContext[Any], call: ToolCall, result: ToolResult) -> ToolResult:
        out: ToolResult = await self._traced(ctx, call, result)
        return out

    async def on_error(self, ctx: RunContext[Any], error: BaseException) -> None:
        await self._traced(ctx, error)

    def __repr__(self) -> str:
        return f"TracedHook({self.inner!r}, {self.hook!r})"
