"""One instance of every event class in ``tinyagents_nb.harness.events``, with non-default values, for observability tests."""

from __future__ import annotations

import inspect
from decimal import Decimal
from typing import Any

from tinyagents_nb.harness import TextDelta, ThinkingDelta, ToolCallDelta, Usage, events as E
from tinyagents_nb.harness.runtime import LimitKind

USAGE = Usage(input_tokens=120, output_tokens=40, cached_input_tokens=20, reasoning_tokens=10, cache_write_tokens=5)


def lineage(n: int) -> Any:
    return {"run_id": "child-1", "parent_run_id": "root-1", "root_run_id": "root-1", "depth": 1, "ts": 1000.25 + n}


def sample_events() -> list[E.AgentEvent]:
    """Every concrete event class, each field set to something a lossy codec would get wrong."""
    events: list[E.AgentEvent] = [
        E.RunStarted(thread_id="t-1", model="openai:gpt-4o-mini", input="héllo ✓", **lineage(0)),
        E.RunCompleted(final_text="done", usage=USAGE, model_calls=2, tool_calls=3, duration_s=1.5, **lineage(1)),
        E.RunFailed(error_type="ProviderError", error="boom", duration_s=0.5, **lineage(2)),
        E.RunCancelledEvent(reason="user", duration_s=0.25, **lineage(3)),
        E.ModelStarted(call_id="c1", model="m", **lineage(4)),
        E.ModelDelta(call_id="c1", delta=TextDelta(text="hi"), **lineage(5)),
        E.ModelDelta(call_id="c1", delta=ThinkingDelta(text="hmm"), attempt=2, **lineage(6)),
        E.ModelDiscarded(call_id="c1", attempt=1, reason="retry", **lineage(6)),
        E.ModelRetracted(call_id="c1", reason="pii ✓", guardrail="no-pii", **lineage(6)),
        E.ModelDelta(call_id="c1", delta=ToolCallDelta(index=1, id="tc", name="add", arguments='{"a":'), **lineage(7)),
        E.ModelCompleted(
            call_id="c1", model="m", usage=USAGE, finish_reason="stop", duration_s=0.75, cached=True, **lineage(8)
        ),
        E.ModelFailed(call_id="c1", model="m", error_type="ProviderError", error="503", attempt=3, **lineage(9)),
        E.ToolStarted(
            call_id="t1", tool_name="add", arguments={"a": 1, "nested": {"xs": [1, "two", None]}}, **lineage(10)
        ),
        E.ToolCompleted(call_id="t1", tool_name="add", output="3", is_error=True, duration_s=0.125, **lineage(11)),
        E.ToolFailed(
            call_id="t1",
            tool_name="add",
            error_type="ValueError",
            error="bad",
            duration_s=0.5,
            status="cancelled",
            **lineage(12),
        ),
        E.RunResumed(resumed_from="run-0", from_step=4, model_calls=2, **lineage(12)),
        E.ToolReplayed(call_id="t0", tool_name="add", arguments={"a": 1}, output="2", is_error=False, **lineage(12)),
        E.SubAgentStarted(name="researcher", child_run_id="child-2", **lineage(13)),
        E.SubAgentCompleted(name="researcher", child_run_id="child-2", status="failed", usage=USAGE, **lineage(14)),
        E.SubAgentReused(name="researcher", turn=2, **lineage(15)),
        E.UsageRecorded(call_id="c1", model="m", usage=USAGE, **lineage(16)),
        E.CostRecorded(call_id="c1", model="m", usd=Decimal("0.000123450"), **lineage(17)),
        E.CostRecorded(call_id=None, model=None, usd=None, **lineage(18)),
        E.LimitReached(limit="model_calls", maximum=10.0, **lineage(19)),
        E.RetryScheduled(call_id="c1", attempt=2, delay_s=0.5, error="429", **lineage(20)),
        E.FallbackUsed(call_id="c1", from_model="a", to_model="b", error="down", **lineage(21)),
        E.CacheHit(call_id="c1", key="k1", **lineage(22)),
        E.CacheMiss(call_id="c1", key="k2", **lineage(23)),
        E.SteeringApplied(command="pause", accepted=False, detail="not now", **lineage(24)),
        E.ContextPressure(
            action="trim",
            tokens_before=900,
            tokens_after=400,
            limit_tokens=512,
            removed_messages=3,
            detail="x",
            **lineage(25),
        ),
        E.MemoryLoaded(thread_id="t-1", messages=4, **lineage(26)),
        E.MemorySaved(thread_id="t-1", messages=6, **lineage(27)),
        E.StructuredRepair(attempt=1, max_attempts=2, output="Weather", strategy="tool", error="bad ✓", **lineage(28)),
        E.ApprovalRequested(call_id="t2", tool_name="pay", arguments={"to": "ü", "cents": [1, None]}, **lineage(29)),
        E.ApprovalDecided(
            call_id="t2",
            tool_name="pay",
            approved=True,
            decided_by="person",
            decider="alice",
            reason="ok ✓",
            arguments_sha256="ab" * 32,
            edited=True,
            arguments={"to": "ü", "cents": [2]},
            decided_at=1700000000.5,
            wait_s=1.25,
            **lineage(30),
        ),
        E.ModelSelected(call_id="c1", model="big", provider="openai", reason="configurable", **lineage(31)),
        E.RateLimitWaited(call_id="c1", waited_s=0.375, **lineage(32)),
        E.MiddlewareStarted(middleware="Trim", hook="before_model", **lineage(33)),
        E.MiddlewareCompleted(middleware="Trim", hook="before_tool", duration_s=0.5, error="KeyError", **lineage(34)),
        E.ToolDeltaEvent(
            call_id="t1", tool_name="crawl", message="page 2/5 ✓", progress=0.4, data={"pages": [1, 2]}, **lineage(35)
        ),
        E.LimitReached(limit=LimitKind.WALL_CLOCK, maximum=2.5, **lineage(36)),
        E.ControlApplied(control="stop_with_final", detail="the answer ✓", **lineage(37)),
        E.GuardrailTrippedEvent(
            guardrail="no_pii",
            stage="tool",
            reason="an e-mail ✉",
            action="rejected",
            tool_name="send",
            call_id="t2",
            **lineage(38),
        ),
        E.CacheLayoutEvent(
            status="broken",
            stable_messages=2,
            shared_messages=1,
            messages=5,
            tools=3,
            prompt_cache=False,
            **lineage(39),
        ),
        E.BudgetReserved(call_id="c1", model="small", tokens=1200, usd=Decimal("0.0012"), **lineage(40)),
        E.BudgetReconciled(
            call_id="c1",
            model="small",
            outcome="cancelled",
            reserved_tokens=1200,
            reserved_usd=Decimal("0.0012"),
            tokens=900,
            usd=None,
            estimated=True,
            **lineage(41),
        ),
    ]
    return events


def event_classes() -> set[type[E.AgentEvent]]:
    """Every concrete event class the public ``events`` namespace exports (so a new class fails the coverage test until sampled)."""
    return {
        obj
        for name in E.__all__
        if inspect.isclass(obj := getattr(E, name)) and issubclass(obj, E.AgentEvent) and obj is not E.AgentEvent
    }
