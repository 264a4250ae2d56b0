from __future__ import annotations

import contextlib
import datetime as dt
import json
import subprocess
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from tests.harness.replay_server import (
    ReplayServer,
    chat_completion,
    chunk,
    drain,
    error_body,
    sse_done,
    sse_text_chunks,
    sse_tool_call_chunks,
    usage_body,
)
from tinyagents_nb.harness import (
    AssistantMessage,
    ConfigurationError,
    ContextLimitError,
    ImageRef,
    JsonBlock,
    Message,
    ModelNotFound,
    ModelRequest,
    ProviderError,
    SystemMessage,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolMessage,
    ToolSchema,
    Usage,
    UserMessage,
)
from tinyagents_nb.harness.models import ModelStreamItem, ResponseFormat, StreamAccumulator, StreamFinish, StreamUsage
from tinyagents_nb.harness.providers import OpenAIChatModel, ProviderSpec
from tinyagents_nb.harness.providers._openai import _connect_hint
from tinyagents_nb.harness.providers.wire import SSEDecoder, SSEEvent, normalize_usage, parse_retry_after, scrub

pytestmark = pytest.mark.anyio

KEY = "sk-test-SECRET-4f9a8b7c6d5e4f3a2b1c"


def make(server: ReplayServer, **kwargs: Any) -> OpenAIChatModel:
    kwargs.setdefault("api_key", KEY)
    return OpenAIChatModel("gpt-4o-mini", base_url=server.base_url, **kwargs)


def ask(text: str = "hi", **kwargs: Any) -> ModelRequest:
    return ModelRequest(messages=[UserMessage(text=text)], **kwargs)


def texts(items: Sequence[ModelStreamItem]) -> list[str]:
    return [item.text for item in items if isinstance(item, TextDelta)]


def leak_text(err: BaseException) -> str:
    """Everything an error could show: str, repr, args, hint, and the formatted chain."""
    parts = [str(err), repr(err), repr(err.args), str(getattr(err, "hint", ""))]
    parts += traceback.format_exception(err)
    cause: BaseException | None = err
    while cause is not None:
        parts.append(repr(cause))
        cause = cause.__cause__ or cause.__context__
    return "\n".join(parts)


