"""A whole trace is reproducible: DeterministicClock + DeterministicIds make two identical runs byte-identical."""

from __future__ import annotations

import json

import pytest

from tinyagents_nb.harness import AgentHarness, RunPolicy, SubAgent, event_to_dict, tool
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
