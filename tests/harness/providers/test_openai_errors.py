"""Provider errors over the real replay server: secrets scrubbed from every field, classification, details kept."""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.harness.replay_server import ReplayServer, chat_completion, chunk, sse_done
from tinyagents_nb.harness import (
    AgentHarness,
    ModelRequest,
    ProviderError,
    RetryPolicy,
    RunContext,
    RunPolicy,
    TextDelta,
    TinyAgentsError,
    UserMessage,
    event_to_dict,
)
from tinyagents_nb.harness.models import ModelStreamItem
from tinyagents_nb.harness.observability import JournalSink, JsonlSink, SQLiteEventJournal
from tinyagents_nb.harness.providers import OpenAIChatModel, ProviderSpec
from tinyagents_nb.harness.providers.wire import error_from_payload, scrub, scrub_value

pytestmark = pytest.mark.anyio

# Key shapes no generic pattern knows, so only the literal, case-insensitive scrub can catch them.
KEY = "tk_EchoSecret9f8e7d6c5b4a3210XyZ"
GATEWAY = "gwTokenQq7Hq2Lx9Pz4RtVv"
RETRY = RetryPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.002, max_retry_after_s=0.05)
SPEC = ProviderSpec.compatible(base_url="http://127.0.0.1:1/v1", name="gateway")


def _model(server: ReplayServer, provider: str | ProviderSpec = "openai") -> OpenAIChatModel:
    return OpenAIChatModel(
        "gpt-4o-mini",
        base_url=server.base_url,
        api_key=KEY,
        provider=provider,
        extra_headers={"X-Gateway-Auth": f"Token {GATEWAY}"},
    )


def _echoing_error(message: str, **fields: Any) -> dict[str, Any]:
    """An error body from a gateway that echoes credentials everywhere except ``message``."""
    return {
        "error": {
            "message": message,
            "type": f"rate_limit_for_{KEY.upper()}",
            "code": f"key:{KEY}",
            "param": {"headers": {"authorization": f"Bearer {KEY}", "x-gateway-auth": f"Token {GATEWAY}"}},
            "metadata": {
                "raw": f"upstream rejected x-gateway-auth={GATEWAY.lower()}",
                "nested": [{"deep": [KEY.swapcase(), {f"key-{KEY}": 1}]}],
            },
            **fields,
        },
        "user_id": f"user_{KEY}",
    }


def _assert_clean(*texts: str) -> None:
    for text in texts:
        lowered = text.lower()
        assert KEY.lower() not in lowered
        assert GATEWAY.lower() not in lowered