# ------------------------------------------------------------------------------------------ unary
async def test_unary_text(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, chat_completion("Hello there", usage=usage_body(10, 5)))
    async with make(replay_server) as model:
        response = await model.invoke(ask())
    assert response.message.text == "Hello there"
    assert response.message.tool_calls == ()
    assert response.finish_reason == "stop"
    assert response.model == "gpt-4o-mini-2024-07-18"  # the served snapshot, not the requested alias
    assert response.provider == "openai"
    assert response.usage == Usage(input_tokens=10, output_tokens=5)
    (sent,) = replay_server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"] == "application/json"
    assert sent.body == {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


async def test_unary_tool_calls_keep_raw_non_json_arguments(replay_server: ReplayServer) -> None:
    calls = [("call_a", "read", '{"path": "a.txt"}'), ("call_b", "grep", "{not json"), ("call_c", "x", "[1, 2]")]
    replay_server.enqueue(200, chat_completion(None, tool_calls=calls, usage=usage_body(50, 20)))
    async with make(replay_server) as model:
        response = await model.invoke(ask())
    a, b, c = response.message.tool_calls
    assert a == ToolCall(id="call_a", name="read", arguments={"path": "a.txt"})
    assert (b.name, b.arguments, b.raw_arguments, b.arguments_valid) == ("grep", {}, "{not json", False)
    assert c.raw_arguments == "[1, 2]"  # JSON, but not an object
    assert response.message.text == ""
    assert response.finish_reason == "tool_calls"


async def test_unary_usage_with_cached_and_reasoning_tokens(replay_server: ReplayServer) -> None:
    body = chat_completion("ok", usage=usage_body(120, 30, cached=64, reasoning=12), reasoning_content="thought")
    replay_server.enqueue(200, body)
    async with make(replay_server) as model:
        response = await model.invoke(ask())
    assert response.usage == Usage(input_tokens=120, output_tokens=30, cached_input_tokens=64, reasoning_tokens=12)
    assert response.message.reasoning == "thought"
    assert response.response_id == "chatcmpl-1"  # a tracer's gen_ai.response.id


async def test_unary_refusal_and_empty_choices(replay_server: ReplayServer) -> None:
    refusal = chat_completion(None)
    refusal["choices"][0]["message"]["refusal"] = "I can't help with that."
    replay_server.enqueue(200, refusal)
    replay_server.enqueue(200, {**chat_completion("x"), "choices": []})
    replay_server.enqueue(200, "<html>oops</html>")
    async with make(replay_server) as model:
        assert (await model.invoke(ask())).message.text == "I can't help with that."
        with pytest.raises(ProviderError) as empty:
            await model.invoke(ask())
        with pytest.raises(ProviderError) as garbled:
            await model.invoke(ask())
    assert (empty.value.code, empty.value.retryable) == ("empty_response", True)
    assert (garbled.value.code, garbled.value.retryable) == ("malformed_response", True)


# ------------------------------------------------------------------------------------------ streaming
async def test_stream_text_with_include_usage_chunk(replay_server: ReplayServer) -> None:
    usage = usage_body(61, 16, cached=32, reasoning=4)
    replay_server.enqueue(200, sse_text_chunks(["Hel", "lo", " world"], usage=usage))
    async with make(replay_server) as model:
        items, error = await drain(model, ask(), close=False)
    assert error is None
    assert texts(items) == ["Hel", "lo", " world"]
    assert items[-2:] == [
        StreamUsage(usage=Usage(input_tokens=61, output_tokens=16, cached_input_tokens=32, reasoning_tokens=4)),
        StreamFinish(finish_reason="stop", model="gpt-4o-mini-2024-07-18", response_id="chatcmpl-1"),
    ]
    body = replay_server.requests[0].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


async def test_stream_two_parallel_tool_calls_interleaved_by_index(replay_server: ReplayServer) -> None:
    calls = [
        ("call_a", "read_file", ['{"pa', 'th": "a', '.txt"}']),
        ("call_b", "search", ['{"q"', ': "x"', ', "k": 3}']),
    ]
    replay_server.enqueue(200, sse_tool_call_chunks(calls, interleave=True, usage=usage_body(80, 24)))
    async with make(replay_server) as model:
        items, error = await drain(model, ask(), close=False)
    assert error is None
    deltas = [item for item in items if isinstance(item, ToolCallDelta)]
    assert [d.index for d in deltas] == [0, 1, 0, 1, 0, 1, 0, 1]  # openers, then alternating fragments
    assert (deltas[0].id, deltas[0].name, deltas[1].id, deltas[1].name) == ("call_a", "read_file", "call_b", "search")
    acc = StreamAccumulator()
    for item in items:
        acc.add(item)
    response = acc.response()
    assert response.message.tool_calls == (
        ToolCall(id="call_a", name="read_file", arguments={"path": "a.txt"}),
        ToolCall(id="call_b", name="search", arguments={"q": "x", "k": 3}),
    )
    assert response.finish_reason == "tool_calls"
    assert response.usage == Usage(input_tokens=80, output_tokens=24)


async def test_stream_ollama_style_reused_index_starts_a_new_call(replay_server: ReplayServer) -> None:
    def call(call_id: str, name: str, args: str) -> dict[str, Any]:
        entry = {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
        return chunk({"tool_calls": [entry]})

    stream = [call("c1", "a", '{"x": 1}'), call("c2", "b", '{"y": 2}'), chunk(None, finish_reason="tool_calls")]
    replay_server.enqueue(200, [*stream, sse_done()])
    async with make(replay_server) as model:
        items, error = await drain(model, ask(), close=False)
    assert error is None
    acc = StreamAccumulator()
    for item in items:
        acc.add(item)
    calls = acc.response().message.tool_calls
    assert [(c.id, c.name, dict(c.arguments)) for c in calls] == [("c1", "a", {"x": 1}), ("c2", "b", {"y": 2})]


async def test_stream_reasoning_content_and_robust_framing(replay_server: ReplayServer) -> None:
    think = json.dumps(chunk({"reasoning_content": "hmm"}))
    text = json.dumps(chunk({"content": "yes"}), indent=1)  # pretty JSON: split over several data: lines
    multiline = "".join(f"data: {line}\r\n" for line in text.splitlines()) + "\r\n"
    split = f"data: {json.dumps(chunk({'content': '!'}))}\n\n"
    replay_server.enqueue(
        200,
        [
            ": OPENROUTER PROCESSING\n\n",
            f"data: {think}\r\n\r\n",  # CRLF framing
            multiline,
            split[:17],  # one event cut across two network writes
            split[17:],
            json_line(chunk({}, finish_reason="stop")),
            "data: [DONE]",  # no trailing blank line
        ],
        chunk_delay_s=0.01,
    )
    async with make(replay_server) as model:
        items, error = await drain(model, ask(), close=False)
    assert error is None
    assert items[0] == ThinkingDelta(text="hmm")
    assert texts(items) == ["yes", "!"]
    assert items[-1] == StreamFinish(finish_reason="stop", model="gpt-4o-mini-2024-07-18", response_id="chatcmpl-1")


def json_line(obj: Any) -> str:
    return f"data: {json.dumps(obj)}\n\n"


async def test_stream_cut_mid_message_keeps_deltas_then_raises(replay_server: ReplayServer) -> None:
    chunks = sse_text_chunks(["a", "b", "c"], usage=usage_body(5, 3))
    replay_server.enqueue(200, chunks, drop_after=3)  # role chunk, "a", "b" - then the socket closes
    replay_server.enqueue(200, chunks[:3], chunked=False)  # clean EOF without finish or [DONE]
    async with make(replay_server) as model:
        for _ in range(2):
            items, error = await drain(model, ask(), close=False)
            assert texts(items) == ["a", "b"]
            assert not any(isinstance(item, StreamFinish) for item in items)
            assert isinstance(error, ProviderError)
            assert (error.code, error.retryable, error.status) == ("stream_interrupted", True, None)
            assert KEY not in leak_text(error)


async def test_stream_cut_after_finish_only_loses_usage(replay_server: ReplayServer) -> None:
    chunks = sse_text_chunks(["done"], usage=usage_body(5, 3))
    replay_server.enqueue(200, chunks, drop_after=3)  # role, text, finish; usage and [DONE] lost
    async with make(replay_server) as model:
        items, error = await drain(model, ask(), close=False)
    assert error is None
    assert texts(items) == ["done"]
    assert not any(isinstance(item, StreamUsage) for item in items)
    assert items[-1] == StreamFinish(finish_reason="stop", model="gpt-4o-mini-2024-07-18", response_id="chatcmpl-1")


async def test_stream_malformed_chunk(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, [json_line(chunk({"content": "partial"})), "data: {not json\n\n", sse_done()])
    async with make(replay_server) as model:
        items, error = await drain(model, ask(), close=False)
    assert texts(items) == ["partial"]
    assert isinstance(error, ProviderError)
    assert (error.code, error.retryable) == ("malformed_stream", True)


async def test_stream_error_events_are_mapped(replay_server: ReplayServer) -> None:
    server_error = {"error": {"message": "The server had an error", "type": "server_error", "code": None}}
    too_long = {
        "error": {
            "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
    bad = {"error": {"message": "Invalid schema", "type": "invalid_request_error", "code": "invalid_value"}}
    for payload in (server_error, too_long, bad):
        replay_server.enqueue(200, [json_line(chunk({"content": "x"})), json_line(payload), sse_done()])
    async with make(replay_server) as model:
        first = await drain(model, ask(), close=False)
        second = await drain(model, ask(), close=False)
        third = await drain(model, ask(), close=False)
    assert texts(first[0]) == ["x"]
    assert isinstance(first[1], ProviderError)
    assert (first[1].retryable, first[1].code) == (True, "server_error")
    assert isinstance(second[1], ContextLimitError)
    assert (second[1].limit_tokens, second[1].estimated_tokens) == (8192, 9000)
    assert isinstance(third[1], ProviderError)
    assert (third[1].retryable, third[1].code) == (False, "invalid_value")


async def test_stream_http_error_before_body(replay_server: ReplayServer) -> None:
    replay_server.enqueue(
        429,
        error_body("Rate limit reached", type="tokens", code="rate_limit_exceeded"),
        headers={"retry-after-ms": "40"},
    )
    async with make(replay_server) as model:
        items, error = await drain(model, ask(), close=False)
    assert items == []
    assert isinstance(error, ProviderError)
    assert (error.status, error.retryable, error.retry_after_s) == (429, True, 0.04)


# ------------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
    ],
)
async def test_429_is_retryable_with_retry_after(
    replay_server: ReplayServer, headers: dict[str, str], expected: float
) -> None:
    message = "Rate limit reached for gpt-4o-mini on tokens per min (TPM). Please try again in 1.772s."
    replay_server.enqueue(429, error_body(message, type="tokens", code="rate_limit_exceeded"), headers=headers)
    async with make(replay_server) as model:
        with pytest.raises(ProviderError) as info:
            await model.invoke(ask())
    err = info.value
    assert (err.status, err.retryable, err.retry_after_s, err.code) == (429, True, expected, "rate_limit_exceeded")
    assert (err.provider, err.model) == ("openai", "gpt-4o-mini")
    assert "429" in str(err)
    assert "Rate limit reached" in str(err)


@pytest.mark.parametrize(
    ("body", "headers", "retryable"),
    [
        (
            error_body("You exceeded your current quota", type="insufficient_quota", code="insufficient_quota"),
            {},
            False,
        ),
        (
            error_body("Request too large for gpt-4o on tokens per min", type="tokens", code="rate_limit_exceeded"),
            {},
            False,
        ),
        (error_body("slow down", code="rate_limit_exceeded"), {"x-should-retry": "false"}, False),
    ],
)
async def test_429_that_will_not_succeed_is_final(
    replay_server: ReplayServer, body: dict[str, Any], headers: dict[str, str], retryable: bool
) -> None:
    replay_server.enqueue(429, body, headers=headers)
    async with make(replay_server) as model:
        with pytest.raises(ProviderError) as info:
            await model.invoke(ask())
    assert info.value.retryable is retryable
    assert info.value.status == 429


@pytest.mark.parametrize("status", [500, 502, 503, 504, 529])
async def test_server_errors_are_retryable(replay_server: ReplayServer, status: int) -> None:
    replay_server.enqueue(status, error_body("The engine is currently overloaded", type="server_error"))
    async with make(replay_server) as model:
        with pytest.raises(ProviderError) as info:
            await model.invoke(ask())
    assert (info.value.status, info.value.retryable) == (status, True)


async def test_x_should_retry_true_overrides_a_4xx(replay_server: ReplayServer) -> None:
    replay_server.enqueue(400, error_body("transient"), headers={"x-should-retry": "true"})
    replay_server.enqueue(422, "plain text body")
    async with make(replay_server) as model:
        with pytest.raises(ProviderError) as forced:
            await model.invoke(ask())
        with pytest.raises(ProviderError) as plain:
            await model.invoke(ask())
    assert forced.value.retryable is True
    assert (plain.value.retryable, plain.value.status) == (False, 422)
    assert "plain text body" in str(plain.value)


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_errors_never_show_the_key(replay_server: ReplayServer, status: int) -> None:
    # A hostile or careless host echoes the whole key and the header back.
    message = f"Incorrect API key provided: {KEY}. Header was Authorization: Bearer {KEY}"
    replay_server.enqueue(status, error_body(message, code="invalid_api_key"))
    async with make(replay_server) as model:
        with pytest.raises(ProviderError) as info:
            await model.invoke(ask())
        assert KEY not in repr(model)
        assert KEY not in str(model)
    err = info.value
    assert (err.status, err.retryable) == (status, False)
    assert err.hint is not None
    assert "OPENAI_API_KEY" in err.hint
    assert "Incorrect API key provided" in str(err)
    assert KEY not in leak_text(err)
    assert KEY[8:20] not in leak_text(err)
    assert replay_server.requests[0].headers["authorization"] == f"Bearer {KEY}"  # it did reach the server


async def test_404_unknown_model_is_model_not_found(replay_server: ReplayServer) -> None:
    message = "The model `gpt-4o-mini` does not exist or you do not have access to it."
    replay_server.enqueue(404, error_body(message, code="model_not_found"))
    replay_server.enqueue(404, "404 page not found")
    async with make(replay_server) as model:
        with pytest.raises(ModelNotFound) as info:
            await model.invoke(ask())
        with pytest.raises(ProviderError) as route:
            await model.invoke(ask())
    assert info.value.model == "gpt-4o-mini"
    assert "does not exist" in str(info.value)
    assert info.value.hint
    assert (route.value.status, route.value.retryable) == (404, False)
    assert route.value.hint is not None
    assert "base_url" in route.value.hint


@pytest.mark.parametrize(
    ("code", "message", "limit", "used"),
    [
        (
            "context_length_exceeded",
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130120 tokens.",
            128000,
            130120,
        ),
        (  # DeepSeek: same text, generic code
            "invalid_request_error",
            "This model's maximum context length is 65536 tokens. However, you requested 70000 tokens "
            "(66000 in the messages, 4000 in the completion).",
            65536,
            70000,
        ),
        (None, "prompt is too long: 213462 tokens > 200000 maximum", 200000, 213462),
    ],
)
async def test_context_length_400_is_context_limit_error(
    replay_server: ReplayServer, code: str | None, message: str, limit: int, used: int
) -> None:
    replay_server.enqueue(400, error_body(message, code=code, param="messages"))
    async with make(replay_server) as model:
        with pytest.raises(ContextLimitError) as info:
            await model.invoke(ask())
    assert info.value.model == "gpt-4o-mini"
    assert (info.value.limit_tokens, info.value.estimated_tokens) == (limit, used)


async def test_other_400_is_final(replay_server: ReplayServer) -> None:
    replay_server.enqueue(400, error_body("Invalid value for 'tool_choice'", code="invalid_value", param="tool_choice"))
    async with make(replay_server) as model:
        with pytest.raises(ProviderError) as info:
            await model.invoke(ask())
    assert (info.value.status, info.value.retryable, info.value.code) == (400, False, "invalid_value")


async def test_connect_error_is_retryable_without_status() -> None:
    with socket_port() as port:
        pass  # the port is now closed: nothing listens there
    async with OpenAIChatModel("gpt-4o", base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY) as model:
        with pytest.raises(ProviderError) as info:
            await model.invoke(ask())
    err = info.value
    assert (err.status, err.retryable, err.code) == (None, True, "connect_error")
    assert err.hint == "is the server at 127.0.0.1 running?"
    assert err.__cause__ is None
    assert err.__context__ is None
    assert KEY not in leak_text(err)


async def test_timeouts(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, chat_completion("late"), delay_s=0.5)
    replay_server.enqueue(200, sse_text_chunks(["a", "b"]), chunk_delay_s=0.3)
    async with make(replay_server, timeout_s=0.1) as model:
        with pytest.raises(ProviderError) as unary:
            await model.invoke(ask())
        _items, error = await drain(model, ask(), close=False)
    assert (unary.value.code, unary.value.retryable) == ("timeout", True)
    assert isinstance(error, ProviderError)
    assert error.retryable is True
    assert error.code in ("timeout", "stream_interrupted")


def socket_port() -> Any:
    import contextlib
    import socket

    @contextlib.contextmanager
    def bound() -> Any:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        try:
            yield sock.getsockname()[1]
        finally:
            sock.close()

    return bound()


# ------------------------------------------------------------------------------------------ request body
async def test_request_body_shape(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, chat_completion("ok"))
    replay_server.enqueue(200, chat_completion("ok"))
    tool = ToolSchema(
        name="read",
        description="Read a file.",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        strict=True,
    )
    transcript: list[Message] = [
        SystemMessage(text="be brief"),
        UserMessage(
            text="look",
            name="ann",
            blocks=[ImageRef(url="https://example.test/cat.png", detail="low"), JsonBlock(data={"k": 1})],
        ),
        AssistantMessage(
            text="",
            reasoning="secret chain of thought",
            tool_calls=[
                ToolCall(id="call_1", name="read", arguments={"path": "ä.txt"}),
                ToolCall(id="call_2", name="read", raw_arguments="{oops"),
            ],
        ),
        ToolMessage(tool_call_id="call_1", name="read", text="contents"),
        ToolMessage(tool_call_id="call_2", name="read", text="bad arguments", is_error=True),
    ]
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    request = ModelRequest(
        messages=transcript,
        tools=(tool,),
        tool_choice="read",
        response_format=ResponseFormat(type="json_schema", name="answer", schema=schema),
        max_output_tokens=256,
        temperature=0.2,
        settings={"seed": 7, "temperature": 0.0},
        thread_id="thread-1",
    )
    async with make(replay_server) as model:
        await model.invoke(request)
        await model.invoke(
            ModelRequest(
                messages=[UserMessage(text="x")],
                tools=(tool,),
                tool_choice="auto",
                response_format=ResponseFormat(type="json_object"),
            )
        )
    first, second = (r.body for r in replay_server.requests)
    assert first["messages"] == [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://example.test/cat.png", "detail": "low"}},
                {"type": "text", "text": '{"k":1}'},
            ],
            "name": "ann",
        },
        {
            "role": "assistant",
            "content": "",  # not null: llama-cpp-python's server answers null with HTTP 500
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": '{"path":"ä.txt"}'}},
                {"id": "call_2", "type": "function", "function": {"name": "read", "arguments": "{oops"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "contents"},
        {"role": "tool", "tool_call_id": "call_2", "content": "bad arguments"},
    ]
    assert "secret chain of thought" not in json.dumps(first)
    assert first["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file.",
                "parameters": dict(tool.parameters),
                "strict": True,
            },
        }
    ]
    assert first["tool_choice"] == {"type": "function", "function": {"name": "read"}}
    assert first["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema, "strict": True},
    }
    assert first["max_completion_tokens"] == 256
    assert "max_tokens" not in first
    assert (first["temperature"], first["seed"]) == (0.0, 7)  # settings are merged last
    assert len(first["prompt_cache_key"]) == 32
    assert "thread-1" not in first["prompt_cache_key"]
    assert "stream" not in first
    assert second["tool_choice"] == "auto"
    assert second["response_format"] == {"type": "json_object"}
    assert second["tools"] == first["tools"]
    assert "prompt_cache_key" not in second


