"""Middleware: cross-cutting hooks around the agent, each model call and each tool call.

Subclass ``Middleware`` and override only the hooks you need; every default passes through.
``MiddlewareStack`` runs ``before_*`` hooks in registration order and ``after_*`` hooks in reverse
(the onion), and precomputes which middleware override which hook, so a hook nobody overrides
costs nothing on the hot path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._controls import SkipTool, StopWithFinal
from ._messages import Message, MessageDelta, ToolCall
from ._model import ModelRequest, ModelResponse
from ._tools import ToolResult

if TYPE_CHECKING:
    from ._context import RunContext
    from ._run import AgentRun
    from ._tool_progress import ToolDelta

__all__ = ["HOOKS", "Middleware", "MiddlewareStack"]

HOOKS = (
    "before_agent",
    "after_agent",
    "before_model",
    "before_send",
    "after_model",
    "on_model_delta",
    "before_tool",
    "on_tool_delta",
    "after_tool",
    "on_error",
)


class Middleware:
    """Base class for middleware; every hook is a pass-through."""

    @property
    def name(self) -> str:
        return type(self).__name__

    async def before_agent(self, ctx: RunContext[Any], messages: list[Message]) -> None:
        """Before the first model call; may edit ``messages`` (the run's transcript) in place."""

    async def after_agent(self, ctx: RunContext[Any], run: AgentRun) -> None:
        """After the run completed (not called for failed or cancelled runs; see ``on_error``)."""

    async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
        """Before each model call; return the request to send (possibly changed)."""
        return request

    async def before_send(self, ctx: RunContext[Any], request: ModelRequest) -> None:
        """Look at the final request just before it goes to the provider; raising refuses the call.

        It runs after every ``before_model`` and after context pressure, so it sees exactly what is
        sent (checks and audits); it cannot change it, since a change could undo the window fit.
        """

    async def after_model(self, ctx: RunContext[Any], response: ModelResponse) -> ModelResponse:
        """After each model call; return the response the loop should use."""
        return response

    def on_model_delta(self, ctx: RunContext[Any], delta: MessageDelta) -> None:
        """For each streamed fragment (synchronous: it runs once per token)."""

    async def before_tool(self, ctx: RunContext[Any], call: ToolCall) -> ToolCall | SkipTool:
        """Before each tool call is admitted; return the call to run (possibly changed).

        Return ``SkipTool(result)`` to answer the call without running the tool. Raising refuses
        the call and ends the run with that error (a policy decision, not a tool failure); to let
        the model recover instead, skip it with an error result.
        """
        return call

    def on_tool_delta(self, ctx: RunContext[Any], call: ToolCall, delta: ToolDelta) -> None:
        """For each progress report of a running tool (synchronous, like ``on_model_delta``)."""

    async def after_tool(self, ctx: RunContext[Any], call: ToolCall, result: ToolResult) -> ToolResult:
        """After each tool call; return the result the model will see."""
        return result

    async def on_error(self, ctx: RunContext[Any], error: BaseException) -> None:
        """When the run fails or is cancelled; for reporting, not recovery."""


def _overrides(mw: Middleware, hook: str) -> bool:
    return getattr(type(mw), hook) is not getattr(Middleware, hook)


class MiddlewareStack:
    """An ordered stack of middleware with the onion ordering.

    Args:
        middleware: The middleware, in registration order.
        wrap: Called as ``wrap(mw, hook)`` for each hook a middleware overrides; what it returns runs
            in its place for that hook (how ``RunPolicy(middleware_events=True)`` times each hook
            without costing anything when it is off).
    """

    __slots__ = ("_by_hook", "middleware")

    def __init__(
        self, middleware: Sequence[Middleware] = (), *, wrap: Callable[[Middleware, str], Middleware] | None = None
    ) -> None:
        self.middleware = tuple(middleware)
        items: tuple[object, ...] = self.middleware
        for mw in items:
            if not isinstance(mw, Middleware):
                from ._errors import ConfigurationError

                raise ConfigurationError(f"{mw!r} is not a Middleware instance")
        self._by_hook: dict[str, tuple[Middleware, ...]] = {}
        for hook in HOOKS:
            chosen = tuple(mw for mw in self.middleware if _overrides(mw, hook))
            if wrap is not None:
                chosen = tuple(wrap(mw, hook) for mw in chosen)
            self._by_hook[hook] = chosen if hook.startswith(("before", "on_")) and hook != "on_error" else chosen[::-1]

    def has(self, hook: str) -> bool:
        return bool(self._by_hook[hook])

    async def before_agent(self, ctx: RunContext[Any], messages: list[Message]) -> None:
        for mw in self._by_hook["before_agent"]:
            await mw.before_agent(ctx, messages)

    async def after_agent(self, ctx: RunContext[Any], run: AgentRun) -> None:
        for mw in self._by_hook["after_agent"]:
            await mw.after_agent(ctx, run)

    async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
        try:
            for mw in self._by_hook["before_model"]:
                request = await mw.before_model(ctx, request)
        except StopWithFinal as stop:
            ctx.request_stop(stop.text)
        return request

    async def before_send(self, ctx: RunContext[Any], request: ModelRequest) -> None:
        for mw in self._by_hook["before_send"]:
            await mw.before_send(ctx, request)

    async def after_model(self, ctx: RunContext[Any], response: ModelResponse) -> ModelResponse:
        try:
            for mw in self._by_hook["after_model"]:
                response = await mw.after_model(ctx, response)
        except StopWithFinal as stop:
            ctx.request_stop(stop.text)
        return response

    def on_model_delta(self, ctx: RunContext[Any], delta: MessageDelta) -> None:
        for mw in self._by_hook["on_model_delta"]:
            mw.on_model_delta(ctx, delta)

    async def before_tool(self, ctx: RunContext[Any], call: ToolCall) -> ToolCall | SkipTool:
        try:
            for mw in self._by_hook["before_tool"]:
                decided = await mw.before_tool(ctx, call)
                if isinstance(decided, SkipTool):
                    return decided
                call = decided
        except StopWithFinal as stop:  # the run ends after this turn, and this call does not run
            ctx.request_stop(stop.text)
            return SkipTool(
                ToolResult.error(f"not run: the run is ending (a hook stopped it before `{call.name}` ran)")
            )
        return call

    def on_tool_delta(self, ctx: RunContext[Any], call: ToolCall, delta: ToolDelta) -> None:
        for mw in self._by_hook["on_tool_delta"]:
            mw.on_tool_delta(ctx, call, delta)

    async def after_tool(self, ctx: RunContext[Any], call: ToolCall, result: ToolResult) -> ToolResult:
        try:
            for mw in self._by_hook["after_tool"]:
                result = await mw.after_tool(ctx, call, result)
        except StopWithFinal as stop:
            ctx.request_stop(stop.text)
        return result

    async def on_error(self, ctx: RunContext[Any], error: BaseException) -> None:
        """Fan the error out to every middleware; one failing hook does not stop the others."""
        for mw in self._by_hook["on_error"]:
            try:
                await mw.on_error(ctx, error)
            except Exception as exc:
                error.add_note(f"middleware {mw.name}.on_error failed: {exc!r}")

    def __len__(self) -> int:
        return len(self.middleware)
