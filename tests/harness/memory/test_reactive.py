"""Reactive compaction: a provider's "prompt too long" compacts the request once more and re-sends it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness.replay_server import ReplayServer, chat_completion, error_body
from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    ConfigurationError,
    ContextLimitError,
    Message,
    OpenAIChatModel,
    RunContext,
    RunPolicy,
    SystemMessage,
    UserMessage,
)
from tinyagents_nb.harness.models import TokenEstimator
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel

pytestmark = pytest.mark.anyio


def long_history(turns: int = 30) -> list[Message]:
    messages: list[Message] = [SystemMessage(text="You are terse.")]
    for i in range(turns):
        messages += [UserMessage(text=f"question {i} " * 30), AssistantMessage(text=f"answer {i} " * 30)]
    messages.append(UserMessage(text="final question?"))
    return messages


def too_long(limit: int | None = None, used: int | None = None) -> ContextLimitError:
    return ContextLimitError("prompt is too long", model="scripted", estimated_tokens=used, limit_tokens=limit)


async def test_a_rejected_prompt_is_compacted_and_resent() -> None:
    history = long_history()
    estimate = TokenEstimator.for_model("scripted").estimate(history)
    # the provider counts twice what we estimate and allows half of our estimate: target ~ a quarter
    model = ScriptedModel([too_long(limit=estimate, used=estimate * 2), "answer"])
    harness = AgentHarness(model=model)  # no known window: only the provider can say "too long"
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    run = await harness.invoke_in_context(ctx, history)
    assert run.status == "completed"
    assert run.final_text == "answer"
    first, second = model.requests
    assert first.messages == tuple(history)
    assert len(second.messages) < len(first.messages)
    assert second.messages[0] == SystemMessage(text="You are terse.")
    assert second.messages[-1] == UserMessage(text="final question?")
    resent = TokenEstimator.for_model("scripted").estimate(second.messages)
    assert resent <= estimate * 0.45
    actions = [e.action for e in rec.of_kind("context.pressure")]  # type: ignore[attr-defined]
    assert actions[0] == "reactive"
    assert len(actions) >= 2  # the chain's own action(s) follow
    assert run.messages[: len(history)] == history  # the run's transcript is not rewritten
    assert run.model_calls == 1  # one model call, sent twice


async def test_without_the_providers_figures_each_attempt_shrinks_more() -> None:
    history = long_history()
    model = ScriptedModel([too_long(), too_long(), "answer"])
    run = await AgentHarness(model=model).invoke(history)
    assert run.final_text == "answer"
    sizes = [len(r.messages) for r in model.requests]
    assert sizes[0] > sizes[1] > sizes[2]


async def test_attempts_are_bounded_then_the_error_ends_the_run() -> None:
    model = ScriptedModel([too_long(), too_long(), too_long(), "never"])
    with pytest.raises(ContextLimitError):
        await AgentHarness(model=model).invoke(long_history())
    assert len(model.requests) == 3  # the first send and two compactions (the default)


async def test_zero_reactive_compactions_fails_at_once() -> None:
    model = ScriptedModel([too_long(), "never"])
    with pytest.raises(ContextLimitError):
        await AgentHarness(model=model, policy=RunPolicy(reactive_compactions=0)).invoke(long_history())
    assert len(model.requests) == 1


async def test_nothing_to_compact_raises_the_providers_error() -> None:
    error = too_long()
    model = ScriptedModel([error, "never"])
    with pytest.raises(ContextLimitError) as info:
        await AgentHarness(model=model).invoke("one short question")
    assert info.value is error
    assert len(model.requests) == 1


@pytest.mark.parametrize("bad", [-1, True, 1.5])
def test_bad_reactive_compactions_is_rejected(bad: Any) -> None:
    with pytest.raises(ConfigurationError):
        RunPolicy(reactive_compactions=bad)


async def test_a_real_adapters_context_error_is_compacted_and_resent(replay_server: ReplayServer) -> None:
    """Through the OpenAI adapter and a loopback server: HTTP 400 context_length_exceeded, then 200."""
    replay_server.enqueue(
        400,
        error_body(
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 160000 tokens.",
            code="context_length_exceeded",
        ),
    )
    replay_server.enqueue(200, chat_completion("compacted and answered"))
    model = OpenAIChatModel("gpt-4o-mini", base_url=replay_server.base_url, api_key="sk-test-0123456789")
    try:
        ctx = RunContext()
        rec = EventRecorder(ctx.events)
        run = await AgentHarness(model=model).invoke_in_context(ctx, long_history())
    finally:
        await model.aclose()
    assert run.final_text == "compacted and answered"
    first, second = (r.body["messages"] for r in replay_server.requests)
    assert len(second) < len(first)
    assert second[-1] == first[-1]  # the current question is kept
    reactive = [e for e in rec.of_kind("context.pressure") if e.action == "reactive"]  # type: ignore[attr-defined]
    assert len(reactive) == 1


async def test_what_a_rejection_taught_is_remembered_so_later_turns_are_not_rejected_again() -> None:
    from tinyagents_nb.harness import ModelResponse, ToolCall, tool

    @tool
    def fetch(page: int) -> str:
        """A page of a long document."""
        return f"page {page}: " + "lorem ipsum " * 150

    estimator = TokenEstimator.for_model("function")
    limit = 4_000  # the provider's real limit; it counts 1.5x what we estimate
    rejections: list[int] = []
    pages = iter(range(1, 6))

    def provider(request: Any) -> ModelResponse | str:
        real = int(estimator.estimate(request.messages) * 1.5)
        if real > limit:
            rejections.append(real)
            raise ContextLimitError("prompt is too long", estimated_tokens=real, limit_tokens=limit)
        page = next(pages, None)
        if page is None:
            return "summary done"
        call = ToolCall(id=f"p{page}", name="fetch", arguments={"page": page})
        return ModelResponse(message=AssistantMessage(text="", tool_calls=(call,)))

    from tinyagents_nb.harness.testkit import FunctionModel

    harness = AgentHarness(model=FunctionModel(provider), tools=[fetch])  # no known window
    run = await harness.invoke(long_history(25))
    assert run.final_text == "summary done"
    assert run.model_calls == 6
    assert len(rejections) == 1  # learned once; every later turn was fitted to what it learned
    assert harness.fitter.learned_prompt_tokens is not None
    assert harness.fitter.learned_prompt_tokens < limit