async def test_non_openai_provider_quirks(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, chat_completion("ok"))
    groq = ProviderSpec.groq()
    async with OpenAIChatModel(
        "llama-3.3-70b-versatile", provider=groq, base_url=replay_server.base_url, api_key=KEY
    ) as model:
        assert model.provider == "groq"
        response = await model.invoke(
            ModelRequest(messages=[UserMessage(text="x", name="ann")], max_output_tokens=9, thread_id="t")
        )
    body = replay_server.requests[0].body
    assert body["max_tokens"] == 9
    assert "max_completion_tokens" not in body
    assert "name" not in body["messages"][0]  # Groq rejects messages[].name
    assert "prompt_cache_key" not in body
    assert response.provider == "groq"


async def test_extra_headers_are_sent_and_treated_as_secret(replay_server: ReplayServer) -> None:
    gateway = "gw-secret-value-123456"
    replay_server.enqueue(500, error_body(f"gateway token {gateway} refused", type="server_error"))
    async with make(replay_server, extra_headers={"X-Gateway-Token": gateway}) as model:
        with pytest.raises(ProviderError) as info:
            await model.invoke(ask())
        assert gateway not in repr(model)
    assert replay_server.requests[0].headers["x-gateway-token"] == gateway
    assert gateway not in leak_text(info.value)


