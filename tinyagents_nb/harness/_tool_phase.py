"""The tool half of a run: admit one turn's tool calls, run them, and report each in events.

The loop hands a turn's calls to its ``ToolPhase``; ``before_tool`` hooks admit (or answer) each in
order, the calls run concurrently when there are several (up to ``max_concurrency``), approvals and
per-tool timeouts are applied, and every call that started is closed by exactly one
``tool.completed`` or ``tool.failed`` event, even when the run is interrupted mid-tool. When the
run's ``max_tool_calls`` is reached mid-turn, the calls within it run and the rest are answered
with error results (no tool runs, every call of the turn is answered, so the transcript can be
sent again); the loop then ends the run with the ``LimitExceeded`` kept in ``exhausted``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import anyio

from ._approval_gate import gate_tool_call
from ._controls import SkipTool
from ._errors import (
    Cancelled,
    LimitExceeded,
    RunTimeout,
    ToolArgumentsError,
    ToolError,
    UnknownToolError,
    describe_error,
)
from ._event_text import error_text, preview
from ._events import LimitReached, ToolCompleted, ToolFailed, ToolStarted
from ._limits import LimitKind, LimitTracker, tighter
from ._messages import ToolCall, ToolMessage
from ._tool_progress import bind_reporter, unbind_reporter
from ._tools import Tool, ToolResult

if TYPE_CHECKING:
    from ._clock import Clock
    from ._context import RunContext
    from ._middleware import MiddlewareStack
    from ._policy import RunPolicy
    from ._tool_registry import ToolRegistry

__all__ = ["ToolPhase"]


class ToolPhase:
    """The tool calls of one run: what ran, what is running, and what a hook answered instead.

    ``check_limit`` runs a limit check and reports ``limit.reached`` when it fails; ``timeout``
    makes the run's deadline error. Both belong to the loop, which owns the run's limits.
    """

    def __init__(
        self,
        ctx: RunContext[Any],
        *,
        tools: ToolRegistry,
        middleware: MiddlewareStack,
        policy: RunPolicy,
        limits: LimitTracker,
        clock: Clock,
        check_limit: Callable[[Callable[[], object]], None],
        timeout: Callable[[], RunTimeout],
    ) -> None:
        self.ctx = ctx
        self.tools = tools
        self.middleware = middleware
        self.policy = policy
        self.limits = limits
        self.clock = clock
        self.check_limit = check_limit
        self.timeout = timeout
        self.completed = 0  # calls that ended with a result (the run's tool_calls)
        self.live_tools: dict[int, tuple[ToolCall, float]] = {}  # started tools without a closing event
        self.supplied: dict[int, ToolResult] = {}  # results a before_tool hook supplied (SkipTool), by id(call)
        self.exhausted: LimitExceeded | None = None  # max_tool_calls reached in the last turn

    async def run(self, calls: Sequence[ToolCall]) -> list[ToolMessage]:
        """Admit, run and report one turn's calls; their results in call order, or the first fatal error."""
        ctx, middleware = self.ctx, self.middleware
        admitted, refused = await self._admit_turn(calls)
        outcomes: list[_Outcome | None] = [None] * len(admitted)
        try:
            if len(admitted) == 1:
                outcomes[0] = await self._execute(admitted[0])  # no task group for the common single call
            else:
                limit = self.policy.limits.max_concurrency
                semaphore = anyio.Semaphore(limit) if limit else None

                async def run_one(i: int, call: ToolCall) -> None:
                    if semaphore is None:
                        outcomes[i] = await self._execute(call)
                    else:
                        async with semaphore:
                            outcomes[i] = await self._execute(call)

                async with anyio.create_task_group() as tg:
                    for i, call in enumerate(admitted):
                        tg.start_soon(run_one, i, call)
        except BaseException as exc:  # the run's task was cancelled (or interrupted) mid-tool: close what started
            self._close_live_tools(exc)
            raise
        results: list[ToolMessage] = []
        first_fatal: Exception | None = None
        for call, outcome in zip(admitted, outcomes, strict=True):
            assert outcome is not None
            result, duration, fatal, ran = outcome
            if not ran:  # stopped before it started: it emitted nothing, so nothing to close
                if first_fatal is None and isinstance(fatal, RunTimeout):
                    ctx.emit(LimitReached, limit=LimitKind.of(fatal.limit), maximum=fatal.maximum)
                first_fatal = first_fatal or fatal
                continue
            if fatal is not None:
                ctx.emit(
                    ToolFailed,
                    call_id=call.id,
                    tool_name=call.name,
                    error_type=type(fatal).__name__,
                    error=error_text(fatal),
                    duration_s=duration,
                    status=_ended_as(fatal),
                )
                first_fatal = first_fatal or fatal
                continue
            if first_fatal is None:  # once the turn has failed, results are only reported, not used
                result = await middleware.after_tool(ctx, call, result)
            self.completed += 1
            ctx.emit(
                ToolCompleted,
                call_id=call.id,
                tool_name=call.name,
                output=preview(result.text),
                is_error=result.is_error,
                duration_s=duration,
            )
            results.append(result.to_message(call))
        if first_fatal is not None:
            raise first_fatal
        return results + refused  # the admitted calls come first in a turn, so this is call order

    async def _admit_turn(self, calls: Sequence[ToolCall]) -> tuple[list[ToolCall], list[ToolMessage]]:
        """The calls to run (after ``before_tool``), and the answers of those past ``max_tool_calls``."""
        ctx, limits, middleware = self.ctx, self.limits, self.middleware
        admitted: list[ToolCall] = []
        refused: list[ToolMessage] = []  # calls past max_tool_calls: answered, never run
        for call in calls:
            ctx.cancellation.raise_if_cancelled()
            self.check_limit(limits.check_deadline)
            if self.exhausted is None:
                try:
                    self.check_limit(limits.record_tool_call)
                except LimitExceeded as exc:
                    self.exhausted = exc
            if self.exhausted is not None:
                why = f"not run: {self.exhausted} (the run's tool-call budget was spent by earlier calls)"
                refused.append(ToolResult.error(why).to_message(call))
                continue
            decided = await middleware.before_tool(ctx, call)
            if isinstance(decided, SkipTool):
                self.supplied[id(call)], decided = decided.result, call
            admitted.append(decided)
        return admitted, refused

    async def _execute(self, call: ToolCall) -> _Outcome:
        """Start one admitted call, unless the run was stopped while it waited for its turn.

        Returns (result, duration, fatal error or None, whether it started). Errors are returned,
        not raised, so concurrent siblings finish and the first fatal error in call order wins (a
        task group would otherwise wrap them in an ``ExceptionGroup``). ``tool.started`` is
        emitted when the tool really starts: not when it is queued, and not while it waits for
        approval (its duration is the tool's, never a person's), with the arguments it runs with.
        """
        ctx = self.ctx
        try:
            if ctx.cancellation.is_cancelled or self.limits.deadline is not None:
                ctx.cancellation.raise_if_cancelled()
                self.limits.check_deadline()  # limit.reached is emitted once, by run
            admitted = await self._admit(call)
        except (Cancelled, RunTimeout) as exc:  # stopped before it started (a wait for approval says so itself)
            return ToolResult.error(error_text(exc)), 0.0, exc, False
        except Exception as exc:  # refused at once by the policy: reported as this call's failure
            ctx.emit(ToolStarted, call_id=call.id, tool_name=call.name, arguments=call.arguments)
            return ToolResult.error(error_text(exc)), 0.0, exc, True
        runs = call if isinstance(admitted, ToolResult) else admitted[1]
        ctx.emit(ToolStarted, call_id=call.id, tool_name=call.name, arguments=runs.arguments)
        started = self.clock.monotonic()
        self.live_tools[id(call)] = (call, started)
        reporter = bind_reporter(ctx, call, self.middleware.on_tool_delta)  # for a ToolReporter parameter
        try:
            result = admitted if isinstance(admitted, ToolResult) else await self._invoke(*admitted)
        except Exception as exc:
            self.live_tools.pop(id(call), None)
            return ToolResult.error(error_text(exc)), self.clock.monotonic() - started, exc, True
        finally:
            unbind_reporter(reporter)
        # (a task cancel leaves the call in live_tools, for run to close)
        self.live_tools.pop(id(call), None)
        return result, self.clock.monotonic() - started, None, True

    def _close_live_tools(self, exc: BaseException) -> None:
        now = self.clock.monotonic()
        live, self.live_tools = self.live_tools, {}
        for call, started in live.values():
            emit_interrupted(self.ctx, call, exc, now - started)

    async def _admit(self, call: ToolCall) -> tuple[Tool, ToolCall] | ToolResult:
        """The tool and the call to run (with the arguments a person approved), or the result that answers it.

        A ``before_tool`` hook's answer, an unknown tool, arguments that are not JSON and a denial are
        answers; the policy may make the first two fatal instead.
        """
        policy, tools = self.policy, self.tools
        if self.supplied and (supplied := self.supplied.pop(id(call), None)) is not None:
            return supplied  # a before_tool hook answered the call
        tool: Tool | None = tools.get(call.name)
        if tool is None:
            message = tools.unknown_tool_message(call.name, call.arguments)
            if policy.unknown_tool == "fail":
                raise UnknownToolError(message, tool_name=call.name, call_id=call.id)
            return ToolResult.error(message)
        if not call.arguments_valid:
            message = (
                f"invalid arguments for tool `{call.name}`: not a JSON object: {preview(call.raw_arguments or '')}"
            )
            if policy.invalid_args == "fail":
                raise ToolArgumentsError(message, tool_name=call.name, call_id=call.id)
            return ToolResult.error(message)
        gated = await gate_tool_call(
            self.ctx,
            tool,
            call,
            unattended=policy.unattended_approval,
            remaining_s=self.limits.remaining_s,
            on_deadline=self._deadline_error,
            timeout_s=policy.approval_timeout_s,
            timeout_action=policy.approval_timeout_action,
        )
        return gated if isinstance(gated, ToolResult) else (tool, gated)  # a denial: the model is told why

    def _deadline_error(self) -> RunTimeout:
        """The deadline's error, not yet reported: ``run`` emits one ``limit.reached`` for the turn."""
        try:
            self.limits.check_deadline()
        except RunTimeout as exc:
            return exc
        return self.timeout()  # unreachable in practice: the wait ended because the deadline passed

    async def _invoke(self, tool: Tool, call: ToolCall) -> ToolResult:
        """Run an admitted call within its time budget, turning its failures into results where the policy says so."""
        policy = self.policy
        tool_timeout = tool.timeout_s if tool.timeout_s is not None else policy.tool_timeout_s
        run_remaining = self.limits.remaining_s()
        budget = tighter(tool_timeout, run_remaining)
        try:
            if budget is None:  # no timeout and no deadline: no cancel scope to set up
                return await tool.call(self.ctx, call.arguments)
            with anyio.move_on_after(budget) as scope:
                return await tool.call(self.ctx, call.arguments)
        except ToolArgumentsError as exc:
            if policy.invalid_args == "fail":
                raise
            return ToolResult.error(str(exc))
        except (Cancelled, LimitExceeded):
            raise
        except Exception as exc:
            failure = f"tool `{call.name}` failed: {describe_error(exc)}"
            if policy.tool_errors == "fail":
                raise ToolError(failure, tool_name=call.name, call_id=call.id) from exc
            return ToolResult.error(failure)
        # only reached when the time budget cancelled the call
        assert scope.cancelled_caught
        if tool_timeout is None or (run_remaining is not None and run_remaining <= tool_timeout):
            raise self.timeout()
        return ToolResult.error(f"tool `{call.name}` timed out after {tool_timeout:g} s")


_Outcome: TypeAlias = tuple[ToolResult, float, Exception | None, bool]


def _ended_as(error: BaseException) -> str:
    """The ``status`` of a ``tool.failed``: how the call ended."""
    if isinstance(error, Cancelled):
        return "cancelled"
    if isinstance(error, RunTimeout):
        return "timed_out"
    return "failed"


def emit_interrupted(ctx: RunContext[Any], call: ToolCall, exc: BaseException, duration_s: float) -> None:
    """Close a started tool call that ``exc`` cut off, so every ``tool.started`` has its end event."""
    ctx.emit(
        ToolFailed,
        call_id=call.id,
        tool_name=call.name,
        error_type=type(exc).__name__,
        error=f"the run was interrupted ({type(exc).__name__}) while the tool ran",
        duration_s=duration_s,
        status="cancelled",
    )
