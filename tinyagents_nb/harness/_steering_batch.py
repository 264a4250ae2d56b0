"""Steering checkpoints: the loop applies the commands queued on a ``SteeringHandle`` to its transcript.

``SteeringHandle`` (in ``_steering``) is only a thread-safe queue, so it can live on the context;
applying a batch needs the run (its transcript, config, events and cancellation), so it lives here,
beside the loop that calls it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ._errors import Cancelled, RunTimeout, SteeringError
from ._events import SteeringApplied
from ._messages import AssistantMessage, Message, SystemMessage, ToolMessage
from ._steering import (
    Cancel,
    InjectMessage,
    Pause,
    Pending,
    Redirect,
    Resume,
    SteeringCommand,
    SteeringHandle,
    SteeringOutcome,
    SteeringPolicy,
)

if TYPE_CHECKING:
    from ._context import RunContext
    from ._run import HarnessRunStatus

__all__ = ["apply_batch", "checkpoint"]


async def checkpoint(
    ctx: RunContext[Any],
    handle: SteeringHandle,
    messages: list[Message],
    status: HarnessRunStatus,
    remaining_s: Callable[[], float | None],
    on_deadline: Callable[[], RunTimeout],
) -> None:
    """Apply queued commands; while paused, wait (cancellably, within the run's deadline) for more."""
    while True:
        apply_batch(ctx, handle, handle._take(), messages)
        if not handle.is_paused:
            return
        status.phase = "paused"
        with ctx.cancellation.scope(timeout_s=remaining_s()) as scope:
            await handle.wait_for_command()
        if scope.cancelled_caught:
            raise on_deadline()
        status.phase = "idle"


def apply_batch(
    ctx: RunContext[Any], handle: SteeringHandle, batch: list[Pending], messages: list[Message]
) -> SteeringOutcome:
    """Apply a taken batch at a checkpoint, in order; one ``steering.applied`` event per command.

    Returns (and records on the handle) the ``SteeringOutcome``: ``PAUSE`` while the run is held.

    A command the policy does not permit, or an injection that would break the transcript, is
    rejected on its own (its receipt says why) and the others still apply.

    Raises:
        Cancelled: The batch contains a permitted ``Cancel`` (later commands are rejected).
    """
    refusals = _refusals(handle.policy, batch)
    for index, (command, receipt) in enumerate(batch):
        refusal = refusals.get(index)
        if refusal is not None:
            receipt._resolve(refusal)
            ctx.emit(SteeringApplied, command=command.command, accepted=False, detail=refusal.message[:200])
            continue
        detail = ""
        if isinstance(command, Pause):
            handle._latch_pause(command.reason)
            detail = command.reason or ""
        elif isinstance(command, Resume):
            handle._release()
        elif isinstance(command, Cancel):
            receipt._resolve()
            ctx.emit(SteeringApplied, command=command.command, accepted=True, detail=command.reason or "")
            handle._state.outcome = SteeringOutcome.CANCEL
            for _, later in batch[index + 1 :]:
                later._resolve(SteeringError("the run was cancelled by an earlier command of the same batch"))
            ctx.cancellation.cancel(command.reason or "cancelled by steering")
            raise Cancelled(ctx.cancellation.reason)
        elif isinstance(command, InjectMessage):
            messages.append(command.message)
            detail = command.message.text[:200]
        elif isinstance(command, Redirect):
            messages.append(SystemMessage(text=f"[steering:redirect] {command.instruction}"))
            detail = command.instruction[:200]
        else:
            ctx.config = replace(ctx.config, metadata={**ctx.config.metadata, **command.metadata})
            detail = ", ".join(sorted(command.metadata))
        receipt._resolve()
        ctx.emit(SteeringApplied, command=command.command, accepted=True, detail=detail)
    outcome = SteeringOutcome.PAUSE if handle.is_paused else SteeringOutcome.CONTINUE
    if batch or handle._state.outcome is None:
        handle._state.outcome = outcome
    return outcome


def _refusals(policy: SteeringPolicy, batch: list[Pending]) -> dict[int, SteeringError]:
    """The commands of ``batch`` to reject, by position, each with its reason.

    Injected tool traffic must arrive as a unit: an assistant message with tool calls followed, in
    the same batch and directly, by one tool result per call. Anything else would send the provider
    an orphan result or an unanswered call.
    """
    refusals: dict[int, SteeringError] = {}
    for index, (command, _) in enumerate(batch):
        if not policy.permits(command.command):
            refusals[index] = SteeringError(
                f"steering command `{command.command}` is not permitted by the run's steering policy",
                hint="create the SteeringHandle with SteeringPolicy().allow(...) or SteeringPolicy.allow_all()",
            )
    index = 0
    while index < len(batch):
        message = _injected(batch[index][0])
        if isinstance(message, ToolMessage) and index not in refusals:
            refusals[index] = SteeringError(
                f"injected tool result for call {message.tool_call_id!r} answers no tool call",
                hint="inject it right after the AssistantMessage that makes the call, in the same batch",
            )
        if not (isinstance(message, AssistantMessage) and message.tool_calls) or index in refusals:
            index += 1
            continue
        end = index + 1
        while end < len(batch) and isinstance(_injected(batch[end][0]), ToolMessage) and end not in refusals:
            end += 1
        answers = [
            m.tool_call_id for m in (_injected(c) for c, _ in batch[index + 1 : end]) if isinstance(m, ToolMessage)
        ]
        calls = [c.id for c in message.tool_calls]
        if sorted(answers) != sorted(calls):
            problem = SteeringError(
                f"injected tool calls {calls} are not answered exactly once by the injected results that follow "
                f"({answers})",
                hint="send the AssistantMessage and one ToolMessage per call together, in that order",
            )
            for j in range(index, end):
                refusals[j] = problem
        index = end
    return refusals


def _injected(command: SteeringCommand) -> Message | None:
    return command.message if isinstance(command, InjectMessage) else None
