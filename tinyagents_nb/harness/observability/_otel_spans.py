"""Events to OpenTelemetry spans: the state machine behind ``OTelSink``.

A run's events arrive after the fact and in offset order, so each span is started and ended with
the event's own timestamp rather than "now": the trace shows when things happened, not when the
listener got to them. One ``invoke_agent`` span per run; ``chat`` spans for its model calls and
``execute_tool`` spans for its tool calls under it; a child run (a sub-agent, an RLM sub-query)
under the tool call that started it. Everything else worth seeing in a trace (approvals, limits,
retries, fallbacks, RLM code blocks) becomes a span event on the span it happened in.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context, trace
from opentelemetry.metrics import Histogram, Meter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from .._events import AgentEvent
from ._obs_sinks import RedactingSink
from ._otel_conventions import GenAIConventions

__all__ = ["SpanBuilder"]

_Attrs = dict[str, Any]
_RUN_EVENTS = ("limit.reached", "fallback.used", "guardrail.tripped", "steering.applied", "context.pressure",
               "structured.repair")  # fmt: skip


def _ns(ts: float) -> int:
    return int(ts * 1e9)


@dataclass(slots=True)
class _Chat:
    span: Span
    start: float
    model: str
    provider: str | None
    text: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Tool:
    span: Span
    start: float
    name: str


@dataclass(slots=True)
class _Run:
    span: Span
    context: otel_context.Context
    name: str
    provider: str | None
    thread_id: str | None
    parent_run_id: str | None
    chats: dict[str, _Chat] = field(default_factory=dict)
    tools: dict[str, _Tool] = field(default_factory=dict)
    cost_usd: float = 0.0
    priced: int = 0
    unpriced: int = 0
    rlm_tool: str | None = None


class SpanBuilder:
    """Turns one ordered event stream (or several, under ``OTelSink``'s lock) into spans and metrics."""

    def __init__(
        self,
        tracer: Tracer,
        meter: Meter | None,
        conventions: GenAIConventions,
        *,
        capture: bool,
        scrubber: RedactingSink,
    ) -> None:
        self.tracer = tracer
        self.names = conventions
        self.capture = capture
        self.scrubber = scrubber
        self.runs: dict[str, _Run] = {}
        self.children: dict[str, tuple[str, str | None, str]] = {}  # child run -> (parent run, call id, name)
        self.durations: Histogram | None = None
        self.tokens: Histogram | None = None
        if meter is not None:
            self.durations = meter.create_histogram(
                "gen_ai.client.operation.duration", unit="s", description="GenAI operation duration"
            )
            self.tokens = meter.create_histogram(
                "gen_ai.client.token.usage", unit="{token}", description="Tokens used per GenAI operation"
            )
        self.handlers: dict[str, Callable[[Any], None]] = {
            "run.started": self._run_started,
            "run.completed": self._run_completed,
            "run.failed": self._run_failed,
            "run.cancelled": self._run_cancelled,
            "model.started": self._model_started,
            "model.delta": self._model_delta,
            "model.discarded": self._model_discarded,
            "model.completed": self._model_completed,
            "model.failed": self._model_failed,
            "cost.recorded": self._cost,
            "tool.started": self._tool_started,
            "tool.completed": self._tool_completed,
            "tool.failed": self._tool_failed,
            "subagent.started": self._subagent_started,
            "approval.requested": self._approval_requested,
            "approval.decided": self._approval_decided,
            "cache.hit": self._cache_hit,
            "rlm.started": self._rlm_started,
            "rlm.code": self._rlm_block,
            "rlm.output": self._rlm_block,
            **dict.fromkeys(("retry.scheduled", "rate_limit.waited"), self._chat_event),
            **dict.fromkeys(_RUN_EVENTS, self._run_event),
        }

    def handle(self, event: AgentEvent) -> None:
        handler = self.handlers.get(event.kind)
        if handler is not None:
            handler(event)

    # ------------------------------------------------------------------------------ helpers
    def _text(self, text: str) -> str:
        """Content scrubbed of secrets: the only way content reaches a span."""
        return self.scrubber.scrub_text(text)

    def _arguments(self, event: Any) -> str:
        """Tool arguments as JSON after the redaction every sink uses (values under ``api_key``-like keys go whole)."""
        try:
            arguments = self.scrubber.redact(event).arguments  # type: ignore[attr-defined]
        except ValueError:
            return "[unredactable]"  # never the raw value
        return arguments if isinstance(arguments, str) else json.dumps(arguments, default=str, ensure_ascii=False)

    def _messages(self, role: str, text: str, finish: str | None = None) -> str:
        message: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": self._text(text)}]}
        if finish:
            message["finish_reason"] = finish
        return json.dumps([message], ensure_ascii=False)

    def _error(self, span: Span, error_type: str, message: str = "") -> None:
        span.set_attribute("error.type", error_type)
        span.set_status(Status(StatusCode.ERROR, self.scrubber.scrub_text(message)[:1000] if message else None))

    def _usage(self, attrs: _Attrs, usage: Any) -> None:
        names = self.names
        attrs["gen_ai.usage.input_tokens"] = usage.input_tokens
        attrs["gen_ai.usage.output_tokens"] = usage.output_tokens
        for name, count in (
            (names.cache_read_tokens, usage.cached_input_tokens),
            (names.cache_write_tokens, usage.cache_write_tokens),
            (names.reasoning_tokens, usage.reasoning_tokens),
        ):
            if name is not None and count:
                attrs[name] = count

    def _parent_context(
        self, event: AgentEvent, link: tuple[str, str | None, str] | None
    ) -> otel_context.Context | None:
        """Where a new run's span hangs: the tool call that started it, else its parent run, else the caller's span."""
        parent_id = event.parent_run_id
        parent = self.runs.get(parent_id) if parent_id is not None else None
        if parent is None:
            return None  # a root run (or a parent we never saw): the current context, e.g. a user's own span
        tool = parent.tools.get(link[1]) if link is not None and link[1] is not None else None
        if tool is None and parent.tools:  # started outside the tool's task (an RLM sub-query): the newest call
            tool = next(reversed(parent.tools.values()))
        return trace.set_span_in_context(tool.span if tool is not None else parent.span)

    # ------------------------------------------------------------------------------ runs
    def _run_started(self, event: Any) -> None:
        link = self.children.pop(event.run_id, None)
        name = link[2] if link is not None else (event.agent or event.model or "agent")
        provider = self.names.provider_value(event.provider)
        attrs: _Attrs = {
            "gen_ai.operation.name": "invoke_agent",
            "openinference.span.kind": "AGENT",
            "gen_ai.agent.name": name,
            "tinyagents.run_id": event.run_id,
            "tinyagents.root_run_id": event.root_run_id,
            "tinyagents.depth": event.depth,
        }
        if provider:
            attrs[self.names.provider] = provider
        if event.model:
            attrs["gen_ai.request.model"] = event.model
        if event.thread_id:  # the conversation, and the session Phoenix and Langfuse group traces by
            attrs["gen_ai.conversation.id"] = attrs["session.id"] = event.thread_id
        if event.parent_run_id:
            attrs["tinyagents.parent_run_id"] = event.parent_run_id
        if self.capture and self.names.input_messages and event.input:
            attrs[self.names.input_messages] = self._messages("user", event.input)
        span = self.tracer.start_span(
            f"invoke_agent {name}",
            context=self._parent_context(event, link),
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=_ns(event.ts),
        )
        self.runs[event.run_id] = _Run(
            span=span,
            context=trace.set_span_in_context(span),
            name=name,
            provider=event.provider,
            thread_id=event.thread_id,
            parent_run_id=event.parent_run_id,
        )

    def _end_run(self, event: Any, status: str, error: tuple[str, str] | None = None) -> None:
        run = self.runs.pop(event.run_id, None)
        if run is None:
            return
        leftover = error or ("cancelled", "the run ended before the call did")
        for chat in run.chats.values():  # a call cut off by the run's end (a Stop, a deadline)
            self._error(chat.span, *leftover)
            chat.span.end(end_time=_ns(event.ts))
        for tool in run.tools.values():
            self._error(tool.span, *leftover)
            tool.span.end(end_time=_ns(event.ts))
        span = run.span
        span.set_attribute("tinyagents.status", status)
        if run.priced:
            span.set_attribute("tinyagents.cost_usd", round(run.cost_usd, 10))
        if run.unpriced:
            span.set_attribute("tinyagents.cost.unpriced_calls", run.unpriced)
        if error is not None:
            self._error(span, *error)
        span.end(end_time=_ns(event.ts))
        parent = self.runs.get(run.parent_run_id) if run.parent_run_id else None
        if parent is not None:  # a run's cost is its whole subtree's, as AgentRun.cost is
            parent.cost_usd += run.cost_usd
            parent.priced += run.priced
            parent.unpriced += run.unpriced

    def _run_completed(self, event: Any) -> None:
        run = self.runs.get(event.run_id)
        if run is not None:
            attrs: _Attrs = {}
            self._usage(attrs, event.usage)
            if self.capture and self.names.output_messages and event.final_text:
                attrs[self.names.output_messages] = self._messages("assistant", event.final_text, "stop")
            run.span.set_attributes(attrs)
        self._end_run(event, "completed")

    def _run_failed(self, event: Any) -> None:
        self._end_run(event, "failed", (event.error_type, event.error))

    def _run_cancelled(self, event: Any) -> None:
        run = self.runs.get(event.run_id)
        if run is not None:
            reason = self.scrubber.scrub_text(event.reason or "")
            run.span.add_event("run.cancelled", {"reason": reason}, timestamp=_ns(event.ts))
        self._end_run(event, "cancelled", ("cancelled", event.reason or "cancelled"))

    def _run_event(self, event: Any) -> None:
        """A span event on the run's span: a limit, a fallback, a guardrail, steering, context pressure."""
        run = self.runs.get(event.run_id)
        if run is None:
            return
        attrs: _Attrs = {}
        for name in ("limit", "maximum", "from_model", "to_model", "action", "tokens_before", "tokens_after",
                     "command", "accepted", "attempt", "guardrail", "stage", "outcome"):  # fmt: skip
            value = getattr(event, name, None)
            if isinstance(value, str | int | float | bool):
                attrs[name] = value
        error = getattr(event, "error", None)
        if isinstance(error, str) and error:
            attrs["error"] = self.scrubber.scrub_text(error)[:1000]
        run.span.add_event(event.kind, attrs, timestamp=_ns(event.ts))

    # ------------------------------------------------------------------------------ model calls
    def _model_started(self, event: Any) -> None:
        run = self.runs.get(event.run_id)
        if run is None:
            return
        provider = event.provider or run.provider
        attrs: _Attrs = {
            "gen_ai.operation.name": "chat",
            "openinference.span.kind": "LLM",
            "gen_ai.request.model": event.model,
        }
        value = self.names.provider_value(provider)
        if value:
            attrs[self.names.provider] = value
        if run.thread_id:
            attrs["gen_ai.conversation.id"] = run.thread_id
        old = run.chats.pop(event.call_id, None)
        if old is not None:  # never ended (a fallback after an error we did not see): close it
            old.span.end(end_time=_ns(event.ts))
        span = self.tracer.start_span(
            f"chat {event.model}", context=run.context, kind=SpanKind.CLIENT, attributes=attrs, start_time=_ns(event.ts)
        )
        run.chats[event.call_id] = _Chat(span=span, start=event.ts, model=event.model, provider=value)

    def _chat(self, event: Any) -> _Chat | None:
        run = self.runs.get(event.run_id)
        return run.chats.get(event.call_id) if run is not None else None

    def _model_delta(self, event: Any) -> None:
        if not self.capture:
            return
        chat = self._chat(event)
        text = getattr(event.delta, "text", None)
        if chat is not None and getattr(event.delta, "type", "text") == "text" and isinstance(text, str):
            chat.text.append(text)

    def _model_discarded(self, event: Any) -> None:
        chat = self._chat(event)
        if chat is not None:
            chat.text.clear()
            chat.span.add_event("model.discarded", {"attempt": event.attempt, "reason": event.reason})

    def _metric_attrs(self, chat: _Chat, response_model: str | None) -> _Attrs:
        attrs: _Attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": chat.model}
        if chat.provider:
            attrs[self.names.provider] = chat.provider
        if response_model:
            attrs["gen_ai.response.model"] = response_model
        return attrs

    def _model_completed(self, event: Any) -> None:
        run = self.runs.get(event.run_id)
        chat = run.chats.pop(event.call_id, None) if run is not None else None
        if chat is None:
            return
        attrs: _Attrs = {}
        if event.model:
            attrs["gen_ai.response.model"] = event.model
        if event.response_id:
            attrs["gen_ai.response.id"] = event.response_id
        if event.finish_reason:
            attrs["gen_ai.response.finish_reasons"] = (event.finish_reason,)
        if event.cached:
            attrs["tinyagents.cache_hit"] = True
        self._usage(attrs, event.usage)
        if self.capture and self.names.output_messages and chat.text:
            attrs[self.names.output_messages] = self._messages("assistant", "".join(chat.text), event.finish_reason)
        chat.span.set_attributes(attrs)
        chat.span.end(end_time=_ns(event.ts))
        metric = self._metric_attrs(chat, event.model)
        if self.durations is not None:
            self.durations.record(event.duration_s, metric)
        if self.tokens is not None and not event.cached:
            self.tokens.record(event.usage.input_tokens, {**metric, "gen_ai.token.type": "input"})
            self.tokens.record(event.usage.output_tokens, {**metric, "gen_ai.token.type": "output"})

    def _model_failed(self, event: Any) -> None:
        run = self.runs.get(event.run_id)
        chat = run.chats.pop(event.call_id, None) if run is not None else None
        if chat is None:
            return
        chat.span.set_attribute("tinyagents.attempts", event.attempt)
        self._error(chat.span, event.error_type, event.error)
        chat.span.end(end_time=_ns(event.ts))
        if self.durations is not None:
            seconds = max(0.0, event.ts - chat.start)
            self.durations.record(seconds, {**self._metric_attrs(chat, None), "error.type": event.error_type})

    def _chat_event(self, event: Any) -> None:
        chat = self._chat(event)
        if chat is None:
            return
        attrs: _Attrs = {}
        for name in ("attempt", "delay_s", "waited_s"):
            value = getattr(event, name, None)
            if isinstance(value, int | float):
                attrs[name] = value
        error = getattr(event, "error", None)
        if isinstance(error, str) and error:
            attrs["error"] = self.scrubber.scrub_text(error)[:1000]
        chat.span.add_event(event.kind, attrs, timestamp=_ns(event.ts))

    def _cache_hit(self, event: Any) -> None:
        chat = self._chat(event)
        if chat is not None:
            chat.span.set_attribute("tinyagents.cache_hit", True)

    def _cost(self, event: Any) -> None:
        run = self.runs.get(event.run_id)
        if run is None:
            return
        chat = run.chats.get(event.call_id) if event.call_id else None
        if event.usd is None:
            run.unpriced += 1
            return
        usd = float(event.usd)
        run.cost_usd += usd
        run.priced += 1
        if chat is not None:
            chat.span.set_attribute("tinyagents.cost_usd", usd)

    # ------------------------------------------------------------------------------ tool calls
    def _tool_started(self, event: Any) -> None:
        run = self.runs.get(event.run_id)
        if run is None:
            return
        attrs: _Attrs = {
            "gen_ai.operation.name": "execute_tool",
            "openinference.span.kind": "TOOL",
            "gen_ai.tool.name": event.tool_name,
            "gen_ai.tool.call.id": event.call_id,
            "gen_ai.tool.type": "function",
        }
        if self.capture and self.names.tool_arguments and event.arguments is not None:
            attrs[self.names.tool_arguments] = self._arguments(event)
        span = self.tracer.start_span(
            f"execute_tool {event.tool_name}",
            context=run.context,
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=_ns(event.ts),
        )
        run.tools[event.call_id] = _Tool(span=span, start=event.ts, name=event.tool_name)

    def _end_tool(self, event: Any) -> _Tool | None:
        run = self.runs.get(event.run_id)
        return run.tools.pop(event.call_id, None) if run is not None else None

    def _tool_end_ns(self, tool: _Tool, event: Any) -> int:
        # results of concurrent calls are reported together, after the slowest: end at the call's own duration
        return _ns(tool.start + event.duration_s) if event.duration_s > 0 else _ns(event.ts)

    def _tool_completed(self, event: Any) -> None:
        tool = self._end_tool(event)
        if tool is None:
            return
        if self.capture and self.names.tool_result:
            tool.span.set_attribute(self.names.tool_result, self._text(event.output))
        if event.is_error:
            self._error(tool.span, "tool_error", "" if not self.capture else event.output)
        tool.span.end(end_time=self._tool_end_ns(tool, event))

    def _tool_failed(self, event: Any) -> None:
        tool = self._end_tool(event)
        if tool is None:
            return
        tool.span.set_attribute("tinyagents.status", event.status)
        self._error(tool.span, event.error_type, event.error)
        tool.span.end(end_time=self._tool_end_ns(tool, event))

    def _subagent_started(self, event: Any) -> None:
        self.children[event.child_run_id] = (event.run_id, event.call_id, event.name)

    def _approval_requested(self, event: Any) -> None:
        run = self.runs.get(event.run_id)
        if run is None:
            return
        attrs: _Attrs = {"gen_ai.tool.name": event.tool_name, "gen_ai.tool.call.id": event.call_id}
        if self.capture and self.names.tool_arguments and event.arguments is not None:
            attrs[self.names.tool_arguments] = self._arguments(event)
        run.span.add_event("approval.requested", attrs, timestamp=_ns(event.ts))

    def _approval_decided(self, event: Any) -> None:
        run = self.runs.get(event.run_id)
        if run is None:
            return
        attrs: _Attrs = {
            "gen_ai.tool.name": event.tool_name,
            "gen_ai.tool.call.id": event.call_id,
            "approved": event.approved,
            "decided_by": event.decided_by,
            "wait_s": event.wait_s,
            "edited": event.edited,
        }
        if self.capture and event.reason:
            attrs["reason"] = self.scrubber.scrub_text(event.reason)
        run.span.add_event("approval.decided", attrs, timestamp=_ns(event.ts))

    # ------------------------------------------------------------------------------ RLM
    def _rlm_started(self, event: Any) -> None:
        run = self.runs.get(event.run_id)
        if run is not None:
            run.rlm_tool = event.tool_name
            run.span.set_attribute("tinyagents.rlm.environment", event.environment)

    def _rlm_block(self, event: Any) -> None:
        """A code block of an RLM step: a span event on the step's ``execute_tool repl`` span."""
        run = self.runs.get(event.run_id)
        if run is None:
            return
        steps = [tool for tool in run.tools.values() if tool.name == run.rlm_tool]
        span = steps[-1].span if steps else run.span
        attrs: _Attrs = {"iteration": event.iteration, "index": event.index}
        if event.kind == "rlm.output":
            attrs["duration_s"] = event.duration_s
            if event.error_type:
                attrs["error.type"] = event.error_type
            if self.capture:
                attrs["output"] = self._text(event.output)
        elif self.capture:
            attrs["code"] = self._text(event.code)
        span.add_event(event.kind, attrs, timestamp=_ns(event.ts))
