"""``OTelSink``: the exact GenAI span tree and attributes of real runs, read back from the SDK's in-memory exporter."""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tinyagents_nb.harness import (
    AgentHarness,
    FallbackPolicy,
    ModelResponse,
    ProviderError,
    RetryPolicy,
    RunCancelled,
    RunConfig,
    RunContext,
    RunLimits,
    RunPolicy,
    SubAgent,
    ToolCall,
    Usage,
    tool,
)
from tinyagents_nb.harness.observability import CONVENTIONS, OTelSink
from tinyagents_nb.harness.testkit import ScriptedModel, SlowModel

pytestmark = pytest.mark.anyio


def attr(span: ReadableSpan, name: str) -> str:
    """A string attribute (content and messages are JSON strings)."""
    value = (span.attributes or {})[name]
    assert isinstance(value, str)
    return value


class Traced:
    """A sink over an in-memory exporter and metric reader, with helpers to read the tree back."""

    def __init__(self, **options: Any) -> None:
        self.exporter = InMemorySpanExporter()
        provider = self.sink_provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.sink = OTelSink(provider, MeterProvider(metric_readers=[self.reader]), **options)

    def context(self, **config: Any) -> RunContext[None]:
        ctx: RunContext[None] = RunContext(config=RunConfig(**config))
        ctx.events.add_listener(self.sink)
        return ctx

    @property
    def spans(self) -> list[ReadableSpan]:
        return sorted(self.exporter.get_finished_spans(), key=lambda s: (s.start_time or 0, s.name))

    def tree(self) -> list[tuple[int, str]]:
        """``(depth, name)`` in start order, depth from the parent links."""
        by_id = {s.context.span_id: s for s in self.spans if s.context is not None}

        def depth(span: ReadableSpan) -> int:
            parent = span.parent
            return 0 if parent is None or parent.span_id not in by_id else 1 + depth(by_id[parent.span_id])

        return [(depth(s), s.name) for s in self.spans]

    def one(self, name: str) -> ReadableSpan:
        found = [s for s in self.spans if s.name == name]
        assert len(found) == 1, [s.name for s in self.spans]
        return found[0]

    def parent_of(self, span: ReadableSpan) -> ReadableSpan:
        assert span.parent is not None
        return next(s for s in self.spans if s.context is not None and s.context.span_id == span.parent.span_id)

    def metrics(self) -> dict[str, list[Any]]:
        data = self.reader.get_metrics_data()
        out: dict[str, list[Any]] = {}
        assert data is not None
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    out.setdefault(metric.name, []).extend(metric.data.data_points)
        return out


@pytest.fixture
def traced() -> Traced:
    return Traced()


@tool
def lookup(city: str) -> str:
    """Look up the weather of a city."""
    return f"sunny in {city}"


def weather_model() -> ScriptedModel:
    usage = Usage(input_tokens=120, output_tokens=12, cached_input_tokens=100, cache_write_tokens=10)
    first = ModelResponse(
        message=ScriptedModel.tool_call("lookup", {"city": "Oslo"}, id="call-1").message,
        usage=usage,
        finish_reason="tool_calls",
        response_id="resp-1",
    )
    second = ModelResponse(
        message=ScriptedModel.text("It is sunny.").message,
        usage=Usage(input_tokens=150, output_tokens=30, reasoning_tokens=20),
        finish_reason="stop",
        response_id="resp-2",
    )
    return ScriptedModel([first, second], model_name="gpt-4o-mini")


