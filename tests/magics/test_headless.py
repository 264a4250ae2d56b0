"""Headless execution: telling nbclient from a live frontend, background cells that wait, late records, %agent wait.

A fake ``shell.kernel`` stands for the execute request's ``allow_stdin`` (what ipykernel records per
request); the real thing, under nbconvert on both ipykernel majors, is in tests/kernel/test_headless.py.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from tinyagents_nb.harness.testkit import ScriptedModel, SlowModel
from tinyagents_nb.magics import NotebookSession
from tinyagents_nb.magics._headless import FOREGROUND_NOTE, RecordRelay, executed_headless

from .conftest import last_run, run_error, run_ok


def _said(capsys: pytest.CaptureFixture[str], *labels: str) -> list[str]:
    """The lines %agent wait printed (without a kernel the dashboards and records print too)."""
    prefixes = (*(f"{label}: " for label in labels), "stopped waiting", "no active run")
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith(prefixes)]


def _request(allow_stdin: bool) -> SimpleNamespace:
    return SimpleNamespace(kernel=SimpleNamespace(_allow_stdin=allow_stdin))


def test_headless_means_a_kernel_request_that_cannot_answer() -> None:
    assert executed_headless(_request(allow_stdin=False))  # nbclient, papermill, nbval
    assert not executed_headless(_request(allow_stdin=True))  # JupyterLab, Notebook, VS Code
    assert not executed_headless(SimpleNamespace())  # plain IPython: the terminal is live
    assert not executed_headless(None)


def _parent(msg_id: str) -> dict[str, Any]:
    return {"header": {"msg_id": msg_id}}


def test_the_relay_sends_with_the_executing_cell_or_the_next_one() -> None:
    relay, sent = RecordRelay(), []
    relay.deliver(lambda parent: sent.append(("early", parent)))  # no cell executing: it waits
    assert sent == []
    assert relay.pending == 1
    relay.cell_started(_parent("c1"))
    assert sent == [("early", _parent("c1"))]
    assert relay.pending == 0
    relay.cell_started(_parent("c1"))  # a cell running a cell (%run): same request, the outer one decides
    relay.cell_finished()
    relay.deliver(lambda parent: sent.append(("nested", parent)))
    assert sent[-1] == ("nested", _parent("c1"))
    relay.cell_finished()
    relay.deliver(lambda parent: sent.append(("late", parent)))
    assert sent[-1] == ("nested", _parent("c1"))  # c1 ended: waits for the next cell
    relay.cell_finished()  # an empty cell ends without starting: harmless
    relay.cell_started(_parent("c2"))
    assert sent[-1] == ("late", _parent("c2"))


def test_a_new_request_resets_an_unbalanced_cell() -> None:
    relay, sent = RecordRelay(), []
    relay.cell_started(_parent("c1"))  # its end was never reported
    relay.cell_started(_parent("c2"))
    relay.cell_finished()
    relay.deliver(lambda parent: sent.append(parent))
    assert sent == []  # c2 ended: nothing executes any more


@pytest.fixture
def slow(session: NotebookSession) -> None:
    session.register_model("slow", SlowModel(ScriptedModel(["late answer"] * 3), delay_s=0.3))


def test_a_headless_background_cell_waits_and_says_so(
    shell: InteractiveShell, slow: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shell, "kernel", SimpleNamespace(_allow_stdin=False), raising=False)
    run_ok(shell, "%%agent --background --model slow\nhi")
    run = last_run(shell)
    assert run.mode == "waiting"
    assert run.status == "completed"  # the cell returned with the run ended
    assert capsys.readouterr().out.count(FOREGROUND_NOTE) == 1
    monkeypatch.setenv("TINYAGENTS_NB_BLOCKING", "0")  # background by default: the same
    run_ok(shell, "%%agent --model slow\nhi")
    assert last_run(shell).status == "completed"
    assert FOREGROUND_NOTE in capsys.readouterr().out
    run_ok(shell, "%%agent --wait --model slow\nhi")  # asked to wait: nothing to say
    assert FOREGROUND_NOTE not in capsys.readouterr().out


def test_keep_leaves_headless_background_cells_in_the_background(
    shell: InteractiveShell, slow: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shell, "kernel", SimpleNamespace(_allow_stdin=False), raising=False)
    run_ok(shell, '%config AgentMagics.headless_background = "keep"')
    run_ok(shell, "%%agent --background --model slow --name kept\nhi")
    assert last_run(shell).mode == "background"
    assert last_run(shell).status == "running"
    assert FOREGROUND_NOTE not in capsys.readouterr().out
    run_ok(shell, "%agent wait kept")
    [said] = _said(capsys, "kept")
    assert said.startswith("kept: [completed · 1 model call")


def test_a_live_frontend_keeps_background_cells_unchanged(
    shell: InteractiveShell, slow: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shell, "kernel", SimpleNamespace(_allow_stdin=True), raising=False)
    run_ok(shell, "%%agent --background --model slow\nhi")
    assert last_run(shell).mode == "background"
    assert last_run(shell).status == "running"
    run_ok(shell, "%agent wait")
    assert last_run(shell).status == "completed"
    assert FOREGROUND_NOTE not in capsys.readouterr().out


def test_agent_wait_waits_for_every_active_run(
    shell: InteractiveShell, session: NotebookSession, slow: None, capsys: pytest.CaptureFixture[str]
) -> None:
    run_ok(shell, "%agent wait")
    assert capsys.readouterr().out == "no active run to wait for\n"
    for name in ("one", "two"):
        run_ok(shell, f"%%agent --background --new-thread --model slow --name {name}\nhi")
    assert len(session.active_runs()) == 2
    run_ok(shell, "%agent wait all")
    assert session.active_runs() == []
    lines = _said(capsys, "one", "two")
    assert [line.split(":")[0] for line in lines] == ["one", "two"]
    assert all("[completed · 1 model call" in line for line in lines)
    run_ok(shell, "%agent wait one")  # an ended run: its summary at once
    assert _said(capsys, "one")[0].startswith("one: [completed")


def test_agent_wait_stops_at_its_timeout_and_leaves_the_run_going(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    session.register_model("slower", SlowModel(ScriptedModel(["x"]), delay_s=30))
    run_ok(shell, "%%agent --background --model slower --name long\nhi")
    run_ok(shell, "%agent wait long --timeout 0.2")
    assert _said(capsys, "long") == ["long: [running]", "stopped waiting after 0.2 s; still active: long"]
    run = last_run(shell)
    assert run.status == "running"
    run.cancel()
    assert run.future is not None
    assert run.future.result(timeout=10).status == "cancelled"  # ends inside the test (its record prints)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("%agent wait --timeout", "--timeout needs a number of seconds > 0, got ''"),
        ("%agent wait --timeout -1", "--timeout needs a number of seconds > 0, got '-1'"),
        ("%agent wait --timeout soon", "got 'soon'"),
        ("%agent wait a b", "takes at most one run"),
        ("%agent wait nope", "no agent runs yet"),
    ],
)
def test_agent_wait_rejects_bad_input(shell: InteractiveShell, line: str, message: str) -> None:
    error = run_error(shell, line)
    assert isinstance(error, UsageError)
    assert message in str(error)
