"""``RunDashboard``: the live view of one streaming run, composed from the pane modules.

Data flows one way. The run emits events on its (possibly session-wide) sink; one listener
(``_router``) keeps this run's tree and appends to the panes' plain state, never touching a
widget (it runs on the emitting thread, once per token). A single flusher on the loop
(``_bridge``) applies that state to the widgets at ``throttle_hz``, and once more when the run's
task is done. Control callbacks may run on any thread and only signal the run. The ``text/plain``
output is a deterministic one-line summary, so non-widget frontends and nbval see something stable.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from tinyagents_nb.harness import AgentStream, ConfigurationError, CostRecord

from ._approvals import ApprovalCards
from ._bridge import Flusher, when_done
from ._controls import RunControls
from ._costs import CostTable
from ._format import format_int, format_usd, plural
from ._gauge import ContextGauge
from ._header import RunHeader, RunState
from ._router import EventRouter
from ._tools import ToolCallsPane
from ._transcript import TranscriptPane
from ._tree import AgentTree, AgentTreePane

__all__ = ["RunDashboard"]


class RunDashboard:
    """A live ipywidgets view of one ``AgentStream``.

    Panes: header, controls, context gauge, transcript, tool calls, sub-agent tree and cost table.

    Create it before the run starts, display it, then call ``start()`` from the loop (the magics
    do all three). Tests and blocking mode may instead drive it with ``flush()``.

    Args:
        stream: The run to show (``AgentHarness.invoke_streaming(...)``).
        title: A label for the run (default ``"agent run"``).
        model: The model name to show before the run reports it.
        throttle_hz: Widget updates per second while the run streams.
        max_history: Transcript segments, tool rows, tree nodes and pressure marks kept; older ones
            are summarised as "… N earlier", so a long run holds bounded memory.

    Raises:
        ConfigurationError: ``throttle_hz`` is not a positive finite number or ``max_history`` < 1.
    """

    def __init__(
        self,
        stream: AgentStream,
        *,
        title: str | None = None,
        model: str | None = None,
        throttle_hz: float = 10.0,
        max_history: int = 2_000,
    ) -> None:
        if not isinstance(stream, AgentStream):
            raise ConfigurationError(f"RunDashboard needs an AgentStream, got {type(stream).__name__}")
        _check_options(throttle_hz, max_history)
        import ipywidgets as widgets

        self.stream = stream
        self.run_id = str(stream.run_id)
        self._ctx = stream.context
        self._is_root = str(self._ctx.root_run_id) == self.run_id
        self._lock = threading.Lock()  # guards the panes' plain state (listener vs. flush)
        self._flush_lock = threading.Lock()  # one flush at a time (flusher vs. a manual flush())
        self.state = RunState(run_id=self.run_id, title=title or "agent run", model=model)
        self._title = title
        self.tree = AgentTree(self.run_id, title or "agent", max_nodes=max_history)
        self.header = RunHeader()
        self.controls = RunControls(stream)
        self.approvals = ApprovalCards(stream)
        self.gauge = ContextGauge(max_marks=max_history)
        self.transcript = TranscriptPane(max_segments=max_history)
        self.tools = ToolCallsPane(max_rows=max_history)
        self.agents = AgentTreePane()
        self.costs = CostTable()
        self._details: Any = widgets.Accordion(
            children=(self.tools.widget, self.agents.widget, self.costs.widget), selected_index=0
        )
        self._titles: tuple[str, ...] = ()
        self.widget: Any = widgets.VBox(
            children=(
                self.header.widget,
                self.controls.widget,
                self.approvals.widget,
                self.gauge.widget,
                self.transcript.widget,
                self._details,
            )
        )
        self._flusher = Flusher(self._flush, lambda: self.state.finished, interval_s=1.0 / throttle_hz)
        self._watching = False
        router = EventRouter(
            lock=self._lock,
            state=self.state,
            tree=self.tree,
            transcript=self.transcript,
            tools=self.tools,
            gauge=self.gauge,
        )
        self._remove_listener: Callable[[], None] | None = self._ctx.events.add_listener(router)
        self._flush(True)

    # ------------------------------------------------------------------ lifecycle (loop thread)
    def start(self) -> None:
        """Start the run (if it has not started) and the flusher, on the running loop; idempotent."""
        task = self.stream.start()
        if not self._watching:
            self._watching = True
            when_done(task, self._on_run_done)
        self._flusher.start()

    async def wait_flushed(self) -> None:
        """Start if needed, then wait until the run ended and the final flush reached the widgets."""
        self.start()
        await self._flusher.wait()

    def flush(self) -> None:
        """Apply all pending state to the widgets now (synchronously), the cost table included."""
        self._flush(True)

    def close(self) -> None:
        """Stop listening and close every widget (their comms); the run itself is not affected."""
        self._detach()
        self.transcript.close()
        self.tools.close()
        self.approvals.close()
        self.widget.close()

    # ------------------------------------------------------------------ the run's end (loop thread)
    def _on_run_done(self, task: asyncio.Future[Any]) -> None:
        """Read the outcome from the task itself, so even an unexpected crash reaches the header."""
        with self._lock:
            state = self.state
            if state.finished:
                return
            if task.cancelled():
                state.terminal = "cancelled"
                state.cancel_reason = state.cancel_reason or "the run's task was cancelled"
            elif (exc := task.exception()) is not None:
                state.terminal, state.error = "failed", exc
            else:
                run = task.result()
                state.result, state.terminal, state.error = run, run.status, run.error
            state.ended = state.ended or time.monotonic()
            state.finished = True
        self._detach()
        self._flusher.notify()

    def _detach(self) -> None:
        remove, self._remove_listener = self._remove_listener, None
        if remove is not None:
            remove()

    # ------------------------------------------------------------------ the flush (loop thread)
    def _status(self) -> str:
        state, controls = self.state, self.controls
        if state.terminal is not None:
            return state.terminal
        if controls.stop_requested:
            return "stopping"
        if self.stream.status.phase == "paused":
            return "paused"
        if self.approvals.pending:  # Stop stays live meanwhile
            return "awaiting approval"
        return "pausing" if controls.pause_requested else "running"

    def _belongs(self, record: CostRecord) -> bool:
        if self._is_root:  # cheaper and immune to delivery order: the whole tree shares our root id
            return str(record.root_run_id) == self.run_id
        return str(record.run_id) in self.tree

    def _flush(self, force: bool) -> None:
        with self._flush_lock:
            if not self.state.finished and self.stream.done:  # before (or without) our done-callback
                self._on_run_done(self.stream.start())
            now = time.monotonic()
            ctx = self._ctx
            with self._lock:
                status = self._status()
                terminal = self.state.terminal is not None
                notice = self.controls.notice
                if self._flusher.last_error is not None:
                    notice = f"dashboard error: {self._flusher.last_error}"
                self.header.render(self.state, status=status, now=now, notice=notice)
                self.controls.render(status=status, terminal=terminal)
                self.approvals.render(terminal=terminal)
                self.gauge.render(ctx.context_window)
                self.transcript.render()
                self.tools.render()
                self.agents.render(self.tree, ctx.usage, ctx.costs, now=now, force=force)
                self.costs.render(ctx.costs, self._belongs, self.tree.name_of, now=now, force=force)
                titles = (f"Tool calls ({self.tools.count:,})", f"Agents ({len(self.tree):,})", "Cost")
            if titles != self._titles:
                self._details.titles = titles
                self._titles = titles

    # ------------------------------------------------------------------ display
    def summary_text(self) -> str:
        """One deterministic line: the status, and once ended the counts, tokens and USD.

        It never contains the run id or timings (nbval compares ``text/plain``; ids are random);
        ``repr()`` has the id.
        """
        with self._lock:
            status = self._status()
            state = self.state
            name = f' "{self._title}"' if self._title else ""
            if state.terminal is None:
                return f"<tinyagents run{name}: {status}>"
            parts = [status]
            if state.terminal == "failed":
                error = state.error
                parts.append(f"{type(error).__name__}: {error}" if error is not None else state.error_text or "error")
            tokens = self._ctx.usage.for_subtree(self.run_id).total_tokens
            usd = self._ctx.costs.for_subtree(self.run_id).total_usd
            parts += [
                plural(state.model_calls, "model call"),
                plural(state.tool_calls, "tool call"),
                f"{format_int(tokens)} tokens",
                "cost unknown" if usd is None else format_usd(usd),
            ]
        return f"<tinyagents run{name}: {' · '.join(parts)}>"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = self.widget._repr_mimebundle_(**kwargs)
        data: dict[str, Any] = dict(bundle) if bundle else {}
        data["text/plain"] = self.summary_text()
        return data

    def __repr__(self) -> str:
        return f"RunDashboard(run_id={self.run_id!r}, status={self._status()!r})"


def _check_options(throttle_hz: object, max_history: object) -> None:
    if isinstance(throttle_hz, bool) or not isinstance(throttle_hz, int | float) or not 0 < throttle_hz < math.inf:
        raise ConfigurationError(f"throttle_hz must be a positive finite number, got {throttle_hz!r}")
    if isinstance(max_history, bool) or not isinstance(max_history, int) or max_history < 1:
        raise ConfigurationError(f"max_history must be an int >= 1, got {max_history!r}")
