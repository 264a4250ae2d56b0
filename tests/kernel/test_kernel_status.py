"""The kernel indicator while a ``%%agent`` cell waits (ipykernel 6.x and 7.x).

JupyterLab's status bar shows the execution state of the last ``status`` message on IOPub, whatever
request it belongs to. A kernel frames each message it handles with ``busy`` and ``idle`` (ipykernel 6
does so for widget messages a waiting cell's pump handles; 7.4 handles them beside the cell without a
status), so typing in the message box or a click while a cell waits could leave the indicator at
"Idle" under a ``[*]`` cell. The cell is sent as JupyterLab sends it (with its ``cellId``).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.kernel._kernel import KernelHarness, LiveCell

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(240)]

SETUP = """
%load_ext tinyagents_nb
from tinyagents_nb.harness.testkit import StreamingMock
from tinyagents_nb.magics import get_session
get_session().register_model('slow', StreamingMock([f'word{i} ' for i in range(600)], chunk_delay_s=0.05))
"""


class WatchedCell(LiveCell):
    """A live cell that also keeps every IOPub ``status`` in order, whichever request it belongs to."""

    def __init__(self, kernel: KernelHarness, code: str, *, cell_id: str) -> None:
        self.statuses: list[tuple[str, str | None]] = []
        super().__init__(kernel, code, cell_id=cell_id)

    def _handle(self, msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "status":
            self.statuses.append((msg["content"]["execution_state"], msg["parent_header"].get("msg_type")))
        super()._handle(msg)


def test_the_indicator_stays_busy_through_widget_messages_while_the_cell_waits(kernel: KernelHarness) -> None:
    assert kernel.execute(SETUP).status == "ok"
    cell = WatchedCell(kernel, "%%agent --model slow --name st1\nTell me a long story", cell_id="cell-status")
    assert cell.pump(lambda c: "word5" in c.html()), "the run never streamed"
    box = cell.widget("TextModel")
    for text in ("a", "ab", "abc"):  # keystrokes in the message box, as the frontend sends them
        cell.send_state(box, value=text)
    cell.kernel.click(cell.widget("ButtonModel", description="Pause"))
    # the click was handled after the keystrokes (one shell channel, in order)
    assert cell.pump(lambda c: "paus" in c.html(), timeout=10), "the widget messages were never handled"
    cell.pump(lambda c: False, timeout=0.5)  # the statuses that follow the click
    assert cell.statuses, "no status at all"
    state, parent = cell.statuses[-1]
    assert state == "busy", f"the indicator is left at {state!r} under a [*] cell: {cell.statuses}"
    assert parent == "execute_request"  # said for the waiting cell itself
    # a control-channel request (JupyterLab's debugger asks for debug info this way) has its own pair too
    kernel.kc.control_channel.send(kernel.kc.session.msg("kernel_info_request"))
    assert cell.pump(lambda c: ("idle", "kernel_info_request") in c.statuses, timeout=10)
    cell.pump(lambda c: False, timeout=0.5)
    assert cell.statuses[-1] == ("busy", "execute_request"), cell.statuses
    kernel.interrupt()
    assert cell.finish(timeout=30).status == "ok"
    assert cell.statuses[-1] == ("idle", "execute_request")  # the cell's end still reads "Idle"
