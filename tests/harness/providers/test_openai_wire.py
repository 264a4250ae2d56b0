"""Wire shapes over the real replay server: omitted body fields, list-form content, reasoning fields."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness.replay_server import ReplayServer, chat_completion, chunk, sse_done, sse_text_chunks
from tinyagents_nb.harness import ConfigurationError, ModelRequest, TextDelta, ThinkingDelta, UserMessage
from tinyagents_nb.harness.models import ModelStreamItem, StreamAccumulator, StreamUsage
from tinyagents_nb.harness.providers import OpenAIChatModel, ProviderSpec

pytestmark = pytest.mark.anyio

KEY = "wire-test-key-0123456789"
MAGISTRAL = "magistral-medium-2507"


def _model(
    server: ReplayServer, provider: str | ProviderSpec = "openai", model: str = "gpt-4o-mini"
) -> OpenAIChatModel:
    return OpenAIChatModel(model, base_url=server.base_url, api_key=KEY, provider=provider)


def _ask(**kwargs: Any) -> ModelRequest:
    return ModelRequest(messages=[UserMessage(text="What is 2+2?")], **kwargs)


async def _stream(model: OpenAIChatModel, request: ModelRequest) -> list[ModelStreamItem]:
    try:
        return [item async for item in model.stream(request)]
    finally:
        await model.aclose()


# ------------------------------------------------------------------------------------------ omitted fields
async def test_mistral_streams_without_stream_options(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, sse_text_chunks(["4"], model="mistral-small-latest"))
    await _stream(_model(replay_server, "mistral", "mistral-small-latest"), _ask())
    body = replay_server.requests[0].body
    assert body["stream"] is True
    assert "stream_options" not in body


async def test_a_none_setting_removes_a_default_instead_of_sending_null(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, sse_text_chunks(["4"]))
    await _stream(_model(replay_server), _ask(settings={"stream_options": None, "seed": 7, "user": None}))
    body = replay_server.requests[0].body
    assert "stream_options" not in body
    assert "user" not in body
    assert body["seed"] == 7


async def test_a_setting_may_put_back_a_field_the_preset_omits(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, sse_text_chunks(["4"]))
    settings = {"stream_options": {"include_usage": True}}
    await _stream(_model(replay_server, "mistral", "mistral-small-latest"), _ask(settings=settings))
    assert replay_server.requests[0].body["stream_options"] == {"include_usage": True}


def test_omit_fields_is_validated_and_frozen() -> None:
    spec = ProviderSpec(name="x", base_url="http://127.0.0.1:1", requires_key=False, omit_fields={"user"})  # type: ignore[arg-type]
    assert spec.omit_fields == frozenset({"user"})
    with pytest.raises(ConfigurationError, match="omit_fields"):
        ProviderSpec(name="x", base_url="http://127.0.0.1:1", requires_key=False, omit_fields="stream_options")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="omit_fields"):
        ProviderSpec(name="x", base_url="http://127.0.0.1:1", requires_key=False, omit_fields=frozenset({" "}))


# ------------------------------------------------------------------------------------------ list-form content
def _magistral_chunk(content: Any, *, finish_reason: str | None = None, usage: Any = None) -> dict[str, Any]:
    # Mistral's chunks: no system_fingerprint or logprobs; usage rides on the finish chunk.
    out: dict[str, Any] = {
        "id": "b3f1c2a7e9d84f0c",
        "object": "chat.completion.chunk",
        "created": 1753800000,
        "model": MAGISTRAL,
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish_reason}],
    }
    if usage is not None:
        out["usage"] = usage
    return out


async def test_a_magistral_stream_keeps_thinking_and_text_parts(replay_server: ReplayServer) -> None:
    think = lambda text: [{"type": "thinking", "thinking": [{"type": "text", "text": text}]}]  # noqa: E731
    replay_server.enqueue(
        200,
        [
            {
                **_magistral_chunk(""),
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
            },
            _magistral_chunk(think("The user asks 2+2. ")),
            _magistral_chunk(think("That is 4.")),
            _magistral_chunk([{"type": "text", "text": "The answer"}]),
            _magistral_chunk(" is 4."),
            _magistral_chunk(
                "", finish_reason="stop", usage={"prompt_tokens": 12, "total_tokens": 40, "completion_tokens": 28}
            ),
            sse_done(),
        ],
    )
    items = await _stream(_model(replay_server, "mistral", MAGISTRAL), _ask())
    assert [item.text for item in items if isinstance(item, ThinkingDelta)] == ["The user asks 2+2. ", "That is 4."]
    assert [item.text for item in items if isinstance(item, TextDelta)] == ["The answer", " is 4."]
    usage = [item.usage for item in items if isinstance(item, StreamUsage)]
    assert usage[0].input_tokens == 12
    assert usage[0].output_tokens == 28
    accumulator = StreamAccumulator()
    for item in items:
        accumulator.add(item)
    message = accumulator.response().message
    assert message.text == "The answer is 4."
    assert message.reasoning == "The user asks 2+2. That is 4."


async def test_a_magistral_completion_keeps_thinking_and_text_parts(replay_server: ReplayServer) -> None:
    body = chat_completion(None, model=MAGISTRAL)
    body["choices"][0]["message"]["content"] = [
        {"type": "thinking", "thinking": [{"type": "text", "text": "Simple arithmetic."}]},
        {"type": "text", "text": "4"},
    ]
    replay_server.enqueue(200, body)
    model = _model(replay_server, "mistral", MAGISTRAL)
    response = await model.invoke(_ask())
    await model.aclose()
    assert response.message.text == "4"
    assert response.message.reasoning == "Simple arithmetic."


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_fields_are_read_in_streams_and_completions(replay_server: ReplayServer, field: str) -> None:
    # reasoning_content: DeepSeek, vLLM, xAI; reasoning: OpenRouter, Groq (reasoning_format=parsed), Ollama.
    replay_server.enqueue(
        200,
        [
            chunk({"role": "assistant", "content": None, field: "Let me add."}),
            chunk({"content": "4"}),
            chunk({}, finish_reason="stop"),
            sse_done(),
        ],
    )
    items = await _stream(_model(replay_server), _ask())
    assert [item.text for item in items if isinstance(item, ThinkingDelta)] == ["Let me add."]
    body = chat_completion("4")
    body["choices"][0]["message"][field] = "Let me add."
    replay_server.enqueue(200, body)
    model = _model(replay_server)
    response = await model.invoke(_ask())
    await model.aclose()
    assert response.message.reasoning == "Let me add."
