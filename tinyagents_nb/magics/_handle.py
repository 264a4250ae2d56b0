"""``NotebookRun``: the handle ``%%agent`` binds to ``_agent``, for awaiting, controlling and showing a run.

Every run executes on the session's own loop thread (``SessionLoop``), whatever its cell does:

- **waiting** (the default): the cell stays busy until the run ends, so outputs land in the cell
  and Run All, nbclient, papermill and nbval see cells act in order. How the waiting cell still
  hears the dashboard's buttons is ``_waiting``'s business.
- **background** (``--background``): the cell returns at once; the run keeps streaming while
  other cells run, even synchronous ones, because it is not on the kernel's thread.

A run on a conversation thread that already has an unfinished run is **queued** behind it, so one
conversation never has two runs racing and a follow-up always sees the answer before it.

Control methods (``cancel``, ``pause``, ``resume``, ``steer``, ``redirect``) are thread-safe: they
queue steering commands or trip the cancellation token, which the loop reads at its checkpoints.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator
from concurrent.futures import Future
from typing import Any, Literal, Protocol

from tinyagents_nb.harness import AgentHarness, AgentRun, AgentStream, AssistantMessage, RunContext

from ._loop import SessionLoop

__all__ = ["NotebookRun", "RunMode", "RunView"]

RunMode = Literal["background", "waiting"]


class RunView(Protocol):
    """Where a run is shown (the cell that started it); called from the session's loop thread."""

    def bundle(self) -> dict[str, Any]:
        """The run's current mimebundle: the live dashboard, or the record once ended."""
        ...

    def ended(self) -> None:
        """The run ended: replace the live view by the static record."""
        ...


