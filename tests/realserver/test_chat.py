"""The harness against a real llama.cpp server on the Chat Completions wire.

Each check compares what the harness reports with what the server sent (tests/realserver/wire.py
keeps the bytes): usage, streamed text, multi-turn transcripts, a stop mid-stream (the server's
``/slots`` must show the generation stopped), context overflow with the server's own token counts
(and reactive compaction recovering from it), structured output and a real tool-call round trip.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from pydantic import BaseModel

from tests.realserver.conftest import ALIAS, N_CTX, LlamaServer
from tests.realserver.wire import Tee, client
from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    ChatModel,
    ContextLimitError,
    ModelDelta,
    ModelRequest,
    RunContext,
    RunPolicy,
    ToolCall,
    ToolMessage,
    UserMessage,
    tool,
)
from tinyagents_nb.harness.providers import OpenAIChatModel, ProviderSpec
from tinyagents_nb.harness.testkit import EventRecorder

pytestmark = [pytest.mark.realserver, pytest.mark.anyio, pytest.mark.timeout(120)]

PLAIN = RunPolicy(temperature=0.0, max_output_tokens=24)


@pytest.fixture
async def tee() -> AsyncIterator[Tee]:
    recorder = Tee()
    yield recorder
    await recorder.aclose()


def local(llama: LlamaServer, tee: Tee) -> OpenAIChatModel:
    return OpenAIChatModel(ALIAS, provider=ProviderSpec.compatible(base_url=llama.base_url), http_client=client(tee))


def server_usage(tee: Tee, index: int = -1) -> tuple[int, int, int]:
    raw = tee.exchanges[index].openai_usage()
    cached = int((raw.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return int(raw["prompt_tokens"]), int(raw["completion_tokens"]), cached


def usage_of(usage: object) -> tuple[int, int, int]:
    return (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens)  # type: ignore[attr-defined]


async def test_invoke_reports_the_servers_usage_and_text(llama: LlamaServer, tee: Tee) -> None:
    model = local(llama, tee)
    response = await model.invoke(
        ModelRequest(messages=[UserMessage(text="What is the capital of France?")], temperature=0, max_output_tokens=16)
    )
    assert usage_of(response.usage) == server_usage(tee)
    assert response.usage.input_tokens > 5
    assert response.message.text == tee.exchanges[-1].openai_text()
    assert response.message.text.strip()


async def test_streaming_text_and_usage_equal_what_the_server_sent(llama: LlamaServer, tee: Tee) -> None:
    harness = AgentHarness(model=local(llama, tee), policy=RunPolicy(temperature=0.0, max_output_tokens=40))
    stream = harness.invoke_streaming("Name three colours of the rainbow.")
    deltas = [event.delta.text for event in [e async for e in stream] if isinstance(event, ModelDelta)]  # type: ignore[attr-defined]
    run = await stream
    await harness.aclose()
    assert run.status == "completed"
    (exchange,) = tee.exchanges
    assert exchange.body["stream"] is True
    assert exchange.body["stream_options"] == {"include_usage": True}
    assert len(deltas) > 3
    assert "".join(deltas) == exchange.openai_text() == run.final_text
    assert usage_of(run.usage) == server_usage(tee)


async def test_multi_turn_sends_the_whole_conversation_and_sums_usage(llama: LlamaServer, tee: Tee) -> None:
    harness = AgentHarness(model=local(llama, tee), policy=PLAIN, system_prompt="You are brief.")
    first = await harness.invoke("My name is Ada. Say hello.")
    second = await harness.invoke([*first.messages, UserMessage(text="What is my name?")])
    await harness.aclose()
    sent = tee.exchanges[-1].body["messages"]
    assert [m["role"] for m in sent][-3:] == ["user", "assistant", "user"]
    assert sent[0] == {"role": "system", "content": "You are brief."}
    assert sent[-2]["content"] == first.final_text
    assert usage_of(first.usage) == server_usage(tee, 0)
    assert usage_of(second.usage) == server_usage(tee, 1)
    assert second.usage.input_tokens > first.usage.input_tokens


async def test_stop_mid_stream_ends_the_run_within_a_second_and_the_server_stops(llama: LlamaServer, tee: Tee) -> None:
    harness = AgentHarness(model=local(llama, tee), policy=RunPolicy(temperature=0.8, max_output_tokens=1500))
    stream = harness.invoke_streaming_with_status("Write a very long story about a lighthouse keeper.")
    seen = 0
    async for event in stream:
        if isinstance(event, ModelDelta):
            seen += 1
            if seen == 10:
                break
    assert llama.busy_slots() == 1  # still generating when the stop is pressed
    pressed = time.monotonic()
    stream.cancel("stop button")
    run = await stream
    ended = time.monotonic() - pressed
    idle = llama.wait_idle(timeout_s=1.0)
    await harness.aclose()
    assert run.status == "cancelled"
    assert ended < 1.0
    assert idle < 1.0
    slot = llama.get("/slots")[0]
    assert slot["is_processing"] is False
    decoded = len(tee.exchanges[-1].events())
    assert decoded < 200  # nowhere near the 1500 tokens asked for: generation stopped with the stream


async def call(model: ChatModel, request: ModelRequest, *, streaming: bool) -> None:
    """One call, streamed to the end or not."""
    if streaming:
        async for _ in model.stream(request):
            pass
    else:
        await model.invoke(request)


def oversized() -> str:
    return "Please summarise the following notes. " + " ".join(f"note {i}: the sky is blue." for i in range(420))


@pytest.mark.parametrize("streaming", [False, True])
async def test_an_oversized_prompt_is_a_context_limit_error_with_the_servers_counts(
    llama: LlamaServer, tee: Tee, streaming: bool
) -> None:
    model = local(llama, tee)
    request = ModelRequest(messages=[UserMessage(text=oversized())], max_output_tokens=16)
    with pytest.raises(ContextLimitError) as info:
        await call(model, request, streaming=streaming)
    await model.aclose()
    error = tee.exchanges[-1].events()[0]["error"]
    assert tee.exchanges[-1].status == 400
    assert info.value.limit_tokens == error["n_ctx"] == N_CTX
    assert info.value.estimated_tokens == error["n_prompt_tokens"] > N_CTX


async def test_a_history_over_the_window_is_compacted_after_the_servers_refusal(llama: LlamaServer, tee: Tee) -> None:
    """No window declared: only the server's answer can start compaction, and the run then completes."""
    history = [UserMessage(text=f"Fact {i}: " + "the river runs to the sea, " * 12) for i in range(30)]
    history.append(UserMessage(text="Say OK."))
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    harness = AgentHarness(model=local(llama, tee), policy=RunPolicy(temperature=0.0, max_output_tokens=8))
    run, _ = await harness.invoke_with_status(ctx, history)
    await harness.aclose()
    assert run.status == "completed", run.error
    assert [x.status for x in tee.exchanges] == [400, 200]
    assert tee.exchanges[0].events()[0]["error"]["type"] == "exceed_context_size_error"
    assert [e.action for e in rec.of_kind("context.pressure")].count("reactive") == 1  # type: ignore[attr-defined]
    assert server_usage(tee)[0] <= N_CTX


