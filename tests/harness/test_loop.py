"""The step machine's edges: waits held to the deadline, Stop before queued tools, closing events,
streams that carry only their own run tree, and retried stream attempts a consumer can drop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from typing import Any

import anyio
import pytest

from tinyagents_nb.harness import (
    AgentEvent,
    AgentHarness,
    AssistantMessage,
    FallbackPolicy,
    ModelRequest,
    ModelResponse,
    ProviderError,
    RateLimiter,
    RetryPolicy,
    RunCancelled,
    RunConfig,
    RunContext,
    RunLimits,
    RunPolicy,
    RunTimeout,
    SubAgent,
    TextDelta,
    tool,
)
from tinyagents_nb.harness.models import ModelStreamItem, StreamFinish
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel, SlowModel

pytestmark = pytest.mark.anyio


def recorded(ctx: RunContext[Any]) -> EventRecorder:
    return EventRecorder(ctx.events)


# ------------------------------------------------------------------------------------------ deadlines
async def test_a_retry_after_longer_than_the_budget_fails_at_once_with_run_timeout() -> None:
    model = ScriptedModel([ProviderError("429", retryable=True, retry_after_s=30.0), "never"])
    ctx = RunContext(config=RunConfig(timeout_s=6))
    rec = recorded(ctx)
    started = time.monotonic()
    with anyio.fail_after(20):
        run, _ = await AgentHarness(model=model).invoke_with_status(ctx, "x")
    assert time.monotonic() - started < 4.0  # not the 30 s wait, nor the 6 s budget
    assert isinstance(run.error, RunTimeout)
    assert isinstance(run.error.__cause__, ProviderError)
    assert model.calls == 1
    assert rec.of_kind("retry.scheduled") == []
    assert [e.limit for e in rec.of_kind("limit.reached")] == ["wall_clock"]  # type: ignore[attr-defined]
    assert rec.kinds()[-1] == "run.failed"


async def test_a_computed_backoff_longer_than_the_budget_fails_at_once() -> None:
    model = ScriptedModel([ProviderError("503", retryable=True), "never"])
    policy = RunPolicy(
        retry=RetryPolicy(initial_backoff_s=20.0, max_backoff_s=20.0), limits=RunLimits(max_wall_clock_s=6)
    )
    started = time.monotonic()
    with anyio.fail_after(20), pytest.raises(RunTimeout):
        await AgentHarness(model=model, policy=policy).invoke("x")
    assert time.monotonic() - started < 4.0
    assert model.calls == 1


async def test_a_backoff_that_fits_is_still_waited() -> None:
    model = ScriptedModel([ProviderError("503", retryable=True), "ok"])
    policy = RunPolicy(retry=RetryPolicy(initial_backoff_s=0.05))
    run = await AgentHarness(model=model, policy=policy).invoke("x", config=RunConfig(timeout_s=30))
    assert run.final_text == "ok"
    assert model.calls == 2


async def test_a_child_run_does_not_wait_past_its_parents_deadline() -> None:
    leaf = SubAgent("leaf", AgentHarness(model=ScriptedModel([ProviderError("429", retryable=True, retry_after_s=60)])))
    root = AgentHarness(
        model=ScriptedModel([ScriptedModel.tool_call("leaf", {"input": "go"}), "handled"]), tools=[leaf.as_tool()]
    )
    started = time.monotonic()
    with anyio.fail_after(20):
        run = await root.invoke("x", config=RunConfig(timeout_s=6))
    assert time.monotonic() - started < 4.0
    assert run.final_text == "handled"  # the child's timeout became an error result for the parent
    assert "wall-clock deadline" in run.messages[2].text


async def test_a_rate_limiter_wait_that_cannot_fit_fails_at_once() -> None:
    limiter = RateLimiter(rate_per_s=0.05, burst=1)  # the second call would wait 20 s
    model = ScriptedModel([ScriptedModel.tool_call("nothing", {}), "never"])
    policy = RunPolicy(rate_limiter=limiter)
    ctx = RunContext(config=RunConfig(timeout_s=6))
    rec = recorded(ctx)
    started = time.monotonic()
    with anyio.fail_after(20):
        run, _ = await AgentHarness(model=model, policy=policy).invoke_with_status(ctx, "x")
    assert time.monotonic() - started < 4.0
    assert isinstance(run.error, RunTimeout)
    assert model.calls == 1
    assert [e.limit for e in rec.of_kind("limit.reached")] == ["wall_clock"]  # type: ignore[attr-defined]


async def test_a_queued_rate_limiter_wait_ends_at_the_deadline() -> None:
    limiter = RateLimiter(rate_per_s=0.2, burst=1)
    policy = RunPolicy(rate_limiter=limiter)
    assert limiter.try_acquire()
    async with anyio.create_task_group() as tg:
        tg.start_soon(limiter.acquire)  # queues first and holds the line for ~5 s
        await anyio.sleep(0.05)
        started = time.monotonic()
        with pytest.raises(RunTimeout):
            await AgentHarness(model=ScriptedModel(["never"]), policy=policy).invoke("x", config=RunConfig(timeout_s=1))
        waited = time.monotonic() - started
        tg.cancel_scope.cancel()
    assert 0.8 < waited < 3.0  # the run ended at its deadline, not when the token came


# ------------------------------------------------------------------------------------------ queued tools
async def test_stop_during_a_tool_skips_the_queued_ones() -> None:
    ctx = RunContext()
    ran: list[str] = []

    @tool
    async def first() -> str:
        """Runs, and the user clicks Stop meanwhile."""
        ran.append("first")
        ctx.cancellation.cancel("stop")
        await anyio.sleep(0.01)
        return "one"

    @tool
    async def second() -> str:
        """Must never start."""
        ran.append("second")
        return "two"

    model = ScriptedModel([ScriptedModel.tool_calls([("first", {}), ("second", {})]), "never"])
    policy = RunPolicy(limits=RunLimits(max_concurrency=1))
    rec = recorded(ctx)
    with pytest.raises(RunCancelled):
        await AgentHarness(model=model, tools=[first, second], policy=policy).invoke_in_context(ctx, "go")
    assert ran == ["first"]
    assert [(e.kind, e.tool_name) for e in rec.events if e.kind.startswith("tool.")] == [  # type: ignore[attr-defined]
        ("tool.started", "first"),
        ("tool.completed", "first"),
    ]
    assert model.calls == 1


async def test_tool_started_is_emitted_when_the_tool_really_starts() -> None:
    order: list[str] = []
    ctx = RunContext()
    ctx.events.add_listener(lambda _offset, e: order.append(f"{e.kind}:{getattr(e, 'tool_name', '')}"))

    @tool
    async def step(n: int) -> int:
        """Work."""
        order.append(f"ran:{n}")
        return n

    model = ScriptedModel([ScriptedModel.tool_calls([("step", {"n": 1}), ("step", {"n": 2})]), "ok"])
    policy = RunPolicy(limits=RunLimits(max_concurrency=1))
    await AgentHarness(model=model, tools=[step], policy=policy).invoke_in_context(ctx, "go")
    tools = [o for o in order if o.startswith(("tool.started", "ran"))]
    assert tools == ["tool.started:step", "ran:1", "tool.started:step", "ran:2"]


async def test_every_started_tool_is_closed_when_a_sibling_fails_the_run() -> None:
    @tool
    async def fine() -> str:
        """Completes."""
        await anyio.sleep(0.01)
        return "fine"

    @tool
    def broken() -> str:
        """Raises."""
        raise ValueError("boom")

    ctx = RunContext()
    rec = recorded(ctx)
    model = ScriptedModel([ScriptedModel.tool_calls([("broken", {}), ("fine", {})]), "never"])
    policy = RunPolicy(tool_errors="fail")
    run, _ = await AgentHarness(model=model, tools=[fine, broken], policy=policy).invoke_with_status(ctx, "go")
    assert run.status == "failed"
    closing = {(e.kind, e.tool_name) for e in rec.events if e.kind in ("tool.completed", "tool.failed")}  # type: ignore[attr-defined]
    assert closing == {("tool.failed", "broken"), ("tool.completed", "fine")}
    assert rec.of_kind("tool.failed")[0].status == "failed"  # type: ignore[attr-defined]


async def test_the_deadline_during_a_tool_skips_the_queued_ones_and_reports_once() -> None:
    ran: list[str] = []

    @tool
    async def slow() -> str:
        """Outlives the run's budget."""
        ran.append("slow")
        await anyio.sleep(5)
        return "late"

    @tool
    def queued() -> str:
        """Must never start."""
        ran.append("queued")
        return "no"

    ctx = RunContext(config=RunConfig(timeout_s=0.3))
    rec = recorded(ctx)
    model = ScriptedModel([ScriptedModel.tool_calls([("slow", {}), ("queued", {})]), "never"])
    policy = RunPolicy(limits=RunLimits(max_concurrency=1))
    with anyio.fail_after(10):
        run, _ = await AgentHarness(model=model, tools=[slow, queued], policy=policy).invoke_with_status(ctx, "go")
    assert isinstance(run.error, RunTimeout)
    assert ran == ["slow"]
    assert len(rec.of_kind("limit.reached")) == 1
    (failed,) = rec.of_kind("tool.failed")
    assert (failed.tool_name, failed.status) == ("slow", "timed_out")  # type: ignore[attr-defined]
    assert [e.tool_name for e in rec.of_kind("tool.started")] == ["slow"]  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------------ closing events
