"""``NotebookRun``: the handle ``%%agent`` binds to ``_agent``, for awaiting, controlling and showing a run.

A run executes in one of two ways, and the handle hides which:

- **background** (the default in a kernel): ``start()`` creates the run's task on the kernel's own
  event loop and returns at once, so the kernel goes idle and Stop clicks, ``%agent stop`` and other
  cells are handled while the run streams. The dashboard's flusher runs on that loop too.
- **blocking** (``--wait``, for Run All, nbclient and nbval): ``run_blocking()`` runs the loop in a
  worker thread (``asyncio.run``) because the cell is synchronous code on the kernel's main thread,
  whose own loop must not be re-entered. The cell thread waits with a timed ``Future.result`` so a
  kernel interrupt (``KeyboardInterrupt``) reaches it; it then cancels the run cooperatively and
  waits for it to end. The waiting cell thread is the only thread that writes widgets (through the
  ``on_tick`` callback, i.e. ``RunDashboard.flush``): the worker only emits events, which the
  dashboard's listener turns into plain state.

Control methods (``cancel``, ``pause``, ``resume``, ``steer``, ``redirect``) are thread-safe: they
queue steering commands or trip the cancellation token, which the loop reads at its checkpoints.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Generator
from concurrent.futures import Future
from typing import Any, Literal

from tinyagents_nb.harness import AgentHarness, AgentRun, AgentStream, AssistantMessage, RunContext

__all__ = ["NotebookRun", "RunMode"]

RunMode = Literal["background", "blocking"]


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
        mode: ``background`` or ``blocking`` once started; ``None`` before.
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
    ) -> None:
        self.stream = stream
        self.harness = harness
        self.prompt = prompt
        self.model = model
        self.name = name
        self.cell_key = cell_key
        self.dashboard: Any = None
        self.mode: RunMode | None = None
        self._outcome: AgentRun | None = None
        self._crash: BaseException | None = None
        self._future: Future[AgentRun] | None = None
        self._closer: asyncio.Task[None] | None = None

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
    def done(self) -> bool:
        return self._outcome is not None or self._crash is not None or self.stream.done

    @property
    def status(self) -> str:
        """``pending``, ``running``, ``paused``, ``completed``, ``failed`` or ``cancelled``."""
        if self._outcome is not None:
            return self._outcome.status
        if self._crash is not None:
            return "failed"
        if self.mode is None:
            return "pending"
        live = self.stream.status
        if live.status != "running":
            return live.status
        return "paused" if live.phase == "paused" else "running"

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
        """Stop the run cooperatively; it ends as ``cancelled`` with its partial transcript."""
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

    # ------------------------------------------------------------------ background mode (kernel loop)
    def start(self) -> None:
        """Start as a task on the running event loop and return at once (idempotent).

        Raises:
            RuntimeError: No event loop is running in this thread (use ``run_blocking``).
        """
        if self.mode is not None:
            return
        loop = asyncio.get_running_loop()
        self.mode = "background"
        if self.dashboard is not None:
            self.dashboard.start()
        task = self.stream.start()
        task.add_done_callback(lambda done: self._on_task_done(done, loop))

    def _on_task_done(self, task: asyncio.Task[AgentRun], loop: asyncio.AbstractEventLoop) -> None:
        if task.cancelled():
            self._crash = asyncio.CancelledError("the run's task was cancelled")
        elif (exc := task.exception()) is not None:
            self._crash = exc
        else:
            self._outcome = task.result()
        # An unconsumed AgentStream keeps a subscription on the (session-wide) sink: release it.
        if not loop.is_closed():
            self._closer = loop.create_task(self.stream.aclose())

    # ------------------------------------------------------------------ blocking mode (cell thread)
    def run_blocking(
        self,
        *,
        poll_s: float = 0.1,
        on_tick: Callable[[], None] | None = None,
        on_interrupt: Callable[[int], None] | None = None,
    ) -> AgentRun | None:
        """Run in a worker thread while this thread waits; returns the finished run.

        Args:
            poll_s: How often ``on_tick`` runs while waiting (and how fast an interrupt is noticed).
            on_tick: Called on this thread every ``poll_s`` and once at the end (the dashboard flush).
            on_interrupt: Called with the count of ``KeyboardInterrupt``s received so far.

        Returns:
            The run, or ``None`` when a second interrupt stopped the wait before the run ended (it
            keeps stopping in the background; ``await run.wait()`` gets it later).
        """
        if self.mode is not None:
            raise RuntimeError(f"run {self.label} was already started ({self.mode})")
        self.mode = "blocking"
        future: Future[AgentRun] = Future()
        self._future = future
        worker = threading.Thread(
            target=self._work, args=(future,), name=f"tinyagents-run-{self.run_id[-8:]}", daemon=True
        )
        worker.start()
        interrupts = 0
        while True:
            try:
                run = future.result(timeout=poll_s)
            except TimeoutError:
                if on_tick is not None:
                    on_tick()
                continue
            except KeyboardInterrupt:
                interrupts += 1
                self.cancel("interrupted")
                if on_interrupt is not None:
                    on_interrupt(interrupts)
                if interrupts >= 2:
                    return None
                continue
            break
        if on_tick is not None:
            on_tick()
        return run

    def _work(self, future: Future[AgentRun]) -> None:
        async def main() -> AgentRun:
            try:
                return await self.stream.wait()
            finally:
                await self.stream.aclose()
                await self.harness.aclose()  # its HTTP clients belong to this thread's loop

        try:
            run = asyncio.run(main())
        except BaseException as exc:
            self._crash = exc
            future.set_exception(exc)
        else:
            self._outcome = run
            future.set_result(run)

    # ------------------------------------------------------------------ awaiting (any loop)
    async def wait(self) -> AgentRun:
        """The finished run whatever its outcome (``run.error`` holds a failure or cancel)."""
        if self._outcome is not None:
            return self._outcome
        if self._crash is not None:
            raise self._crash
        if self._future is not None:
            return await asyncio.wrap_future(self._future)
        self.start()
        return await self.stream.wait()

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
        if self.dashboard is not None:
            bundle: dict[str, Any] = self.dashboard._repr_mimebundle_(include=include, exclude=exclude)
            return bundle
        return {"text/plain": f"<tinyagents run {self.label}: {self.status}>"}

    def __repr__(self) -> str:
        name = f"name={self.name!r}, " if self.name else ""
        return f"NotebookRun({name}run_id={self.run_id!r}, model={self.model!r}, status={self.status!r})"