# ------------------------------------------------------------------------------------------ construction
def test_missing_key_fails_at_construction_with_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError) as info:
        OpenAIChatModel("gpt-4o")
    assert info.value.hint is not None
    assert "OPENAI_API_KEY" in info.value.hint
    monkeypatch.setenv("DEEPSEEK_API_KEY", "   ")  # blank counts as missing
    with pytest.raises(ConfigurationError, match="deepseek"):
        OpenAIChatModel("deepseek-chat", provider="deepseek")
    local = OpenAIChatModel("llama3.2", provider="ollama")  # no key needed
    assert "api_key=<none>" in repr(local)


def test_key_from_env_and_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    model = OpenAIChatModel("gpt-4o")
    assert (model.model_name, model.provider, model.base_url) == ("gpt-4o", "openai", "https://api.openai.com/v1")
    assert repr(model) == (
        "OpenAIChatModel(model='gpt-4o', provider='openai', base_url='https://api.openai.com/v1', api_key=<set>)"
    )
    assert KEY not in repr(model)
    assert KEY not in str(model)
    with_creds = OpenAIChatModel("gpt-4o", base_url="https://user:pw-secret@gw.test/v1?token=abc")
    assert "pw-secret" not in repr(with_creds)
    assert "token" not in repr(with_creds)