class Weather(BaseModel):
    city: str
    celsius: float


async def test_structured_output_by_default_in_one_call(llama: LlamaServer, tee: Tee) -> None:
    harness = AgentHarness(model=local(llama, tee), output_type=Weather, policy=replace(PLAIN, max_output_tokens=64))
    run = await harness.invoke("It is 21 degrees in Rome. Report the weather as JSON.")
    await harness.aclose()
    assert run.structured is not None
    assert isinstance(run.structured.value, Weather)
    assert run.model_calls == 1
    assert tee.exchanges[0].body["response_format"]["type"] == "json_schema"
    assert "tool_choice" not in tee.exchanges[0].body  # llama-server ignores a named tool_choice


def weather_text(city: str) -> str:
    return f"3 C and light snow in {city}."


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return weather_text(city)


def few_shot() -> list[object]:
    """Two earlier tool rounds: the 135M model calls a tool only after seeing it done."""
    out: list[object] = []
    for n, city in enumerate(("Paris", "Rome")):
        call = ToolCall(id=f"call_{n}", name="get_weather", arguments={"city": city})
        out += [
            UserMessage(text=f"What is the weather in {city}?"),
            AssistantMessage(tool_calls=(call,)),
            ToolMessage(tool_call_id=call.id, name="get_weather", text=f"12 C and sunny in {city}."),
            AssistantMessage(text=f"It is 12 C and sunny in {city}."),
        ]
    out.append(UserMessage(text="What is the weather in Oslo?"))
    return out


