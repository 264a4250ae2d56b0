"""Approval cards on the dashboard, clicked the way a frontend (or a subshell thread) would."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tinyagents_nb.harness import AgentHarness, ToolCall, ToolMessage, tool
from tinyagents_nb.harness.events import ApprovalDecided
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel
from tinyagents_nb.widgets import RunDashboard

from .conftest import CommLog, until
from .test_controls import click_from_another_thread

pytestmark = pytest.mark.anyio

sent: list[dict[str, Any]] = []


@tool(requires_approval=True)
def transfer(account: str, amount: int) -> str:
    """Move money."""
    sent.append({"account": account, "amount": amount})
    return "moved"


def dashboard(*calls: tuple[str, dict[str, Any]]) -> tuple[RunDashboard, EventRecorder]:
    sent.clear()
    built = [ToolCall(id=f"t{i}", name=n, arguments=a) for i, (n, a) in enumerate(calls)]
    model = ScriptedModel([ScriptedModel.tool_calls(built), "done"])
    stream = AgentHarness(model=model, tools=[transfer]).invoke_streaming("pay")
    return RunDashboard(stream), EventRecorder(stream.context.events)


async def test_a_card_appears_per_pending_call_and_approve_runs_it(comms: CommLog) -> None:
    dash, rec = dashboard(("transfer", {"account": "A", "amount": 5}))
    assert dash.approvals.widget.children == ()  # no room taken until a call waits
    dash.start()
    await until(lambda: dash.approvals.pending == 1)
    dash.flush()
    (card,) = dash.approvals.cards.values()
    assert "transfer" in card.title.value
    assert json.loads(card.arguments.value) == {"account": "A", "amount": 5}
    assert "● awaiting approval" in dash.header.widget.value
    assert not dash.controls.stop.disabled  # Stop stays live while a call waits
    assert click_from_another_thread(card.approve) == "subshell-test"
    await dash.wait_flushed()
    assert sent == [{"account": "A", "amount": 5}]
    assert dash.approvals.cards == {}
    assert dash.approvals.widget.children == ()
    (event,) = rec.of_type(ApprovalDecided)
    assert (event.approved, event.decided_by, event.decider) == (True, "person", "dashboard")


async def test_deny_with_a_reason_and_edited_arguments_on_two_cards(comms: CommLog) -> None:
    dash, rec = dashboard(("transfer", {"account": "A", "amount": 5}), ("transfer", {"account": "B", "amount": 900}))
    dash.start()
    await until(lambda: dash.approvals.pending == 2)
    dash.flush()
    first, second = dash.approvals.cards["t0"], dash.approvals.cards["t1"]
    second.reason.value = "too much"
    click_from_another_thread(second.deny)
    first.arguments.value = '{"account": "A", "amount": "lots"}'  # invalid: re-validated, the call waits
    click_from_another_thread(first.approve)
    dash.flush()
    assert "edited arguments rejected" in first.error.value
    assert list(dash.approvals.cards) == ["t0"]
    first.arguments.value = '{"account": "A", "amount": 7}'
    click_from_another_thread(first.approve)
    run = await dash.stream.result()
    await dash.wait_flushed()
    assert sent == [{"account": "A", "amount": 7}]
    denied = next(m for m in run.messages if isinstance(m, ToolMessage) and m.tool_call_id == "t1")
    assert denied.is_error
    assert "too much" in denied.text
    decided = {e.call_id: e for e in rec.of_type(ApprovalDecided)}
    assert decided["t0"].edited
    assert decided["t1"].reason == "too much"
    # each decision is a note in the transcript and a line of the run log (which the cell's record reads)
    notes = [row.value for row in dash.transcript.widget.children if 'class="ta-note"' in getattr(row, "value", "")]
    assert any("✗ denied transfer (by dashboard: too much)" in note for note in notes)
    assert any("✓ approved transfer with edited arguments (by dashboard)" in note for note in notes)
    _, decisions, _ = dash.log_snapshot()
    assert [(d.call_id, d.text()) for d in decisions] == [
        ("t1", "✗ denied transfer (by dashboard: too much)"),
        ("t0", "✓ approved transfer with edited arguments (by dashboard)"),
    ]


async def test_stop_while_a_card_waits_cancels_and_clears_the_cards(comms: CommLog) -> None:
    dash, _ = dashboard(("transfer", {"account": "A", "amount": 5}))
    dash.start()
    await until(lambda: dash.approvals.pending == 1)
    dash.flush()
    click_from_another_thread(dash.controls.stop)
    await dash.wait_flushed()
    assert dash.state.terminal == "cancelled"
    assert dash.approvals.cards == {}
    assert sent == []
    _, (decision,), _ = dash.log_snapshot()
    assert decision.decided_by == "withdrawn"
    assert decision.text().startswith("✗ withdrawn transfer (")


async def test_an_unattended_decision_is_logged_with_who_decided(comms: CommLog) -> None:
    sent.clear()
    call = ToolCall(id="t0", name="transfer", arguments={"account": "A", "amount": 5})
    harness = AgentHarness(model=ScriptedModel([ScriptedModel.tool_calls([call]), "done"]), tools=[transfer])
    stream = harness.invoke_streaming("pay")
    stream.approvals.attended = False  # what a headless session does: nobody can click
    dash = RunDashboard(stream)
    await dash.wait_flushed()
    _, (decision,), _ = dash.log_snapshot()
    assert (decision.approved, decision.decided_by) == (False, "unattended")
    assert decision.text().startswith("✗ denied transfer (unattended: nobody can answer")
    assert sent == []
