"""llama-cpp-python's server, replayed from its real bytes (tests/fixtures/llama-cpp-python/).

Its habits differ from llama.cpp's ``llama-server``: no usage on streams (asked for or not), HTTP
500 for an assistant turn with ``"content": null``, a named ``tool_choice`` honoured while a
``json_schema`` response format is rejected (500), an overflow worded the OpenAI way on a unary
call, and, on a streamed call, a 200 whose event stream is empty. Each test serves the recorded
bytes from a 127.0.0.1 replay server and drives the public API; where the harness sends a request
the recording was made from, the test also checks that it still sends exactly that body, so a
change in request shapes shows up as a stale recording instead of passing against old bytes.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel

from tests.harness.recorded import Recording
from tests.harness.replay_server import ReplayServer, drain
from tinyagents_nb.harness import (
    AgentHarness,
    ContextLimitError,
    ModelPricing,
    ModelRequest,
    ProviderError,
    RetryPolicy,
    RunContext,
    RunPolicy,
    TextDelta,
    ToolSchema,
    UserMessage,
    tool,
)
from tinyagents_nb.harness.models import StreamAccumulator, StreamUsage
from tinyagents_nb.harness.providers import OpenAIChatModel, ProviderSpec
from tinyagents_nb.harness.testkit import EventRecorder

pytestmark = pytest.mark.anyio

HOST = "llama-cpp-python"
FAST = RetryPolicy(max_attempts=2, initial_backoff_s=0.001, max_backoff_s=0.002)
WEATHER_TOOL = ToolSchema(
    name="get_weather",
    description="The current weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def rec(name: str) -> Recording:
    return Recording.load(HOST, name)


class Weather(BaseModel):
    """The structured answer the structured-output recordings ask for."""

    city: str
    celsius: float


def model_on(server: ReplayServer) -> OpenAIChatModel:
    return OpenAIChatModel("smollm2", provider=ProviderSpec.compatible(base_url=server.base_url))


def priced() -> RunContext[None]:
    """A context that knows the local model's (made-up) price, so its calls are priced, not unknown."""
    ctx = RunContext()
    ctx.costs.register_price(
        "compatible:smollm2", ModelPricing(input_per_mtok=Decimal(1000), output_per_mtok=Decimal(1000))
    )
    return ctx


def ask(text: str, **fields: Any) -> ModelRequest:
    return ModelRequest(messages=[UserMessage(text=text)], temperature=0.0, **fields)


# ------------------------------------------------------------------------------------------- usage
async def test_a_unary_answer_reports_usage_and_it_is_taken_exactly(replay_server: ReplayServer) -> None:
    recording = rec("unary_text")
    recording.enqueue(replay_server)
    response = await model_on(replay_server).invoke(ask("Say hi.", max_output_tokens=8))
    assert replay_server.requests[0].body == recording.request
    reported = recording.json()["usage"]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (
        reported["prompt_tokens"],
        reported["completion_tokens"],
    )
    assert not response.usage.estimated
    assert response.message.text == recording.json()["choices"][0]["message"]["content"]


@pytest.mark.parametrize("name", ["stream_include_usage", "stream_plain"])
async def test_its_streams_carry_no_usage_even_when_asked(replay_server: ReplayServer, name: str) -> None:
    recording = rec(name)
    assert not any(event.get("usage") for event in recording.events())  # the habit, in the real bytes
    recording.enqueue(replay_server)
    items, error = await drain(model_on(replay_server), ask("Say hi.", max_output_tokens=8))
    assert error is None
    if name == "stream_include_usage":
        assert replay_server.requests[0].body == recording.request
    text = "".join(item.text for item in items if isinstance(item, TextDelta))
    assert text == "".join(str(e["choices"][0]["delta"].get("content") or "") for e in recording.events())
    assert not [item for item in items if isinstance(item, StreamUsage)]  # nothing invented at the wire


async def test_a_streamed_run_records_an_estimate_marked_as_such_and_prices_it(replay_server: ReplayServer) -> None:
    recording = rec("stream_include_usage")
    recording.enqueue(replay_server)
    ctx = priced()
    harness: AgentHarness[None] = AgentHarness(
        model=model_on(replay_server), policy=RunPolicy(max_output_tokens=8, temperature=0.0)
    )
    run, _ = await harness.invoke_with_status(ctx, "Say hi.", streaming=True)
    assert run.status == "completed", run.error
    assert replay_server.requests[0].body == recording.request
    assert run.usage.estimated
    assert run.usage.input_tokens > 0
    assert run.usage.output_tokens > 0  # the 9 deltas that arrived, estimated: not zero
    totals = ctx.costs.total()
    assert totals.known_usd is not None
    assert totals.known_usd > 0


