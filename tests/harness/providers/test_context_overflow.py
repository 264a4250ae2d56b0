"""Every host's way of saying "the prompt does not fit" becomes ``ContextLimitError`` with its token counts.

Replayed from a real 127.0.0.1 server: as an HTTP error, as an error event inside a 200 stream, on
the Chat Completions and the Anthropic Messages wire, and through the agent loop, whose reactive
compaction must then run (it only runs on ``ContextLimitError``). The wordings come from the hosts'
error references, public SDK sources and recorded traffic; llama.cpp's was recorded against a real
``llama-server`` (tests/realserver/ runs the same against the real server).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.harness.anthropic_samples import event, message_start, rechunk, stream, text_block, usage
from tests.harness.replay_server import ReplayServer, chat_completion, chunk, drain, error_body, sse_done
from tinyagents_nb.harness import (
    AgentHarness,
    AnthropicModel,
    ContextLimitError,
    ModelRequest,
    ProviderError,
    RunContext,
    UserMessage,
)
from tinyagents_nb.harness.providers import OpenAIChatModel, ProviderSpec
from tinyagents_nb.harness.testkit import EventRecorder

pytestmark = pytest.mark.anyio

LLAMA_CPP: dict[str, Any] = {
    "error": {
        "code": 400,
        "type": "exceed_context_size_error",
        "message": "request (2638 tokens) exceeds the available context size (2048 tokens), try increasing it",
        "n_prompt_tokens": 2638,
        "n_ctx": 2048,
    }
}

# (host, message, used, limit): None where the wording carries no numbers
WORDINGS = [
    (
        "llama.cpp",
        "request (2638 tokens) exceeds the available context size (2048 tokens), try increasing it",
        2638,
        2048,
    ),
    ("llama.cpp (older)", "the request exceeds the available context size, try increasing it", None, None),
    ("llama.cpp (older)", "context size has been exceeded", None, None),
    (
        "OpenRouter",
        "This endpoint's maximum context length is 8192 tokens. However, you requested about 9100 tokens "
        "(9000 of text input, 100 in the output). Please reduce the length of either one.",
        9100,
        8192,
    ),
    (
        "vLLM",
        "This model's maximum context length is 2048 tokens. However, your request has 2100 input tokens.",
        2100,
        2048,
    ),
    ("OpenAI Responses", "Your input exceeds the context window of this model.", None, None),
    (
        "Gemini",
        "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).",
        1196265,
        1048575,
    ),
    ("xAI", "This model's maximum prompt length is 131072 but the request contains 537812 tokens.", 537812, 131072),
    (
        "Mistral",
        "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
        40000,
        32768,
    ),
    ("Groq", "Please reduce the length of the messages or completion.", None, None),
    (
        "Cerebras",
        "Please reduce the length of the messages or completion. Current length is 9000 while limit is 8192",
        9000,
        8192,
    ),
    ("Bedrock", "Input is too long for requested model.", None, None),
    (
        "LM Studio",
        "The number of tokens to keep from the initial prompt is greater than the context length.",
        None,
        None,
    ),
    ("Moonshot", "Invalid request: Your request exceeded model token limit: 131072", None, None),
    ("Anthropic", "input length and `max_tokens` exceed context limit: 199000 + 21333 > 200000", None, None),
]


def openai_compatible(server: ReplayServer) -> OpenAIChatModel:
    return OpenAIChatModel("smollm2", provider=ProviderSpec.compatible(base_url=server.base_url))


def anthropic(server: ReplayServer) -> AnthropicModel:
    return AnthropicModel("smollm2", api_key="local-test-key", base_url=server.base_url)


def ask() -> ModelRequest:
    return ModelRequest(messages=[UserMessage(text="hi")])


@pytest.mark.parametrize(("host", "message", "used", "limit"), WORDINGS)
async def test_each_hosts_overflow_wording_is_a_context_limit_error(
    replay_server: ReplayServer, host: str, message: str, used: int | None, limit: int | None
) -> None:
    replay_server.enqueue(400, error_body(message))
    _, error = await drain(openai_compatible(replay_server), ask())
    assert isinstance(error, ContextLimitError), (host, error)
    assert (error.estimated_tokens, error.limit_tokens) == (used, limit)


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_llama_servers_overflow_answer_carries_its_real_counts_on_both_wires(
    replay_server: ReplayServer, wire: str
) -> None:
    """The body's own fields count, even when the message is reworded (or cut) by a proxy."""
    body = {"error": {**LLAMA_CPP["error"], "message": "request exceeds the available context size"}}
    replay_server.enqueue(400, body)
    replay_server.enqueue(400, body)
    model = openai_compatible(replay_server) if wire == "openai" else anthropic(replay_server)
    with pytest.raises(ContextLimitError) as info:
        await model.invoke(ask())
    _, error = await drain(model, ask())
    for found in (info.value, error):
        assert isinstance(found, ContextLimitError)
        assert (found.estimated_tokens, found.limit_tokens) == (2638, 2048)
        assert "HTTP 400" in str(found)


