"""Approve and Deny clicks reaching a *waiting* ``%%agent`` cell (the default execution mode), in a real kernel.

The cell is busy while its run waits for approval, so the test cannot ask the kernel anything; it
finds the cards' buttons in the widget ``comm_open`` messages on IOPub, as a frontend does, clicks
them, and reads the cell's record when the cell ends.
"""

from __future__ import annotations

import queue
import time
from typing import Any

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

calls = [ToolCall(id='q0', name='drop', arguments={'table': 'logs'}), ToolCall(id='q1', name='drop', arguments={'table': 'users'})]
get_session().register_model('wq', ScriptedModel([ScriptedModel.tool_calls(calls), 'finished']))
get_session().register_tool(drop)
"""


def _buttons(messages: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Button model ids by description, in the order their comms opened."""
    found: dict[str, list[str]] = {}
    for msg in messages:
        if msg["msg_type"] != "comm_open":
            continue
        state = msg["content"].get("data", {}).get("state", {})
        if state.get("_model_name") == "ButtonModel":
            found.setdefault(state.get("description", ""), []).append(msg["content"]["comm_id"])
    return found


def test_approve_and_deny_clicks_reach_a_waiting_cell(kernel: KernelHarness) -> None:
    assert kernel.execute(SETUP).status == "ok"
    msg_id = kernel.kc.execute("%%agent --model wq --name wr\nclean up", allow_stdin=True)
    seen: list[dict[str, Any]] = []
    idle = False
    clicked = False
    deadline = time.monotonic() + 60
    while not idle:
        assert time.monotonic() < deadline, "the waiting cell never ended"
        try:
            msg = kernel.kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        seen.append(msg)
        buttons = _buttons(seen)
        if not clicked and len(buttons.get("Approve", [])) >= 2 and len(buttons.get("Deny", [])) >= 2:
            kernel.click(buttons["Approve"][0])  # the card of q0
            kernel.click(buttons["Deny"][1])  # the card of q1
            clicked = True
        if (
            msg["msg_type"] == "status"
            and msg["content"]["execution_state"] == "idle"
            and msg["parent_header"].get("msg_id") == msg_id
        ):
            idle = True
    assert clicked, "the approval cards never appeared"
    assert kernel.value("wr.status") == "completed"
    assert kernel.value("dropped") == ["logs"]
    assert kernel.value("[m.is_error for m in wr.outcome.messages if getattr(m, 'tool_call_id', None) == 'q1']") == [
        True
    ]
