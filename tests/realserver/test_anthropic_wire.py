"""The Anthropic Messages adapter against llama.cpp's ``/v1/messages``: invoke, stream, overflow.

llama-server speaks the Anthropic wire too; usage arrives the Anthropic way (``input_tokens``
without the cache reads, ``cache_read_input_tokens`` beside it) and must be normalised to the
harness's convention exactly as the server counted it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.realserver.conftest import ALIAS, N_CTX, LlamaServer
from tests.realserver.test_chat import call, oversized
from tests.realserver.wire import Tee, client
from tinyagents_nb.harness import (
    AgentHarness,
    AnthropicModel,
    ContextLimitError,
    ModelDelta,
    ModelRequest,
    RunPolicy,
    UserMessage,
)

pytestmark = [pytest.mark.realserver, pytest.mark.anyio, pytest.mark.timeout(120)]


@pytest.fixture
async def tee() -> AsyncIterator[Tee]:
    recorder = Tee()
    yield recorder
    await recorder.aclose()


def claude_like(llama: LlamaServer, tee: Tee) -> AnthropicModel:
    return AnthropicModel(ALIAS, api_key="local-test-key", base_url=llama.base_url, http_client=client(tee))


def server_usage(tee: Tee) -> tuple[int, int, int]:
    """(input incl. cache reads, output, cache reads) as the server reported them."""
    merged: dict[str, int] = {}
    for event in tee.exchanges[-1].events():
        raw = event.get("usage") or (event.get("message") or {}).get("usage") or {}
        merged.update({k: v for k, v in raw.items() if isinstance(v, int)})
    read = merged.get("cache_read_input_tokens", 0)
    written = merged.get("cache_creation_input_tokens", 0)
    return merged["input_tokens"] + read + written, merged["output_tokens"], read


def usage_of(usage: object) -> tuple[int, int, int]:
    return (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens)  # type: ignore[attr-defined]


async def test_invoke_on_the_messages_wire(llama: LlamaServer, tee: Tee) -> None:
    model = claude_like(llama, tee)
    response = await model.invoke(
        ModelRequest(messages=[UserMessage(text="What is the capital of France?")], temperature=0, max_output_tokens=16)
    )
    await model.aclose()
    assert response.message.text.strip()
    assert usage_of(response.usage) == server_usage(tee)
    assert tee.exchanges[-1].body["max_tokens"] == 16


async def test_streaming_on_the_messages_wire(llama: LlamaServer, tee: Tee) -> None:
    harness = AgentHarness(model=claude_like(llama, tee), policy=RunPolicy(temperature=0.0, max_output_tokens=40))
    stream = harness.invoke_streaming("Name three colours of the rainbow.")
    deltas = [e.delta.text for e in [x async for x in stream] if isinstance(e, ModelDelta)]  # type: ignore[attr-defined]
    run = await stream
    await harness.aclose()
    assert run.status == "completed"
    wire_text = "".join(
        (e.get("delta") or {}).get("text", "")
        for e in tee.exchanges[-1].events()
        if e.get("type") == "content_block_delta"
    )
    assert len(deltas) > 3
    assert "".join(deltas) == wire_text == run.final_text
    assert usage_of(run.usage) == server_usage(tee)


@pytest.mark.parametrize("streaming", [False, True])
async def test_overflow_on_the_messages_wire_is_a_context_limit_error(
    llama: LlamaServer, tee: Tee, streaming: bool
) -> None:
    model = claude_like(llama, tee)
    request = ModelRequest(messages=[UserMessage(text=oversized())], max_output_tokens=16)
    with pytest.raises(ContextLimitError) as info:
        await call(model, request, streaming=streaming)
    await model.aclose()
    assert info.value.limit_tokens == N_CTX
    assert info.value.estimated_tokens is not None
    assert info.value.estimated_tokens > N_CTX
