"""A whole trace is reproducible: DeterministicClock + DeterministicIds make two identical runs byte-identical."""

from __future__ import annotations

import json

import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    ProviderError,
    RetryPolicy,
    RunContext,
    RunPolicy,
    SubAgent,
    event_to_dict,
    tool,
)
from tinyagents_nb.harness.events import ApprovalRequested
from tinyagents_nb.harness.memory import LongTermMemory
from tinyagents_nb.harness.stores import InMemoryStore
from tinyagents_nb.harness.testkit import DeterministicClock, DeterministicIds, ScriptedModel

pytestmark = pytest.mark.anyio


@tool
async def lookup(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def build() -> AgentHarness[None]:
    """A root that calls a tool, then a sub-agent (which calls a tool itself), then answers."""
    ids = DeterministicIds()
    policy = RunPolicy(clock=DeterministicClock(), ids=ids)
    child = SubAgent(
        "helper",
        AgentHarness(
            model=ScriptedModel([ScriptedModel.tool_call("lookup", {"city": "Oslo"}), "child done"], ids=ids),
            tools=[lookup],
        ),
        description="Helps.",
    )
    model = ScriptedModel(
        [
            ScriptedModel.tool_calls([("lookup", {"city": "Rome"}), ("helper", {"input": "ask"})]),
            "all done",
        ],
        ids=ids,
    )
    return AgentHarness(model=model, tools=[lookup, child.as_tool()], policy=policy)


async def trace(streaming: bool) -> str:
    harness = build()
    if streaming:
        stream = harness.invoke_streaming("go")
        events = [e async for e in stream]
        await stream.result()
    else:
        run, events = await harness.invoke_with_events("go")
        assert run.ok
    return json.dumps([event_to_dict(e) for e in events], sort_keys=True)


@pytest.mark.parametrize("streaming", [False, True])
async def test_two_identical_runs_have_byte_identical_event_json(streaming: bool) -> None:
    first, second = await trace(streaming), await trace(streaming)
    assert first == second
    events = json.loads(first)
    runs = {e["run_id"] for e in events}
    assert runs == {"run-1", "run-2"}  # the root and its sub-agent, both from the id source
    assert {e["depth"] for e in events} == {0, 1}
    tool_ids = {e["call_id"] for e in events if e["kind"] == "tool.started"}
    assert len(tool_ids) == 3
    assert all(i.startswith("call-") for i in tool_ids)
    stamps = [e["ts"] for e in events]
    assert stamps == sorted(set(stamps))
    assert 1_700_000_000.0 <= stamps[0] < 1_700_000_000.1


async def test_the_root_run_id_comes_from_the_id_source() -> None:
    harness = AgentHarness(model=ScriptedModel(["hi"]), policy=RunPolicy(ids=DeterministicIds(prefix="t")))
    run = await harness.invoke("x")
    assert run.run_id == "t-run-1"


async def test_scripted_ids_replace_the_scripts_ids_when_served() -> None:
    ids = DeterministicIds(prefix="s")
    model = ScriptedModel([ScriptedModel.tool_call("lookup", {"city": "A"}, id="mine"), "ok"], ids=ids)
    run = await AgentHarness(model=model, tools=[lookup]).invoke("x")
    assert run.messages[1].tool_calls[0].id == "s-call-1"  # type: ignore[union-attr]
    assert run.messages[2].tool_call_id == "s-call-1"  # type: ignore[union-attr]


@tool(requires_approval=True)
async def publish(text: str) -> str:
    """Publish a note (needs a person's approval)."""
    return f"published {text}"


def build_with_approval_retry_and_memory() -> tuple[AgentHarness[None], LongTermMemory]:
    """A run that retries with jitter, waits for an approval, and writes a long-term note."""
    ids = DeterministicIds()
    memory = LongTermMemory(InMemoryStore())
    model = ScriptedModel(
        [
            ProviderError("503", retryable=True),
            ScriptedModel.tool_call("publish", {"text": "hi"}),
            ScriptedModel.tool_call("remember", {"text": "The user publishes on Mondays."}),
            "all done",
        ],
        ids=ids,
    )
    policy = RunPolicy(
        clock=DeterministicClock(),
        ids=ids,
        retry=RetryPolicy(max_attempts=2, initial_backoff_s=0.01, jitter=0.9),
    )
    return AgentHarness(model=model, tools=[publish, *memory.tools()], policy=policy), memory


async def approved_trace() -> tuple[str, list[str], list[float]]:
    harness, memory = build_with_approval_retry_and_memory()
    stream = harness.invoke_streaming("go")
    events = []
    async for event in stream:
        events.append(event)
        if isinstance(event, ApprovalRequested):  # a person answers, on the loop's thread
            stream.approve(event.call_id, by="alice")
    run = await stream.result()
    assert run.ok
    notes = memory.all(RunContext())
    return (
        json.dumps([event_to_dict(e) for e in events], sort_keys=True),
        [n.key for n in notes],
        [n.created_at for n in notes],
    )


async def test_approvals_retry_jitter_and_memory_keys_are_reproducible() -> None:
    first, second = await approved_trace(), await approved_trace()
    assert first == second
    events = json.loads(first[0])
    (retry,) = [e for e in events if e["kind"] == "retry.scheduled"]
    assert retry["delay_s"] != 0.01  # jittered, yet the same in both runs
    (decided,) = [e for e in events if e["kind"] == "approval.decided"]
    assert (decided["decided_by"], decided["approved"]) == ("person", True)
    assert 1_700_000_000.0 <= decided["decided_at"] < 1_700_000_000.1  # the run's clock, not the wall clock
    assert 0 < decided["wait_s"] < 0.1
    keys, stamps = first[1], first[2]
    assert len(keys) == 1
    assert keys[0].startswith("mem-")
    assert 1_700_000_000.0 <= stamps[0] < 1_700_000_000.1