def test_from_env_reads_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert OpenAIChatModel.from_env("gpt-4o").base_url == "http://127.0.0.1:9/v1"
    with pytest.raises(ConfigurationError):
        OpenAIChatModel.from_env("gpt-4o", api_key="x")
    monkeypatch.delenv("XAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="xai"):
        OpenAIChatModel.from_env("grok-4", provider="xai")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"model": ""},
        {"model": "m", "base_url": "ftp://x"},
        {"model": "m", "api_key": ""},
        {"model": "m", "api_key": "k", "timeout_s": 0},
        {"model": "m", "api_key": "k", "timeout_s": True},
        {"model": "m", "api_key": "k", "provider": "nope"},
    ],
)
def test_bad_constructor_input(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        OpenAIChatModel(**kwargs)


def test_profile_is_lazy_and_overridable() -> None:
    from tinyagents_nb.harness import ModelProfile

    model = OpenAIChatModel("gpt-4o", api_key=KEY)
    assert model.profile.structured_output == "native"
    assert model.profile is model.profile  # computed once
    custom = ModelProfile(name="gpt-4o", provider="openai", context_window=1000)
    assert OpenAIChatModel("gpt-4o", api_key=KEY, profile=custom).profile is custom


def test_model_survives_a_new_event_loop(replay_server: ReplayServer) -> None:
    import asyncio

    replay_server.enqueue(200, chat_completion("one"))
    replay_server.enqueue(200, chat_completion("two"))
    model = make(replay_server)

    async def once() -> str:
        try:
            return (await model.invoke(ask())).message.text
        finally:
            await model.aclose()

    assert asyncio.run(once()) == "one"
    assert asyncio.run(once()) == "two"  # a fresh loop gets a fresh client


async def test_supplied_http_client_is_used_and_left_open(replay_server: ReplayServer) -> None:
    import httpx

    replay_server.enqueue(200, chat_completion("ok"))
    async with httpx.AsyncClient(headers={"x-from-client": "1"}) as client:
        model = make(replay_server, http_client=client)
        assert (await model.invoke(ask())).message.text == "ok"
        await model.aclose()
        assert not client.is_closed
    assert replay_server.requests[0].headers["x-from-client"] == "1"


def test_import_does_not_load_httpx() -> None:
    code = (
        "import sys; import tinyagents_nb.harness.providers; "
        "bad = [m for m in ('httpx', 'httpcore', 'genai_prices') if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------------------------------ pure helpers
@pytest.mark.parametrize(
    ("raw", "kwargs", "expected"),
    [
        (
            usage_body(100, 40, cached=30, reasoning=10),
            {},
            Usage(input_tokens=100, output_tokens=40, cached_input_tokens=30, reasoning_tokens=10),
        ),
        # xAI: reasoning outside completion_tokens; total_tokens proves it
        (usage_body(10, 5, reasoning=7, total=22), {}, Usage(input_tokens=10, output_tokens=12, reasoning_tokens=7)),
        # xAI flag without a total
        (
            {"prompt_tokens": 10, "completion_tokens": 5, "completion_tokens_details": {"reasoning_tokens": 3}},
            {"reasoning_outside_completion": True},
            Usage(input_tokens=10, output_tokens=8, reasoning_tokens=3),
        ),
        # ... but a total showing reasoning inside wins over the flag
        (
            usage_body(10, 5, reasoning=3),
            {"reasoning_outside_completion": True},
            Usage(input_tokens=10, output_tokens=5, reasoning_tokens=3),
        ),
        # DeepSeek cache hits
        (
            {
                "prompt_tokens": 50,
                "completion_tokens": 5,
                "prompt_cache_hit_tokens": 20,
                "prompt_cache_miss_tokens": 30,
            },
            {},
            Usage(input_tokens=50, output_tokens=5, cached_input_tokens=20),
        ),
        # OpenRouter cache writes; nonsense is clamped so Usage invariants hold
        (
            {
                "prompt_tokens": 10,
                "completion_tokens": 1,
                "prompt_tokens_details": {"cached_tokens": 8, "cache_write_tokens": 5},
            },
            {},
            Usage(input_tokens=10, output_tokens=1, cached_input_tokens=8, cache_write_tokens=2),
        ),
        ({"prompt_tokens": -3, "completion_tokens": "7", "prompt_tokens_details": None}, {}, Usage()),
        (None, {}, Usage()),
    ],
)
def test_normalize_usage(raw: Any, kwargs: dict[str, Any], expected: Usage) -> None:
    assert normalize_usage(raw, **kwargs) == expected


def test_parse_retry_after() -> None:
    now = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
    assert parse_retry_after({"retry-after": "Thu, 01 Jan 2026 12:00:30 GMT"}, now=now) == 30.0
    assert parse_retry_after({"retry-after": "Thu, 01 Jan 2026 11:00:00 GMT"}, now=now) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({"retry-after": "-1"}) is None
    assert parse_retry_after({"retry-after-ms": "x", "retry-after": "3"}) == 3.0
    assert parse_retry_after({}) is None


def test_scrub() -> None:
    text = f"key {KEY} and Bearer abc.def and sk-proj-ABCDEFGH123 and pw"
    cleaned = scrub(text, ["pw"])
    assert KEY not in cleaned
    assert "abc.def" not in cleaned
    assert "ABCDEFGH123" not in cleaned
    assert cleaned.endswith("***")
    assert len(scrub("x" * 5000)) <= 600


# ------------------------------------------------------------------------------------------ SSE decoder
def decode_all(pieces: Sequence[bytes]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for piece in pieces:
        events += decoder.feed(piece)
    return events + decoder.close()


def test_sse_decoder_rules() -> None:
    wire = (
        b": keep-alive\n\n"
        b"event: message\ndata: line one\ndata:line two\nid: 7\nretry: 10\n\n"
        b"data: \xe2\x80\xa8 raw U+2028 stays inside\r\n\r\n"
        b"data: cr only\r\r"
        b"data\n\n"  # a field without a colon: one empty data line, dispatched as ""
        b"data: cut off at EOF"
    )
    events = decode_all([wire])
    assert events == [
        SSEEvent(data="line one\nline two", event="message"),
        SSEEvent(data="\u2028 raw U+2028 stays inside"),
        SSEEvent(data="cr only"),
        SSEEvent(data=""),
    ]
    assert decode_all([b"data: [DONE]"]) == [SSEEvent(data="[DONE]")]  # tolerated without the blank line
    assert decode_all([b"data: x\n\ndata: [DONE]\n"]) == [SSEEvent(data="x"), SSEEvent(data="[DONE]")]


_SAFE_TEXT = st.text(
    alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]), min_size=1, max_size=30
).filter(lambda text: not text.startswith(" "))


@settings(max_examples=150, deadline=None)
@given(
    datas=st.lists(st.lists(_SAFE_TEXT, min_size=1, max_size=3), min_size=1, max_size=6),
    eol=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=12),
)
def test_sse_decoder_is_independent_of_network_splits(datas: list[list[str]], eol: str, cuts: list[int]) -> None:
    text = ""
    for lines in datas:
        text += f": ping{eol}" + "".join(f"data: {line}{eol}" for line in lines) + eol
    wire = text.encode()
    points = sorted({cut % (len(wire) + 1) for cut in cuts})
    pieces = [wire[a:b] for a, b in zip([0, *points], [*points, len(wire)], strict=True)]
    assert [event.data for event in decode_all(pieces)] == ["\n".join(lines) for lines in datas]


