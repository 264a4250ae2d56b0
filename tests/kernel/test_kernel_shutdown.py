"""Kernel ▸ Shut Down (or Restart) mid-run: every run stops and its record replaces its dashboard first.

The kernel is ended the way Jupyter Server ends it (jupyter_client's ``shutdown_kernel``: an
interrupt, then a ``shutdown_request`` on the control channel, then a wait before a kill) while a
background run streams in one cell and a waiting cell streams in another. What the frontend keeps
is what the kernel sent before it exited: each cell must end as a record that says the kernel went
away, with no live widget left and no "stopping" line below it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kernel._kernel import KernelHarness, LiveCell
from tests.kernel.conftest import K6_PYTHON

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(180)]

SETUP = """
%load_ext tinyagents_nb
from tinyagents_nb.harness.testkit import StreamingMock
from tinyagents_nb.magics import get_session
get_session().register_model('slow', StreamingMock([f'word{i} ' for i in range(600)], chunk_delay_s=0.05))
"""
WIDGET = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(params=[(sys.executable, "7."), (str(K6_PYTHON), "6.")], ids=["ipykernel7", "ipykernel6"])
def fresh(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KernelHarness]:
    """A kernel of its own: the test ends it."""
    python, expected = request.param
    if not Path(python).exists():
        if os.environ.get("CI"):
            pytest.fail(f"the ipykernel 6.x environment is missing ({python}); ./dev test creates it")
        pytest.skip(f"no ipykernel 6.x environment at {python} (./dev test creates .venv-k6)")
    harness = KernelHarness(python, tmp_path)
    try:
        assert harness.version.startswith(expected), harness.version
        assert harness.execute(SETUP).status == "ok"
        yield harness
    finally:
        harness.kc.stop_channels()
        if harness.km.has_kernel:
            harness.km.shutdown_kernel(now=True)


def _streaming(cell: LiveCell) -> bool:
    return "word3" in cell.html()


def _ends_as_record(cell: LiveCell, why: str) -> None:
    assert cell.pump(lambda c: why in c.markdown(), timeout=10), (cell.result.outputs, cell.result.stdout)
    outputs = [o for o in cell.result.outputs if o.get("data")]
    assert len(outputs) == 1, outputs  # the record took the dashboard's place: one output, no extra line
    data = outputs[0]["data"]
    assert WIDGET not in data  # nothing live-looking is left to render
    assert f"— stopped: {why} —" in data["text/markdown"]
    assert f"[cancelled ({why}) · " in data["text/plain"]
    assert cell.result.stdout == ""  # no "stopping" line below the record


@pytest.mark.parametrize("how", ["shutdown", "restart"])
def test_ending_the_kernel_mid_run_leaves_records_not_live_dashboards(fresh: KernelHarness, how: str) -> None:
    background = LiveCell(fresh, "%%agent --model slow --background --name bg\nA long story")
    assert background.pump(lambda c: c.idle and _streaming(c)), "the background run never streamed"
    waiting = LiveCell(fresh, "%%agent --model slow --new-thread --name w\nAnother long story")
    waiting.adopt(background)
    assert waiting.pump(lambda c: "word3" in c.html() and len(c.result.outputs) == 1), "the waiting run never streamed"
    asked = time.monotonic()
    if how == "shutdown":
        fresh.km.shutdown_kernel(now=False)  # what Kernel ▸ Shut Down makes Jupyter Server do
        why = "the kernel was shut down"
    else:
        fresh.km.restart_kernel(now=False)
        why = "the kernel restarted"
    took = time.monotonic() - asked
    assert took < 5, f"the kernel took {took:.1f} s to go: it was killed, not shut down"
    _ends_as_record(waiting, why)
    for msg in waiting.others:  # the messages for the background cell that the waiting cell read
        background._handle(msg)
    _ends_as_record(background, why)
    assert "word599" not in waiting.markdown() + background.markdown()


def test_a_record_the_shutdowns_own_interrupt_wrote_says_the_kernel_was_shut_down(fresh: KernelHarness) -> None:
    """jupyter_client interrupts before it asks: an idle kernel's ■ may end a background run first."""
    background = LiveCell(fresh, "%%agent --model slow --background --name bg\nA long story")
    assert background.pump(lambda c: c.idle and _streaming(c)), "the background run never streamed"
    fresh.interrupt()
    assert background.pump(lambda c: "— stopped here —" in c.markdown(), timeout=10)  # its record: "interrupted"
    fresh.km.shutdown_kernel(now=False)  # (the interrupt it sends first finds nothing running)
    _ends_as_record(background, "the kernel was shut down")