async def test_a_key_echoed_in_every_error_field_appears_nowhere(
    replay_server: ReplayServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    replay_server.enqueue(429, _echoing_error("Rate limit reached, retry soon"), headers={"retry-after-ms": "1"})
    replay_server.enqueue(
        200,
        [chunk({"role": "assistant", "content": "par"}), {"error": _echoing_error("boom")["error"] | {"code": KEY}}],
    )
    replay_server.enqueue(400, _echoing_error("the request is invalid", code=f"bad_{KEY}"))
    model = _model(replay_server)
    journal = SQLiteEventJournal(tmp_path / "events.db")
    jsonl = JsonlSink(tmp_path / "events.jsonl")
    ctx = RunContext()
    ctx.events.add_listener(JournalSink(journal))
    ctx.events.add_listener(jsonl)
    harness: AgentHarness[None] = AgentHarness(model=model, policy=RunPolicy(retry=RETRY))
    caplog.set_level(logging.DEBUG)
    try:
        run, status = await harness.invoke_with_status(ctx, "hi", streaming=True)
    finally:
        await model.aclose()
    error = run.error
    assert isinstance(error, ProviderError)
    assert error.status == 400
    assert not error.retryable
    assert len(replay_server.requests) == 3  # 429 retried, the stream error retried, the 400 final
    kinds = [event.kind for _, event in ctx.events.recent()]
    assert kinds.count("retry.scheduled") == 2
    assert "model.failed" in kinds
    assert kinds[-1] == "run.failed"
    journal.close()
    jsonl.close()
    rows = sqlite3.connect(tmp_path / "events.db").execute("SELECT * FROM tinyagents_events").fetchall()
    assert rows
    _assert_clean(
        str(error),
        repr(error),
        repr(error.args),
        str(error.code),
        str(error.hint),
        json.dumps(error.details),
        repr(vars(error)),
        repr(run),
        repr(status),
        str(status.error),
        *(json.dumps(event_to_dict(event), default=str) for _, event in ctx.events.recent()),
        repr(rows),
        (tmp_path / "events.jsonl").read_text(),
        *(record.getMessage() for record in caplog.records),
        caplog.text,
    )
    assert "upstream" in str(error)
    assert "***" in str(error)


async def test_an_echoed_key_is_scrubbed_in_a_unary_200_error_body(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, _echoing_error("Internal error", code=503))
    model = _model(replay_server)
    with pytest.raises(ProviderError) as info:
        await model.invoke(ModelRequest(messages=[UserMessage(text="hi")]))
    await model.aclose()
    _assert_clean(str(info.value), repr(info.value), str(info.value.code), json.dumps(info.value.details))
    assert info.value.retryable  # a numeric 503 in a 200 body: a server-side failure


def test_scrub_value_walks_keys_values_and_any_case() -> None:
    scrubbed = scrub_value({f"x{KEY}": [KEY.upper(), {"a": (f"Bearer {KEY.lower()}", 7, None, True)}]}, [KEY])
    assert scrubbed == {"x***": ["***", {"a": ["Bearer ***", 7, None, True]}]}
    assert scrub(f"see {KEY.swapcase()}!", [KEY]) == "see ***!"


# ------------------------------------------------------------------------------------------ classification
async def _stream(model: OpenAIChatModel) -> tuple[list[ModelStreamItem], BaseException | None]:
    items: list[ModelStreamItem] = []
    try:
        async for item in model.stream(ModelRequest(messages=[UserMessage(text="hi")])):
            items.append(item)
    except TinyAgentsError as exc:
        return items, exc
    return items, None


def _openrouter_stream_error(code: int, message: str) -> list[Any]:
    # OpenRouter: a 200 stream whose last event is an error object with an HTTP-like numeric code.
    return [
        ": OPENROUTER PROCESSING\n\n",
        chunk({"role": "assistant", "content": "Sure"}, model="meta-llama/llama-3.3-70b-instruct"),
        {
            "error": {"code": code, "message": message},
            "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
        },
        sse_done(),
    ]


async def test_a_mid_stream_4xx_code_is_final_and_not_paid_for_again(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, _openrouter_stream_error(400, "Token limit reached"))
    model = _model(replay_server, "openrouter")
    harness: AgentHarness[None] = AgentHarness(model=model, policy=RunPolicy(retry=RETRY))
    run, _ = await harness.invoke_with_status(RunContext(), "hi", streaming=True)
    await model.aclose()
    assert isinstance(run.error, ProviderError)
    assert not run.error.retryable
    assert run.error.code == "400"
    assert len(replay_server.requests) == 1


@pytest.mark.parametrize(
    ("code", "retryable"),
    [(400, False), (401, False), (402, False), (404, False), (408, True), (429, True), (502, True), (503, True)],
)
def test_numeric_codes_in_stream_errors_are_classified_like_statuses(code: int, retryable: bool) -> None:
    error = error_from_payload({"code": code, "message": "Provider returned error"}, spec=SPEC, model="m")
    assert isinstance(error, ProviderError)
    assert error.retryable is retryable


def test_a_quota_429_code_in_a_stream_is_final() -> None:
    error = error_from_payload({"code": 429, "message": "You exceeded your current quota"}, spec=SPEC, model="m")
    assert isinstance(error, ProviderError)
    assert not error.retryable


# ------------------------------------------------------------------------------------------ details
async def test_openrouter_upstream_reason_is_kept(replay_server: ReplayServer) -> None:
    raw = (
        "meta-llama/llama-3.3-70b-instruct:free is temporarily rate-limited upstream. Please retry shortly, "
        "or add your own key to accumulate your rate limits: https://openrouter.ai/settings/integrations"
    )
    body = {
        "error": {
            "message": "Provider returned error",
            "code": 429,
            "metadata": {"raw": raw, "provider_name": "Chutes"},
        },
        "user_id": "user_2vXq9mTn3Lr",
    }
    replay_server.enqueue(429, body)
    model = _model(replay_server, "openrouter")
    with pytest.raises(ProviderError) as info:
        await model.invoke(ModelRequest(messages=[UserMessage(text="hi")]))
    await model.aclose()
    assert "temporarily rate-limited upstream" in str(info.value)
    assert "Chutes" in str(info.value)
    assert info.value.details["metadata.raw"] == raw
    assert info.value.details["metadata.provider_name"] == "Chutes"
    assert info.value.retryable


async def test_groq_failed_generation_is_kept(replay_server: ReplayServer) -> None:
    generation = '<function=get_weather{"city": "Paris"}</function>'
    body = {
        "error": {
            "message": "Failed to call a function. Please adjust your prompt. See 'failed_generation' for more details.",
            "type": "invalid_request_error",
            "code": "tool_use_failed",
            "failed_generation": generation,
        }
    }
    replay_server.enqueue(400, body)
    model = _model(replay_server, "groq")
    with pytest.raises(ProviderError) as info:
        await model.invoke(ModelRequest(messages=[UserMessage(text="weather?")]))
    await model.aclose()
    assert generation in str(info.value)
    assert info.value.details == {"failed_generation": generation}
    assert info.value.code == "tool_use_failed"
    assert not info.value.retryable


async def test_deltas_in_the_same_read_as_an_error_event_are_kept(replay_server: ReplayServer) -> None:
    # Groq sends the answer's tokens and the error event back to back; they arrive in one read.
    events = [
        chunk({"role": "assistant", "content": ""}, model="llama-3.3-70b-versatile"),
        chunk({"content": "maybe"}, model="llama-3.3-70b-versatile"),
        {
            "error": {
                "message": "Failed to call a function. Please adjust your prompt. See 'failed_generation' for more details.",
                "type": "invalid_request_error",
                "code": "tool_use_failed",
                "failed_generation": "maybe",
            }
        },
    ]
    wire = b"".join(f"data: {json.dumps(event)}\n\n".encode() for event in events)
    replay_server.enqueue(200, [wire])
    model = _model(replay_server, "groq")
    items, error = await _stream(model)
    await model.aclose()
    assert [item.text for item in items if isinstance(item, TextDelta)] == ["maybe"]
    assert isinstance(error, ProviderError)
    assert error.code == "tool_use_failed"


async def test_a_chat_completion_still_parses_after_these_changes(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, chat_completion("fine"))
    model = _model(replay_server)
    response = await model.invoke(ModelRequest(messages=[UserMessage(text="hi")]))
    await model.aclose()
    assert response.message.text == "fine"


async def test_a_json_escaped_key_in_a_body_without_message_is_scrubbed(replay_server: ReplayServer) -> None:
    escaped = "".join(f"\\u{ord(ch):04x}" for ch in KEY)  # the key spelled with JSON escapes only
    replay_server.enqueue(500, '{"error": {"code": "' + escaped + '"}}')
    model = _model(replay_server)
    with pytest.raises(ProviderError) as info:
        await model.invoke(ModelRequest(messages=[UserMessage(text="hi")]))
    await model.aclose()
    text = str(info.value).lower()
    assert KEY.lower() not in text
    assert "\\u0074\\u006b" not in text
