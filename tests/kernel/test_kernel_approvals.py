"""Approval cards in a real kernel (6.x and 7.x): Approve and Deny clicked as the frontend sends them,
and a headless execution (``allow_stdin=False``, as nbclient sends) that decides at once instead of hanging."""

from __future__ import annotations

import time

import pytest

from tests.kernel._kernel import KernelHarness

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(180)]

SETUP = """
%load_ext tinyagents_nb
from tinyagents_nb.harness import ToolCall, tool
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import get_session
dropped = []

@tool(requires_approval=True)
def drop(table: str) -> str:
    '''Drop a table.'''
    dropped.append(table)
    return 'dropped ' + table

def script(name, *tables):
    calls = [ToolCall(id=f'{name}{i}', name='drop', arguments={'table': t}) for i, t in enumerate(tables)]
    get_session().register_model(name, ScriptedModel([ScriptedModel.tool_calls(calls), 'finished']))

get_session().register_tool(drop)
"""


def wait_for(kernel: KernelHarness, expr: str, *, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if kernel.value(expr):
            return
        time.sleep(0.05)
    raise AssertionError(f"{expr} never became true")


def test_approve_and_deny_clicks_reach_a_waiting_tool_call(kernel: KernelHarness) -> None:
    assert kernel.execute(SETUP).status == "ok"
    kernel.execute("dropped.clear(); script('m1', 'logs', 'users')")
    cell = kernel.execute("%%agent --model m1 --name ap --background\nclean up")
    assert cell.status == "ok"
    wait_for(kernel, "len(ap.dashboard.approvals.cards) == 2")
    assert kernel.value("ap.status") == "running"
    assert kernel.value("ap.dashboard.controls.stop.disabled") is False  # Stop stays live
    approve = kernel.value("ap.dashboard.approvals.cards['m10'].approve.model_id")
    deny = kernel.value("ap.dashboard.approvals.cards['m11'].deny.model_id")
    kernel.execute("ap.dashboard.approvals.cards['m11'].reason.value = 'keep the users'")
    clicked = time.monotonic()
    kernel.click(deny)
    kernel.click(approve)
    wait_for(kernel, "ap.done")
    elapsed = time.monotonic() - clicked
    assert kernel.value("ap.status") == "completed"
    assert kernel.value("dropped") == ["logs"]
    decided = kernel.value(
        "[(e.call_id, e.approved, e.decider, e.reason) for e in get_session().journal.read_from(0, kinds=['approval.decided'])"
        " for e in [e.event]]"
    )
    assert sorted(map(tuple, decided)) == [
        ("m10", True, "dashboard", None),
        ("m11", False, "dashboard", "keep the users"),
    ]
    assert elapsed < 10, f"the clicks took {elapsed:.3f} s to end the run"


def test_a_headless_execution_denies_at_once_and_never_hangs(kernel: KernelHarness) -> None:
    kernel.execute(SETUP)
    kernel.execute("dropped.clear(); script('m2', 'logs')")
    cell = kernel.execute("%%agent --model m2 --name hd --wait\nclean up", allow_stdin=False, timeout=60)
    assert cell.status == "ok"
    wait_for(kernel, "hd.done")
    assert kernel.value("hd.status") == "completed"
    assert kernel.value("dropped") == []
    assert kernel.value(
        "[e.event.decided_by for e in get_session().journal.read_from(0, kinds=['approval.decided'])"
        " if e.event.call_id == 'm20']"
    ) == ["unattended"]
