"""Gemini, Azure OpenAI and Groq quirks, through the real OpenAI adapter and the replay server."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from tests.harness.replay_server import ReplayServer, chat_completion, chunk, sse_done, sse_text_chunks, usage_body
from tinyagents_nb.harness import ConfigurationError, CostTracker, ModelRequest, UserMessage
from tinyagents_nb.harness.models import StreamUsage
from tinyagents_nb.harness.providers import OpenAIChatModel, ProviderSpec, resolve_model
from tinyagents_nb.harness.providers.wire import normalize_usage

pytestmark = pytest.mark.anyio

KEY = "AIzaSy-SECRET-preset-0123456789"


def ask() -> ModelRequest:
    return ModelRequest(messages=[UserMessage(text="hi")])


async def stream_usage(model: OpenAIChatModel) -> Any:
    try:
        items = [item async for item in model.stream(ask())]
    finally:
        await model.aclose()
    return next(item.usage for item in items if isinstance(item, StreamUsage))


# ------------------------------------------------------------------------------------------ Gemini
def test_gemini_hidden_thinking_is_counted_as_reasoning_output() -> None:
    # Gemini's compatible endpoint: 74 output tokens, of which only 12 appear in completion_tokens.
    usage = normalize_usage({"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 83})
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (9, 74, 62)
    plain = normalize_usage({"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21})
    assert (plain.output_tokens, plain.reasoning_tokens) == (12, 0)


async def test_gemini_stream_usage_bills_hidden_thinking(replay_server: ReplayServer) -> None:
    spec = ProviderSpec.gemini()
    replay_server.enqueue(
        200,
        sse_text_chunks(
            ["Hello"], model="gemini-2.5-flash", usage={"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 83}
        ),
    )
    model = OpenAIChatModel("gemini-2.5-flash", provider=spec, base_url=replay_server.base_url, api_key=KEY)
    usage = await stream_usage(model)
    assert (usage.output_tokens, usage.reasoning_tokens) == (74, 62)
    cost, source = CostTracker().price("gemini-2.5-flash", usage, "gemini")
    assert source == "genai-prices"
    assert cost is not None
    assert cost.output_usd == Decimal(74) * Decimal("2.5") / 1_000_000  # thinking billed at the output rate
    assert replay_server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_gemini_profile_has_native_schemas_and_thinking() -> None:
    from tinyagents_nb.harness.models import profile_for

    assert profile_for("gemini", "gemini-2.5-flash").structured_output == "native"
    assert profile_for("gemini", "gemini-2.5-flash").supports_reasoning
    assert not profile_for("gemini", "gemini-2.0-flash").supports_reasoning


def test_gemini_key_falls_back_to_google_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    assert not ProviderSpec.gemini().has_key
    monkeypatch.setenv("GOOGLE_API_KEY", "g-key")
    assert ProviderSpec.gemini().api_key_from_env() == "g-key"
    monkeypatch.setenv("GEMINI_API_KEY", "gem-key")
    assert ProviderSpec.gemini().api_key_from_env() == "gem-key"
    model = resolve_model("gemini:gemini-2.5-pro")
    assert isinstance(model, OpenAIChatModel)
    assert model.provider == "gemini"
    assert "gem-key" not in repr(model)


# ------------------------------------------------------------------------------------------ Groq
async def test_groq_usage_only_under_x_groq_is_read(replay_server: ReplayServer) -> None:
    final = chunk({}, finish_reason="stop", model="llama-3.3-70b-versatile")
    final["x_groq"] = {"id": "req_01", "usage": usage_body(20, 5)}
    del final["usage"]
    replay_server.enqueue(200, [chunk({"role": "assistant", "content": "ok"}), final, sse_done()])
    model = OpenAIChatModel("llama-3.3-70b-versatile", provider="groq", base_url=replay_server.base_url, api_key=KEY)
    usage = await stream_usage(model)
    assert (usage.input_tokens, usage.output_tokens) == (20, 5)


# ------------------------------------------------------------------------------------------ Azure
async def test_azure_deployment_url_api_version_and_api_key_header(replay_server: ReplayServer) -> None:
    endpoint = replay_server.base_url.removesuffix("/v1")
    spec = ProviderSpec.azure(deployment="gpt-4o-prod", endpoint=endpoint)
    model = OpenAIChatModel("gpt-4o", provider=spec, api_key=KEY)
    replay_server.enqueue(200, chat_completion("hi from azure"))
    try:
        response = await model.invoke(ask())
    finally:
        await model.aclose()
    assert response.message.text == "hi from azure"
    sent = replay_server.requests[0]
    assert sent.path == "/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21"
    assert sent.headers["api-key"] == KEY
    assert "authorization" not in sent.headers
    assert KEY not in repr(model)
    assert "api_key=<set>" in repr(model)


async def test_azure_v1_and_dated_endpoint_urls(replay_server: ReplayServer) -> None:
    endpoint = replay_server.base_url.removesuffix("/v1")
    v1 = ProviderSpec.azure(deployment="gpt-4o-prod", endpoint=endpoint, api_version=None)
    assert v1.endpoint("chat/completions") == f"{endpoint}/openai/v1/chat/completions"
    dated = ProviderSpec.azure(deployment="emb", endpoint=endpoint + "/", api_version="2025-01-01")
    assert dated.endpoint("embeddings") == f"{endpoint}/openai/deployments/emb/embeddings?api-version=2025-01-01"


def test_azure_needs_an_endpoint_and_resolves_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    with pytest.raises(ConfigurationError, match="endpoint"):
        ProviderSpec.azure(deployment="d")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    model = resolve_model("azure:gpt-4o-prod")
    assert isinstance(model, OpenAIChatModel)
    assert model.spec.endpoint("chat/completions").startswith(
        "https://res.openai.azure.com/openai/deployments/gpt-4o-prod/"
    )
    assert KEY not in repr(model)