# Seeds tried in order; the first ones called the tool on the x86-64-v3 build (seeds 0, 5, 8, 10 and 11 of
# 0-11 did there, about two in five). Another SIMD path samples other tokens for the same seed.
TOOL_SEEDS = (5, 11, 0, 8, 10, 1, 2, 3, 4, 6, 7, 9, 12, 13, 14, 15)


@pytest.mark.timeout(600)
async def test_a_real_tool_call_round_trip(llama: LlamaServer) -> None:
    """A tool call the real model makes goes round: the server's call id kept, the result sent back.

    The 135M model calls a tool for some sampling seeds only, and which seeds depends on the CPU's
    SIMD path (the same seed samples other tokens on AVX2 and AVX-512 builds). llama-server refuses
    a custom grammar alongside tools and its ``tool_choice: "required"`` grammar still lets the model
    write text first (it never got to the call), so the output cannot be forced. Instead the run is
    tried with a fixed list of seeds until one calls the tool: a seed that answers in text must
    still complete cleanly, the test fails unless some seed calls the tool, and every call made is
    checked on the wire (the call id kept, ``"content": ""`` sent back, the result the tool gave
    for the arguments the model sent, usage equal to the server's). The model's choice of city is
    quality, not protocol, and is not asserted.
    """
    for seed in TOOL_SEEDS:
        tee = Tee()
        policy = RunPolicy(temperature=0.7, max_output_tokens=64, model_settings={"seed": seed})
        harness = AgentHarness(model=local(llama, tee), tools=[get_weather], policy=policy)
        run = await harness.invoke(few_shot())  # type: ignore[arg-type]
        await harness.aclose()
        await tee.aclose()
        assert run.status == "completed", (seed, run.error)
        assert [x.body["seed"] for x in tee.exchanges] == [seed] * len(tee.exchanges)
        calls = check_round_trips(tee)
        assert run.tool_calls == calls
        total = [sum(x) for x in zip(*(server_usage(tee, i) for i in range(len(tee.exchanges))), strict=True)]
        assert list(usage_of(run.usage)) == total
        if calls:
            return
    pytest.fail(f"no seed of {TOOL_SEEDS} made the model call the tool")


def check_round_trips(tee: Tee) -> int:
    """Check every tool call the server answered with went back on the next request; return how many."""
    calls = 0
    for index, exchange in enumerate(tee.exchanges):
        message = exchange.events()[0]["choices"][0]["message"]
        wire_calls = message.get("tool_calls") or []
        if not wire_calls:
            assert index == len(tee.exchanges) - 1  # a text answer ends the run
            continue
        calls += len(wire_calls)
        sent = tee.exchanges[index + 1].body["messages"]
        assistant, results = sent[-1 - len(wire_calls)], sent[-len(wire_calls) :]
        assert [c["id"] for c in assistant["tool_calls"]] == [c["id"] for c in wire_calls]  # the server's ids kept
        assert assistant["content"] == ""  # never null: llama-cpp-python's server rejects null
        for call, result in zip(wire_calls, results, strict=True):
            assert call["function"]["name"] == "get_weather"
            assert (result["role"], result["tool_call_id"]) == ("tool", call["id"])
            arguments = json.loads(call["function"]["arguments"])
            if isinstance(arguments.get("city"), str):
                assert result["content"] == weather_text(arguments["city"])
            else:  # arguments that do not validate go back as an error the model can read
                assert "city" in result["content"]
    return calls