def _assert_tree_closed(events: list[AgentEvent]) -> None:
    """Every started run, sub-agent and tool call has exactly one closing event."""
    runs = [e.run_id for e in events if e.kind == "run.started"]
    ended = [e.run_id for e in events if e.kind in ("run.completed", "run.failed", "run.cancelled")]
    assert sorted(runs) == sorted(ended)
    children = [e.child_run_id for e in events if e.kind == "subagent.started"]  # type: ignore[attr-defined]
    closed = [e.child_run_id for e in events if e.kind == "subagent.completed"]  # type: ignore[attr-defined]
    assert sorted(children) == sorted(closed)
    tools = [(e.run_id, e.call_id) for e in events if e.kind == "tool.started"]  # type: ignore[attr-defined]
    done = [(e.run_id, e.call_id) for e in events if e.kind in ("tool.completed", "tool.failed")]  # type: ignore[attr-defined]
    assert sorted(tools) == sorted(done)


def _delegating_root(leaf_model: Any, **policy: Any) -> AgentHarness[None]:
    leaf = SubAgent("leaf", AgentHarness(model=leaf_model))
    return AgentHarness(
        model=ScriptedModel([ScriptedModel.tool_call("leaf", {"input": "go"}), "handled"]),
        tools=[leaf.as_tool()],
        policy=RunPolicy(**policy),
    )