class NotebookRun:
    """One ``%%agent`` run: awaitable (``await run`` is ``await run.result()``) and controllable.

    Attributes:
        stream: The harness's streaming run.
        harness: The harness built for this run (model, tools, memory, limits).
        name: The ``--name`` given, if any.
        prompt: The prompt after interpolation.
        model: The model's name.
        cell_key: Identifies the notebook cell that started the run (for re-run handling).
        dashboard: The ``RunDashboard`` showing the run, when one was made.
        view: Where the run is shown, when it is (set by the magic).
        mode: ``waiting`` or ``background`` once started; ``None`` before.
    """

    def __init__(
        self,
        *,
        stream: AgentStream,
        harness: AgentHarness[Any],
        prompt: str,
        model: str,
        name: str | None = None,
        cell_key: str | None = None,
        launcher: Callable[[NotebookRun, RunMode], object] | None = None,
        notes: Callable[[NotebookRun], list[str]] | None = None,
    ) -> None:
        self.stream = stream
        self._launcher = launcher
        self._notes = notes
        self.notes: list[str] = []  # one-line notes for the record (a missing price, a renamed model)
        self.harness = harness
        self.prompt = prompt
        self.model = model
        self.name = name
        self.cell_key = cell_key
        self.dashboard: Any = None
        self.view: RunView | None = None
        self.mode: RunMode | None = None
        self._outcome: AgentRun | None = None
        self._crash: BaseException | None = None
        self._future: Future[AgentRun] | None = None
        self._queued = False
        self.ended_at: float | None = None
        """``time.monotonic()`` when the run's outcome arrived."""
        self.ended_by: str | None = None
        """Why the run was stopped, when that is not its cancel reason (the kernel shut down after ■)."""

    # ------------------------------------------------------------------ identity and state
    @property
    def run_id(self) -> str:
        return str(self.stream.run_id)

    @property
    def context(self) -> RunContext[Any]:
        return self.stream.context

    @property
    def thread_id(self) -> str | None:
        thread = self.stream.context.thread_id
        return None if thread is None else str(thread)

    @property
    def label(self) -> str:
        """The ``--name``, else the last 8 characters of the run id (its random part)."""
        return self.name or self.run_id[-8:]

    @property
    def outcome(self) -> AgentRun | None:
        """The finished run (``None`` while it runs); failed and cancelled runs included."""
        return self._outcome

    @property
    def crash(self) -> BaseException | None:
        """An error that ended the run outside the harness's own handling (it is then ``failed``)."""
        return self._crash

    @property
    def future(self) -> Future[AgentRun] | None:
        """Resolves when the run has ended and its record was published; ``None`` before ``start``."""
        return self._future

    @property
    def done(self) -> bool:
        return self._future.done() if self._future is not None else False

    @property
    def status(self) -> str:
        """``pending``, ``queued``, ``running``, ``paused``, ``completed``, ``failed`` or ``cancelled``."""
        if self._outcome is not None:
            return self._outcome.status
        if self._crash is not None:
            return "failed"
        if self.mode is None:
            return "pending"
        if self._queued:
            return "queued"
        live = self.stream.status
        if live.status != "running":
            return live.status
        return "paused" if live.phase == "paused" else "running"

    @property
    def stop_reason(self) -> str | None:
        """Why a cancelled run stopped: ``ended_by``, else the reason its cancel gave."""
        if self.ended_by:
            return self.ended_by
        outcome = self._outcome
        reason = getattr(outcome.error, "reason", None) if outcome is not None else None
        return reason if isinstance(reason, str) else None

    @property
    def final_text(self) -> str:
        """The answer once completed; for a cancelled or failed run, the last (partial) assistant text."""
        run = self._outcome
        if run is None:
            return ""
        if run.final_text:
            return run.final_text
        for message in reversed(run.messages):
            if isinstance(message, AssistantMessage) and message.text:
                return message.text
        return ""

    # ------------------------------------------------------------------ control (any thread)
    def cancel(self, reason: str | None = "cancelled from the notebook") -> None:
        """Stop the run cooperatively (a queued run ends before it starts); it ends as ``cancelled``."""
        self.stream.cancel(reason)

    def pause(self, reason: str | None = None) -> None:
        """Hold the run before its next model call, until ``resume()``."""
        self.stream.pause(reason)

    def resume(self) -> None:
        self.stream.resume()

    def steer(self, text: str) -> None:
        """Add a user message that the run's next model request will contain."""
        self.stream.steer(text)

    def redirect(self, instruction: str) -> None:
        """Change the run's course with a system instruction before its next model call."""
        self.stream.redirect(instruction)

    # ------------------------------------------------------------------ running (session loop)
    def start(self, mode: RunMode = "background") -> None:
        """Start through the session that made the run (queued behind its thread's unfinished run); idempotent.

        Raises:
            RuntimeError: The run was made without a session (use ``launch``).
        """
        if self._future is None:
            if self._launcher is None:
                raise RuntimeError(f"run {self.label} has no session to start it; call launch(loop, ...)")
            self._launcher(self, mode)

    def launch(self, loop: SessionLoop, *, mode: RunMode, after: NotebookRun | None = None) -> Future[AgentRun]:
        """Run on ``loop`` once ``after`` (the thread's previous run) has ended; idempotent.

        Returns:
            A future resolved with the finished run after its record was shown.
        """
        if self._future is None:
            self.mode = mode
            self._queued = after is not None and not after.done
            self._future = loop.submit(self._main(after))
        return self._future

    async def _main(self, after: NotebookRun | None) -> AgentRun:
        try:
            if after is not None and after._future is not None:
                await self._queue_behind(after._future)
            self._queued = False
            if self.dashboard is not None:
                self.dashboard.queued = False
                self.dashboard.start()
            else:
                self.stream.start()
            try:
                run = await self.stream.wait()
            finally:
                await self.stream.aclose()  # an unconsumed stream keeps a subscription on the shared sink
        except BaseException as exc:
            self._crash = exc
            self._show_end()
            raise
        self._outcome = run
        self.ended_at = time.monotonic()
        if self._notes is not None:
            self.notes = self._notes(self)
        self._show_end()
        return run

    async def _queue_behind(self, previous: Future[AgentRun]) -> None:
        """Wait for the thread's previous run to end (whatever its outcome), or for this run's cancel."""
        ahead = asyncio.wrap_future(previous)
        cancelled = asyncio.ensure_future(self.context.cancellation.cancelled())
        try:
            either: list[asyncio.Future[Any]] = [ahead, cancelled]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancelled.cancel()
        if ahead.done() and not ahead.cancelled():
            ahead.exception()  # retrieved: that run's failure is in its own record

    def _show_end(self) -> None:
        if self.view is not None:
            self.view.ended()

    # ------------------------------------------------------------------ awaiting (any loop)
    async def wait(self) -> AgentRun:
        """The finished run whatever its outcome (``run.error`` holds a failure or cancel); starts a pending run."""
        self.start()
        assert self._future is not None
        return await asyncio.wrap_future(self._future)

    async def result(self) -> AgentRun:
        """The completed run; raises its error (``RunCancelled``, ``ProviderError``, ...) otherwise."""
        run = await self.wait()
        if run.error is not None:
            raise run.error
        return run

    def __await__(self) -> Generator[Any, None, AgentRun]:
        return self.result().__await__()

    # ------------------------------------------------------------------ display
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        if self.view is not None:
            return self.view.bundle()
        return {"text/plain": f"<tinyagents run {self.label}: {self.status}>"}

    def __repr__(self) -> str:
        name = f"name={self.name!r}, " if self.name else ""
        return f"NotebookRun({name}run_id={self.run_id!r}, model={self.model!r}, status={self.status!r})"
