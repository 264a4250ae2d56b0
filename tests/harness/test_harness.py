"""The agent loop end to end, driven by testkit models (no network)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from tinyagents_nb.harness import (
    AgentEvent,
    AgentHarness,
    AssistantMessage,
    CancellationToken,
    FallbackPolicy,
    LimitExceeded,
    ModelProfile,
    ModelResponse,
    ProviderError,
    RetryPolicy,
    RunCancelled,
    RunConfig,
    RunContext,
    RunLimits,
    RunPolicy,
    RunTimeout,
    StructuredOutputError,
    ToolCall,
    ToolError,
    ToolMessage,
    UnknownToolError,
    Usage,
    UserMessage,
    tool,
)
from tinyagents_nb.harness.stores import InMemoryResponseCache
from tinyagents_nb.harness.testkit import EventRecorder, FakeTool, ScriptedModel, SlowModel, StreamingMock, Trajectory

pytestmark = pytest.mark.anyio

U = Usage(input_tokens=10, output_tokens=5)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def recorded(ctx: RunContext[Any]) -> EventRecorder:
    return EventRecorder(ctx.events)


# ------------------------------------------------------------------------------------------ basics
async def test_text_reply() -> None:
    model = ScriptedModel([ScriptedModel.text("hello", usage=U)])
    harness = AgentHarness(model=model, system_prompt="be nice")
    ctx = RunContext()
    rec = recorded(ctx)
    run = await harness.invoke_in_context(ctx, "hi")
    assert run.final_text == "hello"
    assert run.status == "completed"
    assert [m.role for m in run.messages] == ["system", "user", "assistant"]
    assert run.usage == U
    assert run.model_calls == 1
    assert rec.kinds() == [
        "run.started",
        "model.started",
        "usage.recorded",
        "cost.recorded",
        "model.completed",
        "run.completed",
    ]
    assert model.requests[0].messages[0].text == "be nice"  # type: ignore[union-attr]


async def test_tool_loop_and_trajectory() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("add", {"a": 2, "b": 3}, usage=U), ScriptedModel.text("5", usage=U)])
    harness = AgentHarness(model=model, tools=[add])
    ctx = RunContext()
    rec = recorded(ctx)
    run = await harness.invoke_in_context(ctx, "2+3?")
    assert run.final_text == "5"
    assert run.tool_calls == 1
    assert run.usage == U + U
    tool_msg = run.messages[2]
    assert isinstance(tool_msg, ToolMessage)
    assert tool_msg.text == "5"
    assert model.requests[1].messages[-1] == tool_msg
    (
        Trajectory.from_events(rec.events)
        .assert_model_called_times(2)
        .assert_tool_called("add", times=1, with_args={"a": 2})
        .assert_order(["model.started", "tool.started:add", "tool.completed:add", "model.started", "run.completed"])
        .assert_completed()
    )
    # the schema the model saw is stable across turns
    assert model.requests[0].tools == model.requests[1].tools


async def test_every_event_carries_lineage() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("add", {"a": 1, "b": 1}), "2"])
    ctx = RunContext(config=RunConfig(run_id="root-run"))
    rec = recorded(ctx)
    await AgentHarness(model=model, tools=[add]).invoke_in_context(ctx, "go")
    assert {(e.run_id, e.root_run_id, e.parent_run_id, e.depth) for e in rec.events} == {
        ("root-run", "root-run", None, 0)
    }
    offsets_ok = all(isinstance(e.ts, float) for e in rec.events)
    assert offsets_ok


async def test_parallel_tool_calls_run_concurrently_and_fold_in_call_order() -> None:
    gate = anyio.Event()

    @tool
    async def waiter() -> str:
        """Wait for the other tool."""
        await gate.wait()
        return "waited"

    @tool
    async def opener() -> str:
        """Open the gate."""
        gate.set()
        return "opened"

    model = ScriptedModel([ScriptedModel.tool_calls([("waiter", {}), ("opener", {})]), "done"])
    ctx = RunContext()
    rec = recorded(ctx)
    with anyio.fail_after(5):  # serial execution would deadlock here
        run = await AgentHarness(model=model, tools=[waiter, opener]).invoke_in_context(ctx, "go")
    assert [m.text for m in run.messages if isinstance(m, ToolMessage)] == ["waited", "opened"]
    kinds = [e.kind for e in rec.events if e.kind.startswith("tool.")]
    assert kinds == ["tool.started", "tool.started", "tool.completed", "tool.completed"]


async def test_max_concurrency_serializes_tools() -> None:
    active = 0
    peak = 0

    @tool
    async def busy(n: int) -> int:
        """Pretend to work."""
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await anyio.sleep(0.01)
        active -= 1
        return n

    model = ScriptedModel([ScriptedModel.tool_calls([("busy", {"n": i}) for i in range(4)]), "ok"])
    policy = RunPolicy(limits=RunLimits(max_concurrency=1))
    await AgentHarness(model=model, tools=[busy], policy=policy).invoke("go")
    assert peak == 1


# ------------------------------------------------------------------------------------------ tool errors
async def test_unknown_tool_is_reported_to_the_model() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("nope", {}), "sorry"])
    run = await AgentHarness(model=model, tools=[add]).invoke("go")
    result = run.messages[2]
    assert isinstance(result, ToolMessage)
    assert result.is_error
    assert "unknown tool `nope`" in result.text
    assert "add" in result.text
    assert run.final_text == "sorry"


async def test_unknown_tool_can_fail_the_run() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("nope", {})])
    harness = AgentHarness(model=model, tools=[add], policy=RunPolicy(unknown_tool="fail"))
    with pytest.raises(UnknownToolError):
        await harness.invoke("go")


async def test_invalid_arguments_become_an_error_result() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("add", {"a": "x", "b": 1}), "fixed"])
    run = await AgentHarness(model=model, tools=[add]).invoke("go")
    result = run.messages[2]
    assert isinstance(result, ToolMessage)
    assert result.is_error
    assert "invalid arguments for tool `add`" in result.text
    assert "a" in result.text


async def test_non_json_arguments_are_reported_verbatim() -> None:
    bad = ModelResponse(
        message=AssistantMessage(tool_calls=[ToolCall.from_json_arguments(id="c", name="add", arguments="{oops")])
    )
    model = ScriptedModel([bad, "ok"])
    run = await AgentHarness(model=model, tools=[add]).invoke("go")
    result = run.messages[2]
    assert isinstance(result, ToolMessage)
    assert result.is_error
    assert "{oops" in result.text


async def test_raising_tool_is_reported_or_fails_per_policy() -> None:
    boom = FakeTool("boom", [RuntimeError("disk full")])
    run = await AgentHarness(model=ScriptedModel([ScriptedModel.tool_call("boom", {}), "ok"]), tools=[boom]).invoke("x")
    result = run.messages[2]
    assert isinstance(result, ToolMessage)
    assert "RuntimeError: disk full" in result.text
    ctx = RunContext()
    rec = recorded(ctx)
    harness = AgentHarness(
        model=ScriptedModel([ScriptedModel.tool_call("boom", {})]), tools=[boom], policy=RunPolicy(tool_errors="fail")
    )
    with pytest.raises(ToolError, match="disk full"):
        await harness.invoke_in_context(ctx, "x")
    Trajectory.from_events(rec.events).assert_order(["tool.failed", "run.failed"]).assert_failed("ToolError")


async def test_tool_timeout_is_reported_and_the_run_continues() -> None:
    slow = FakeTool("slow", ["late"], delay_s=5, timeout_s=0.05)
    model = ScriptedModel([ScriptedModel.tool_call("slow", {}), "moved on"])
    with anyio.fail_after(3):
        run = await AgentHarness(model=model, tools=[slow]).invoke("x")
    result = run.messages[2]
    assert isinstance(result, ToolMessage)
    assert "timed out" in result.text
    assert run.final_text == "moved on"


async def test_injected_context_is_hidden_and_provided() -> None:
    seen: list[str] = []

    @tool
    def whoami(ctx: RunContext[Any], greeting: str) -> str:
        """Report the run."""
        seen.append(ctx.run_id)
        return greeting

    model = ScriptedModel([ScriptedModel.tool_call("whoami", {"greeting": "hi", "ctx": "forged"}), "ok"])
    ctx = RunContext(config=RunConfig(run_id="r-inject"))
    await AgentHarness(model=model, tools=[whoami]).invoke_in_context(ctx, "x")
    assert seen == ["r-inject"]
    assert "ctx" not in model.requests[0].tools[0].parameters["properties"]


# ------------------------------------------------------------------------------------------ limits
async def test_model_call_cap_fails_closed() -> None:
    looping = ScriptedModel([ScriptedModel.tool_call("add", {"a": 1, "b": 1})] * 5)
    ctx = RunContext(config=RunConfig(max_model_calls=2))
    rec = recorded(ctx)
    harness = AgentHarness(model=looping, tools=[add])
    with pytest.raises(LimitExceeded, match="max model calls") as info:
        await harness.invoke_in_context(ctx, "x")
    assert info.value.limit == "model_calls"
    assert looping.calls == 2
    assert "limit.reached" in rec.kinds()


async def test_tool_call_cap() -> None:
    model = ScriptedModel([ScriptedModel.tool_calls([("add", {"a": 1, "b": 1})] * 3)])
    harness = AgentHarness(model=model, tools=[add], policy=RunPolicy(limits=RunLimits(max_tool_calls=2)))
    with pytest.raises(LimitExceeded, match="max tool calls"):
        await harness.invoke("x")


async def test_wall_clock_timeout() -> None:
    slow = SlowModel(ScriptedModel(["late"]), delay_s=5)
    with anyio.fail_after(3):
        with pytest.raises(RunTimeout):
            await AgentHarness(model=slow).invoke("x", config=RunConfig(timeout_s=0.1))


# ------------------------------------------------------------------------------------------ retry and fallback
FAST = RetryPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.002)


async def test_retryable_error_is_retried() -> None:
    model = ScriptedModel([ProviderError("busy", status=503, retryable=True), ScriptedModel.text("ok", usage=U)])
    ctx = RunContext()
    rec = recorded(ctx)
    run = await AgentHarness(model=model, policy=RunPolicy(retry=FAST)).invoke_in_context(ctx, "x")
    assert run.final_text == "ok"
    assert rec.kinds().count("retry.scheduled") == 1
    assert rec.kinds().count("model.started") == 1


async def test_fallback_after_non_retryable_error_with_fresh_budget() -> None:
    primary = ScriptedModel([ProviderError("gone", status=400)], model_name="primary")
    backup = ScriptedModel([ProviderError("busy", retryable=True), "from backup"], model_name="backup")
    ctx = RunContext()
    rec = recorded(ctx)
    policy = RunPolicy(retry=FAST, fallback=FallbackPolicy([backup]))
    run = await AgentHarness(model=primary, policy=policy).invoke_in_context(ctx, "x")
    assert run.final_text == "from backup"
    assert "fallback.used" in rec.kinds()
    assert rec.kinds().count("retry.scheduled") == 1


async def test_exhausted_retries_fail_with_the_provider_error() -> None:
    model = ScriptedModel([ProviderError("busy", retryable=True)] * 3)
    with pytest.raises(ProviderError, match="busy"):
        await AgentHarness(model=model, policy=RunPolicy(retry=FAST)).invoke("x")
    assert model.calls == 3


# ------------------------------------------------------------------------------------------ cancellation
async def test_pre_cancelled_run_makes_no_model_call() -> None:
    model = ScriptedModel(["never"])
    token = CancellationToken()
    token.cancel("early")
    ctx = RunContext(cancellation=token)
    rec = recorded(ctx)
    with pytest.raises(RunCancelled) as info:
        await AgentHarness(model=model).invoke_in_context(ctx, "x")
    assert model.calls == 0
    assert info.value.reason == "early"
    assert rec.kinds() == ["run.started", "run.cancelled"]


async def test_cancel_from_another_thread_during_a_slow_stream_keeps_the_partial_text() -> None:
    model = StreamingMock(["first ", "second ", "third"], chunk_delay_s=2.0)
    harness = AgentHarness(model=model)
    stream = harness.invoke_streaming("x")
    deltas: list[AgentEvent] = []
    start = 0.0
    async for event in stream:
        if event.kind == "model.delta":
            deltas.append(event)
            start = time.monotonic()
            threading.Thread(target=stream.cancel, args=("stop clicked",)).start()
    run = await stream.wait()
    assert time.monotonic() - start < 1.0  # the 2 s chunk wait was interrupted
    assert run.status == "cancelled"
    assert isinstance(run.error, RunCancelled)
    assert len(deltas) == 1
    partial = run.messages[-1]
    assert isinstance(partial, AssistantMessage)
    assert partial.text == "first "
    assert partial.tags == ("partial",)
    assert not any(isinstance(m, ToolMessage) and "cancel" in m.text.lower() for m in run.messages)


async def test_cancel_during_retry_backoff_stops_without_another_attempt() -> None:
    model = ScriptedModel([ProviderError("busy", retryable=True), "never"])
    policy = RunPolicy(retry=RetryPolicy(max_attempts=3, initial_backoff_s=30, max_backoff_s=30))
    ctx = RunContext()
    timer = threading.Timer(0.05, ctx.cancellation.cancel, args=("stop",))
    timer.start()
    with anyio.fail_after(5):
        run, status = await AgentHarness(model=model, policy=policy).invoke_with_status(ctx, "x")
    timer.join()
    assert run.status == "cancelled"
    assert status.status == "cancelled"
    assert model.calls == 1


async def test_cancel_before_a_tool_call_skips_the_tool() -> None:
    ran: list[int] = []

    @tool
    def side_effect() -> str:
        """Do something irreversible."""
        ran.append(1)
        return "done"

    ctx = RunContext()

    class CancelOnToolTurn(ScriptedModel):
        pass

    model = ScriptedModel([ScriptedModel.tool_call("side_effect", {})])
    original = model.invoke

    async def invoke_then_cancel(request: Any) -> ModelResponse:
        response = await original(request)
        ctx.cancellation.cancel("user")
        return response

    model.invoke = invoke_then_cancel  # type: ignore[method-assign]
    with pytest.raises(RunCancelled):
        await AgentHarness(model=model, tools=[side_effect]).invoke_in_context(ctx, "x")
    assert ran == []


# ------------------------------------------------------------------------------------------ streaming
async def test_streaming_yields_deltas_then_the_terminal_event() -> None:
    model = ScriptedModel([ScriptedModel.text("hello streaming world")], chunk_size=5)
    stream = AgentHarness(model=model).invoke_streaming("x")
    kinds: list[str] = []
    text = ""
    async for event in stream:
        kinds.append(event.kind)
        if event.kind == "model.delta":
            text += event.delta.text  # type: ignore[attr-defined]
    assert text == "hello streaming world"
    assert kinds[-1] == "run.completed"
    assert kinds.count("model.delta") == 5
    run = await stream.result()
    assert run.final_text == "hello streaming world"


async def test_streamed_tool_calls_are_assembled() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("add", {"a": 20, "b": 22}), "42"])
    stream = AgentHarness(model=model, tools=[add]).invoke_streaming("x")
    run = await stream.result()
    assert [m.text for m in run.messages if isinstance(m, ToolMessage)] == ["42"]


# ------------------------------------------------------------------------------------------ cache
async def test_response_cache_hits_across_runs_and_is_not_billed() -> None:
    cache = InMemoryResponseCache()
    model = ScriptedModel([ScriptedModel.text("cached answer", usage=U)])
    harness = AgentHarness(model=model, policy=RunPolicy(response_cache=cache))
    first = await harness.invoke("same question")
    ctx = RunContext()
    rec = recorded(ctx)
    second = await harness.invoke_in_context(ctx, "same question")
    assert second.final_text == first.final_text == "cached answer"
    assert model.calls == 1
    assert "cache.hit" in rec.kinds()
    assert "usage.recorded" not in rec.kinds()
    assert second.usage.is_empty


# ------------------------------------------------------------------------------------------ structured output
class Weather(BaseModel):
    city: str
    celsius: float


async def test_structured_output_via_tool_strategy() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("Weather", {"city": "Oslo", "celsius": -3})])
    run = await AgentHarness(model=model, output_type=Weather).invoke("weather?")
    assert run.structured is not None
    assert run.structured.value == Weather(city="Oslo", celsius=-3)
    assert run.structured.parse(dict) == {"city": "Oslo", "celsius": -3.0}
    assert model.requests[0].tool_choice == "Weather"
    assert json.loads(run.final_text) == {"city": "Oslo", "celsius": -3.0}


async def test_structured_output_native_strategy_from_profile() -> None:
    profile = ModelProfile(name="m", provider="test", structured_output="native")
    model = ScriptedModel(['```json\n{"city": "Rome", "celsius": 21}\n```'], profile=profile)
    run = await AgentHarness(model=model, output_type=Weather).invoke("weather?")
    assert run.structured is not None
    assert run.structured.value == Weather(city="Rome", celsius=21)
    assert model.requests[0].response_format is not None


async def test_invalid_structured_output_fails_the_run() -> None:
    profile = ModelProfile(name="m", provider="test", structured_output="native")
    model = ScriptedModel(["no json here"] * 3, profile=profile)
    with pytest.raises(StructuredOutputError, match="after 2 repair attempts"):  # the default: 2 repairs
        await AgentHarness(model=model, output_type=Weather).invoke("weather?")
    assert model.calls == 3


# ------------------------------------------------------------------------------------------ sync twin and inputs
def test_run_sync_without_a_loop() -> None:
    run = AgentHarness(model=ScriptedModel(["sync ok"])).run_sync("x")
    assert run.final_text == "sync ok"


async def test_run_sync_inside_a_running_loop_uses_a_worker_thread() -> None:
    run = AgentHarness(model=ScriptedModel(["inside"])).run_sync("x")
    assert run.final_text == "inside"


async def test_transcript_input_is_continued() -> None:
    model = ScriptedModel(["again"])
    history = [UserMessage(text="hi"), AssistantMessage(text="hello"), UserMessage(text="more")]
    run = await AgentHarness(model=model).invoke(history)
    assert run.messages[:3] == history
    assert len(model.requests[0].messages) == 3


async def test_empty_prompt_is_rejected() -> None:
    from tinyagents_nb.harness import ConfigurationError

    with pytest.raises(ConfigurationError, match="empty"):
        await AgentHarness(model=ScriptedModel(["x"])).invoke("   ")


async def test_context_window_estimate_is_exposed_for_the_gauge() -> None:
    ctx = RunContext()
    await AgentHarness(model=ScriptedModel(["ok"]), context_window=8_000).invoke_in_context(ctx, "hello there")
    assert ctx.context_window is not None
    assert ctx.context_window.max_tokens == 8_000
    assert 0 < ctx.context_window.estimated_prompt_tokens < 100
    assert 0 < ctx.context_window.utilization < 0.05


async def test_a_broken_cache_is_a_miss_not_a_failed_run(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(InMemoryResponseCache):
        def get(self, key: str) -> ModelResponse | None:
            raise RuntimeError("disk gone")

        def put(self, key: str, response: ModelResponse) -> None:
            raise RuntimeError("disk gone")

    run = await AgentHarness(model=ScriptedModel(["fine"]), policy=RunPolicy(response_cache=Broken())).invoke("x")
    assert run.final_text == "fine"
    assert "treating it as a miss" in caplog.text


async def test_cancel_from_inside_a_tool_stops_before_the_next_model_call() -> None:
    @tool
    def stopper(ctx: RunContext[Any]) -> str:
        """Ask to stop."""
        ctx.cancellation.cancel("tool said so")
        return "stopping"

    model = ScriptedModel([ScriptedModel.tool_call("stopper", {}), "never"])
    with pytest.raises(RunCancelled, match="tool said so") as info:
        await AgentHarness(model=model, tools=[stopper]).invoke("x")
    assert model.calls == 1
    assert isinstance(info.value.messages[-1], ToolMessage)  # the tool's result is kept in the partial transcript


async def test_cancel_during_an_in_flight_unary_call_is_prompt() -> None:
    slow = SlowModel(ScriptedModel(["late"]), delay_s=30)
    ctx = RunContext()
    threading.Timer(0.05, ctx.cancellation.cancel).start()
    start = time.monotonic()
    with anyio.fail_after(5), pytest.raises(RunCancelled):
        await AgentHarness(model=slow).invoke_in_context(ctx, "x")
    assert time.monotonic() - start < 2


async def test_an_externally_cancelled_task_still_reports_its_end() -> None:
    import asyncio

    slow = SlowModel(ScriptedModel(["late"]), delay_s=30)
    ctx = RunContext()
    rec = recorded(ctx)
    stream = AgentHarness(model=slow).invoke_streaming("x", context=ctx)
    task = stream.start()
    await anyio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert rec.kinds()[-1] == "run.cancelled"
    assert stream.status.status == "cancelled"
    with anyio.fail_after(2):  # the event iterator ends instead of waiting forever
        assert [e.kind async for e in stream][-1] == "run.cancelled"


async def test_a_slow_sync_tool_is_held_to_its_timeout() -> None:
    @tool(timeout_s=0.1)
    def sleepy() -> str:
        """Block for a while."""
        time.sleep(1.0)
        return "too late"

    start = time.monotonic()
    run = await AgentHarness(model=ScriptedModel([ScriptedModel.tool_call("sleepy", {}), "ok"]), tools=[sleepy]).invoke(
        "x"
    )
    assert time.monotonic() - start < 0.9
    assert "timed out" in run.messages[2].text


async def test_a_failed_model_call_emits_model_failed() -> None:
    ctx = RunContext()
    rec = recorded(ctx)
    with pytest.raises(ProviderError):
        await AgentHarness(model=ScriptedModel([ProviderError("down")])).invoke_in_context(ctx, "x")
    failed = rec.of_kind("model.failed")
    assert len(failed) == 1
    assert failed[0].error_type == "ProviderError"  # type: ignore[attr-defined]
    assert rec.kinds()[-2:] == ["model.failed", "run.failed"]


async def test_status_times_use_the_policy_clock() -> None:
    from tinyagents_nb.harness.testkit import DeterministicClock

    clock = DeterministicClock(start=1_000.0, step=1.0)
    run, status = await AgentHarness(model=ScriptedModel(["x"]), policy=RunPolicy(clock=clock)).invoke_with_status(
        RunContext(), "x"
    )
    assert run.ok
    assert status.ended_at is not None
    assert 1_000.0 <= status.started_at < status.ended_at < 1_100.0


async def test_an_unstarted_stream_buffers_nothing_on_a_shared_sink() -> None:
    session = RunContext()
    idle = AgentHarness(model=ScriptedModel(["never"])).invoke_streaming("x", context=session.new_root())
    await AgentHarness(model=ScriptedModel(["busy"] * 3)).invoke_in_context(session.new_root(), "y")
    assert idle._events is None
    assert len(session.events._listeners) == 0
    started_only = AgentHarness(model=ScriptedModel(["done"])).invoke_streaming("z", context=session.new_root())
    await started_only.wait()  # started but never iterated: still no subscription
    assert started_only._events is None
    assert len(session.events._listeners) == 0
    # iterating late catches up from the retained history
    assert [e.kind async for e in started_only][-1] == "run.completed"


async def test_the_tool_call_cap_mid_turn_runs_the_allowed_calls_and_answers_the_rest() -> None:
    ran: list[int] = []

    @tool
    def bump(n: int) -> str:
        """Count."""
        ran.append(n)
        return f"bumped {n}"

    model = ScriptedModel(
        [ScriptedModel.tool_calls([ToolCall(id=f"b{n}", name="bump", arguments={"n": n}) for n in range(3)])]
    )
    harness = AgentHarness(model=model, tools=[bump], policy=RunPolicy(limits=RunLimits(max_tool_calls=2)))
    stream = harness.invoke_streaming("x")
    rec = recorded(stream.context)
    run = await stream.wait()
    assert isinstance(run.error, LimitExceeded)
    assert run.error.limit == "tool_calls"
    assert ran == [0, 1]  # the calls within the cap ran
    answered = [m for m in run.messages if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in answered] == ["b0", "b1", "b2"]  # every call answered, in call order
    assert answered[2].is_error
    assert "not run" in answered[2].text
    assert [e.kind for e in rec.events].count("tool.completed") == 2