async def test_a_tool_run_is_one_invoke_agent_with_chat_and_execute_tool_children(traced: Traced) -> None:
    harness: AgentHarness[None] = AgentHarness(model=weather_model(), tools=[lookup], name="weather")
    ctx = traced.context(thread_id="thread-7")
    run = await harness.invoke_in_context(ctx, "Weather in Oslo?")
    assert run.final_text == "It is sunny."
    assert traced.tree() == [
        (0, "invoke_agent weather"),
        (1, "chat gpt-4o-mini"),
        (1, "execute_tool lookup"),
        (1, "chat gpt-4o-mini"),
    ]
    agent = traced.one("invoke_agent weather")
    attrs = dict(agent.attributes or {})
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.name"] == "weather"
    assert attrs["gen_ai.conversation.id"] == "thread-7"
    assert attrs["session.id"] == "thread-7"  # how Phoenix and Langfuse group a conversation's traces
    assert attrs["openinference.span.kind"] == "AGENT"
    assert attrs["gen_ai.request.model"] == "gpt-4o-mini"
    assert attrs["gen_ai.provider.name"] == "test"
    assert attrs["tinyagents.run_id"] == run.run_id
    assert attrs["gen_ai.usage.input_tokens"] == 270
    assert attrs["gen_ai.usage.output_tokens"] == 42
    assert attrs["tinyagents.status"] == "completed"
    assert "gen_ai.input.messages" not in attrs  # content capture is off by default
    assert agent.status.status_code is StatusCode.UNSET

    first, second = (s for s in traced.spans if s.name == "chat gpt-4o-mini")
    a = dict(first.attributes or {})
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.request.model"] == "gpt-4o-mini"
    assert a["gen_ai.response.model"] == "gpt-4o-mini"
    assert a["gen_ai.response.id"] == "resp-1"
    assert a["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert a["gen_ai.conversation.id"] == "thread-7"
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (120, 12)
    assert a["gen_ai.usage.cache_read.input_tokens"] == 100
    assert a["gen_ai.usage.cache_write.input_tokens"] == 10
    assert "gen_ai.usage.reasoning.output_tokens" not in a  # zero counts are left out
    b = dict(second.attributes or {})
    assert b["gen_ai.response.id"] == "resp-2"
    assert b["gen_ai.usage.reasoning.output_tokens"] == 20
    assert b["gen_ai.response.finish_reasons"] == ("stop",)

    tool_span = traced.one("execute_tool lookup")
    t = dict(tool_span.attributes or {})
    assert t == {
        "gen_ai.operation.name": "execute_tool",
        "openinference.span.kind": "TOOL",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": "call-1",
        "gen_ai.tool.type": "function",
    }
    # spans carry the events' own times, in order
    assert first.end_time is not None
    assert tool_span.start_time is not None
    assert first.end_time <= tool_span.start_time
    assert traced.sink.open_runs == 0

    metrics = traced.metrics()
    tokens = metrics["gen_ai.client.token.usage"]
    by_type = {(p.attributes["gen_ai.token.type"]): p.sum for p in tokens}
    assert by_type == {"input": 270, "output": 42}
    assert {p.attributes["gen_ai.provider.name"] for p in tokens} == {"test"}
    (duration,) = metrics["gen_ai.client.operation.duration"]
    assert duration.count == 2
    assert duration.attributes["gen_ai.operation.name"] == "chat"


async def test_cost_is_an_attribute_of_the_call_and_of_the_run(traced: Traced) -> None:
    model = ScriptedModel(
        [ModelResponse(message=ScriptedModel.text("hi").message, usage=Usage(input_tokens=1_000_000, output_tokens=0))],
        model_name="gpt-4o-mini",
    )
    harness: AgentHarness[None] = AgentHarness(model=model)
    ctx = traced.context()
    run = await harness.invoke_in_context(ctx, "hello")
    chat = dict(traced.one("chat gpt-4o-mini").attributes or {})
    agent = dict(traced.spans[0].attributes or {})
    assert run.cost is not None
    if run.cost.total_usd is None:  # the testkit provider is not priced: the run says so instead of 0
        assert "tinyagents.cost_usd" not in chat
        assert agent["tinyagents.cost.unpriced_calls"] == 1
    else:
        assert chat["tinyagents.cost_usd"] == pytest.approx(float(run.cost.total_usd))
        assert agent["tinyagents.cost_usd"] == pytest.approx(float(run.cost.total_usd))


async def test_a_sub_agent_nests_under_the_tool_call_that_started_it(traced: Traced) -> None:
    child = SubAgent("researcher", AgentHarness(model=ScriptedModel(["found it"], model_name="small")))
    root: AgentHarness[None] = AgentHarness(
        model=ScriptedModel(
            [ScriptedModel.tool_call("researcher", {"input": "dig"}, id="call-sub"), "summarised"], model_name="big"
        ),
        tools=[child.as_tool()],
        name="lead",
    )
    run = await root.invoke_in_context(traced.context(thread_id="t"), "research")
    assert run.final_text == "summarised"
    assert traced.tree() == [
        (0, "invoke_agent lead"),
        (1, "chat big"),
        (1, "execute_tool researcher"),
        (2, "invoke_agent researcher"),
        (3, "chat small"),
        (1, "chat big"),
    ]
    sub = traced.one("invoke_agent researcher")
    assert traced.parent_of(sub).name == "execute_tool researcher"
    attrs = dict(sub.attributes or {})
    assert attrs["tinyagents.depth"] == 1
    assert attrs["tinyagents.parent_run_id"] == run.run_id
    assert attrs["gen_ai.conversation.id"] == "t"
    assert len({s.context.trace_id for s in traced.spans if s.context is not None}) == 1


async def test_a_retry_is_a_span_event_of_one_chat_span(traced: Traced) -> None:
    model = ScriptedModel([ProviderError("503 busy", retryable=True), "ok"], model_name="m")
    harness: AgentHarness[None] = AgentHarness(
        model=model, policy=RunPolicy(retry=RetryPolicy(initial_backoff_s=0.01, jitter=0))
    )
    run = await harness.invoke_in_context(traced.context(), "x")
    assert run.final_text == "ok"
    assert traced.tree() == [(0, "invoke_agent m"), (1, "chat m")]
    chat = traced.one("chat m")
    assert [e.name for e in chat.events] == ["retry.scheduled"]
    event = dict(chat.events[0].attributes or {})
    assert event["attempt"] == 1
    assert "503 busy" in str(event["error"])
    assert chat.status.status_code is StatusCode.UNSET


async def test_a_failed_call_sets_the_error_status_and_error_type(traced: Traced) -> None:
    model = ScriptedModel([ProviderError("bad key sk-abcdefghijklmnopqrstuvwx", retryable=False)], model_name="m")
    with pytest.raises(ProviderError):
        await AgentHarness(model=model).invoke_in_context(traced.context(), "x")
    chat, agent = traced.one("chat m"), traced.one("invoke_agent m")
    for span in (chat, agent):
        assert span.status.status_code is StatusCode.ERROR
        assert (span.attributes or {})["error.type"] == "ProviderError"
        assert "sk-abcdefghijklmnop" not in (span.status.description or "")
        assert "[REDACTED]" in (span.status.description or "")


async def test_a_cancelled_run_closes_its_open_call_and_says_cancelled(traced: Traced) -> None:
    model = SlowModel(ScriptedModel(["never"], model_name="slow"), delay_s=30)
    ctx = traced.context()
    timer = threading.Timer(0.2, ctx.cancellation.cancel, args=("user pressed Stop",))  # Stop, from another thread
    timer.start()
    with pytest.raises(RunCancelled):
        await AgentHarness(model=model).invoke_in_context(ctx, "x")
    assert traced.tree() == [(0, "invoke_agent slow"), (1, "chat slow")]
    chat, agent = traced.one("chat slow"), traced.one("invoke_agent slow")
    assert (chat.attributes or {})["error.type"] == "cancelled"
    assert (agent.attributes or {})["tinyagents.status"] == "cancelled"
    assert (agent.attributes or {})["error.type"] == "cancelled"
    assert agent.status.status_code is StatusCode.ERROR
    assert [e.name for e in agent.events] == ["run.cancelled"]
    assert dict(agent.events[0].attributes or {})["reason"] == "user pressed Stop"
    assert traced.sink.open_runs == 0


async def test_an_approval_is_two_span_events_before_its_tool_span(traced: Traced) -> None:
    @tool(requires_approval=True)
    def send(to: str) -> str:
        """Send a message."""
        return f"sent to {to}"

    model = ScriptedModel([ScriptedModel.tool_call("send", {"to": "bob"}, id="c-1"), "done"], model_name="m")
    harness: AgentHarness[None] = AgentHarness(
        model=model, tools=[send], policy=RunPolicy(unattended_approval="approve")
    )
    run = await harness.invoke_in_context(traced.context(), "x")
    assert run.final_text == "done"
    agent = traced.one("invoke_agent m")
    assert [e.name for e in agent.events] == ["approval.requested", "approval.decided"]
    decided = dict(agent.events[1].attributes or {})
    assert decided["approved"] is True
    assert decided["decided_by"] == "unattended"
    assert decided["gen_ai.tool.call.id"] == "c-1"
    tool_span = traced.one("execute_tool send")
    assert tool_span.start_time is not None
    assert agent.events[1].timestamp <= tool_span.start_time


async def test_capture_puts_redacted_content_and_never_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    secret_key = "sk-live-0123456789abcdefghijkl"
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-9f8e7d6c5b4a")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    traced = Traced()
    assert traced.sink.capture_content is True

    @tool
    def call_api(url: str, api_key: str, note: str) -> str:
        """Call an API."""
        return f"called {url} with Authorization: Bearer {api_key} and tok-9f8e7d6c5b4a"

    args = {"url": "https://example.com", "api_key": "hunter2-value", "note": f"key is {secret_key}"}
    model = ScriptedModel(
        [ScriptedModel.tool_calls([ToolCall(id="c", name="call_api", arguments=args)]), f"used {secret_key}"],
        model_name="m",
    )
    stream = AgentHarness(model=model, tools=[call_api]).invoke_streaming(
        f"use my key {secret_key} and tok-9f8e7d6c5b4a"
    )
    stream.context.events.add_listener(traced.sink)
    stream.start()
    run = await stream.result()
    assert run.final_text.startswith("used")
    everything: list[str] = []
    for span in traced.spans:
        everything.extend(str(v) for v in (span.attributes or {}).values())
        everything.append(span.status.description or "")
        for event in span.events:
            everything.extend(str(v) for v in (event.attributes or {}).values())
    blob = "\n".join(everything)
    for secret in (secret_key, "hunter2-value", "tok-9f8e7d6c5b4a"):
        assert secret not in blob
    agent_span = traced.one("invoke_agent m")
    messages = json.loads(attr(agent_span, "gen_ai.input.messages"))
    assert messages[0]["role"] == "user"
    assert "[REDACTED]" in messages[0]["parts"][0]["content"]
    tool_span = traced.one("execute_tool call_api")
    arguments = json.loads(attr(tool_span, "gen_ai.tool.call.arguments"))
    assert arguments["url"] == "https://example.com"
    assert arguments["api_key"] == "[REDACTED]"
    assert attr(tool_span, "gen_ai.tool.call.result") == "called https://example.com with Authorization: [REDACTED]"
    output = json.loads(attr(agent_span, "gen_ai.output.messages"))
    assert output[0]["parts"][0]["content"] == "used [REDACTED]"
    chats = [s for s in traced.spans if s.name == "chat m"]
    streamed = json.loads(attr(chats[-1], "gen_ai.output.messages"))
    assert streamed[0]["parts"][0]["content"] == "used [REDACTED]"


@pytest.mark.parametrize("version", sorted(CONVENTIONS))
async def test_the_version_switch_renames_attributes(version: str) -> None:
    traced = Traced(conventions=version)
    await AgentHarness(model=weather_model(), tools=[lookup]).invoke_in_context(traced.context(), "x")
    attrs = dict(next(s for s in traced.spans if s.name.startswith("chat")).attributes or {})
    names = CONVENTIONS[version]
    assert attrs[names.provider] == "test"
    other = "gen_ai.system" if names.provider == "gen_ai.provider.name" else "gen_ai.provider.name"
    assert other not in attrs
    cache_write = {
        "latest": "gen_ai.usage.cache_write.input_tokens",
        "1.41": "gen_ai.usage.cache_creation.input_tokens",
        "1.36": None,
    }[version]
    if cache_write is None:
        assert not any("cache" in key for key in attrs)
    else:
        assert attrs[cache_write] == 10


def test_an_unknown_version_is_a_clear_error() -> None:
    from tinyagents_nb.harness import ConfigurationError

    with pytest.raises(ConfigurationError, match=r"1\.36"):
        OTelSink(conventions="0.9")


def test_without_the_extra_one_line_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # what a missing SDK looks like to import
    with pytest.raises(ImportError) as info:
        OTelSink()
    assert str(info.value) == "OpenTelemetry export needs the SDK: pip install 'tinyagents-nb[otel]'"


async def test_concurrent_tools_end_at_their_own_duration(traced: Traced) -> None:
    @tool
    async def quick() -> str:
        """Answer at once."""
        await anyio.sleep(0.01)
        return "quick"

    @tool
    async def slow() -> str:
        """Answer late."""
        await anyio.sleep(0.3)
        return "slow"

    model = ScriptedModel([ScriptedModel.tool_calls([("quick", {}), ("slow", {})]), "both"], model_name="m")
    await AgentHarness(model=model, tools=[quick, slow]).invoke_in_context(traced.context(), "x")
    fast, late = traced.one("execute_tool quick"), traced.one("execute_tool slow")
    assert fast.start_time is not None
    assert fast.end_time is not None
    assert late.end_time is not None
    # both results are reported after the slower call; the quick call's span still ends when it did
    assert (fast.end_time - fast.start_time) / 1e9 < 0.2
    assert (late.end_time - late.start_time) / 1e9 >= 0.29


async def test_a_budget_refusal_is_a_span_event_and_fails_the_run(traced: Traced) -> None:
    usage = Usage(input_tokens=900, output_tokens=100)
    calls = ScriptedModel.tool_call("lookup", {"city": "Oslo"})
    model = ScriptedModel(
        [ModelResponse(message=calls.message, usage=usage, finish_reason="tool_calls")], model_name="m"
    )
    policy = RunPolicy(limits=RunLimits(max_total_tokens=1_000))
    run, _ = await AgentHarness(model=model, tools=[lookup], policy=policy).invoke_with_status(traced.context(), "x")
    assert run.status == "failed"
    agent = traced.one("invoke_agent m")
    refused = [e for e in agent.events if e.name == "limit.reached"]
    assert [dict(e.attributes or {})["limit"] for e in refused] == ["total_tokens"]
    assert (agent.attributes or {})["error.type"] == "BudgetExceeded"
    assert traced.tree() == [(0, "invoke_agent m"), (1, "chat m"), (1, "execute_tool lookup")]  # no second request


async def test_a_fallback_is_a_failed_chat_span_then_one_for_the_backup(traced: Traced) -> None:
    primary = ScriptedModel([ProviderError("401 bad credentials", retryable=False)], model_name="primary")
    backup = ScriptedModel(["from the backup"], model_name="backup")
    policy = RunPolicy(retry=RetryPolicy.none(), fallback=FallbackPolicy([backup]))
    run = await AgentHarness(model=primary, policy=policy).invoke_in_context(traced.context(), "x")
    assert run.final_text == "from the backup"
    assert traced.tree() == [(0, "invoke_agent primary"), (1, "chat primary"), (1, "chat backup")]
    failed = traced.one("chat primary")
    assert failed.status.status_code is StatusCode.ERROR
    assert (failed.attributes or {})["error.type"] == "ProviderError"
    assert traced.one("chat backup").status.status_code is StatusCode.UNSET
    agent = traced.one("invoke_agent primary")
    assert [e.name for e in agent.events] == ["fallback.used"]
    assert dict(agent.events[0].attributes or {})["to_model"] == "backup"
    (duration,) = [p for p in traced.metrics()["gen_ai.client.operation.duration"] if "error.type" in p.attributes]
    assert duration.attributes["error.type"] == "ProviderError"


async def test_a_root_run_joins_the_callers_current_span(traced: Traced) -> None:
    tracer = traced.sink_provider.get_tracer("app")
    with tracer.start_as_current_span("nightly job"):
        await AgentHarness(model=ScriptedModel(["ok"], model_name="m")).invoke_in_context(traced.context(), "x")
    assert traced.tree() == [(0, "nightly job"), (1, "invoke_agent m"), (2, "chat m")]