# ------------------------------------------------------------------------------------------ cancellation
async def test_cancelling_a_stream_is_not_converted_and_the_model_stays_usable(replay_server: ReplayServer) -> None:
    import anyio

    replay_server.enqueue(200, sse_text_chunks(["a", "b", "c", "d"]), chunk_delay_s=0.2)
    replay_server.enqueue(200, chat_completion("after"))
    seen: list[ModelStreamItem] = []
    async with make(replay_server) as model:
        with anyio.move_on_after(0.3) as scope:
            async with contextlib.aclosing(model.stream(ask())) as stream:
                async for item in stream:
                    seen.append(item)
        assert scope.cancelled_caught  # a cancel is a cancel, never a ProviderError
        assert len(texts(seen)) < 4
        assert (await model.invoke(ask())).message.text == "after"


async def test_consumer_may_stop_early(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, sse_text_chunks(["first", "second"]))
    async with make(replay_server) as model:
        async with contextlib.aclosing(model.stream(ask())) as stream:
            async for item in stream:
                assert item == TextDelta(text="first")
                break


async def test_connect_errors_hint_at_the_cause() -> None:
    with socket_port() as port:
        pass
    async with OpenAIChatModel("llama3", provider="ollama", base_url=f"http://127.0.0.1:{port}/v1") as model:
        with pytest.raises(ProviderError) as info:
            await model.invoke(ask())
    assert info.value.hint == "is `ollama serve` running?"
    assert _connect_hint("openai", "https://api.openai.com/v1").startswith("no network?")