async def test_a_sub_agent_cut_off_by_its_tool_timeout_is_closed() -> None:
    root = _delegating_root(SlowModel(ScriptedModel(["late"]), delay_s=30), tool_timeout_s=0.2)
    ctx = RunContext()
    rec = recorded(ctx)
    with anyio.fail_after(10):
        run = await root.invoke_in_context(ctx, "x")
    assert run.final_text == "handled"
    _assert_tree_closed(rec.events)
    (completed,) = rec.of_kind("subagent.completed")
    assert completed.status == "cancelled"  # type: ignore[attr-defined]
    (tool_end,) = [e for e in rec.of_kind("tool.completed") if e.depth == 0]
    assert tool_end.is_error  # type: ignore[attr-defined]


async def test_an_externally_cancelled_tree_closes_every_node() -> None:
    root = _delegating_root(SlowModel(ScriptedModel(["late"]), delay_s=30))
    ctx = RunContext()
    rec = recorded(ctx)
    stream = root.invoke_streaming("x", context=ctx)
    task = stream.start()
    leaf_called = anyio.Event()
    ctx.events.add_listener(lambda _o, e: leaf_called.set() if e.kind == "model.started" and e.depth == 1 else None)
    with anyio.fail_after(10):
        await leaf_called.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    _assert_tree_closed(rec.events)
    assert rec.of_kind("subagent.completed")[0].status == "cancelled"  # type: ignore[attr-defined]
    (failed,) = rec.of_kind("tool.failed")
    assert failed.status == "cancelled"  # type: ignore[attr-defined]
    assert failed.depth == 0


# ------------------------------------------------------------------------------------------ shared sinks
async def test_a_stream_yields_only_its_own_run_tree_on_a_shared_sink() -> None:
    session = RunContext()
    slow = {"chunk_delay_s": 0.01}
    a = AgentHarness(model=SlowModel(ScriptedModel(["alpha " * 10]), **slow)).invoke_streaming(
        "a", context=session.new_root()
    )
    b = AgentHarness(model=SlowModel(ScriptedModel(["beta " * 10]), **slow)).invoke_streaming(
        "b", context=session.new_root()
    )
    seen: dict[str, list[AgentEvent]] = {"a": [], "b": []}

    async def drain(name: str, stream: Any) -> None:
        async for event in stream:
            seen[name].append(event)

    async with anyio.create_task_group() as tg:
        tg.start_soon(drain, "a", a)
        tg.start_soon(drain, "b", b)
    assert {e.root_run_id for e in seen["a"]} == {a.run_id}
    assert {e.root_run_id for e in seen["b"]} == {b.run_id}
    text_a = "".join(e.delta.text for e in seen["a"] if e.kind == "model.delta")  # type: ignore[attr-defined]
    assert text_a == "alpha " * 10
    assert seen["a"][-1].kind == "run.completed"


