"""``EventRouter``: the dashboard's one sink listener, turning this run's events into pane state.

It runs on whichever thread emits (the run's loop thread, once per token), so it only appends to
plain Python state under the dashboard's lock and never touches a widget. It also keeps the run's
tree: a session shares one sink across many runs, so an event is accepted only when its run is
the dashboard's run or a sub-agent that a member announced with ``subagent.started``.

An RLM run's code runs as calls of one tool (``repl``), which ``rlm.started`` names. Those calls
are not listed in the Tool calls pane: the transcript already shows each of them, as the reply
that carried the code and a code step per block with its status and output (``rlm.code`` and
``rlm.output``). A ``repl`` row would repeat the code as a JSON argument and the outputs run
together as one result, a second and worse view of the same step; its other calls (a reminder of
the protocol, a prose ``FINAL``) are the protocol's turns, which the record leaves out too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from tinyagents_nb.harness import AgentEvent, TextDelta, ThinkingDelta

from ._format import plural
from ._gauge import ContextGauge
from ._header import RunState
from ._runlog import Alert, RunLog, alert_for_guardrail, alert_for_limit
from ._tools import ToolCallsPane
from ._transcript import SegmentKind, TranscriptPane
from ._tree import AgentTree

__all__ = ["TERMINAL_KINDS", "EventRouter"]

TERMINAL_KINDS: Final = {"run.completed": "completed", "run.failed": "failed", "run.cancelled": "cancelled"}
_STEERING_WORDS: Final = {
    "inject_message": "your message was added to the conversation (the next model call reads it)",
    "pause": "paused",
    "resume": "resumed",
    "redirect": "redirected",
    "cancel": "stop requested",
}


class EventRouter:
    """Call it as a sink listener: ``sink.add_listener(router)``."""

    def __init__(
        self,
        *,
        lock: threading.Lock,
        state: RunState,
        tree: AgentTree,
        transcript: TranscriptPane,
        tools: ToolCallsPane,
        gauge: ContextGauge,
        log: RunLog,
    ) -> None:
        self._lock = lock
        self._state = state
        self._tree = tree
        self._transcript = transcript
        self._tools = tools
        self._gauge = gauge
        self._log = log
        self._step_keys: dict[tuple[str, str, int], int] = {}
        self._retries: dict[tuple[str, str], int] = {}
        self._step_tools: dict[str, str] = {}
        """The tool whose calls are code steps, by RLM run id (``rlm.started``)."""
        self._early: dict[str, list[tuple[str, int]]] = {}
        """Calls a resumed run reported before its first model call (tool, row key), by run id: those it
        replayed from its journal and settled. ``rlm.started`` comes after them, and makes its code steps."""
        self._talking: set[str] = set()
        """Runs that made a model call (their later calls are not early)."""
        self._handlers: Mapping[str, Callable[[Any], None]] = {
            "model.delta": self._on_delta,
            "model.started": self._on_model_started,
            "run.started": self._on_run_started,
            "run.resumed": self._on_run_resumed,
            "model.completed": self._on_model_completed,
            "model.failed": self._on_model_failed,
            "tool.started": self._on_tool_started,
            "tool.completed": self._on_tool_completed,
            "tool.failed": self._on_tool_failed,
            "tool.delta": self._on_tool_delta,
            "tool.replayed": self._on_tool_replayed,
            "subagent.started": self._on_subagent_started,
            "subagent.completed": lambda e: tree.finish(e.child_run_id, e.status),
            "context.pressure": self._on_pressure,
            "steering.applied": self._on_steering,
            "retry.scheduled": self._on_retry,
            "model.discarded": lambda e: self._transcript.discard_call(e.run_id, e.call_id),
            "model.retracted": lambda e: self._transcript.retract_call(
                e.run_id, e.call_id, f"guardrail {e.guardrail!r} blocked it ({e.reason})"
            ),
            "fallback.used": lambda e: self._note(e, f"fallback: {e.from_model} → {e.to_model} ({e.error})"),
            "limit.reached": self._on_limit,
            "guardrail.tripped": self._on_guardrail,
            "approval.decided": self._on_decided,
            "rlm.started": self._on_rlm_started,
            "rlm.code": self._on_code,
            "rlm.output": self._on_output,
            **dict.fromkeys(TERMINAL_KINDS, self._on_run_ended),
        }

    def __call__(self, offset: int, event: AgentEvent) -> None:
        handler = self._handlers.get(event.kind)
        if handler is None:
            return
        with self._lock:
            if event.run_id in self._tree:
                handler(event)

    # ------------------------------------------------------------------ handlers (under the lock)
    def _on_delta(self, event: Any) -> None:
        delta = event.delta
        kind: SegmentKind
        if isinstance(delta, TextDelta):
            kind = "text"
        elif isinstance(delta, ThinkingDelta):
            kind = "thinking"
        else:
            return  # tool-call fragments: the tool pane shows the call once it starts
        self._transcript.add_delta(event.run_id, event.call_id, kind, delta.text, self._tree.caption)

    def _on_run_started(self, event: Any) -> None:
        state = self._state
        if event.run_id == state.run_id:
            state.started = time.monotonic()
            state.model = state.model or event.model

    def _on_run_resumed(self, event: Any) -> None:
        """A resumed run: the model calls made before the restart count (its tool calls come replayed)."""
        self._state.model_calls += event.model_calls
        before = plural(event.model_calls, "model call")
        self._note(event, f"↪ resumed from step {event.from_step}: {before} before the restart")

    def _on_run_ended(self, event: Any) -> None:
        status = TERMINAL_KINDS[event.kind]
        if event.kind == "run.failed" and event.run_id != self._state.run_id:
            self._log.explain(event.run_id, event.error_type, event.error)
        self._tree.finish(event.run_id, status)
        state = self._state
        if event.run_id != state.run_id:
            return
        state.terminal = state.terminal or status
        state.ended = state.ended or time.monotonic()
        if event.kind == "run.failed":
            state.error_text = f"{event.error_type}: {event.error}"
            state.alert = self._log.explain(event.run_id, event.error_type, event.error) or state.alert
        elif event.kind == "run.cancelled":
            state.cancel_reason = event.reason

    def _on_retry(self, event: Any) -> None:
        # the retried attempt streams from the start in a new segment; model.discarded (just before)
        # already struck the failed attempt's text out of the answer
        self._transcript.end_call(event.run_id, event.call_id)
        self._retries[(event.run_id, event.call_id)] = event.attempt
        self._note(event, f"attempt {event.attempt} failed, retrying in {event.delay_s:.1f} s: {event.error}")

    def _on_model_started(self, event: Any) -> None:
        self._talking.add(event.run_id)  # past the run's start: rlm.started would have come by now
        self._early.pop(event.run_id, None)
        self._state.live_calls.add((event.run_id, event.call_id))  # counted while it streams (a retry is the same call)

    def _on_model_completed(self, event: Any) -> None:
        self._state.model_calls += 1
        self._gauge.record_cache(event.usage.cached_input_tokens, event.usage.cache_write_tokens)
        self._retries.pop((event.run_id, event.call_id), None)
        self._transcript.end_call(event.run_id, event.call_id)

    def _on_model_failed(self, event: Any) -> None:
        self._transcript.fail_call(event.run_id, event.call_id)
        attempts = max(event.attempt, self._retries.pop((event.run_id, event.call_id), 0) + 1)
        after = f" after {attempts} attempts" if attempts > 1 else ""
        self._note(event, f"model call failed{after}: {event.error_type}: {event.error}")

    def _on_rlm_started(self, event: Any) -> None:
        self._step_tools[event.run_id] = event.tool_name
        for tool_name, key in self._early.pop(event.run_id, []):  # reported before the run said it was RLM
            if tool_name == event.tool_name:  # a code step (replayed, or skipped on resume), not a tool call
                self._tools.drop(key)
                self._state.tool_calls -= 1
                self._state.code_steps += 1

    def _is_step_call(self, event: Any) -> bool:
        """A call that runs an RLM run's code: its steps show it (see the module docstring)."""
        return bool(self._step_tools.get(event.run_id) == event.tool_name)

    def _on_tool_started(self, event: Any) -> None:
        if self._is_step_call(event):
            return
        caption = self._tree.caption(event.run_id)
        key = self._tools.started(event.run_id, event.call_id, event.tool_name, event.arguments, caption)
        if event.run_id not in self._talking:  # a resumed run settling its open calls (see _on_rlm_started)
            self._early.setdefault(event.run_id, []).append((event.tool_name, key))

    def _on_tool_replayed(self, event: Any) -> None:
        """A resumed run's call from before the restart: counted and listed (marked), never shown as running."""
        if self._is_step_call(event):
            self._state.code_steps += 1
            return
        self._state.tool_calls += 1
        caption = self._tree.caption(event.run_id)
        key = self._tools.replayed(
            event.run_id,
            event.call_id,
            event.tool_name,
            event.arguments,
            caption,
            output=event.output,
            is_error=event.is_error,
        )
        self._early.setdefault(event.run_id, []).append((event.tool_name, key))

    def _on_tool_delta(self, event: Any) -> None:
        data = event.data
        if isinstance(data, dict) and data.get("summary") and event.message:
            self._tools.summarised(event.run_id, event.call_id, event.message)

    def _count_call(self, event: Any) -> None:
        if self._is_step_call(event):
            self._state.code_steps += 1  # the record and transcript call them steps, not tool calls
        else:
            self._state.tool_calls += 1

    def _on_tool_completed(self, event: Any) -> None:
        self._count_call(event)
        self._tools.finished(
            event.run_id, event.call_id, output=event.output, is_error=event.is_error, duration_s=event.duration_s
        )

    def _on_tool_failed(self, event: Any) -> None:
        self._count_call(event)
        if self._is_step_call(event):  # stopped mid-block: its step says how, as the row would have
            for step in self._log.end_call(event.run_id, event.call_id, event.error_type, event.duration_s):
                key = self._step_keys.get((step.run_id, step.call_id, step.index))
                if key is not None:
                    self._transcript.touch(key)
            return
        self._tools.finished(
            event.run_id,
            event.call_id,
            output=event.error,
            is_error=True,
            duration_s=event.duration_s,
            error_type=event.error_type,
        )

    def _on_subagent_started(self, event: Any) -> None:
        self._tree.add_child(event.run_id, str(event.child_run_id), event.name, event.depth + 1)

    def _on_pressure(self, event: Any) -> None:
        caption = self._tree.caption(event.run_id)
        self._gauge.add_mark(
            event.action, event.tokens_before, event.tokens_after, detail=event.detail, caption=caption
        )

    def _on_steering(self, event: Any) -> None:
        if not event.accepted:
            detail = f": {event.detail}" if event.detail else ""
            self._note(event, f"↪ steering refused ({event.command}){detail}")
            return
        if event.command == "inject_message" and event.run_id == self._state.run_id:
            self._state.steers_delivered += 1
        words = _STEERING_WORDS.get(event.command, event.command.replace("_", " "))
        detail = event.detail
        if event.command in ("pause", "cancel") and detail.endswith(" button"):
            detail = ""  # "paused: pause button" says nothing new
        self._note(event, f"↪ {words}" + (f": {detail}" if detail else ""))

    def _on_code(self, event: Any) -> None:
        step = self._log.add_code(event, self._tree.caption(event.run_id))
        slot = (step.run_id, step.call_id, step.index)
        self._step_keys[slot] = self._transcript.add_step(step)
        if len(self._step_keys) > 2 * len(self._log.steps) + 64:  # forget the keys of dropped steps
            self._step_keys = {s: k for s, k in self._step_keys.items() if s in self._log.steps}

    def _on_output(self, event: Any) -> None:
        if self._log.add_output(event) is not None:
            key = self._step_keys.get((event.run_id, event.call_id, event.index))
            if key is not None:
                self._transcript.touch(key)

    def _on_decided(self, event: Any) -> None:
        decision = self._log.add_decision(event, self._tree.caption(event.run_id))
        self._transcript.add_note(decision.text().removeprefix(f"{decision.caption} · "), decision.caption)

    def _on_guardrail(self, event: Any) -> None:
        self._alert(event, alert_for_guardrail(event, self._tree.caption(event.run_id)))

    def _on_limit(self, event: Any) -> None:
        self._alert(event, alert_for_limit(event, self._tree.caption(event.run_id)))

    def _alert(self, event: AgentEvent, alert: Alert) -> None:
        self._log.add_alert(alert)
        self._state.alert = alert
        self._note(event, f"⛔ {alert.what}" + (f": {alert.why}" if alert.why else ""))

    def _note(self, event: AgentEvent, text: str) -> None:
        self._transcript.add_note(text, self._tree.caption(event.run_id))
