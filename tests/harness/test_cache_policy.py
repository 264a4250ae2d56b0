"""Cache policy, cache-layout events and a prefix-stability check that treats append-only growth as stable."""

from __future__ import annotations

from typing import Any

import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    Middleware,
    ModelRequest,
    RunContext,
    RunPolicy,
    SystemMessage,
    ToolSchema,
    UserMessage,
    event_to_dict,
    tool,
)
from tinyagents_nb.harness.events import CacheLayoutEvent
from tinyagents_nb.harness.middleware import CachePolicy, PromptCacheGuardMiddleware
from tinyagents_nb.harness.observability import event_from_dict
from tinyagents_nb.harness.prompts import PromptBuilder
from tinyagents_nb.harness.providers.wire import AnthropicWireOptions, anthropic_body
from tinyagents_nb.harness.stores import InMemoryResponseCache
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel

pytestmark = pytest.mark.anyio

TOOLS = (ToolSchema(name="weather", description="Weather.", parameters={"type": "object"}),)


@tool
def echo(text: str) -> str:
    """Echo."""
    return text


def history(n: int) -> list[Any]:
    out: list[Any] = []
    for i in range(n):
        out += [UserMessage(text=f"q{i}"), AssistantMessage(text=f"a{i}")]
    return out


def test_append_only_growth_is_prefix_stable() -> None:
    def layout(turns: int, *, system: str = "You are terse.", tools: tuple[ToolSchema, ...] = TOOLS) -> Any:
        return PromptBuilder(tools).push_system(system).push_history(history(turns)).layout()

    before, grown = layout(2), layout(5)
    assert before.fingerprint != grown.fingerprint  # the old check called this unstable
    assert grown.is_prefix_stable_against(before)
    assert not before.is_prefix_stable_against(grown)  # shrinking drops cached messages
    assert not layout(5, system="You are verbose.").is_prefix_stable_against(before)
    assert not layout(5, tools=()).is_prefix_stable_against(before)
    rewritten = (
        PromptBuilder(TOOLS)
        .push_system("You are terse.")
        .push_history([UserMessage(text="q0"), AssistantMessage(text="changed"), *history(5)[2:]])
    )
    assert not rewritten.layout().is_prefix_stable_against(before)
    assert layout(2).is_prefix_stable_against(before)


async def test_the_guard_emits_a_layout_event_per_call_and_appends_are_stable() -> None:
    guard = PromptCacheGuardMiddleware(strict=True)
    model = ScriptedModel([ScriptedModel.tool_call("echo", {"text": "x"}), "done"])
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    await AgentHarness(model=model, tools=[echo], system_prompt="s", middleware=[guard]).invoke_in_context(ctx, "go")
    events = rec.of_kind("cache.layout")
    assert [e.status for e in events] == ["first", "appended"]  # type: ignore[attr-defined]
    second = events[1]
    assert isinstance(second, CacheLayoutEvent)
    assert (second.stable_messages, second.shared_messages, second.messages, second.tools) == (1, 2, 4, 1)
    assert guard.violations == []
    assert event_from_dict(event_to_dict(second)) == second


async def test_the_guard_names_a_changed_prefix_and_a_rewrite() -> None:
    class Drift(Middleware):
        n = 0

        async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
            self.n += 1
            if self.n == 1:
                return request
            system = SystemMessage(text="changed")  # from the second call on
            if self.n == 2:
                return request.with_messages((system, *request.messages[1:]))
            return request.with_messages((system, UserMessage(text="edited"), *request.messages[2:]))

    model = ScriptedModel([ScriptedModel.tool_call("echo", {"text": "x"}), ScriptedModel.tool_call("echo", {}), "ok"])
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    guard = PromptCacheGuardMiddleware()
    harness = AgentHarness(model=model, tools=[echo], system_prompt="s", middleware=[Drift(), guard])
    await harness.invoke_in_context(ctx, "go")
    assert [e.status for e in rec.of_kind("cache.layout")] == ["first", "prefix_changed", "rewritten"]  # type: ignore[attr-defined]
    assert len(guard.violations) == 2


async def test_cache_policy_can_bypass_the_response_cache() -> None:
    cache = InMemoryResponseCache()
    model = ScriptedModel(["one", "two", "three"])
    on = AgentHarness(model=model, policy=RunPolicy(response_cache=cache))
    assert (await on.invoke("hi")).final_text == "one"
    assert (await on.invoke("hi")).final_text == "one"  # a hit
    off = AgentHarness(model=model, policy=RunPolicy(response_cache=cache, cache=CachePolicy(response_cache=False)))
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    assert (await off.invoke_in_context(ctx, "hi")).final_text == "two"
    assert rec.of_kind("cache.hit") == []
    assert rec.of_kind("cache.miss") == []


async def test_cache_policy_can_turn_off_prompt_cache_breakpoints() -> None:
    model = ScriptedModel(["a", "b"])
    await AgentHarness(model=model).invoke("hi")
    await AgentHarness(model=model, policy=RunPolicy(cache=CachePolicy(prompt_cache=False))).invoke("hi")
    on, off = model.requests
    assert (on.prompt_cache, off.prompt_cache) == (True, False)
    options = AnthropicWireOptions(max_tokens=100)
    with_marks = anthropic_body(
        on.with_messages((SystemMessage(text="s"), *on.messages)), model="m", options=options, stream=False
    )
    without = anthropic_body(
        off.with_messages((SystemMessage(text="s"), *off.messages)), model="m", options=options, stream=False
    )
    assert "cache_control" in str(with_marks)
    assert "cache_control" not in str(without)
