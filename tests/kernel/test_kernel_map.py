"""``%%agent --map`` on a real ipykernel (6.x and 7.x): the live view's Stop is heard while the cell waits."""

from __future__ import annotations

import re

import pytest

from tests.kernel._kernel import KernelHarness, LiveCell

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(240)]

SETUP = """
%load_ext tinyagents_nb
import asyncio, pandas as pd
from tinyagents_nb.harness.testkit import FunctionModel
from tinyagents_nb.magics import get_session

async def _slow(request):
    await asyncio.sleep(0.05)
    return "ok " + request.messages[-1].text

get_session().register_model("slowmap", FunctionModel(_slow))
tickets = pd.DataFrame({"t": [f"ticket {i}" for i in range(400)]})
"""


def _done(cell: LiveCell) -> int:
    match = re.search(r"([\d,]+) done", cell.html())
    return int(match.group(1).replace(",", "")) if match else 0


def test_stop_in_the_map_view_stops_a_waiting_map_cell(kernel: KernelHarness) -> None:
    assert kernel.execute(SETUP).status == "ok"
    cell = LiveCell(kernel, "%%agent --map tickets --model slowmap --concurrency 4\nSay {{t}}")
    assert cell.pump(lambda c: _done(c) >= 8, timeout=60), "the map never progressed: " + cell.html()[-500:]
    stop = cell.widget("ButtonModel", description="Stop")
    kernel.click(stop)
    result = cell.finish(timeout=60)
    assert result.status == "ok", result.error
    record = "\n".join(o.get("data", {}).get("text/plain", "") for o in result.outputs)
    assert "tickets: stopped" in record
    assert all("application/vnd.jupyter.widget-view+json" not in o.get("data", {}) for o in result.outputs)
    pending = kernel.value("int((tickets_result['status'] == 'pending').sum())")
    done = kernel.value("int((tickets_result['status'] == 'done').sum())")
    assert pending > 0
    assert done >= 8
    assert pending + done == 400
    assert kernel.value("tickets_result.loc[0, 'answer']") == "ok Say ticket 0"
