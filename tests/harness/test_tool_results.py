"""Tool results controlled at arrival: per-tool limits, raw output kept in the store and read back."""

from __future__ import annotations

import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    ConfigurationError,
    InMemoryStore,
    ModelRequest,
    RunConfig,
    RunContext,
    ToolCall,
    ToolMessage,
    ToolResult,
    tool,
)
from tinyagents_nb.harness.memory import TOOL_OUTPUT_NAMESPACE, CompactToolOutputs, load_tool_output
from tinyagents_nb.harness.models import TokenEstimator
from tinyagents_nb.harness.runtime import ToolResultLimit
from tinyagents_nb.harness.stores import StoreRegistry
from tinyagents_nb.harness.testkit import FunctionModel, ScriptedModel

pytestmark = pytest.mark.anyio

BIG = "".join(f"line {i:05d}\n" for i in range(5_000))  # 55,000 chars


@tool
def dump_log() -> str:
    """Return the whole log."""
    return BIG


@tool
def small() -> str:
    """A short answer."""
    return "short"


def tool_messages(request: ModelRequest) -> list[ToolMessage]:
    return [m for m in request.messages if isinstance(m, ToolMessage)]


async def test_an_oversized_result_is_cut_at_arrival_and_the_raw_output_is_kept() -> None:
    store = InMemoryStore()
    model = ScriptedModel([ScriptedModel.tool_call("dump_log"), "done"])
    limit = ToolResultLimit(2_000, store=store)
    harness = AgentHarness(model=model, tools=[dump_log], middleware=[limit])
    run = await harness.invoke("read the log", config=RunConfig(thread_id="t1"))
    (seen,) = tool_messages(model.requests[1])
    assert len(seen.text) <= 2_000
    assert seen.text.startswith("line 00000")
    assert "line 04999" in seen.text  # the tail is kept too
    assert "truncated" in seen.text
    assert run.messages[-2].text == seen.text  # the transcript holds the cut result, not the raw one
    keys = store.keys(TOOL_OUTPUT_NAMESPACE)
    assert len(keys) == 1
    assert keys[0].startswith("t1/")
    assert keys[0] in seen.text  # the note names the key
    raw = load_tool_output(store, keys[0])
    assert raw is not None
    assert raw.text == BIG  # the same reader CompactToolOutputs' keys use


async def test_per_tool_limits_override_the_default_and_none_exempts() -> None:
    store = InMemoryStore()
    model = ScriptedModel([ScriptedModel.tool_calls([("dump_log", {}), ("small", {})]), "done"])
    limit = ToolResultLimit(500, per_tool={"dump_log": None}, store=store)
    await AgentHarness(model=model, tools=[dump_log, small], middleware=[limit]).invoke("x")
    texts = [m.text for m in tool_messages(model.requests[1])]
    assert texts == [BIG, "short"]
    assert store.keys(TOOL_OUTPUT_NAMESPACE) == []
    assert limit.limit_for("dump_log") is None
    assert limit.limit_for("other") == 500


async def test_the_model_pages_through_the_raw_output_with_the_reader_tool() -> None:
    store = InMemoryStore()
    limit = ToolResultLimit(1_000, store=store)
    reader = limit.reader_tool(page_chars=30_000)
    pages: list[str] = []

    def script(request: ModelRequest) -> object:
        results = tool_messages(request)
        if not results:
            return ScriptedModel.tool_call("dump_log")
        last = results[-1]
        if last.name == "dump_log":
            key = last.text.split("key '", 1)[1].split("'", 1)[0]
            return ScriptedModel.tool_call("read_tool_output", {"key": key})
        pages.append(last.text)
        if "continue with offset=" in last.text:
            offset = int(last.text.split("continue with offset=", 1)[1].split("]", 1)[0])
            key = store.keys(TOOL_OUTPUT_NAMESPACE)[0]
            return ScriptedModel.tool_call("read_tool_output", {"key": key, "offset": offset})
        return "read it all"

    model = FunctionModel(script)  # type: ignore[arg-type]
    harness = AgentHarness(model=model, tools=[dump_log, reader], middleware=[limit])
    assert limit.limit_for("read_tool_output") is None  # its pages are exempt, or each would be cut again
    run = await harness.invoke("read everything", config=RunConfig(thread_id="t2"))
    assert run.final_text == "read it all"
    assert len(pages) == 2
    body = "".join(page.split("\n", 1)[1] for page in pages)
    assert body == BIG


async def test_the_reader_refuses_keys_of_another_thread() -> None:
    store = InMemoryStore()
    limit = ToolResultLimit(500, store=store)
    reader = limit.reader_tool()
    ctx_a = RunContext(config=RunConfig(thread_id="A"), stores=StoreRegistry(default=store))
    await limit.after_tool(ctx_a, ToolCall(id="c1", name="dump_log"), ToolResult.ok("secret of thread A " * 100))
    (key,) = store.keys(TOOL_OUTPUT_NAMESPACE)
    assert "secret of thread A" in (await reader.call(ctx_a, {"key": key})).text  # its own thread reads it
    ctx = RunContext(config=RunConfig(thread_id="B"), stores=StoreRegistry(default=store))
    text = await reader.call(ctx, {"key": key})
    assert "no stored tool output" in text.text
    assert "secret" not in text.text


async def test_keys_match_compaction_under_pressure() -> None:
    """A result cut at arrival and the same result compacted under pressure share one store entry."""
    store = InMemoryStore()
    ctx = RunContext(config=RunConfig(thread_id="t"), stores=StoreRegistry(default=store))
    message = ToolMessage(tool_call_id="c9", name="dump_log", text=BIG)
    await CompactToolOutputs(store=store).apply(ctx, [message], need_tokens=1, estimator=TokenEstimator.for_model("m"))
    compacted_key = store.keys(TOOL_OUTPUT_NAMESPACE)
    await ToolResultLimit(500, store=store).after_tool(ctx, ToolCall(id="c9", name="dump_log"), ToolResult.ok(BIG))
    assert store.keys(TOOL_OUTPUT_NAMESPACE) == compacted_key


def test_bad_limits_are_rejected() -> None:
    with pytest.raises(ConfigurationError):
        ToolResultLimit(10)
    with pytest.raises(ConfigurationError):
        ToolResultLimit(per_tool={"x": True})  # type: ignore[dict-item]
    with pytest.raises(ConfigurationError):
        ToolResultLimit(head_fraction=0)
    with pytest.raises(ConfigurationError):
        ToolResultLimit().reader_tool(page_chars=0)
