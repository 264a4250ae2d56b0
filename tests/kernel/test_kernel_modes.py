"""Execution modes on a real ipykernel (6.x and 7.x): waiting cells with live controls, background runs, ■.

Clicks are sent exactly as JupyterLab sends them (``comm_msg`` on the shell channel, no subshell), so
a pass means the kernel handled the click while the ``%%agent`` cell was still executing.
"""

from __future__ import annotations

import time

import pytest

from tests.kernel._kernel import KernelHarness, LiveCell

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(240)]

SETUP = """
%load_ext tinyagents_nb
from tinyagents_nb.harness.testkit import FunctionModel, ScriptedModel, SlowModel, StreamingMock
from tinyagents_nb.magics import get_session
session = get_session()
session.register_model('slow', StreamingMock([f'word{i} ' for i in range(600)], chunk_delay_s=0.05))
session.register_model('steps', ScriptedModel(['first step', 'second step', 'third step']))

def _memo(request):
    seen = ' '.join(m.text for m in request.messages if m.role == 'user')
    return 'Your name is Ada.' if 'Ada' in seen and 'name?' in seen else 'Noted.'

session.register_model('memo', SlowModel(FunctionModel(_memo), delay_s=0.5))
"""

CLICK_LIMIT_S = 0.5


@pytest.fixture
def ready(kernel: KernelHarness) -> KernelHarness:
    if kernel.value("'session' in dir()"):
        return kernel
    result = kernel.execute(SETUP)
    assert result.status == "ok", result.error
    return kernel


def _streaming(cell: LiveCell) -> bool:
    return "word5" in cell.html()


def test_default_mode_waits_and_leaves_a_static_record(ready: KernelHarness) -> None:
    result = ready.execute("%%agent --name ask1\nHello there")
    assert result.status == "ok", result.error
    [output] = result.outputs
    data = output["data"]
    assert "application/vnd.jupyter.widget-view+json" not in data  # the live view was replaced
    assert "You asked: 'Hello there'" in data["text/markdown"]
    assert "[completed · 1 model call" in data["text/plain"]
    assert "running" not in data["text/plain"]
    assert ready.value("ask1.status") == "completed"
    assert "running" not in ready.execute("ask1").text()  # the handle's repr after the end


def test_stop_click_cancels_a_waiting_cell(ready: KernelHarness) -> None:
    cell = LiveCell(ready, "%%agent --model slow --name w1\nTell me a long story")
    assert cell.pump(_streaming), "the run never streamed"
    stop = cell.widget("ButtonModel", description="Stop")
    assert not cell.models[stop].get("disabled"), "Stop is disabled: clicks are said not to reach this kernel"
    clicked = time.monotonic()
    ready.click(stop)
    assert cell.pump(lambda c: "cancelled" in c.markdown() or "cancelled" in c.html(), timeout=10)
    latency = time.monotonic() - clicked
    result = cell.finish()
    assert result.status == "ok"
    assert latency < CLICK_LIMIT_S, f"Stop took {latency:.3f} s on ipykernel {ready.version}"
    assert "word599" not in cell.markdown()
    assert ready.value("w1.outcome.error.reason") == "stop button"


def test_pause_resume_and_send_work_while_the_cell_waits(ready: KernelHarness) -> None:
    cell = LiveCell(ready, "%%agent --model slow --name w2\nAnother long story")
    assert cell.pump(_streaming)
    pause = cell.widget("ButtonModel", description="Pause")
    clicked = time.monotonic()
    ready.click(pause)
    assert cell.pump(lambda c: "pausing" in c.html() or "paused" in c.html(), timeout=10)
    assert time.monotonic() - clicked < CLICK_LIMIT_S
    text = cell.widget("TextModel")
    cell.send_state(text, value="focus on the ending")
    clicked = time.monotonic()
    ready.click(cell.widget("ButtonModel", description="Send"))
    assert cell.pump(lambda c: c.models[text].get("value") == "", timeout=10)  # cleared once the run took it
    assert time.monotonic() - clicked < CLICK_LIMIT_S
    ready.click(cell.widget("ButtonModel", description="Stop"))
    assert cell.finish().status == "ok"
    assert ready.value("w2.dashboard.controls.sent") == ["focus on the ending"]


def test_kernel_interrupt_cancels_a_waiting_cell_cooperatively(ready: KernelHarness) -> None:
    cell = LiveCell(ready, "%%agent --model slow --name w3\nYet another story")
    assert cell.pump(_streaming)
    ready.interrupt()
    result = cell.finish()
    assert "interrupted: stopping the run (interrupt again to stop waiting)" in cell.html()  # said live
    # ... in the run's own output, so the record that replaced it is all the saved cell keeps
    assert "interrupted" not in result.stdout
    assert [list(o["data"]) for o in result.outputs] == [["text/markdown", "text/plain"]]
    assert "cancelled" in cell.markdown()
    assert ready.value("w3.status") == "cancelled"


def test_run_all_keeps_order_follow_up_sees_the_answer(ready: KernelHarness) -> None:
    ready.execute("%agent thread new")
    # Run All: every execute_request is sent at once, before the first cell has finished
    first = LiveCell(ready, "%%agent --model memo\nMy name is Ada. Remember it.")
    second_id = ready.kc.execute("%%agent --model memo --name second\nWhat is my name?")
    third_id = ready.kc.execute("print(second.final_text, len(get_session().messages()))")
    assert first.finish().status == "ok"
    second = ready._collect(second_id, 60)
    third = ready._collect(third_id, 60)
    assert "Your name is Ada." in second.outputs[0]["data"]["text/markdown"]
    assert third.stdout.strip() == "Your name is Ada. 4"


