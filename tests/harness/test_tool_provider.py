"""``ToolProvider``: tools listed at run time (how MCP servers plug in), without any MCP in sight."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    ConfigurationError,
    RunContext,
    Tool,
    ToolMessage,
    ToolProvider,
    ToolRegistry,
    tool,
)
from tinyagents_nb.harness.testkit import ScriptedModel


@tool
def double(x: int) -> int:
    """Double x."""
    return 2 * x


@tool
def triple(x: int) -> int:
    """Triple x."""
    return 3 * x


class Provider:
    def __init__(self, *tools: Tool) -> None:
        self.listed: tuple[Tool, ...] = tools
        self.asked = 0
        self.closed = 0

    @property
    def name(self) -> str:
        return "fake"

    async def list_tools(self, ctx: RunContext[Any]) -> Sequence[Tool]:
        self.asked += 1
        return self.listed

    async def aclose(self) -> None:
        self.closed += 1


def test_a_provider_is_recognised_and_its_tools_appear_at_refresh() -> None:
    provider = Provider(double)
    assert isinstance(provider, ToolProvider)
    assert not isinstance(double, ToolProvider)
    registry = ToolRegistry([triple, provider])
    assert registry.names() == ["triple"]
    assert registry.providers == (provider,)
    schemas = asyncio.run(registry.refresh(RunContext()))
    assert [s.name for s in schemas] == ["double", "triple"]
    assert registry["double"] is double
    assert asyncio.run(registry.refresh(RunContext())) is schemas  # unchanged list: nothing rebuilt


def test_a_provided_tool_never_shadows_a_registered_one() -> None:
    registry = ToolRegistry([double, Provider(double)])
    with pytest.raises(ConfigurationError, match="clashes"):
        asyncio.run(registry.refresh(RunContext()))


def test_register_refuses_a_provider_with_a_hint() -> None:
    with pytest.raises(ConfigurationError, match="add_provider"):
        ToolRegistry().register(Provider())  # type: ignore[arg-type]


def test_a_run_asks_before_every_model_call_and_sees_a_changed_list() -> None:
    provider = Provider(double)
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("double", {"x": 2}),
            ScriptedModel.tool_call("triple", {"x": 2}),
            ScriptedModel.text("ok"),
        ]
    )
    agent = AgentHarness(model=model, tools=[provider])

    original = provider.list_tools

    async def grow(ctx: RunContext[Any]) -> Sequence[Tool]:
        if provider.asked == 1:
            provider.listed = (double, triple)
        return await original(ctx)

    provider.list_tools = grow  # type: ignore[method-assign]
    run = agent.run_sync("go")
    assert [m.text for m in run.messages if isinstance(m, ToolMessage)] == ["4", "6"]
    assert [len(r.tools) for r in model.requests] == [1, 2, 2]
    assert provider.asked == 3


def test_run_sync_keeps_providers_open_and_aclose_closes_them() -> None:
    provider = Provider(double)
    agent = AgentHarness(model=ScriptedModel([ScriptedModel.text("a"), ScriptedModel.text("b")]), tools=[provider])
    agent.run_sync("one")
    agent.run_sync("two")
    assert provider.closed == 0  # reused across runs (and their event loops)
    agent.close()
    assert provider.closed == 1
