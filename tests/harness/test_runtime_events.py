"""Runtime entry points and the events of middleware, rate limits, model selection and limits."""

from __future__ import annotations

import json

import anyio.lowlevel
import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    FallbackPolicy,
    LimitExceeded,
    Middleware,
    ModelRequest,
    ProviderError,
    RateLimiter,
    RetryPolicy,
    RunCancelled,
    RunLimits,
    RunPolicy,
    SubAgent,
    event_to_dict,
    tool,
)
from tinyagents_nb.harness.events import LimitReached
from tinyagents_nb.harness.runtime import LimitKind
from tinyagents_nb.harness.testkit import ScriptedModel, SlowModel

pytestmark = pytest.mark.anyio


@tool
def lookup(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def two_turns() -> ScriptedModel:
    return ScriptedModel([ScriptedModel.tool_call("lookup", {"city": "Oslo"}), "done"])


# ------------------------------------------------------------------------------------------ entry points
async def test_invoke_with_events_returns_the_run_and_its_tree_events() -> None:
    run, events = await AgentHarness(model=two_turns(), tools=[lookup]).invoke_with_events("go")
    assert run.ok
    assert run.final_text == "done"
    kinds = [e.kind for e in events]
    assert kinds[0] == "run.started"
    assert kinds[-1] == "run.completed"
    assert kinds.count("tool.completed") == 1
    assert {e.run_id for e in events} == {run.run_id}


async def test_a_sub_agent_invoked_on_its_own_returns_its_events() -> None:
    helper = SubAgent("helper", AgentHarness(model=ScriptedModel(["hi"])), system_prompt="Be kind.")
    run, events = await helper.invoke_with_events("go")
    assert run.final_text == "hi"
    assert run.messages[0].text == "Be kind."
    assert [e.kind for e in events] == ["run.started", "model.started", "model.completed", "run.completed"]


async def test_invoke_with_events_never_raises_and_keeps_the_failed_runs_events() -> None:
    model = ScriptedModel([ProviderError("boom", retryable=False)])
    run, events = await AgentHarness(model=model).invoke_with_events("go")
    assert run.status == "failed"
    assert isinstance(run.error, ProviderError)
    assert events[-1].kind == "run.failed"


async def test_the_streaming_twin_of_invoke_with_status_never_raises() -> None:
    harness = AgentHarness(model=SlowModel(ScriptedModel(["never"]), delay_s=5))
    handle = harness.invoke_streaming_with_status("go")
    assert handle.error is None
    async for event in handle:
        if event.kind == "model.started":
            handle.cancel("enough")
    run = await handle  # no RunCancelled raised
    assert run.status == "cancelled"
    assert isinstance(run.error, RunCancelled)
    assert handle.error is run.error
    assert handle.status.status == "cancelled"
    # the ordinary handle still raises
    plain = harness.invoke_streaming("go")
    plain.start()
    plain.cancel("stop")
    with pytest.raises(RunCancelled):
        await plain


# ------------------------------------------------------------------------------------------ middleware events
class Tagger(Middleware):
    async def before_model(self, ctx, request: ModelRequest) -> ModelRequest:  # type: ignore[no-untyped-def]
        return request.with_messages(request.messages)


class Refuser(Middleware):
    async def before_tool(self, ctx, call):  # type: ignore[no-untyped-def]
        raise PermissionError("no tools today")


async def test_middleware_events_only_when_asked() -> None:
    quiet = AgentHarness(model=two_turns(), tools=[lookup], middleware=[Tagger()])
    _, events = await quiet.invoke_with_events("go")
    assert not [e for e in events if e.kind.startswith("middleware.")]
    loud = AgentHarness(
        model=two_turns(), tools=[lookup], middleware=[Tagger()], policy=RunPolicy(middleware_events=True)
    )
    run, events = await loud.invoke_with_events("go")
    assert run.ok
    traced = [(e.kind, e.middleware, e.hook) for e in events if e.kind.startswith("middleware.")]  # type: ignore[attr-defined]
    assert (
        traced
        == [
            ("middleware.started", "Tagger", "before_model"),
            ("middleware.completed", "Tagger", "before_model"),
        ]
        * 2
    )  # two model calls; the hooks Tagger does not override are not traced


async def test_a_raising_hook_completes_with_its_error_name() -> None:
    harness = AgentHarness(
        model=two_turns(), tools=[lookup], middleware=[Refuser()], policy=RunPolicy(middleware_events=True)
    )
    run, events = await harness.invoke_with_events("go")
    assert run.status == "failed"
    (done,) = [e for e in events if e.kind == "middleware.completed"]
    assert (done.hook, done.error) == ("before_tool", "PermissionError")  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------------ rate limits, selection
class ManualClock:
    """Time that moves only while the limiter sleeps: on a busy machine the 20 ms between the two model
    calls could pass on the wall clock and refill the bucket, so the second call would not wait."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        await anyio.lowlevel.checkpoint()
        self.now += delay


async def test_rate_limit_waits_are_reported() -> None:
    clock = ManualClock()
    limiter = RateLimiter(rate_per_s=50, burst=1, clock=clock, sleep=clock.sleep)
    harness = AgentHarness(model=two_turns(), tools=[lookup], policy=RunPolicy(rate_limiter=limiter))
    run, events = await harness.invoke_with_events("go")
    assert run.ok
    waits = [e for e in events if e.kind == "rate_limit.waited"]
    assert len(waits) == 1  # the first call takes the burst token; the second waits for a refill
    assert waits[0].waited_s == pytest.approx(0.02)  # one token at 50 per second
    assert waits[0].call_id


async def test_model_selected_names_the_model_and_why() -> None:
    primary = ScriptedModel([ProviderError("down", retryable=False)], model_name="primary")
    backup = ScriptedModel(["ok"], model_name="backup")
    policy = RunPolicy(retry=RetryPolicy.none(), fallback=FallbackPolicy([backup]))
    run, events = await AgentHarness(model=primary, policy=policy).invoke_with_events("go")
    assert run.ok
    selected = [(e.model, e.provider, e.reason) for e in events if e.kind == "model.selected"]  # type: ignore[attr-defined]
    assert selected == [("backup", "test", "fallback")]  # the primary, as configured, is not announced
    kinds = [e.kind for e in events]
    assert kinds[kinds.index("model.selected") + 1] == "model.started"
    assert [e.model for e in events if e.kind == "model.started"] == ["primary", "backup"]  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------------ LimitKind
async def test_limit_reached_carries_a_limit_kind_with_the_old_string() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("lookup", {"city": "A"})] * 3)
    harness = AgentHarness(model=model, tools=[lookup], policy=RunPolicy(limits=RunLimits(max_model_calls=1)))
    run, events = await harness.invoke_with_events("go")
    assert isinstance(run.error, LimitExceeded)
    (reached,) = [e for e in events if isinstance(e, LimitReached)]
    assert reached.limit is LimitKind.MODEL_CALLS
    assert reached.limit == "model_calls"
    assert reached.limit_kind is LimitKind.MODEL_CALLS
    assert event_to_dict(reached)["limit"] == "model_calls"
    assert json.dumps(event_to_dict(reached)["limit"]) == '"model_calls"'
    assert LimitKind.of("max_cost_usd") == "max_cost_usd"  # a limit the enum does not name stays a string
    assert LimitReached(run_id="r", root_run_id="r", limit="max_cost_usd").limit_kind is None
