"""Errors reported inside a 200 stream get the status the HTTP API gives the same error.

An Anthropic stream may end with an ``error`` event, an OpenAI-compatible one with an
``{"error": ...}`` chunk. Replayed from a real 127.0.0.1 server, through the adapters and the agent
loop's retry policy: the same error is retried (or not) as it would be as an HTTP answer.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.harness.anthropic_samples import event, message_start, rechunk, stream, text_block, usage
from tests.harness.replay_server import ReplayServer, chunk, drain, sse_done, sse_text_chunks
from tinyagents_nb.harness import (
    AgentHarness,
    AnthropicModel,
    ContextLimitError,
    ModelNotFound,
    ModelRequest,
    ProviderError,
    RetryPolicy,
    RunContext,
    RunPolicy,
    UserMessage,
    event_to_dict,
)
from tinyagents_nb.harness.providers import OpenAIChatModel
from tinyagents_nb.harness.testkit import EventRecorder

pytestmark = pytest.mark.anyio

ANT_KEY = "sk-ant-api03-STREAMERR-9f8e7d6c5b4a"
OAI_KEY = "sk-test-STREAMERR-1a2b3c4d5e6f7a8b"
FAST = RetryPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.002, max_retry_after_s=0.05)


def ask() -> ModelRequest:
    return ModelRequest(messages=[UserMessage(text="hi")])


def assert_no_key(key: str, *objs: object) -> None:
    for obj in objs:
        assert key.lower() not in repr(obj).lower()
        assert key.lower() not in str(obj).lower()


# ------------------------------------------------------------------------------------------ Anthropic
def anthropic(server: ReplayServer) -> AnthropicModel:
    return AnthropicModel("claude-sonnet-4-5", base_url=server.base_url, api_key=ANT_KEY)


def failing_stream(kind: str, message: str) -> list[bytes]:
    """A stream that starts answering, then ends with an ``error`` event (no ``message_stop``)."""
    events = [message_start(usage(5, 1)), *text_block(0, ["par"])]
    events.append(event("error", {"error": {"type": kind, "message": message}}))
    return rechunk(events)


@pytest.mark.parametrize(
    ("kind", "status", "retryable"),
    [
        ("invalid_request_error", 400, False),
        ("authentication_error", 401, False),
        ("permission_error", 403, False),
        ("request_too_large", 413, False),
        ("rate_limit_error", 429, True),
        ("api_error", 500, True),
        ("overloaded_error", 529, True),
    ],
)
async def test_anthropic_in_stream_errors_get_their_http_status(
    replay_server: ReplayServer, kind: str, status: int, retryable: bool
) -> None:
    replay_server.enqueue(200, failing_stream(kind, f"went wrong (key {ANT_KEY})"))
    _, error = await drain(anthropic(replay_server), ask())
    assert isinstance(error, ProviderError)
    assert (error.status, error.retryable, error.code) == (status, retryable, kind)
    assert f"as HTTP {status}" in str(error)
    if status in (401, 403):
        assert error.hint is not None
        assert "ANTHROPIC_API_KEY" in error.hint
    assert_no_key(ANT_KEY, error, error.args, error.details)


async def test_anthropic_in_stream_not_found_naming_the_model_is_model_not_found(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, failing_stream("not_found_error", "model: claude-sonnet-4-5-20250929"))
    _, error = await drain(anthropic(replay_server), ask())
    assert isinstance(error, ModelNotFound)


async def test_anthropic_in_stream_prompt_too_long_is_a_context_limit_error(replay_server: ReplayServer) -> None:
    replay_server.enqueue(
        200, failing_stream("invalid_request_error", "prompt is too long: 213462 tokens > 200000 maximum")
    )
    _, error = await drain(anthropic(replay_server), ask())
    assert isinstance(error, ContextLimitError)
    assert (error.estimated_tokens, error.limit_tokens) == (213462, 200000)


async def test_an_in_stream_overload_is_retried_like_a_529_and_succeeds(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, failing_stream("overloaded_error", "Overloaded"))
    replay_server.enqueue(200, stream(text_block(0, ["fine"])))
    model = anthropic(replay_server)
    harness: AgentHarness[None] = AgentHarness(model=model, policy=RunPolicy(retry=FAST))
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    run, _ = await harness.invoke_with_status(ctx, "hi", streaming=True)
    await model.aclose()
    assert run.status == "completed", run.error
    assert run.final_text == "fine"
    assert len(replay_server.requests) == 2
    (retry,) = rec.of_kind("retry.scheduled")
    assert "529" in retry.error  # type: ignore[attr-defined]
    for _, recorded in ctx.events.recent():
        assert ANT_KEY not in json.dumps(event_to_dict(recorded), default=str)


async def test_an_in_stream_invalid_request_is_not_retried(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, failing_stream("invalid_request_error", "messages.1: roles must alternate"))
    replay_server.enqueue(200, stream(text_block(0, ["never sent"])))
    model = anthropic(replay_server)
    harness: AgentHarness[None] = AgentHarness(model=model, policy=RunPolicy(retry=FAST))
    run, _ = await harness.invoke_with_status(RunContext(), "hi", streaming=True)
    await model.aclose()
    assert run.status == "failed"
    assert isinstance(run.error, ProviderError)
    assert (run.error.status, run.error.retryable) == (400, False)
    assert len(replay_server.requests) == 1
    assert replay_server.pending == 1


# ------------------------------------------------------------------------------------------ OpenAI-compatible
def openai(server: ReplayServer) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-4o-mini", base_url=server.base_url, api_key=OAI_KEY)


def error_chunks(error: dict[str, Any]) -> list[Any]:
    return [chunk({"role": "assistant", "content": "par"}), {"error": error}, sse_done()]


@pytest.mark.parametrize(
    ("error", "status", "retryable"),
    [
        ({"message": "Rate limit reached for gpt-4o-mini", "type": "tokens", "code": "rate_limit_exceeded"}, 429, True),
        (
            {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"},
            429,
            False,
        ),
        ({"message": "The server had an error", "type": "server_error", "code": None}, 500, True),
        (
            {"message": "The engine is currently overloaded", "type": "server_error", "code": "server_is_overloaded"},
            503,
            True,
        ),
        ({"message": "Invalid schema", "type": "invalid_request_error", "code": "invalid_value"}, 400, False),
        (
            {
                "message": f"Incorrect API key provided: {OAI_KEY}",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            },
            401,
            False,
        ),
        ({"message": "generation went sideways", "type": "weird_upstream_thing", "code": None}, None, True),
        ({"message": "no such thing", "type": "not_found", "code": None}, None, False),
    ],
)
async def test_openai_in_stream_errors_get_the_status_their_code_or_type_implies(
    replay_server: ReplayServer, error: dict[str, Any], status: int | None, retryable: bool
) -> None:
    replay_server.enqueue(200, error_chunks(error))
    items, raised = await drain(openai(replay_server), ask())
    assert items  # the text before the error is kept
    assert isinstance(raised, ProviderError)
    assert (raised.status, raised.retryable) == (status, retryable)
    assert raised.code == (error["code"] or error["type"])
    if status == 401:
        assert raised.hint is not None
        assert "OPENAI_API_KEY" in raised.hint
    assert_no_key(OAI_KEY, raised, raised.args, raised.details)


async def test_openai_in_stream_rate_limit_is_retried_and_succeeds(replay_server: ReplayServer) -> None:
    replay_server.enqueue(
        200, error_chunks({"message": "Rate limit reached", "type": "tokens", "code": "rate_limit_exceeded"})
    )
    replay_server.enqueue(200, sse_text_chunks(["fine"]))
    model = openai(replay_server)
    harness: AgentHarness[None] = AgentHarness(model=model, policy=RunPolicy(retry=FAST))
    run, _ = await harness.invoke_with_status(RunContext(), "hi", streaming=True)
    await model.aclose()
    assert run.status == "completed", run.error
    assert run.final_text == "fine"
    assert len(replay_server.requests) == 2
