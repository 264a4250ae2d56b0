"""Background runs and the Stop button on a real ipykernel (6.x and 7.x), driven like a frontend."""

from __future__ import annotations

import time

import pytest

from tests.kernel._kernel import KernelHarness

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(180)]

SETUP = """
import asyncio
from tinyagents_nb.harness import AgentHarness, RunContext
from tinyagents_nb.harness.testkit import StreamingMock
from tinyagents_nb.widgets import RunDashboard

def slow_run(chunks=200, delay=2.0):
    harness = AgentHarness(model=StreamingMock([f"tick{i} " for i in range(chunks)], chunk_delay_s=delay))
    stream = harness.invoke_streaming("go")
    dash = RunDashboard(stream)
    dash.start()
    return stream, dash
"""


def test_a_background_run_leaves_the_kernel_idle_and_responsive(kernel: KernelHarness) -> None:
    assert kernel.execute(SETUP).status == "ok"
    started = kernel.execute("stream, dash = slow_run(delay=0.2); display(dash)")
    assert started.status == "ok"
    assert started.elapsed_s < 10  # the cell returned while the run streams
    latencies = [kernel.execute("1+1").elapsed_s for _ in range(5)]
    assert kernel.value("stream.done") is False
    assert sorted(latencies)[2] < 1.0  # a following cell executes while the run is active
    kernel.execute("stream.cancel('test over')")
    assert kernel.value("(await stream.wait()).status") == "cancelled"


def test_stop_click_from_the_frontend_cancels_a_streaming_run(kernel: KernelHarness) -> None:
    kernel.execute(SETUP)
    kernel.execute("stream, dash = slow_run(delay=2.0)")
    # wait for the first chunk to arrive, then click Stop while the run waits on the next 2 s chunk
    deadline = time.monotonic() + 20
    while kernel.value("dash.transcript.text()") == "" and time.monotonic() < deadline:
        time.sleep(0.1)
    comm_id = kernel.value("dash.controls.stop.model_id")
    clicked = time.monotonic()
    kernel.click(comm_id)
    status = None
    while time.monotonic() - clicked < 5:
        status = kernel.value("stream.status.status")
        if status != "running":
            break
        time.sleep(0.02)
    ended = time.monotonic() - clicked
    assert status == "cancelled"
    assert ended < 1.5, f"Stop took {ended:.3f} s"
    assert kernel.value("(await stream.wait()).error.reason") == "stop button"
    assert kernel.value("'tick0' in dash.transcript.text()") is True


def test_kernel_interrupt_cancels_a_blocking_run_cooperatively(kernel: KernelHarness) -> None:
    kernel.execute(SETUP)
    kernel.execute("from tinyagents_nb.harness import RunCancelled")
    msg_id = kernel.kc.execute(
        "harness = AgentHarness(model=StreamingMock(['a ', 'b ', 'c ', 'd '], chunk_delay_s=2.0))\n"
        "try:\n"
        "    run = harness.run_sync('go')\n"
        "    outcome = run.status\n"
        "except RunCancelled as exc:\n"
        "    outcome = 'cancelled: ' + str(exc.reason) + ' partial=' + repr([m.text for m in exc.messages][-1])\n"
        "    raise\n"
    )
    time.sleep(3.0)
    kernel.interrupt()
    result = kernel._collect(msg_id, 30)
    assert result.error is not None
    assert result.error["ename"] in ("RunCancelled", "KeyboardInterrupt")
    outcome = kernel.value("outcome")
    assert outcome.startswith("cancelled: KeyboardInterrupt")
    assert outcome.endswith("partial='go'")  # a unary call had produced nothing yet: the transcript is the input