async def test_the_type_alone_marks_an_overflow(replay_server: ReplayServer) -> None:
    replay_server.enqueue(400, {"error": {"code": 400, "type": "exceed_context_size_error", "message": "nope"}})
    _, error = await drain(openai_compatible(replay_server), ask())
    assert isinstance(error, ContextLimitError)


async def test_an_overflow_reported_inside_a_stream_is_a_context_limit_error(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, [chunk({"role": "assistant", "content": "par"}), LLAMA_CPP, sse_done()])
    items, error = await drain(openai_compatible(replay_server), ask())
    assert isinstance(error, ContextLimitError)
    assert (error.estimated_tokens, error.limit_tokens) == (2638, 2048)
    assert "in stream" in str(error)
    assert items  # the delta before the error was yielded


async def test_an_anthropic_stream_error_event_with_llama_servers_body(replay_server: ReplayServer) -> None:
    events = [message_start(usage(5, 1)), *text_block(0, ["par"]), event("error", LLAMA_CPP)]
    replay_server.enqueue(200, rechunk(events))
    _, error = await drain(anthropic(replay_server), ask())
    assert isinstance(error, ContextLimitError)
    assert (error.estimated_tokens, error.limit_tokens) == (2638, 2048)


async def test_rate_limits_and_other_400s_are_not_overflows(replay_server: ReplayServer) -> None:
    replay_server.enqueue(400, error_body("Invalid value for 'tool_choice'"))
    replay_server.enqueue(429, error_body("Rate limit reached for tokens per min", type="rate_limit_exceeded"))
    model = openai_compatible(replay_server)
    for _ in range(2):
        _, error = await drain(model, ask(), close=False)
        assert isinstance(error, ProviderError)
        assert not isinstance(error, ContextLimitError)
    await model.aclose()


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_the_loop_compacts_and_resends_after_llama_servers_overflow(
    replay_server: ReplayServer, wire: str
) -> None:
    """With no window declared, only the server's answer can start compaction; the run then completes."""
    replay_server.enqueue(400, LLAMA_CPP)
    if wire == "openai":
        replay_server.enqueue(200, chat_completion("done"))
        model: OpenAIChatModel | AnthropicModel = openai_compatible(replay_server)
    else:
        replay_server.enqueue(200, stream(text_block(0, ["done"])))
        model = anthropic(replay_server)
    history = [UserMessage(text=f"note {i}: " + "words " * 200) for i in range(12)]
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    harness: AgentHarness[None] = AgentHarness(model=model)
    run, _ = await harness.invoke_with_status(ctx, history, streaming=wire == "anthropic")
    await model.aclose()
    assert run.status == "completed", run.error
    assert run.final_text == "done"
    reactive = [e for e in rec.of_kind("context.pressure") if e.action == "reactive"]  # type: ignore[attr-defined]
    assert len(reactive) == 1
    first, second = (len(json.dumps(r.body["messages"])) for r in replay_server.requests)
    assert second < first * 0.9  # compacted to the server's own count, less a margin
