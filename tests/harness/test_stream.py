"""Stream modes: ``AgentStream.chunks(*modes)`` over one run tree's events."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import anyio
import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    AgentRun,
    ConfigurationError,
    ModelRequest,
    ModelResponse,
    ProviderError,
    RetryPolicy,
    RunConfig,
    RunContext,
    RunPolicy,
    StreamChunk,
    SubAgent,
    TextDelta,
    tool,
)
from tinyagents_nb.harness.models import ModelStreamItem, StreamFinish
from tinyagents_nb.harness.runtime import MODE_KINDS
from tinyagents_nb.harness.testkit import ScriptedModel, SlowModel

pytestmark = pytest.mark.anyio


@tool
def lookup(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


class _FlakyStream(ScriptedModel):
    """Streams half an answer and fails once (retryable), then streams the whole answer."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(["unused"], **kwargs)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        self.requests.append(request)
        failing = len(self.requests) == 1
        for chunk in ["The answer ", "is 4"] if failing else ["The answer ", "is 42."]:
            yield TextDelta(text=chunk)
        if failing:
            raise ProviderError("connection reset mid-stream", retryable=True)
        yield StreamFinish(finish_reason="stop")

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("streaming only")


def agent_with_child() -> AgentHarness[None]:
    child = SubAgent("helper", AgentHarness(model=ScriptedModel(["child says hi"])), description="Helps.")
    model = ScriptedModel(
        [ScriptedModel.tool_calls([("lookup", {"city": "Rome"}), ("helper", {"input": "q"})]), "done"]
    )
    return AgentHarness(model=model, tools=[lookup, child.as_tool()])


async def collect(stream: Any, *modes: str) -> list[StreamChunk]:
    return [chunk async for chunk in stream.chunks(*modes)]


async def test_messages_mode_carries_attempts_and_the_discard_marker() -> None:
    harness = AgentHarness(model=_FlakyStream(), policy=RunPolicy(retry=RetryPolicy(initial_backoff_s=0.01)))
    chunks = await collect(harness.invoke_streaming("x"), "messages")
    assert {c.mode for c in chunks} == {"messages"}
    kinds = [c.data.kind for c in chunks]
    assert set(kinds) == {"model.delta", "model.discarded"}
    dropped = {(c.data.call_id, c.data.attempt) for c in chunks if c.data.kind == "model.discarded"}
    text = "".join(
        c.data.delta.text
        for c in chunks
        if c.data.kind == "model.delta" and (c.data.call_id, c.data.attempt) not in dropped
    )
    assert text == "The answer is 42."


async def test_tools_updates_and_final_modes() -> None:
    stream = agent_with_child().invoke_streaming("go")
    chunks = await collect(stream, "tools", "updates", "final")
    tools = [c.data.kind for c in chunks if c.mode == "tools"]
    assert tools.count("tool.started") == 2
    assert tools.count("tool.completed") == 2
    assert all(k in MODE_KINDS["tools"] for k in tools)
    updates = [c.data.kind for c in chunks if c.mode == "updates"]
    assert updates[0] == "run.started"
    assert updates[-1] == "run.completed"
    assert {"subagent.started", "subagent.completed", "model.started", "model.completed"} <= set(updates)
    assert "model.delta" not in updates
    assert "usage.recorded" not in updates
    final = chunks[-1]
    assert final.mode == "final"
    assert isinstance(final.data, AgentRun)
    assert final.data.final_text == "done"
    assert final.run_id == stream.run_id
    assert final.depth == 0
    assert [c.mode for c in chunks].count("final") == 1
    child_runs = {c.run_id for c in chunks if c.depth == 1}
    assert len(child_runs) == 1
    assert all(c.parent_run_id == stream.run_id for c in chunks if c.depth == 1)


async def test_events_mode_is_the_whole_event_stream() -> None:
    harness = agent_with_child()
    first = harness.invoke_streaming("go")
    chunks = await collect(first, "events")
    events = [e async for e in agent_with_child().invoke_streaming("go")]
    assert [c.data.kind for c in chunks] == [e.kind for e in events]


async def test_no_modes_means_all_and_two_views_of_one_run_agree() -> None:
    stream = agent_with_child().invoke_streaming("go")
    every = await collect(stream)
    assert {c.mode for c in every} == {"messages", "tools", "updates", "events", "final"}
    updates = await collect(stream, "updates")  # a second view, caught up from the run's start
    assert [c.data for c in updates] == [c.data for c in every if c.mode == "updates"]


async def test_only_the_handles_own_tree_never_a_concurrent_run_on_the_same_sink() -> None:
    session = RunContext(config=RunConfig(run_id="session"))
    slow = AgentHarness(model=SlowModel(ScriptedModel(["a"]), delay_s=0.05))
    a = slow.invoke_streaming("x", context=session.new_root(run_id="a"))
    b = agent_with_child().invoke_streaming("y", context=session.new_root(run_id="b"))
    got: dict[str, list[StreamChunk]] = {}

    async def read(name: str, stream: Any) -> None:
        got[name] = await collect(stream)

    async with anyio.create_task_group() as tg:
        tg.start_soon(read, "a", a)
        tg.start_soon(read, "b", b)
    assert {c.run_id for c in got["a"]} == {"a"}
    assert "a" not in {c.run_id for c in got["b"]}
    assert "b" in {c.run_id for c in got["b"]}


async def test_a_nested_handle_sees_its_subtree_only() -> None:
    parent = RunContext(config=RunConfig(run_id="parent"))
    nested = parent.child()
    stream = agent_with_child().invoke_streaming("go", context=nested)
    chunks = await collect(stream, "updates", "final")
    assert "parent" not in {c.run_id for c in chunks}
    assert chunks[-1].parent_run_id == "parent"
    assert chunks[-1].depth == 1


async def test_an_unknown_mode_is_a_clear_error_before_the_run_starts() -> None:
    stream = agent_with_child().invoke_streaming("go")
    with pytest.raises(ConfigurationError, match="unknown stream mode 'token'"):
        stream.chunks("messages", "token")
    assert not stream.done
    assert stream._task is None


async def test_stopping_early_releases_the_subscription() -> None:
    stream = agent_with_child().invoke_streaming("go")
    sink = stream.context.events
    before = len(sink._listeners)
    view = stream.chunks("events")
    async for _chunk in view:
        break
    await view.aclose()  # type: ignore[attr-defined]
    assert len(sink._listeners) == before
    await stream.result()
