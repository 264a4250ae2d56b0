"""``OTelSink.otlp``: real OTLP/HTTP protobuf export to a 127.0.0.1 receiver, and a dead collector that costs a run nothing."""

from __future__ import annotations

import socket
import time

import pytest

from tinyagents_nb.harness import AgentHarness, RunConfig, RunContext, tool
from tinyagents_nb.harness.observability import OTelSink
from tinyagents_nb.harness.testkit import ScriptedModel

from .otlp_receiver import OTLPReceiver

pytestmark = pytest.mark.anyio


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def harness() -> AgentHarness[None]:
    model = ScriptedModel([ScriptedModel.tool_call("add", {"a": 2, "b": 3}, id="c-add"), "5"], model_name="m")
    return AgentHarness(model=model, tools=[add], name="adder")


async def run_with(sink: OTelSink, thread: str = "thread-1") -> None:
    ctx: RunContext[None] = RunContext(config=RunConfig(thread_id=thread))
    ctx.events.add_listener(sink)
    run = await harness().invoke_in_context(ctx, "2+3?")
    assert run.final_text == "5"


async def test_spans_and_metrics_arrive_as_otlp_protobuf_with_their_tree() -> None:
    with OTLPReceiver() as rx:
        sink = OTelSink.otlp(rx.url, service_name="notebook-tests")
        try:
            await run_with(sink)
            assert sink.force_flush()
            spans = rx.wait_for(4)
        finally:
            sink.shutdown()
        assert ("/v1/traces", "application/x-protobuf") in rx.requests
        assert {"gen_ai.client.token.usage", "gen_ai.client.operation.duration"} <= set(rx.metric_names)
    by_name = {s.name: s for s in spans}
    assert sorted(by_name) == ["chat m", "execute_tool add", "invoke_agent adder"]
    root = by_name["invoke_agent adder"]
    assert root.parent_span_id == b""
    assert root.resource["service.name"] == "notebook-tests"
    assert root.attributes["gen_ai.conversation.id"] == "thread-1"
    assert root.attributes["gen_ai.agent.name"] == "adder"
    tool_span = by_name["execute_tool add"]
    assert tool_span.parent_span_id == root.span_id
    assert tool_span.attributes["gen_ai.tool.call.id"] == "c-add"
    chats = [s for s in spans if s.name == "chat m"]
    assert len(chats) == 2
    assert all(c.parent_span_id == root.span_id and c.kind == 3 for c in chats)  # SPAN_KIND_CLIENT
    assert {c.attributes["gen_ai.response.finish_reasons"] for c in chats} == {("tool_calls",), ("stop",)}
    assert len({s.trace_id for s in spans}) == 1


async def test_the_standard_environment_variables_choose_the_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    with OTLPReceiver() as rx:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.url)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=agents")
        sink = OTelSink.otlp(metrics=False)
        try:
            await run_with(sink)
            sink.force_flush()
            spans = rx.wait_for(4)
        finally:
            sink.shutdown()
    assert {s.name for s in spans} == {"invoke_agent adder", "chat m", "execute_tool add"}
    assert rx.headers[0]["x-team"] == "agents"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_dead_collector_never_slows_or_fails_a_run() -> None:
    baseline = OTelSink.otlp(f"http://127.0.0.1:{free_port()}", timeout_s=1.0, metrics=False)
    started = time.perf_counter()
    for i in range(20):
        await run_with(baseline, thread=f"t{i}")
    elapsed = time.perf_counter() - started
    # Every export of these spans fails (connection refused, retried with backoff for up to 1 s each):
    # none of that happens on the run's thread, so twenty runs take far less than one export attempt.
    assert elapsed < 1.0, elapsed
    assert baseline.errors == 0
    assert baseline.open_runs == 0
    stopping = time.perf_counter()
    baseline.shutdown()  # the only place a dead collector can cost time: bounded by the exporter timeout
    assert time.perf_counter() - stopping < 5.0


@pytest.mark.parametrize(
    ("given", "spans_to"),
    [
        ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
        ("http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/traces"),
        ("http://127.0.0.1:6006/v1/traces", "http://127.0.0.1:6006/v1/traces"),  # Phoenix's documented form
        ("http://127.0.0.1:3000/api/public/otel", "http://127.0.0.1:3000/api/public/otel/v1/traces"),  # Langfuse's
    ],
)
def test_an_endpoint_is_a_base_url_or_the_full_traces_url(given: str, spans_to: str) -> None:
    sink = OTelSink.otlp(given, metrics=False)
    try:
        assert sink.endpoint == spans_to
    finally:
        sink.shutdown()
