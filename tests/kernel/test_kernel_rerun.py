"""Re-running a waiting ``%%agent`` cell mid-run stops the old run first (ipykernel 6.x and 7.x).

The re-run is sent as JupyterLab sends it: a second execute request with the same ``cellId`` in its
metadata while the first one still executes. Before the fix the kernel queued it, the first run
streamed on to its end (about 30 s here) and only then did the second start.
"""

from __future__ import annotations

import time

import pytest

from tests.kernel._kernel import KernelHarness, LiveCell

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(240)]

SETUP = """
%load_ext tinyagents_nb
from tinyagents_nb.harness.testkit import StreamingMock
from tinyagents_nb.magics import get_session
get_session().register_model('slow', StreamingMock([f'word{i} ' for i in range(600)], chunk_delay_s=0.05))
"""

CELL = "%%agent --model slow --name s1\nTell me a long story"


@pytest.fixture
def ready(kernel: KernelHarness) -> KernelHarness:
    if not kernel.value("'get_session' in dir()"):
        result = kernel.execute(SETUP)
        assert result.status == "ok", result.error
    return kernel


def test_rerunning_a_waiting_cell_stops_its_run_and_the_new_run_says_so(ready: KernelHarness) -> None:
    first = LiveCell(ready, CELL, cell_id="cell-rerun")
    assert first.pump(lambda c: "word5" in c.html()), "the first run never streamed"
    rerun_at = time.monotonic()
    second = LiveCell(ready, CELL, cell_id="cell-rerun")
    # (on ipykernel 6 the pump publishes an early "idle" for this cell when it defers the re-run's
    # request, so wait for the record itself, then for the cell's reply)
    assert first.pump(lambda c: "cancelled" in c.markdown(), timeout=20), "the old run was never stopped"
    assert first.finish(timeout=20).status == "ok"
    stopped_in = time.monotonic() - rerun_at
    assert stopped_in < 5, f"the old run took {stopped_in:.1f} s to give way (it ran to its end?)"
    record = first.markdown()
    assert "stopped: the cell was run again" in record
    assert "cancelled (the cell was run again)" in record.replace("\\", "")  # (escaped inside <code>)
    assert "word599" not in record

    second.adopt(first)
    assert second.pump(lambda c: "stopped the earlier run s1 of this cell" in c.result.stdout, timeout=20)
    # its own dashboard (the first one's widgets, adopted, streamed too): ■ then reaches the waiting re-run,
    # which on ipykernel 6 is a cell jupyter-ui-poll replayed
    assert second.pump(lambda c: "word5" in c.html(own=True), timeout=20), "the re-run never streamed"
    ready.interrupt()
    result = second.finish(timeout=30)
    assert result.status == "ok", result.error  # a cooperative stop, not a KeyboardInterrupt traceback
    assert "cancelled (interrupted)" in second.markdown().replace("\\", "")
    statuses = ready.value("[(r.name, r.status) for r in get_session().runs[-2:]]")
    assert statuses == [["s1", "cancelled"], ["s1", "cancelled"]]
    # the stopped run's answer never became a finished turn of the thread, and each stop is said once
    assert ready.value("get_session().runs[-2].outcome.error.reason") == "the cell was run again"


def test_another_cell_queued_meanwhile_never_stops_the_waiting_run(ready: KernelHarness) -> None:
    first = LiveCell(ready, "%%agent --model slow --name s2\nA short story", cell_id="cell-a")
    assert first.pump(lambda c: "word5" in c.html())
    other = LiveCell(ready, "print('other cell ran')", cell_id="cell-b")  # Run All queues it
    assert not first.pump(lambda c: "cancelled" in c.html(), timeout=1.5)
    ready.interrupt()
    assert first.pump(lambda c: "cancelled" in c.markdown(), timeout=20)
    assert first.finish(timeout=30).status == "ok"
    assert "stopped: the cell was run again" not in first.markdown()
    other.adopt(first)
    assert other.finish(timeout=30).stdout.strip() == "other cell ran"
