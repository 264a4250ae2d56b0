"""Approvals under pressure: a decision racing a Stop, call ids reused across a tree, nobody answering."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    AgentStream,
    ApprovalError,
    RunPolicy,
    SubAgent,
    ToolCall,
    ToolMessage,
    tool,
)
from tinyagents_nb.harness.events import ApprovalDecided
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel

pytestmark = pytest.mark.anyio

ran: list[str] = []


@tool(requires_approval=True)
def wipe(path: str) -> str:
    """Delete a folder."""
    ran.append(path)
    return f"wiped {path}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def asks(path: str, call_id: str = "c0") -> ScriptedModel:
    return ScriptedModel([ScriptedModel.tool_call("wipe", {"path": path}, id=call_id), "done"])


async def wait_pending(stream: AgentStream, count: int = 1) -> None:
    with anyio.fail_after(20):
        while len(stream.pending_approvals()) < count:  # noqa: ASYNC110 (the desk has no event to await)
            await anyio.sleep(0.002)


async def race_once(order: int, pause: int = 0) -> tuple[Any, ApprovalDecided]:
    """Approve and Stop at (nearly) the same moment; returns what approve() said and what the run recorded."""
    stream = AgentHarness(model=asks("x"), tools=[wipe]).invoke_streaming("go")
    rec = EventRecorder(stream.context.events)
    stream.start()
    await wait_pending(stream)
    said: list[Any] = []

    def click() -> None:
        try:
            said.append(stream.approve(by="alice"))
        except ApprovalError as exc:
            said.append(exc)

    if order == 0:  # the click lands first, on the loop's thread (a synchronous callback)
        click()
        stream.cancel("Stop")
    elif order == 1:  # the Stop lands first, and the run has had a moment to act on it
        stream.cancel("Stop")
        await anyio.sleep(0.002 * pause)
        click()
    else:  # a widget thread clicks while the loop's thread stops
        clicker = threading.Thread(target=click)
        clicker.start()
        stream.cancel("Stop")
        clicker.join()
    with anyio.fail_after(20):
        await stream.wait()
    (decided,) = rec.of_type(ApprovalDecided)
    return said[0], decided


async def test_a_decision_handed_out_is_the_decision_recorded_even_when_a_stop_races_it() -> None:
    outcomes = {"approved": 0, "withdrawn": 0}
    for trial in range(240):
        said, decided = await race_once(trial % 3, trial % 4)
        if isinstance(said, ApprovalError):  # withdrawn first: approve() said so, and the run recorded that
            assert (decided.approved, decided.decided_by) == (False, "withdrawn"), trial
            outcomes["withdrawn"] += 1
        else:  # approve() handed out a decision: the run records exactly it
            assert said.approved
            assert (decided.approved, decided.decided_by, decided.decider) == (True, "person", "alice"), trial
            assert decided.arguments_sha256 == said.arguments_sha256
            assert decided.decided_at == said.decided_at
            outcomes["approved"] += 1
    assert outcomes["approved"] > 0  # both sides of the race were exercised
    assert outcomes["withdrawn"] > 0


async def test_sibling_sub_agents_reusing_a_call_id_both_wait_and_are_answered_by_run() -> None:
    left = SubAgent("left", AgentHarness(model=asks("/a", call_id="same"), tools=[wipe]), description="L.")
    right = SubAgent("right", AgentHarness(model=asks("/b", call_id="same"), tools=[wipe]), description="R.")
    root = AgentHarness(
        model=ScriptedModel(
            [
                ScriptedModel.tool_calls(
                    [
                        ToolCall(id="r0", name="left", arguments={"input": "a"}),
                        ToolCall(id="r1", name="right", arguments={"input": "b"}),
                    ]
                ),
                "root done",
            ]
        ),
        tools=[left.as_tool(), right.as_tool()],
    )
    stream = root.invoke_streaming("go")
    stream.start()
    await wait_pending(stream, 2)
    waiting = stream.pending_approvals()
    assert [r.call_id for r in waiting] == ["same", "same"]
    assert len({r.run_id for r in waiting}) == 2
    with pytest.raises(ApprovalError, match="waiting in 2 runs"):
        stream.approve("same")  # ambiguous: never guess which child's call is meant
    by_path = {r.arguments["path"]: r for r in waiting}
    stream.approve("same", run_id=by_path["/a"].run_id)
    stream.deny("same", "not that one", run_id=by_path["/b"].run_id)
    run = await stream.result()
    assert run.final_text == "root done"
    assert ran == ["/a"]
    answers = {m.tool_call_id: m.text for m in run.messages if isinstance(m, ToolMessage)}
    assert answers == {"r0": "done", "r1": "done"}  # both children finished (the denial went to the model)


@pytest.mark.parametrize(("action", "ran_after"), [("deny", []), ("approve", ["x"])])
async def test_an_unanswered_approval_times_out_into_its_action(action: Any, ran_after: list[str]) -> None:
    policy = RunPolicy(approval_timeout_s=0.2, approval_timeout_action=action)
    stream = AgentHarness(model=asks("x"), tools=[wipe], policy=policy).invoke_streaming("go")
    rec = EventRecorder(stream.context.events)
    with anyio.fail_after(20):
        run = await stream.result()  # nobody ever answers
    assert run.final_text == "done"
    assert ran == ran_after
    (decided,) = rec.of_type(ApprovalDecided)
    assert (decided.approved, decided.decided_by) == (action == "approve", "timeout")
    assert decided.wait_s >= 0.2
    assert stream.pending_approvals() == []
    if action == "deny":
        (answer,) = [m for m in run.messages if isinstance(m, ToolMessage)]
        assert "nobody answered in time" in answer.text


async def test_an_unanswered_approval_can_fail_the_run_and_approve_then_raises() -> None:
    policy = RunPolicy(approval_timeout_s=0.2, approval_timeout_action="fail")
    stream = AgentHarness(model=asks("x"), tools=[wipe], policy=policy).invoke_streaming("go")
    with anyio.fail_after(20):
        run = await stream.wait()
    assert run.status == "failed"
    assert isinstance(run.error, ApprovalError)
    assert "waited 0.2 s for approval" in str(run.error)
    assert ran == []
    with pytest.raises(ApprovalError):
        stream.approve("c0")


def test_the_approval_timeout_defaults_to_five_minutes_and_is_checked() -> None:
    assert (RunPolicy().approval_timeout_s, RunPolicy().approval_timeout_action) == (300.0, "deny")
    assert RunPolicy(approval_timeout_s=None).approval_timeout_s is None
    for bad in ({"approval_timeout_s": 0}, {"approval_timeout_s": True}, {"approval_timeout_action": "maybe"}):
        with pytest.raises(Exception, match="approval_timeout"):
            RunPolicy(**bad)