# -------------------------------------------------------------------------------- content: null
def like_the_server(body: Any) -> tuple[int, bytes | list[bytes], dict[str, str]]:
    """Answer as the recorded server did: a tool call first, a 500 for ``"content": null`` later."""
    assistants = [m for m in body["messages"] if m["role"] == "assistant"]
    if not assistants:
        return rec("tool_choice_named").answer()
    if any(m.get("content") is None for m in assistants):
        return rec("tool_result_content_null").answer()
    return rec("tool_result_content_empty").answer()


def test_the_recorded_rejection_is_about_the_null_content() -> None:
    recording = rec("tool_result_content_null")
    assert recording.status == 500
    message = recording.json()["error"]["message"]
    assert "'content'), 'msg': 'Input should be a valid string', 'input': None" in message


async def test_a_real_tool_loop_never_sends_null_content_so_the_server_accepts_it(replay_server: ReplayServer) -> None:
    replay_server.respond_with(like_the_server)

    @tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        return "3 C and light snow"

    harness: AgentHarness[None] = AgentHarness(
        model=model_on(replay_server), tools=[get_weather], policy=RunPolicy(retry=FAST)
    )
    run, _ = await harness.invoke_with_status(priced(), "What is the weather in Oslo?")
    assert run.status == "completed", run.error
    _first, second = (r.body for r in replay_server.requests)
    (assistant,) = [m for m in second["messages"] if m["role"] == "assistant"]
    assert assistant["content"] == ""
    assert (
        assistant["tool_calls"][0]["id"]
        == rec("tool_choice_named").json()["choices"][0]["message"]["tool_calls"][0]["id"]
    )  # the server's own call id goes back


async def test_the_null_content_rejection_is_a_readable_provider_error(replay_server: ReplayServer) -> None:
    rec("tool_result_content_null").enqueue(replay_server)
    with pytest.raises(ProviderError) as info:
        await model_on(replay_server).invoke(ask("x"))
    assert info.value.status == 500
    assert "Input should be a valid string" in str(info.value)


# ------------------------------------------------------------------------------------ tool_choice
@pytest.mark.parametrize("name", ["tool_choice_named", "tool_choice_named_stream"])
async def test_a_named_tool_choice_comes_back_as_one_call(replay_server: ReplayServer, name: str) -> None:
    recording = rec(name)
    recording.enqueue(replay_server)
    model = model_on(replay_server)
    request = ask(
        "What is the weather in Oslo?", tools=(WEATHER_TOOL,), tool_choice="get_weather", max_output_tokens=32
    )
    if name.endswith("_stream"):
        items, error = await drain(model, request)
        assert error is None
        acc = StreamAccumulator()
        for item in items:
            acc.add(item)
        response = acc.response()
    else:
        response = await model.invoke(request)
    assert replay_server.requests[0].body == recording.request
    (call,) = response.message.tool_calls
    assert call.name == "get_weather"
    assert call.id.startswith("call__0_get_weather_cmpl-")
    assert call.arguments == {"city": "Oslo"}


# ------------------------------------------------------------------------------- structured output
def recorded_arguments(recording: Recording) -> str:
    """The tool call's argument text as the server sent it: whole, or in stream fragments."""
    if not recording.chunked:
        return str(recording.json()["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"])
    return "".join(
        call["function"]["arguments"]
        for event in recording.events()
        for choice in event["choices"]
        for call in choice["delta"].get("tool_calls") or ()
    )


def structured_host(streaming: bool) -> Any:
    """Answer as the recorded server did: ``json_schema`` rejected, a forced tool call honoured."""
    suffix = "_stream" if streaming else ""

    def answer(body: Any) -> tuple[int, bytes | list[bytes], dict[str, str]]:
        if "response_format" in body:
            return rec(f"structured_json_schema{suffix}").answer()
        return rec(f"structured_tool{suffix}").answer()

    return answer