def test_background_run_streams_while_another_cell_sleeps(ready: KernelHarness) -> None:
    started = ready.execute("%%agent --model slow --background --name bg1\nStream in the background")
    assert started.status == "ok"
    assert started.elapsed_s < 5
    out = ready.execute(
        "import time\n"
        "before = len(bg1.dashboard.transcript.text())\n"
        "time.sleep(3)\n"
        "print(before, len(bg1.dashboard.transcript.text()))"
    )
    before, after = map(int, out.stdout.split())
    assert after > before + 100, (before, after)  # ~60 words of 6-7 characters in 3 s
    ready.execute("bg1.cancel('test over')")
    assert ready.value("(await bg1.wait()).status") == "cancelled"


def test_a_second_run_on_the_thread_queues_behind_a_background_run(ready: KernelHarness) -> None:
    ready.execute("%%agent --model slow --background --name bg2\nFirst")
    ready.execute("%%agent --model steps --background --name bg3\nSecond")
    assert ready.value("bg3.status") == "queued"
    assert "queued" in ready.value("bg3.dashboard.summary_text()")
    ready.execute("bg2.cancel('done')")
    assert ready.value("(await bg3.wait()).status") == "completed"
    assert ready.value("bg3.outcome.messages[0].role") in ("user", "assistant")  # bg2's exchange came first
    assert ready.value("[m.text for m in get_session().messages()][-2:]") == ["Second", "first step"]


def test_interrupt_while_idle_cancels_background_runs(ready: KernelHarness) -> None:
    cell = LiveCell(ready, "%%agent --model slow --background --name bg4\nForever")
    assert cell.pump(lambda c: c.idle and _streaming(c))  # the kernel is idle, the run streams
    interrupted = time.monotonic()
    ready.interrupt()
    # nothing else is sent: the idle kernel itself must react, in the run's own cell
    assert cell.pump(lambda c: "cancelled" in c.markdown(), timeout=10)
    assert time.monotonic() - interrupted < 2.0
    assert "■ interrupt: stopping background run bg4" in cell.html()  # said in the dashboard, not below the record
    assert cell.result.stdout == ""
    assert [list(o["data"]) for o in cell.result.outputs] == [["text/markdown", "text/plain"]]
    assert ready.value("bg4.outcome.error.reason") == "interrupted"
    assert ready.execute("1 + 1").status == "ok"  # the kernel itself was not disturbed


def test_stop_click_reaches_a_background_run_while_agent_wait_waits(ready: KernelHarness) -> None:
    started = LiveCell(ready, "%%agent --model slow --background --name bgw\nA story to wait for")
    assert started.pump(lambda c: c.idle and _streaming(c))
    stop = started.widget("ButtonModel", description="Stop")
    waiting = LiveCell(ready, "%agent wait")
    waiting.pump(lambda c: c.idle, timeout=1.0)  # give the kernel time to start executing it
    assert not waiting.idle, "%agent wait ended before the click"
    clicked = time.monotonic()
    ready.click(stop)
    result = waiting.finish()
    waited = time.monotonic() - clicked
    assert result.status == "ok", result.error
    assert waited < 10, f"%agent wait heard the click only after {waited:.1f} s on ipykernel {ready.version}"
    assert result.stdout.startswith("bgw: [cancelled (stop button) · "), result.stdout
    assert ready.value("bgw.outcome.error.reason") == "stop button"


def test_kernel_interrupt_stops_agent_wait_and_leaves_the_run_going(ready: KernelHarness) -> None:
    started = LiveCell(ready, "%%agent --model slow --background --name bgi\nA story to stop waiting for")
    assert started.pump(lambda c: c.idle and _streaming(c))
    waiting = LiveCell(ready, "%agent wait")
    waiting.pump(lambda c: c.idle, timeout=1.0)
    assert not waiting.idle
    ready.interrupt()
    result = waiting.finish()
    assert result.status == "ok", result.error
    assert result.stdout == "bgi: [running]\nstopped waiting; still active: bgi (%agent stop all stops them)\n"
    assert ready.value("bgi.status") == "running"
    ready.execute("bgi.cancel('test over')")
    assert ready.value("(await bgi.wait()).status") == "cancelled"


def test_a_wait_that_cannot_hear_clicks_says_press_stop(ready: KernelHarness) -> None:
    # the magic called from code is a plain synchronous wait: ipykernel 6 pumps it, 7 cannot hear clicks there
    cell = LiveCell(ready, "get_ipython().run_cell_magic('agent', '--model slow --name w4', 'From code')")
    assert cell.pump(_streaming)
    stop = cell.widget("ButtonModel", description="Stop")
    pumped = ready.version.startswith("6.")
    assert bool(cell.models[stop].get("disabled")) is not pumped
    assert ("press ■" in cell.html()) is not pumped
    ready.interrupt()  # ■ works either way
    assert cell.finish().status == "ok"
    assert ready.value("w4.status") == "cancelled"
