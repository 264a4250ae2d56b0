"""Tool calls a provider sends without an id get unique invented ids; ids it sends are kept verbatim.

Replays id-less calls (as some local servers and proxies send them) from a real 127.0.0.1 server,
through the streaming and unary paths of both adapters and through the whole agent loop.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.harness.anthropic_samples import event, message_body, stream, tool_block
from tests.harness.replay_server import ReplayServer, chat_completion, chunk, sse_done, sse_text_chunks
from tinyagents_nb.harness import (
    AgentHarness,
    AnthropicModel,
    AssistantMessage,
    ModelRequest,
    RetryPolicy,
    RunContext,
    RunPolicy,
    ToolCallDelta,
    ToolMessage,
    UserMessage,
    tool,
)
from tinyagents_nb.harness.models import ModelResponse, ModelStreamItem, StreamAccumulator, StreamFinish
from tinyagents_nb.harness.providers import OpenAIChatModel

pytestmark = pytest.mark.anyio

KEY = "sk-test-CALLIDS-0a1b2c3d4e5f6a7b"
INVENTED = re.compile(r"call_[0-9a-f]{12}_\d+")
FAST = RetryPolicy(max_attempts=2, initial_backoff_s=0.001, max_backoff_s=0.002)


@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: 21C"


def request() -> ModelRequest:
    return ModelRequest(messages=[UserMessage(text="weather?")])


def fold(items: list[ModelStreamItem]) -> ModelResponse:
    acc = StreamAccumulator()
    for item in items:
        acc.add(item)
    return acc.response()


async def collect(stream: Any) -> list[ModelStreamItem]:
    return [item async for item in stream]


# ------------------------------------------------------------------------------------------ OpenAI wire
def idless_completion(*cities: str, ids: tuple[str | None, ...] = ()) -> dict[str, Any]:
    """A completion whose tool calls carry no ``id`` key (unless ``ids`` gives one)."""
    body = chat_completion(tool_calls=[("x", "weather", json.dumps({"city": city})) for city in cities])
    for position, call in enumerate(body["choices"][0]["message"]["tool_calls"]):
        given = ids[position] if position < len(ids) else None
        if given is None:
            del call["id"]
        else:
            call["id"] = given
    return body


def idless_stream(*cities: str, ids: tuple[str | None, ...] = ()) -> list[Any]:
    """Streamed tool calls without ``id`` (unless ``ids`` gives one): an opener and two fragments each."""
    out: list[Any] = [chunk({"role": "assistant", "content": None})]
    for index, city in enumerate(cities):
        opener: dict[str, Any] = {"index": index, "type": "function", "function": {"name": "weather", "arguments": ""}}
        if index < len(ids) and ids[index] is not None:
            opener["id"] = ids[index]
        out.append(chunk({"tool_calls": [opener]}))
        args = json.dumps({"city": city})
        for piece in (args[:5], args[5:]):
            out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    out += [chunk({}, finish_reason="tool_calls"), sse_done()]
    return out


async def test_openai_unary_invents_distinct_ids_per_response(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, idless_completion("Oslo", "Rome"))
    replay_server.enqueue(200, idless_completion("Oslo", "Rome"))
    async with OpenAIChatModel("gpt-4o-mini", base_url=replay_server.base_url, api_key=KEY) as model:
        first = (await model.invoke(request())).message.tool_calls
        second = (await model.invoke(request())).message.tool_calls
    ids = [call.id for call in (*first, *second)]
    assert all(INVENTED.fullmatch(call_id) for call_id in ids), ids
    assert len(set(ids)) == 4  # never call_0 twice
    assert [call_id.rsplit("_", 1)[1] for call_id in ids] == ["0", "1", "0", "1"]  # the position stays readable
    assert first[0].id.rsplit("_", 1)[0] == first[1].id.rsplit("_", 1)[0]  # one stem per response
    assert [dict(call.arguments) for call in first] == [{"city": "Oslo"}, {"city": "Rome"}]


async def test_openai_stream_invents_one_id_per_call_shared_by_its_deltas(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, idless_stream("Oslo", "Rome"))
    replay_server.enqueue(200, idless_stream("Oslo", "Rome"))
    async with OpenAIChatModel("gpt-4o-mini", base_url=replay_server.base_url, api_key=KEY) as model:
        first = await collect(model.stream(request()))
        second = await collect(model.stream(request()))
    finals = []
    for items in (first, second):
        deltas = [item for item in items if isinstance(item, ToolCallDelta)]
        calls = fold(items).message.tool_calls
        assert [dict(call.arguments) for call in calls] == [{"city": "Oslo"}, {"city": "Rome"}]
        for position, call in enumerate(calls):
            assert INVENTED.fullmatch(call.id), call.id
            # every delta of the call names it alike (or not at all, as the wire's later fragments do)
            assert {d.id for d in deltas if d.index == position} - {None} == {call.id}
        finals += [call.id for call in calls]
    assert len(set(finals)) == 4


@pytest.mark.parametrize("streaming", [False, True])
async def test_openai_provider_ids_are_kept_verbatim_next_to_invented_ones(
    replay_server: ReplayServer, streaming: bool
) -> None:
    ids = ("call_0", None)  # a host id that looks like an old invented one is still the host's
    replay_server.enqueue(
        200, idless_stream("Oslo", "Rome", ids=ids) if streaming else idless_completion("Oslo", "Rome", ids=ids)
    )
    async with OpenAIChatModel("gpt-4o-mini", base_url=replay_server.base_url, api_key=KEY) as model:
        if streaming:
            response = fold(await collect(model.stream(request())))
        else:
            response = await model.invoke(request())
    calls = response.message.tool_calls
    assert calls[0].id == "call_0"
    assert INVENTED.fullmatch(calls[1].id), calls[1].id


@pytest.mark.parametrize("streaming", [False, True])
async def test_two_turns_of_idless_calls_pair_each_result_with_its_call(
    replay_server: ReplayServer, streaming: bool
) -> None:
    if streaming:
        replay_server.enqueue(200, idless_stream("Oslo"))
        replay_server.enqueue(200, idless_stream("Rome"))
        replay_server.enqueue(200, sse_text_chunks(["Both 21C."]))
    else:
        replay_server.enqueue(200, idless_completion("Oslo"))
        replay_server.enqueue(200, idless_completion("Rome"))
        replay_server.enqueue(200, chat_completion("Both 21C."))
    model = OpenAIChatModel("gpt-4o-mini", base_url=replay_server.base_url, api_key=KEY)
    harness: AgentHarness[None] = AgentHarness(model=model, tools=[weather], policy=RunPolicy(retry=FAST))
    run, _ = await harness.invoke_with_status(RunContext(), "Oslo, then Rome?", streaming=streaming)
    await model.aclose()
    assert run.status == "completed", run.error
    assert run.final_text == "Both 21C."
    calls = [call for m in run.messages if isinstance(m, AssistantMessage) for call in m.tool_calls]
    results = [m for m in run.messages if isinstance(m, ToolMessage)]
    assert len(calls) == 2
    assert calls[0].id != calls[1].id  # both were the first call of their turn
    assert [r.tool_call_id for r in results] == [c.id for c in calls]
    assert [r.text for r in results] == ["Oslo: 21C", "Rome: 21C"]
    # what went back to the host pairs the same way
    last = replay_server.requests[2].body["messages"]
    sent_calls = [c["id"] for m in last if m["role"] == "assistant" for c in m.get("tool_calls", ())]
    assert sent_calls == [c.id for c in calls]
    assert [m["tool_call_id"] for m in last if m["role"] == "tool"] == sent_calls


# ------------------------------------------------------------------------------------------ Anthropic
def anthropic(server: ReplayServer) -> AnthropicModel:
    return AnthropicModel("claude-sonnet-4-5", base_url=server.base_url, api_key=KEY)


def idless_tool_block(index: int, city: str) -> list[bytes]:
    start = {"type": "tool_use", "name": "weather", "input": {}}  # no "id", as some compatible proxies send it
    args = json.dumps({"city": city})
    return [
        event("content_block_start", {"index": index, "content_block": start}),
        event("content_block_delta", {"index": index, "delta": {"type": "input_json_delta", "partial_json": args}}),
        event("content_block_stop", {"index": index}),
    ]


async def test_anthropic_stream_invents_ids_by_call_position_and_keeps_sent_ones(replay_server: ReplayServer) -> None:
    blocks = (tool_block(0, "toolu_a", "weather", ['{"city": "Oslo"}']), idless_tool_block(1, "Rome"))
    replay_server.enqueue(200, stream(*blocks, stop_reason="tool_use"))
    replay_server.enqueue(200, stream(idless_tool_block(0, "Oslo"), stop_reason="tool_use"))
    model = anthropic(replay_server)
    first = await collect(model.stream(request()))
    second = await collect(model.stream(request()))
    await model.aclose()
    calls = fold(first).message.tool_calls
    assert calls[0].id == "toolu_a"
    assert INVENTED.fullmatch(calls[1].id), calls[1].id
    assert calls[1].id.endswith("_1")  # the call's position, not its content-block index
    opener = next(d for d in first if isinstance(d, ToolCallDelta) and d.index == 1 and d.name)
    assert opener.id == calls[1].id
    again = fold(second).message.tool_calls[0].id
    assert INVENTED.fullmatch(again)
    assert again != calls[1].id


async def test_anthropic_unary_invents_ids_and_keeps_sent_ones(replay_server: ReplayServer) -> None:
    content = [
        {"type": "tool_use", "name": "weather", "input": {"city": "Oslo"}},
        {"type": "tool_use", "id": "toolu_b", "name": "weather", "input": {"city": "Rome"}},
    ]
    replay_server.enqueue(200, message_body(content, stop_reason="tool_use"))
    replay_server.enqueue(200, message_body(content, stop_reason="tool_use"))
    model = anthropic(replay_server)
    first = (await model.invoke(request())).message.tool_calls
    second = (await model.invoke(request())).message.tool_calls
    await model.aclose()
    assert [call.id for call in first][1:] == [call.id for call in second][1:] == ["toolu_b"]
    assert INVENTED.fullmatch(first[0].id), first[0].id
    assert INVENTED.fullmatch(second[0].id), second[0].id
    assert first[0].id != second[0].id


# ------------------------------------------------------------------------------------------ accumulator
def test_accumulator_invents_unique_ids_for_adapters_that_send_none() -> None:
    ids = []
    for _ in range(2):
        acc = StreamAccumulator()
        acc.add(ToolCallDelta(index=0, name="weather", arguments='{"city": '))
        acc.add(ToolCallDelta(index=0, arguments='"Oslo"}'))
        acc.add(StreamFinish(finish_reason="tool_calls"))
        (call,) = acc.response().message.tool_calls
        assert dict(call.arguments) == {"city": "Oslo"}
        assert acc.response().message.tool_calls[0].id == call.id  # stable for the response
        ids.append(call.id)
    assert all(INVENTED.fullmatch(call_id) for call_id in ids), ids
    assert ids[0] != ids[1]


def test_accumulator_keeps_a_provider_id_sent_after_the_first_fragment() -> None:
    acc = StreamAccumulator()
    acc.add(ToolCallDelta(index=0, id="call_invented_0", name="weather"))
    acc.add(ToolCallDelta(index=0, id="host-7", arguments="{}"))
    acc.add(ToolCallDelta(index=0, arguments=""))
    assert acc.response().message.tool_calls[0].id == "host-7"