@pytest.mark.parametrize("streaming", [False, True])
async def test_structured_output_falls_back_to_the_tool_call_this_host_supports_and_remembers(
    replay_server: ReplayServer, streaming: bool
) -> None:
    suffix = "_stream" if streaming else ""
    rejected, honoured = rec(f"structured_json_schema{suffix}"), rec(f"structured_tool{suffix}")
    assert rejected.status == 500
    assert "Input should be 'text' or 'json_object'" in rejected.json()["error"]["message"]
    replay_server.respond_with(structured_host(streaming))
    model = model_on(replay_server)
    policy = RunPolicy(retry=FAST, max_output_tokens=48)
    harness: AgentHarness[None] = AgentHarness(model=model, output_type=Weather, policy=policy)
    prompt = "The weather in Rome is 21 C. Report it."
    run, _ = await harness.invoke_with_status(priced(), prompt, streaming=streaming)
    assert run.status == "completed", run.error
    sent = [r.body for r in replay_server.requests]
    assert sent[0] == rejected.request  # the default for a compatible host, as recorded
    assert sent[-1] == honoured.request  # the fallback, as recorded
    assert len(sent) == 2  # the rejection is not retried: it says the host lacks the strategy
    assert run.structured is not None
    assert run.structured.value == Weather(**json.loads(recorded_arguments(honoured)))

    again, _ = await AgentHarness(model=model, output_type=Weather, policy=policy).invoke_with_status(
        priced(), prompt, streaming=streaming
    )
    assert again.status == "completed", again.error
    assert [r.body for r in replay_server.requests][2:] == [honoured.request]  # remembered: straight to the tool


# -------------------------------------------------------------------------------------- overflow
async def test_a_unary_overflow_is_a_context_limit_error_with_the_servers_counts(replay_server: ReplayServer) -> None:
    recording = rec("overflow")
    recording.enqueue(replay_server)
    with pytest.raises(ContextLimitError) as info:
        await model_on(replay_server).invoke(ModelRequest(messages=[UserMessage(text="x")]))
    message = recording.json()["error"]["message"]
    assert "maximum context length is 2048 tokens" in message
    assert "you requested 2623 tokens" in message
    assert (info.value.estimated_tokens, info.value.limit_tokens) == (2623, 2048)


async def test_a_streamed_overflow_is_an_empty_200_and_still_a_context_limit_error(replay_server: ReplayServer) -> None:
    """The server fails inside its event stream: a 200 with no event at all. Only a unary call says why."""
    empty, worded = rec("overflow_stream"), rec("overflow")
    assert (empty.status, empty.body, empty.cut) == (200, b"", False)
    empty.enqueue(replay_server)
    replay_server.enqueue(hang_up=True)  # the server closes the connection the empty stream came on
    worded.enqueue(replay_server)
    request = ModelRequest(messages=[UserMessage(text="x")], max_output_tokens=8)
    items, error = await drain(model_on(replay_server), request)
    assert items == []
    assert isinstance(error, ContextLimitError), error
    assert (error.estimated_tokens, error.limit_tokens) == (2623, 2048)
    first, *unary = (r.body for r in replay_server.requests)
    assert first["stream"] is True
    assert len(unary) == 2  # asked once, and again on a fresh connection
    for second in unary:
        assert "stream" not in second
        assert "stream_options" not in second


async def test_a_streamed_run_over_the_window_compacts_and_completes(replay_server: ReplayServer) -> None:
    """The empty 200 used to end the run as an interrupted stream; now reactive compaction runs."""
    long_prompt = len(json.dumps(rec("overflow").request["messages"]))

    def host(body: Any) -> tuple[int, bytes | list[bytes], dict[str, str]]:
        over = len(json.dumps(body["messages"])) >= long_prompt
        if body.get("stream"):
            return rec("overflow_stream" if over else "stream_include_usage").answer()
        return rec("overflow" if over else "unary_text").answer()

    replay_server.respond_with(host)
    history = [UserMessage(text=f"note {i}: " + "The quick brown fox jumps over the lazy dog. " * 30) for i in range(9)]
    ctx = priced()
    events = EventRecorder(ctx.events)
    harness: AgentHarness[None] = AgentHarness(
        model=model_on(replay_server), policy=RunPolicy(retry=FAST, max_output_tokens=8)
    )
    run, _ = await harness.invoke_with_status(ctx, history, streaming=True)
    assert run.status == "completed", run.error
    reactive = [e for e in events.of_kind("context.pressure") if e.action == "reactive"]  # type: ignore[attr-defined]
    assert len(reactive) == 1
    sent = replay_server.requests
    assert [bool(r.body.get("stream")) for r in sent] == [True, False, True]  # stream, why?, compacted stream
    assert len(json.dumps(sent[-1].body["messages"])) < long_prompt


async def test_an_empty_200_stream_whose_unary_retry_answers_yields_that_answer(replay_server: ReplayServer) -> None:
    rec("overflow_stream").enqueue(replay_server)
    answer = rec("unary_text")
    answer.enqueue(replay_server)
    items, error = await drain(model_on(replay_server), ask("Say hi.", max_output_tokens=8))
    assert error is None
    acc = StreamAccumulator()
    for item in items:
        acc.add(item)
    response = acc.response()
    assert response.message.text == answer.json()["choices"][0]["message"]["content"]
    assert response.usage.input_tokens == answer.json()["usage"]["prompt_tokens"]
    assert response.finish_reason == "length"
