"""``RunDashboard``: the live view of one streaming run, composed from the pane modules.

Data flows one way. The run emits events on its (possibly session-wide) sink; one listener
(``_router``) keeps this run's tree and appends to the panes' plain state, never touching a
widget (it runs on the emitting thread, once per token). A single flusher on the loop
(``_bridge``) applies that state to the widgets at ``throttle_hz``, and once more when the run's
task is done. Control callbacks may run on any thread and only signal the run. The ``text/plain``
output is a deterministic one-line summary, so non-widget frontends and nbval see something stable.

Layout, top to bottom: header (status, model, time, calls, tokens, USD), controls, context gauge
(hidden while no window is known), transcript (grows with the page), then the tool calls (only
once there is one), the sub-agent tree (only once there is a sub-agent) and the cost table, each
under a small heading and all visible at once: nothing needs a click to be seen.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from tinyagents_nb.harness import AgentEvent, AgentStream, ConfigurationError
from tinyagents_nb.harness.models import loaded_tokenizer_for_model
from tinyagents_nb.harness.runtime import CostRecord

from ._approvals import ApprovalCards
from ._bridge import Flusher, when_done
from ._budget import BudgetBars
from ._controls import ADDED_PREFIX, PAUSING_NOTICE, QUEUED_PREFIX, RunControls
from ._costs import CostTable
from ._details import AgentLine, CostLine, RunDetails, ToolLine
from ._format import code_span, esc
from ._gauge import ContextGauge
from ._header import Notice, RunHeader, RunState, Totals, usage_text
from ._router import EventRouter
from ._runlog import Alert, CodeStep, Decision, RunLog
from ._safe_markdown import safe_markdown
from ._style import STYLESHEET
from ._tools import ToolCallsPane
from ._transcript import TranscriptPane
from ._tree import AgentTree, AgentTreePane

__all__ = ["RunDashboard"]


class RunDashboard:
    """A live ipywidgets view of one ``AgentStream``.

    Panes: header, controls, context gauge, transcript, tool calls, sub-agent tree and cost table.

    Create it before the run starts, display it, then call ``start()`` from the loop (the magics
    do all three). Tests may instead drive it with ``flush()``.

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
        self.budget = BudgetBars()
        self.log = RunLog(max_items=max_history)
        """Code steps, approval decisions and alerts of the run's tree (the end-of-run record reads them)."""
        self._tools_title: Any = widgets.HTML(value="")
        self._tools_section: Any = widgets.VBox(
            children=(self._tools_title, self.tools.widget), layout=widgets.Layout(display="none")
        )
        self._agents_section: Any = widgets.VBox(
            children=(widgets.HTML(value='<div class="ta-section">Agents</div>'), self.agents.widget),
            layout=widgets.Layout(display="none"),
        )
        self._cost_section: Any = widgets.VBox(
            children=(widgets.HTML(value='<div class="ta-section">Cost</div>'), self.budget.widget, self.costs.widget)
        )
        self._tools_shown = -1
        self._agents_shown = False
        self._stop_marked = False
        self._undelivered_noted = False
        self._display_id: str | None = None
        self._record_shown = False
        self.widget: Any = widgets.VBox(
            children=(
                widgets.HTML(value=STYLESHEET),
                self.header.widget,
                self.controls.widget,
                self.approvals.widget,
                self.gauge.widget,
                self.transcript.widget,
                self._tools_section,
                self._agents_section,
                self._cost_section,
            ),
            _dom_classes=["ta-dash"],
        )
        self._flusher = Flusher(self._flush, lambda: self.state.finished, interval_s=1.0 / throttle_hz)
        self._watching = False
        self.queued: str | bool = False
        """Set (to a note such as "queued behind run a1") while the run waits for its thread's previous run."""
        router = EventRouter(
            lock=self._lock,
            state=self.state,
            tree=self.tree,
            transcript=self.transcript,
            tools=self.tools,
            gauge=self.gauge,
            log=self.log,
        )
        ctx, budget, run_id = self._ctx, self.budget, self.run_id

        def listener(offset: int, event: AgentEvent) -> None:
            if event.kind == "model.started" and event.run_id == run_id:
                budget.capture(ctx.budgets)  # bound only while the run runs
            router(offset, event)

        self._remove_listener: Callable[[], None] | None = self._ctx.events.add_listener(listener)
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

    def note(self, text: str) -> None:
        """Show ``text`` under the header until the next notice (a warning tone), e.g. what ■ did.

        A line the run's end makes stale belongs here rather than in the cell's output: the
        record that replaces the dashboard then replaces the line too.
        """
        self.controls.notice = Notice(text, "warn")
        self.flush()

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

    # ------------------------------------------------------------------ what the run did (under the lock)
    def _totals(self) -> Totals:
        usage = self._ctx.usage.for_subtree(self.run_id)
        usd = self._ctx.costs.for_subtree(self.run_id).total_usd
        calls, estimate = 0, 0
        if self.state.terminal in ("cancelled", "failed"):  # what a stop cut off: streamed, never reported
            streamed = [text for text in self.transcript.streamed_text().values() if text]
            calls = len(streamed)
            if streamed and not usage.estimated:  # (the harness records a stopped call's estimate itself)
                counter = loaded_tokenizer_for_model(self.state.model or None)  # a Stop never waits for a BPE load
                estimate = sum(counter.count(text) for text in streamed)
        return Totals(
            tokens=usage.total_tokens,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            usd=usd,
            interrupted_calls=calls,
            estimated_tokens=estimate,
            estimated=usage.estimated,
        )

    def _on_terminal(self) -> None:
        """Once the run ended: mark where a stop cut the transcript, frame the answer, report lost messages."""
        state = self.state
        if state.terminal == "completed":
            self.transcript.mark_answer(self.run_id)
        if state.terminal in ("cancelled", "failed") and not self._stop_marked:
            self._stop_marked = True
            if self.transcript.streamed_text():
                why = f" ({state.cancel_reason})" if state.terminal == "cancelled" and state.cancel_reason else ""
                self.transcript.add_note(
                    f"■ {state.terminal} here{why}: the text above is all that arrived", css="ta-stopped"
                )
        undelivered = len(self.controls.sent) - state.steers_delivered
        if undelivered > 0 and not self._undelivered_noted:
            self._undelivered_noted = True
            what = "message was" if undelivered == 1 else f"{undelivered} messages were"
            self.controls.notice = Notice(f"not delivered: the run has no further step (your {what} not seen)", "warn")

    def _notice(self, status: str) -> Notice | None:
        notice = self.controls.notice
        if self._flusher.last_error is not None:
            return Notice(f"dashboard error: {self._flusher.last_error}", "warn")
        if (
            notice is not None
            and notice.text.startswith(QUEUED_PREFIX)
            and self.controls.sent
            and self.state.steers_delivered >= len(self.controls.sent)
        ):  # the transcript's note says it was added: the header must not still say queued
            return Notice(ADDED_PREFIX + notice.text.removeprefix(QUEUED_PREFIX))
        if notice is not None and notice.text == PAUSING_NOTICE and status == "paused":
            return Notice("paused — Resume continues; a message sent now is seen when it does")
        if notice is None and isinstance(self.queued, str):
            notice = Notice(self.queued)
        if notice is None and self.controls.unreachable is not None and self.state.terminal is None:
            notice = Notice(self.controls.unreachable, "warn")
        return notice

    # ------------------------------------------------------------------ the flush (loop thread)
    def _status(self) -> str:
        state, controls = self.state, self.controls
        if state.terminal is not None:
            return state.terminal
        if self.queued and not controls.stop_requested:
            return "queued"
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
                if self.state.finished:
                    self._on_terminal()
                self.header.render(
                    self.state, status=status, now=now, totals=self._totals(), notice=self._notice(status)
                )
                self.controls.render(status=status, terminal=terminal)
                self.approvals.render(terminal=terminal)
                self.gauge.render(ctx.context_window, self.state.error)
                quiet = not (self.state.model_calls or self.tools.count or self.state.code_steps)
                self.transcript.render(waiting=not terminal and quiet and not self.approvals.pending)
                self.tools.render()
                self.agents.render(self.tree, ctx.usage, ctx.costs, now=now, force=force)
                self.costs.render(ctx.costs, self._belongs, self.tree.name_of, now=now, force=force, ended=terminal)
                self.budget.render(ctx)
                tool_count, agents = self.tools.count, len(self.tree) > 1
            if tool_count != self._tools_shown:
                self._tools_shown = tool_count
                self._tools_title.value = f'<div class="ta-section">Tool calls ({tool_count:,})</div>'
                self._tools_section.layout.display = None if tool_count else "none"
            if agents != self._agents_shown:
                self._agents_shown = agents
                self._agents_section.layout.display = None if agents else "none"
            self._replace_display()

    # ------------------------------------------------------------------ display
    def interrupted(self) -> tuple[int, int]:
        """``(calls, estimated tokens)`` a stop or failure cut off mid-stream, which no provider reported."""
        with self._lock:
            totals = self._totals()
        return totals.interrupted_calls, totals.estimated_tokens

    def log_snapshot(self) -> tuple[list[CodeStep], list[Decision], list[Alert]]:
        """Copies of the run log's code steps, approval decisions and alerts (thread-safe)."""
        with self._lock:
            return self.log.snapshot()

    def details(self) -> RunDetails:
        """A plain copy of the panes (tree, tool calls, cost, steering) and the header's counts (thread-safe)."""
        ctx = self._ctx
        with self._lock:
            state = self.state
            self.costs.update(ctx.costs, self._belongs, self.tree.name_of)
            agents = tuple(
                AgentLine(
                    name=node.name,
                    depth=node.depth,
                    status=node.status,
                    tokens=ctx.usage.for_subtree(node.run_id).total_tokens,
                    usd=ctx.costs.for_subtree(node.run_id).total_usd,
                )
                for node in self.tree.ordered()
            )
            tools = tuple(
                ToolLine(
                    name=row.name,
                    caption=row.caption,
                    status=row.status,
                    arguments=row.arguments,
                    output=row.output,
                    error_type=row.error_type,
                    duration_s=row.duration_s,
                    replayed=row.replayed,
                )
                for row in self.tools.rows.values()
            )
            cost_rows = self.costs.rows()
            return RunDetails(
                model_calls=state.model_calls,
                tool_calls=state.tool_calls,
                code_steps=state.code_steps,
                agents=agents,
                agents_dropped=self.tree.dropped,
                tools=tools,
                tools_dropped=self.tools.dropped,
                costs=tuple(_cost_line(row) for row in cost_rows),
                sent=tuple(self.controls.sent),
                delivered=state.steers_delivered,
            )

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
            parts.append(usage_text(state.model_calls, state.tool_calls, self._totals(), code_steps=state.code_steps))
        return f"<tinyagents run{name}: {' · '.join(parts)}>"

    def _ipython_display_(self) -> None:
        """``display(dashboard)``: the live view now, and a static record in its place when the run ends.

        A widget needs its kernel, so a saved notebook would keep a "running" line and reopen as
        "Error displaying widget". Shown while the run is live, the output gets a display id and
        the final flush replaces it by ``record_markdown()``; shown after the end (to look at the
        panes again), it stays the live view, which is what was asked for.
        """
        from IPython.display import display

        live = not self.state.finished
        if live and self._display_id is None:
            self._display_id = f"tinyagents-dashboard-{self.run_id}"
        display(self._repr_mimebundle_(), raw=True, display_id=self._display_id if live else None)  # type: ignore[no-untyped-call]

    def record_markdown(self) -> dict[str, str]:
        """A static ``text/markdown`` + ``text/plain`` record: the answer text, the pressure marks, the summary."""
        with self._lock:
            text = self.transcript.text()
            marks = list(self.gauge.marks)
        summary = self.summary_text()
        markdown = [f"**{esc(self.state.title)}**", safe_markdown(text) if text.strip() else "*(no text)*"]
        markdown += [f"context pressure: {code_span(mark)}" for mark in marks]
        markdown.append(code_span(summary))
        plain = [self.state.title, text, *(f"context pressure: {mark}" for mark in marks), summary]
        return {"text/markdown": "\n\n".join(markdown), "text/plain": "\n".join(plain)}

    def _replace_display(self) -> None:
        """Once the run ended: the output ``display(dashboard)`` made becomes the record (once)."""
        if self._display_id is None or self._record_shown or not self.state.finished:
            return
        self._record_shown = True
        from IPython.display import update_display

        update_display(self.record_markdown(), raw=True, display_id=self._display_id)  # type: ignore[no-untyped-call]

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = self.widget._repr_mimebundle_(**kwargs)
        data: dict[str, Any] = dict(bundle) if bundle else {}
        data["text/plain"] = self.summary_text()
        return data

    def __repr__(self) -> str:
        return f"RunDashboard(run_id={self.run_id!r}, status={self._status()!r})"


def _cost_line(row: dict[Any, Any]) -> CostLine:
    return CostLine(
        agent=str(row["agent"]),
        model=str(row["model"]),
        calls=int(row["calls"]),
        input_tokens=int(row["input"]),
        cached_input_tokens=int(row["cached"]),
        output_tokens=int(row["output"]),
        usd=row["usd"],
    )


def _check_options(throttle_hz: object, max_history: object) -> None:
    if isinstance(throttle_hz, bool) or not isinstance(throttle_hz, int | float) or not 0 < throttle_hz < math.inf:
        raise ConfigurationError(f"throttle_hz must be a positive finite number, got {throttle_hz!r}")
    if isinstance(max_history, bool) or not isinstance(max_history, int) or max_history < 1:
        raise ConfigurationError(f"max_history must be an int >= 1, got {max_history!r}")
