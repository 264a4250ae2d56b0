"""``AgentStream``: the handle of a run started by ``AgentHarness.invoke_streaming``.

It iterates the run tree's events (or stream-mode chunks), awaits the result, and steers, cancels
and answers approvals from any thread. The run is a ``RunLoop`` task on the running event loop; the
handle only starts it, reads its sink and forwards commands to the context's handles.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator, Mapping
from typing import Any

from ._approval import ApprovalDecision, ApprovalDesk, ApprovalRequest
from ._child_steering import SubAgentHandle, find_child
from ._errors import SteeringError
from ._events import AgentEvent
from ._loop import RunLoop
from ._messages import UserMessage
from ._run import AgentRun, HarnessRunStatus
from ._sink import EventSubscription
from ._steering import InjectMessage, Pause, Redirect, Resume, SteeringCommand, SteeringReceipt
from ._stream import StreamChunk, iter_chunks, run_tree_filter, stream_modes

__all__ = ["AgentStream"]

_TERMINAL = frozenset({"run.completed", "run.failed", "run.cancelled"})


class AgentStream(AsyncIterator[AgentEvent]):
    """A streaming run: async-iterate its events (ending with its terminal event), await ``result()``.

    The run starts on the first iteration or ``result()`` call, as a task on the running loop.
    ``chunks(*modes)`` views the same run tree through stream modes instead.
    """

    def __init__(self, loop: RunLoop, *, raises: bool = True) -> None:
        ctx = loop.ctx
        if ctx.approvals is None:  # a handle exists, so someone can answer approvals
            ctx.approvals = ApprovalDesk()
        self.context = ctx
        self.approvals: ApprovalDesk = ctx.approvals
        self._raises = raises
        self.run_id = ctx.run_id
        self.status: HarnessRunStatus = loop.status
        self._events: EventSubscription | None = None
        self._since = 0
        self._loop = loop
        self._task: asyncio.Task[AgentRun] | None = None

    def start(self) -> asyncio.Task[AgentRun]:
        """Start the run if it has not started; returns its task."""
        if self._task is None:
            self._since = self.context.events.next_offset
            self._task = asyncio.get_running_loop().create_task(self._loop.run(), name=f"tinyagents-run-{self.run_id}")
        return self._task

    def _subscription(self) -> EventSubscription:
        # Subscribed on first iteration, catching up from the sink's retained history since the
        # start: a run that is only started (e.g. by a dashboard) buffers nothing.
        if self._events is None:
            self._events = self._subscribe()
        return self._events

    def _subscribe(self) -> EventSubscription:
        """A new view of this run tree's events since the start, ending with the run's terminal event."""
        run_id = self.run_id
        return self.context.events.subscribe(
            since=self._since,
            until=lambda e: e.run_id == run_id and e.kind in _TERMINAL,
            where=run_tree_filter(self.context),
        )

    def __aiter__(self) -> AgentStream:
        return self

    async def __anext__(self) -> AgentEvent:
        self.start()
        return await self._subscription().__anext__()

    async def wait(self) -> AgentRun:
        """The run's result, whatever its outcome (``run.error`` holds a failure or cancel)."""
        return await asyncio.shield(self.start())

    async def result(self) -> AgentRun:
        """The completed run; raises its error (e.g. ``RunCancelled``) otherwise.

        A handle from ``invoke_streaming_with_status`` returns the run whatever its outcome.
        """
        run = await self.wait()
        if run.error is not None and self._raises:
            raise run.error
        return run

    @property
    def error(self) -> BaseException | None:
        """The error that ended the run (``None`` while it runs, or when it completed)."""
        task = self._task
        if task is None or not task.done() or task.cancelled() or task.exception() is not None:
            return None
        return task.result().error

    def chunks(self, *modes: str) -> AsyncIterator[StreamChunk]:
        """Iterate this run tree's stream in the given modes (none: all five); starts the run.

        Each call is an independent view (its own subscription, caught up from the run's start), so
        several consumers can read different modes of one run. Only this handle's run and its
        descendants appear, never another run sharing the sink. ``final`` comes last, once.

        Raises:
            ConfigurationError: An unknown mode (at once, before the run starts).
        """
        chosen = stream_modes(modes)
        self.start()
        ctx = self.context
        return iter_chunks(self._subscribe(), chosen, self.wait, parent_run_id=ctx.parent_run_id, depth=ctx.depth)

    @property
    def done(self) -> bool:
        return self._task is not None and self._task.done()

    def cancel(self, reason: str | None = None) -> None:
        """Request cooperative cancellation (thread-safe)."""
        self.context.cancellation.cancel(reason)

    def steer(self, command: SteeringCommand | str) -> SteeringReceipt:
        """Send a steering command (a string is an injected user message); thread-safe.

        Returns:
            The receipt the run resolves at its next checkpoint (applied, or rejected with why).

        Raises:
            SteeringError: The run was started without a ``SteeringHandle`` on its context.
        """
        handle = self.context.steering
        if handle is None:
            raise SteeringError(
                "this run accepts no steering",
                hint="start it with a context that has a SteeringHandle (RunContext.with_steering)",
            )
        return handle.send(InjectMessage(message=UserMessage(text=command)) if isinstance(command, str) else command)

    def children(self) -> list[SubAgentHandle]:
        """Steerable handles of the sub-agents this run is running now (empty without a ``SteeringHandle``)."""
        handle = self.context.steering
        return [] if handle is None else list(handle._children())

    def child(self, run_id: str) -> SubAgentHandle:
        """The running sub-agent ``run_id`` (a child or any deeper descendant), to steer or cancel.

        Raises:
            SteeringError: None such is running.
        """
        return find_child(self.children(), run_id)

    def pause(self, reason: str | None = None) -> SteeringReceipt:
        """Hold the run at its next checkpoint (before its next model call)."""
        return self.steer(Pause(reason=reason))

    def resume(self) -> SteeringReceipt:
        return self.steer(Resume())

    def redirect(self, instruction: str) -> SteeringReceipt:
        return self.steer(Redirect(instruction=instruction))

    def approve(
        self,
        call_id: str | None = None,
        *,
        run_id: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        by: str | None = None,
    ) -> ApprovalDecision:
        """Approve a tool call waiting in this run's tree (see ``ApprovalDesk.approve``); thread-safe.

        Raises:
            ApprovalError: Nothing such is waiting, or the request was withdrawn (e.g. by a Stop)
                before this decision: a decision returned is always the one the run records.
        """
        return self.approvals.approve(call_id, run_id=run_id, arguments=arguments, by=by)

    def deny(
        self, call_id: str | None = None, reason: str | None = None, *, run_id: str | None = None, by: str | None = None
    ) -> ApprovalDecision:
        """Deny a waiting tool call; the model gets an error result saying ``reason``; thread-safe."""
        return self.approvals.deny(call_id, reason, run_id=run_id, by=by)

    def pending_approvals(self) -> list[ApprovalRequest]:
        return self.approvals.pending()

    def __await__(self) -> Generator[Any, None, AgentRun]:
        return self.result().__await__()

    async def aclose(self) -> None:
        """Stop listening; a run still going is cancelled and awaited."""
        if self._events is not None:
            await self._events.aclose()
        if self._task is not None and not self._task.done():
            self.cancel("stream closed")
            await self.wait()
