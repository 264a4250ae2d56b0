"""Every way of showing a run ends in a record, on ipykernel 6.x and 7.x.

``display(RunDashboard(...))`` (notebook 05 drives the harness API this way) used to leave the live
widget in the saved file: its ``text/plain`` said ``running`` and a reopened notebook showed "Error
displaying widget". Now the output it made is replaced by a static record when the run ends.
"""

from __future__ import annotations

import pytest

from tests.kernel._kernel import KernelHarness

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(240)]

CELL = """
from IPython.display import display
from tinyagents_nb.harness import AgentHarness
from tinyagents_nb.harness.testkit import StreamingMock
from tinyagents_nb.widgets import RunDashboard
stream = AgentHarness(model=StreamingMock("Costs are $5 and $10 here.", chunk_delay_s=0.01)).invoke_streaming("hi")
dashboard = RunDashboard(stream, title="turn 1")
display(dashboard)
await dashboard.wait_flushed()
"""


def test_a_directly_displayed_dashboard_ends_as_a_record(kernel: KernelHarness) -> None:
    result = kernel.execute(CELL)
    assert result.status == "ok", result.error
    [output] = result.outputs
    data = output["data"]
    assert "application/vnd.jupyter.widget-view+json" not in data  # the live view was replaced
    assert "Costs are $5 and $10 here." in data["text/markdown"]
    assert "running" not in data["text/plain"]
    assert "completed · 1 model call" in data["text/plain"]
    shown_again = kernel.execute("display(dashboard)")  # after the end: the panes again, on request
    assert "application/vnd.jupyter.widget-view+json" in shown_again.outputs[0]["data"]
