"""The context-pressure chain inside the loop: before every model call, with events, and a final failure."""

from __future__ import annotations

import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    ContextLimitError,
    ContextWindow,
    Message,
    RunContext,
    SystemMessage,
    UserMessage,
)
from tinyagents_nb.harness.runtime import RETRIEVED_TAG
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel

pytestmark = pytest.mark.anyio


def conversation(turns: int) -> list[Message]:
    messages: list[Message] = [SystemMessage(text="You are terse.")]
    messages.append(UserMessage(text="background " * 200, tags=[RETRIEVED_TAG]))
    for i in range(turns):
        messages += [UserMessage(text=f"question {i} " * 20), AssistantMessage(text=f"answer {i} " * 20)]
    messages.append(UserMessage(text="final question?"))
    return messages


async def test_pressure_relieves_the_request_but_keeps_the_transcript() -> None:
    model = ScriptedModel(["ok"])
    window = ContextWindow(model="m", max_tokens=1_200, reserved_output_tokens=200)
    harness = AgentHarness(model=model, context_window=window)
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    history = conversation(12)
    run = await harness.invoke_in_context(ctx, history)
    sent = model.requests[0].messages
    assert sent[0] == SystemMessage(text="You are terse.")
    assert sent[-1] == UserMessage(text="final question?")
    assert not any(RETRIEVED_TAG in m.tags for m in sent)  # dropped first
    actions = [e.action for e in rec.of_kind("context.pressure")]  # type: ignore[attr-defined]
    assert actions[0] == "drop_retrieved" or actions[0].startswith("drop")
    for event in rec.of_kind("context.pressure"):
        assert event.tokens_after < event.tokens_before  # type: ignore[attr-defined]
    assert ctx.context_window is not None
    assert ctx.context_window.estimated_prompt_tokens <= window.usable_tokens
    assert run.messages[: len(history)] == history  # the run's own transcript is intact


async def test_nothing_left_to_drop_fails_with_context_limit_error() -> None:
    model = ScriptedModel(["never"])
    harness = AgentHarness(
        model=model, context_window=ContextWindow(model="m", max_tokens=300, reserved_output_tokens=50)
    )
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    with pytest.raises(ContextLimitError):
        await harness.invoke_in_context(ctx, [SystemMessage(text="rules " * 400), UserMessage(text="hi")])
    assert model.calls == 0
    assert rec.of_kind("context.pressure")[-1].action == "fail"  # type: ignore[attr-defined]
    assert rec.kinds()[-1] == "run.failed"


async def test_pressure_can_be_turned_off() -> None:
    model = ScriptedModel(["ok"])
    harness = AgentHarness(model=model, context_window=1_000, pressure=None)
    ctx = RunContext()
    await harness.invoke_in_context(ctx, conversation(12))
    assert len(model.requests[0].messages) == len(conversation(12))
    assert ctx.context_window is not None
    assert ctx.context_window.utilization > 1


def _tool_with_doc(doc: str) -> object:
    from tinyagents_nb.harness import tool

    def lookup(query: str) -> str:
        return query

    lookup.__doc__ = doc
    return tool(lookup)


async def test_tool_schema_tokens_follow_the_tool_set() -> None:
    """Registering or removing a tool between runs changes the estimate; the same set is counted once."""
    from tinyagents_nb.harness import tool

    @tool
    def small() -> str:
        """Tiny."""
        return "x"

    model = ScriptedModel(["a", "b", "c", "d"])
    harness = AgentHarness(model=model, tools=[small], context_window=100_000)
    prompt = [UserMessage(text="hi")]

    async def estimate() -> int:
        ctx = RunContext()
        await harness.invoke_in_context(ctx, prompt)
        assert ctx.context_window is not None
        return ctx.context_window.estimated_prompt_tokens

    before = await estimate()
    harness.tools.register(_tool_with_doc("Look something up. " * 200))  # type: ignore[arg-type]
    grown = await estimate()
    assert grown > before + 500  # the new schema is counted, not the stale first count
    harness.tools.unregister("lookup")
    assert await estimate() == before
    # counted once per distinct set: the two sets seen so far, nothing more
    assert len(harness.fitter._tool_tokens) == 2
    assert await estimate() == before
    assert len(harness.fitter._tool_tokens) == 2
