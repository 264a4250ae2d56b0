"""``--background`` runs: the cell returns at once, the run streams on the session's loop thread.

Each test runs its cells from inside an anyio test and awaits the handles there, as a later cell of
a notebook would; the runs themselves live on the session's own loop thread.
"""

from __future__ import annotations

import _thread
import threading
from collections.abc import Callable

import anyio
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from tinyagents_nb.harness import ProviderError, RunCancelled, UserMessage
from tinyagents_nb.harness.testkit import ScriptedModel, SlowModel, StreamingMock
from tinyagents_nb.magics import NotebookRun, NotebookSession

from .conftest import last_run, run_error, run_ok

pytestmark = pytest.mark.anyio


async def until(predicate: Callable[[], bool], *, limit_s: float = 5.0) -> None:
    with anyio.fail_after(limit_s):
        while not predicate():  # noqa: ASYNC110 - polls plain state that has no event to wait on
            await anyio.sleep(0.01)


def _noop() -> str:
    """Does nothing."""
    return "ok"


async def test_the_cell_returns_at_once_and_the_handle_is_awaitable(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    session.register_model("slow", SlowModel(ScriptedModel(["late answer"]), delay_s=0.2))
    run_ok(shell, "%%agent --background --model slow --name job\nhi")
    job = shell.user_ns["job"]
    assert isinstance(job, NotebookRun)
    assert job.mode == "background"
    assert job.status == "running"
    assert "no running event loop" not in capsys.readouterr().out
    run = await job  # await run == await run.result()
    assert run.final_text == "late answer"
    assert job.status == "completed"
    assert (await job.wait()) is run
    assert job.outcome is run
    await until(lambda: job.dashboard.state.finished)
    assert job.dashboard.summary_text().startswith('<tinyagents run "job": completed')


async def test_stop_cancels_a_slow_background_run(shell: InteractiveShell, session: NotebookSession) -> None:
    session.register_model("slow", SlowModel(ScriptedModel(["never"]), delay_s=30))
    run_ok(shell, "%%agent --background --model slow\nthis takes forever")
    handle = last_run(shell)
    await anyio.sleep(0.05)
    with anyio.fail_after(5):
        run_ok(shell, "%agent stop")
        run = await handle.wait()
    assert run.status == "cancelled"
    assert handle.status == "cancelled"
    with pytest.raises(RunCancelled):
        await handle.result()
    assert session.active_runs() == []


async def test_stop_all_and_stop_by_name(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    session.register_model("slow", SlowModel(ScriptedModel(["a", "b", "c"]), delay_s=30))
    for name in ("one", "two", "three"):
        run_ok(shell, f"%%agent --background --new-thread --model slow --name {name}\nrun {name}")
    run_ok(shell, "%agent stop two")
    await shell.user_ns["two"].wait()
    assert [r.status for r in session.runs] == ["running", "cancelled", "running"]
    run_ok(shell, "%agent stop all")
    for name in ("one", "three"):
        await shell.user_ns[name].wait()
    assert "stopping one, three" in capsys.readouterr().out
    run_ok(shell, "%agent stop")
    assert "no active run to stop" in capsys.readouterr().out
    error = run_error(shell, "%agent stop two")
    assert isinstance(error, UsageError)
    assert "cannot stop run two: it is cancelled" in str(error)


async def test_steer_reaches_the_next_model_request(shell: InteractiveShell, session: NotebookSession) -> None:
    inner = ScriptedModel([ScriptedModel.tool_call("noop"), "steered answer"])
    session.register_model("slow", SlowModel(inner, delay_s=0.2))
    session.register_tool(_noop, name="noop")
    run_ok(shell, "%%agent --background --model slow\nstart working")
    handle = last_run(shell)
    run_ok(shell, '%agent steer "Only report the totals."')
    run_ok(shell, "%agent redirect Answer in French.")
    run = await handle.result()
    assert run.final_text == "steered answer"
    second = inner.requests[1].messages
    assert UserMessage(text="Only report the totals.") in second
    assert any("Answer in French." in m.text for m in second if m.role == "system")


async def test_pause_holds_the_run_until_resume(shell: InteractiveShell, session: NotebookSession) -> None:
    inner = ScriptedModel([ScriptedModel.tool_call("noop"), "resumed"])
    slow = SlowModel(inner, delay_s=0.1)
    session.register_model("slow", slow)
    session.register_tool(_noop, name="noop")
    run_ok(shell, "%%agent --background --model slow --name p\ngo")
    handle = shell.user_ns["p"]
    await until(lambda: slow.calls == 1)  # inside its first model call
    run_ok(shell, "%agent pause p")
    await until(lambda: handle.status == "paused")
    await anyio.sleep(0.3)
    assert inner.calls == 1
    assert not handle.done
    run_ok(shell, "%agent resume p")
    run = await handle.result()
    assert run.final_text == "resumed"
    assert inner.calls == 2


async def test_handle_methods_control_the_run(shell: InteractiveShell, session: NotebookSession) -> None:
    inner = ScriptedModel([ScriptedModel.tool_call("noop"), "ok"])
    session.register_model("slow", SlowModel(inner, delay_s=0.1))
    session.register_tool(_noop, name="noop")
    run_ok(shell, "%%agent --background --model slow\ngo")
    handle = last_run(shell)
    handle.steer("from Python")
    run = await handle.result()
    assert UserMessage(text="from Python") in inner.requests[1].messages
    assert run.ok


async def test_rerunning_a_cell_stops_its_earlier_run(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    session.register_model("slow", SlowModel(ScriptedModel(["first", "second"]), delay_s=0.3))
    source = "%%agent --background --model slow --name r\nsame cell"
    run_ok(shell, source, cell_id="cell-1")
    first = shell.user_ns["r"]
    run_ok(shell, "%%agent --background --model slow\nanother cell", cell_id="cell-2")
    other = last_run(shell)
    run_ok(shell, source, cell_id="cell-1")
    second = shell.user_ns["r"]
    assert second is not first
    assert f"stopped the earlier run {first.label} of this cell" in capsys.readouterr().out
    outcome = await first.wait()
    assert outcome.status == "cancelled"
    assert "the cell was run again" in str(outcome.error)
    assert (await other.wait()).status == "completed"  # a different cell's run is left alone
    assert (await second.wait()).status == "completed"


async def test_rerun_detection_falls_back_to_the_cell_source(shell: InteractiveShell, session: NotebookSession) -> None:
    session.register_model("slow", SlowModel(ScriptedModel(["a", "b"]), delay_s=0.3))
    run_ok(shell, "%%agent --background --model slow\nno cell id here")
    first = last_run(shell)
    run_ok(shell, "%%agent --background --model slow\nno cell id here")
    assert (await first.wait()).status == "cancelled"
    assert (await last_run(shell).wait()).status == "completed"


async def test_a_failed_background_run_shows_in_its_dashboard(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    failing = ScriptedModel([ProviderError("upstream is down", provider="acme", model="x", retryable=False)])
    session.register_model("broken", failing)
    run_ok(shell, "%%agent --background --model broken\nhi")
    handle = last_run(shell)
    run = await handle.wait()
    assert run.status == "failed"
    assert handle.status == "failed"
    with pytest.raises(ProviderError):
        await handle.result()
    await until(lambda: handle.dashboard.state.finished)
    assert "failed" in handle.dashboard.summary_text()
    assert "ProviderError" in handle.dashboard.summary_text()


async def test_an_interrupt_cancels_a_blocking_run_and_keeps_the_partial_answer(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    words = [f"w{i} " for i in range(200)]
    session.register_model("stream", StreamingMock(words, chunk_delay_s=0.02))
    stop = threading.Event()

    def press_interrupt_once_it_streams() -> None:  # ■ by what was seen, not after a fixed time (load varies)
        while not stop.wait(0.01):
            run = shell.user_ns.get("_agent")
            if run is not None and run.dashboard is not None and "w1 " in run.dashboard.transcript.text():
                _thread.interrupt_main()
                return

    presser = threading.Thread(target=press_interrupt_once_it_streams, daemon=True)
    presser.start()
    try:
        shell.run_cell_magic("agent", "--model stream --wait", "count slowly")
    finally:
        stop.set()
    handle = last_run(shell)
    assert handle.status == "cancelled"
    assert handle.mode == "waiting"
    out = capsys.readouterr().out
    assert "interrupted: stopping the run" in out
    assert out.strip().splitlines()[-1].startswith("[cancelled (interrupted) · 0 model calls")
    assert handle.final_text.startswith("w0 w1 ")
    assert len(handle.final_text) < len("".join(words))
    await until(lambda: handle.dashboard.state.finished)


async def test_an_interrupt_while_the_cell_starts_its_run_stops_the_run_without_a_traceback(
    shell: InteractiveShell, session: NotebookSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """■ before the wait began (e.g. as ``jupyter_ui_poll`` sets up in a replayed cell) is kept for the wait."""
    session.register_model("stream", StreamingMock([f"w{i} " for i in range(400)], chunk_delay_s=0.02))
    new_run = session.new_run

    def interrupted_while_starting(*args: object, **kwargs: object) -> NotebookRun:
        _thread.interrupt_main()  # SIGINT lands in the middle of the magic's set-up
        return new_run(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(session, "new_run", interrupted_while_starting)
    shell.run_cell_magic("agent", "--model stream --wait", "count slowly")  # no KeyboardInterrupt escapes
    handle = last_run(shell)
    assert handle.status == "cancelled"
    assert handle.stop_reason == "interrupted"
    await until(lambda: handle.dashboard.state.finished)


async def test_a_queued_run_cancelled_while_waiting_ends_at_once(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    session.register_model("slow", SlowModel(ScriptedModel(["never", "also never"]), delay_s=30))
    run_ok(shell, "%%agent --background --model slow --name ahead\nfirst")
    run_ok(shell, "%%agent --background --model slow --name behind\nsecond")
    behind = shell.user_ns["behind"]
    assert behind.status == "queued"
    behind.cancel("not needed")
    with anyio.fail_after(5):  # does not wait for the run ahead of it
        run = await behind.wait()
    assert run.status == "cancelled"
    assert shell.user_ns["ahead"].status == "running"
    shell.user_ns["ahead"].cancel("test over")
    await shell.user_ns["ahead"].wait()
