"""Tool progress (``ToolDelta`` via an injected ``ToolReporter``) and ``HookCounts``."""

from __future__ import annotations

import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    ConfigurationError,
    Middleware,
    RunContext,
    ToolCall,
    ToolDelta,
    ToolReporter,
    tool,
)
from tinyagents_nb.harness.middleware import HookCounter, HookCounts
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel

pytestmark = pytest.mark.anyio


@tool
async def crawl(pages: int, report: ToolReporter) -> str:
    """Crawl some pages."""
    for page in range(1, pages + 1):
        report(f"page {page} of {pages}", progress=page / pages, data={"page": page})
    return f"crawled {pages}"


@tool
def sync_crawl(pages: int, report: ToolReporter) -> str:
    """The same, as a sync tool (it runs on a worker thread)."""
    for page in range(pages):
        report.send(ToolDelta(message=f"p{page}"))
    return "ok"


class Watcher(Middleware):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, float | None]] = []

    def on_tool_delta(self, ctx, call: ToolCall, delta: ToolDelta) -> None:  # type: ignore[no-untyped-def]
        self.seen.append((call.id, delta.message, delta.progress))


def script() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedModel.tool_calls(
                [
                    ToolCall(id="a", name="crawl", arguments={"pages": 2}),
                    ToolCall(id="b", name="crawl", arguments={"pages": 3}),
                ]
            ),
            "done",
        ]
    )


async def test_reports_become_tool_delta_events_hooks_and_tools_chunks() -> None:
    watcher, counter = Watcher(), HookCounter()
    harness = AgentHarness(model=script(), tools=[crawl], middleware=[watcher, counter])
    assert "report" not in str(crawl.schema.parameters)  # injected, never shown to the model
    stream = harness.invoke_streaming("go")
    chunks = [c async for c in stream.chunks("tools")]
    run = await stream.result()
    deltas = [c.data for c in chunks if c.data.kind == "tool.delta"]
    assert [(d.call_id, d.message) for d in deltas if d.call_id == "a"] == [("a", "page 1 of 2"), ("a", "page 2 of 2")]
    assert [d.progress for d in deltas if d.call_id == "b"] == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert deltas[0].data == {"page": 1}
    assert deltas[0].tool_name == "crawl"
    assert sorted(watcher.seen) == sorted((d.call_id, d.message, d.progress) for d in deltas)
    counts = counter.counts(run.run_id)
    assert isinstance(counts, HookCounts)
    assert counts["on_tool_delta"] == 5
    assert counts["before_tool"] == 2
    assert counts["after_tool"] == 2
    assert counts["before_model"] == 2
    assert counts["after_agent"] == 1
    assert counts["on_error"] == 0
    assert counts.total == sum(counts.fired().values())


async def test_a_sync_tool_reports_from_its_worker_thread() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("sync_crawl", {"pages": 3}), "done"])
    run, events = await AgentHarness(model=model, tools=[sync_crawl]).invoke_with_events("go")
    assert run.ok
    assert [e.message for e in events if e.kind == "tool.delta"] == ["p0", "p1", "p2"]  # type: ignore[attr-defined]


async def test_a_tool_called_outside_a_run_reports_into_nothing() -> None:
    result = await crawl.call(RunContext(), {"pages": 2})
    assert result.text == "crawled 2"


def test_bad_deltas_are_typed_errors() -> None:
    with pytest.raises(ConfigurationError, match="progress"):
        ToolDelta(progress=1.5)
    with pytest.raises(ConfigurationError, match="message"):
        ToolDelta(message=3)  # type: ignore[arg-type]


async def test_hook_counts_are_per_run() -> None:
    counter = HookCounter()
    harness = AgentHarness(model=ScriptedModel(["a", "b"]), middleware=[counter])
    first = await harness.invoke("x")
    second = await harness.invoke("y")
    assert counter.runs() == [first.run_id, second.run_id]
    assert counter.counts(first.run_id)["before_model"] == 1
    assert counter.counts()["before_model"] == 2
    assert counter.counts("nobody").total == 0
    with pytest.raises(ConfigurationError, match="before_lunch"):
        HookCounts({"before_lunch": 1})


kept: list[ToolReporter] = []


@tool
async def leaky(report: ToolReporter) -> str:
    """Keeps its reporter after it returns (a background job, a cached object)."""
    report("working")
    kept.append(report)
    return "started"


async def test_a_reporter_kept_after_its_tool_returns_emits_nothing() -> None:
    kept.clear()
    model = ScriptedModel([ScriptedModel.tool_call("leaky", {}, id="k"), "done"])
    watcher = Watcher()
    harness = AgentHarness(model=model, tools=[leaky], middleware=[watcher])
    ctx: RunContext[None] = RunContext()
    rec = EventRecorder(ctx.events)  # stays attached after the run
    run = await harness.invoke_in_context(ctx, "go")
    assert run.ok
    (reporter,) = kept
    reporter("after the tool ended")  # after tool.completed, even after run.completed
    reporter.send(ToolDelta(message="again"))
    kinds = rec.kinds()
    assert kinds[-1] == "run.completed"
    assert kinds.count("tool.delta") == 1
    assert kinds.index("tool.delta") < kinds.index("tool.completed")
    assert [m for _, m, _ in watcher.seen] == ["working"]
    assert reporter.sent == 1
