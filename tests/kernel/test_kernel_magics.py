"""`%%agent` in a real kernel (6.x and 7.x): background runs, the Stop click, and ■ in a waiting cell."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.kernel._kernel import KernelHarness

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(180)]

SETUP = """
%load_ext tinyagents_nb
from tinyagents_nb.harness.testkit import StreamingMock
from tinyagents_nb.magics import get_session
get_session().register_model('slow', StreamingMock([f'w{i} ' for i in range(300)], chunk_delay_s=2.0))
get_session().register_model('steady', StreamingMock([f's{i} ' for i in range(300)], chunk_delay_s=0.1))
"""


def wait_for(kernel: KernelHarness, expr: str, *, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if kernel.value(expr):
            return
        time.sleep(0.05)
    raise AssertionError(f"{expr} never became true")


def test_agent_cell_returns_at_once_and_other_cells_run(kernel: KernelHarness) -> None:
    assert kernel.execute(SETUP).status == "ok"
    cell = kernel.execute("%%agent --model steady --background --name bg\nstream a long answer")
    assert cell.status == "ok"
    assert cell.elapsed_s < 10
    assert "tinyagents run bg: live dashboard" in cell.text()  # the text/plain beside the widget
    assert "running" not in cell.text()
    wait_for(kernel, "'s3' in bg.dashboard.transcript.text()")
    latencies = sorted(kernel.execute("1+1").elapsed_s for _ in range(5))
    assert kernel.value("bg.done") is False
    assert latencies[2] < 1.0
    kernel.execute("%agent stop bg")
    wait_for(kernel, "bg.done")
    assert kernel.value("bg.status") == "cancelled"


def test_stop_click_cancels_an_agent_run_within_a_bound(kernel: KernelHarness) -> None:
    kernel.execute(SETUP)
    kernel.execute("%%agent --model slow --background --name slowrun\ngo")
    wait_for(kernel, "'w0' in slowrun.dashboard.transcript.text()")  # now waiting 2 s for the next chunk
    comm_id = kernel.value("slowrun.dashboard.controls.stop.model_id")
    clicked = time.monotonic()
    kernel.click(comm_id)
    while kernel.value("slowrun.status") == "running" and time.monotonic() - clicked < 5:
        time.sleep(0.02)
    elapsed = time.monotonic() - clicked
    assert kernel.value("slowrun.status") == "cancelled"
    assert elapsed < 1.5, f"Stop took {elapsed:.3f} s"


def test_kernel_interrupt_in_a_waiting_cell_cancels_and_keeps_the_partial_text(kernel: KernelHarness) -> None:
    kernel.execute(SETUP)
    msg_id = kernel.kc.execute("%%agent --model slow --wait --name blocked\ngo")
    time.sleep(3.5)  # w0 and w1 have streamed
    kernel.interrupt()
    result = kernel._collect(msg_id, 30)
    assert result.error is None, result.error  # the cell ends cleanly, not with a traceback wall
    # what ■ did was said in the dashboard, which the record replaced: no stale "stopping" line is kept
    assert "interrupted: stopping the run" not in result.text()
    assert [list(o["data"]) for o in result.outputs] == [["text/markdown", "text/plain"]]
    assert "w0" in result.text()  # the record replaced the dashboard: partial text and summary
    assert "[cancelled (interrupted)" in result.text()
    assert kernel.value("blocked.status") == "cancelled"
    assert kernel.value("'w299' in blocked.final_text") is False


def test_two_kernels_start_sessions_on_one_session_file(kernel: KernelHarness, tmp_path: Path) -> None:
    import sys

    path = tmp_path / "shared" / "session.sqlite"
    other = KernelHarness(sys.executable, tmp_path / "other")
    try:
        start = time.time() + 3.0  # both kernels open the fresh file at the same instant
        cell = (
            "import time\n"
            "from tinyagents_nb.magics import NotebookSession\n"
            f"while time.time() < {start!r}: time.sleep(0.0005)\n"
            f"session = NotebookSession(store_path={str(path)!r})\n"
            "session.store.put('kernels', '{name}', True)\n"
            "print('opened')\n"
        )
        # both cells are sent before either is collected, so the kernels really open together
        sent = [(k, k.kc.execute(cell.replace("{name}", n))) for n, k in (("a", kernel), ("b", other))]
        for k, msg_id in sent:
            result = k._collect(msg_id, 60.0)
            assert result.error is None, result.error
            assert "opened" in result.stdout
        assert kernel.value("sorted(session.store.keys('kernels'))") == ["a", "b"]
        assert other.value("sorted(session.store.keys('kernels'))") == ["a", "b"]
    finally:
        other.close()