async def test_a_nested_runs_stream_yields_only_its_subtree() -> None:
    leaf = SubAgent("leaf", AgentHarness(model=SlowModel(ScriptedModel(["leaf text"]), delay_s=0.2)))
    mid = AgentHarness(
        model=ScriptedModel([ScriptedModel.tool_call("leaf", {"input": "go"}), "mid text"]), tools=[leaf.as_tool()]
    )
    parent = RunContext(config=RunConfig(run_id="parent"))
    child = parent.child()
    sibling = parent.child()
    stream = mid.invoke_streaming("x", context=child)
    events: list[AgentEvent] = []
    async for event in stream:
        events.append(event)
        if event.kind == "run.started" and event.run_id == child.run_id:  # others talk on the sink meanwhile
            sibling.emit(type(event), input="noise")  # type: ignore[call-arg]
            parent.emit(type(event), input="noise")  # type: ignore[call-arg]
    runs = {e.run_id for e in events}
    assert child.run_id in runs
    assert len(runs) == 2  # the nested run and its leaf
    assert sibling.run_id not in runs
    assert "parent" not in runs
    assert all(e.input != "noise" for e in events if e.kind == "run.started")  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------------ retried streams
class _FlakyStream(ScriptedModel):
    """Streams part of an answer and then fails, ``failures`` times; then streams the whole answer."""

    def __init__(self, partial: list[str], full: list[str], *, failures: int = 1, **kwargs: Any) -> None:
        super().__init__(["unused"], **kwargs)
        self._partial, self._full, self._failures = partial, full, failures

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        self.requests.append(request)
        failing = len(self.requests) <= self._failures
        for chunk in self._partial if failing else self._full:
            yield TextDelta(text=chunk)
        if failing:
            raise ProviderError("connection reset mid-stream", retryable=True)
        yield StreamFinish(finish_reason="stop")

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("streaming only")


def _answer_from_events(events: list[AgentEvent]) -> str:
    """What any consumer does: join the deltas, dropping attempts announced by model.discarded."""
    dropped = {(e.call_id, e.attempt) for e in events if e.kind == "model.discarded"}  # type: ignore[attr-defined]
    return "".join(
        e.delta.text  # type: ignore[attr-defined]
        for e in events
        if e.kind == "model.delta" and (e.call_id, e.attempt) not in dropped  # type: ignore[attr-defined]
    )


async def test_a_retried_streams_failed_attempt_is_discarded() -> None:
    model = _FlakyStream(["The answer ", "is 4"], ["The answer ", "is 42."])
    policy = RunPolicy(retry=RetryPolicy(initial_backoff_s=0.01))
    stream = AgentHarness(model=model, policy=policy).invoke_streaming("x")
    events = [e async for e in stream]
    run = await stream.result()
    assert run.final_text == "The answer is 42."
    assert _answer_from_events(events) == "The answer is 42."
    deltas = [e for e in events if e.kind == "model.delta"]
    assert [e.attempt for e in deltas] == [1, 1, 2, 2]  # type: ignore[attr-defined]
    kinds = [e.kind for e in events]
    assert kinds.index("model.discarded") < kinds.index("retry.scheduled")
    (discarded,) = [e for e in events if e.kind == "model.discarded"]
    assert (discarded.attempt, discarded.reason) == (1, "retry")  # type: ignore[attr-defined]
    assert not any("partial" in m.tags for m in run.messages if isinstance(m, AssistantMessage))


async def test_a_fallback_after_a_partial_stream_discards_it() -> None:
    primary = _FlakyStream(["Half an ans"], [], failures=9, model_name="primary")
    backup = ScriptedModel(["Whole answer."], model_name="backup")
    policy = RunPolicy(retry=RetryPolicy.none(), fallback=FallbackPolicy([backup]))
    stream = AgentHarness(model=primary, policy=policy).invoke_streaming("x")
    events = [e async for e in stream]
    assert (await stream.result()).final_text == "Whole answer."
    assert _answer_from_events(events) == "Whole answer."
    (discarded,) = [e for e in events if e.kind == "model.discarded"]
    assert discarded.reason == "fallback"  # type: ignore[attr-defined]
    assert {e.attempt for e in events if e.kind == "model.delta" and "Whole" in e.delta.text} == {2}  # type: ignore[attr-defined]


async def test_a_final_failed_attempt_keeps_its_partial_text() -> None:
    model = _FlakyStream(["Half an ans"], [], failures=9)
    stream = AgentHarness(model=model, policy=RunPolicy(retry=RetryPolicy.none())).invoke_streaming("x")
    events = [e async for e in stream]
    run = await stream.wait()
    assert run.status == "failed"
    assert [e.kind for e in events if e.kind == "model.discarded"] == []  # nothing follows it: nothing to drop
    assert run.messages[-1] == AssistantMessage(text="Half an ans", tags=("partial",))
