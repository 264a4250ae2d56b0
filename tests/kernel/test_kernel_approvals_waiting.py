"""Approve and Deny clicks reaching a *waiting* ``%%agent`` cell (the default execution mode), in a real kernel.

The cell is busy while its run waits for approval, so the test cannot ask the kernel anything; it
follows the widget messages on IOPub as a frontend does and clicks a card's buttons the moment the
card becomes visible: when the dashboard the cell displays holds it, through its containers'
``children``. A button's own ``comm_open`` is not that moment: ipywidgets opens a button's comm when
the button is made, before the card attaches ``on_click``, and a frontend renders it only once a
displayed container lists it (a click sent on ``comm_open`` alone was lost about one run in five
under load). To show that a person's click cannot be lost, the kernel here makes the cards' handlers
arrive late on purpose (``on_click`` waits 0.3 s), and the clicks must still land.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.kernel._kernel import KernelHarness, LiveCell

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(180)]

SETUP = """
%load_ext tinyagents_nb
import time as _time
import ipywidgets as _widgets
from tinyagents_nb.harness import ToolCall, tool
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import get_session
dropped = []

_on_click = _widgets.Button.on_click
def _late_on_click(self, callback, remove=False):
    if self.description in ('Approve', 'Deny'):
        _time.sleep(0.3)  # the flusher thread descheduled between making a card's buttons and wiring them
    return _on_click(self, callback, remove=remove)
_widgets.Button.on_click = _late_on_click

@tool(requires_approval=True)
def drop(table: str) -> str:
    '''Drop a table.'''
    dropped.append(table)
    return 'dropped ' + table

calls = [ToolCall(id='q0', name='drop', arguments={'table': 'logs'}), ToolCall(id='q1', name='drop', arguments={'table': 'users'})]
get_session().register_model('wq', ScriptedModel([ScriptedModel.tool_calls(calls), 'finished']))
get_session().register_tool(drop)
"""

VIEW = "application/vnd.jupyter.widget-view+json"


def _ids(refs: Any) -> list[str]:
    return [ref.removeprefix("IPY_MODEL_") for ref in refs or () if isinstance(ref, str)]


def _shown(cell: LiveCell) -> set[str]:
    """The widget models a frontend renders now: the cell's displayed views and everything they contain."""
    todo = [str(out.get("data", {}).get(VIEW, {}).get("model_id", "")) for out in cell.result.outputs]
    shown: set[str] = set()
    while todo:
        model_id = todo.pop()
        if not model_id or model_id in shown or model_id not in cell.models:
            continue
        shown.add(model_id)
        state = cell.models[model_id]
        todo += _ids(state.get("children"))
        todo += [str(o.get("data", {}).get(VIEW, {}).get("model_id", "")) for o in state.get("outputs", ())]
    return shown


def _card_buttons(cell: LiveCell, call_id: str) -> dict[str, str]:
    """The buttons (by description) of the visible approval card of ``call_id``; empty while it is not visible."""
    shown = _shown(cell)
    for card in shown:
        parts = [cell.models.get(part, {}) for part in _ids(cell.models[card].get("children"))]
        titled = any(p.get("_model_name") == "HTMLModel" and f"({call_id})" in str(p.get("value")) for p in parts)
        if not titled:
            continue
        rows = [button for part in parts for button in _ids(part.get("children"))]
        return {
            str(cell.models[b]["description"]): b
            for b in rows
            if b in shown and cell.models[b].get("_model_name") == "ButtonModel"
        }
    return {}


def _showing(call_id: str, button: str) -> Callable[[LiveCell], bool]:
    return lambda cell: button in _card_buttons(cell, call_id)


def test_approve_and_deny_clicks_reach_a_waiting_cell(kernel: KernelHarness) -> None:
    assert kernel.execute(SETUP).status == "ok"
    cell = LiveCell(kernel, "%%agent --model wq --name wr\nclean up")
    clicked: list[str] = []
    for call_id, choice in (("q0", "Approve"), ("q1", "Deny")):  # each the instant its card shows
        assert cell.pump(_showing(call_id, choice), timeout=60), f"the card of {call_id} never appeared"
        kernel.click(_card_buttons(cell, call_id)[choice])
        clicked.append(call_id)
    result = cell.finish(timeout=60)
    assert result.status == "ok", result.error
    assert clicked == ["q0", "q1"]
    assert kernel.value("wr.status") == "completed"
    assert kernel.value("dropped") == ["logs"]
    assert kernel.value("[m.is_error for m in wr.outcome.messages if getattr(m, 'tool_call_id', None) == 'q1']") == [
        True
    ]
