"""Durable runs in the notebook: a run whose process was killed shows as interrupted and resumes."""

from __future__ import annotations

import os
import re
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from tinyagents_nb.harness import ModelRequest, tool
from tinyagents_nb.harness.durable import ResumePlan, RunStore
from tinyagents_nb.harness.events import ApprovalDecided
from tinyagents_nb.harness.testkit import EventRecorder, FunctionModel
from tinyagents_nb.magics import get_session

from ..harness.durable import test_durable_resume as kill
from ..harness.durable.durable_script import answer, charge, lookup
from .conftest import last_run, run_error, run_ok


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_interrupted_run_is_listed_and_resumed_with_percent_agent_resume(
    shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kill._kill_in(tmp_path, "charge")  # a run in another process, killed inside a non-idempotent tool
    monkeypatch.setenv("DURABLE_FOLDER", str(tmp_path))
    store = tmp_path / "runs.sqlite"
    run_ok(shell, f"%config AgentMagics.store_path = {os.fspath(store)!r}")
    run_ok(shell, "%agent reset")
    assert "1 interrupted run in" in capsys.readouterr().out  # said once, where the store is opened
    session = get_session()
    session.register_model("function", FunctionModel(answer))
    session.register_tool(charge)
    session.register_tool(lookup)

    runs = run_ok(shell, "%agent runs").result
    (row,) = runs[runs["status"] == "interrupted"].to_dict("records")
    assert row["model_calls"] == 1
    assert row["total_tokens"] == 110
    assert row["prompt"] == "pay and look up"

    assert row["run"].startswith("interrupted ")  # the label carries the id's tail, which %agent resume takes
    run_ok(shell, f"%agent resume {row['run'].split()[-1]}")
    out = capsys.readouterr().out
    assert "all done" in out
    assert "330 tokens in all" in out
    tail = row["run"].split()[-1]
    assert re.search(rf"\[completed · run [0-9a-f]{{8}} resumed run {tail} from step 2 ", out)  # short ids
    assert not re.search(r"run-[0-9a-f]{12}-", out)  # no full run id in what the resume says
    assert (tmp_path / "charge.log").read_text().count("x") == 1
    runs = run_ok(shell, "%agent runs").result
    assert not (runs["status"] == "interrupted").any()


def _count_plans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times a ``ResumePlan`` is read from the journal from now on (one item, counting)."""
    made = [0]
    init = ResumePlan.__init__

    def counted(self: ResumePlan, *args: Any, **kwargs: Any) -> None:
        made[0] += 1
        init(self, *args, **kwargs)

    monkeypatch.setattr(ResumePlan, "__init__", counted)
    return made


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_resumed_runs_record_dashboard_and_run_list_count_every_tool_call_of_the_job(
    shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kill._kill_in(tmp_path, "lookup")  # charge finished before the kill; lookup (idempotent) was cut off
    monkeypatch.setenv("DURABLE_FOLDER", str(tmp_path))
    run_ok(shell, f"%config AgentMagics.store_path = {os.fspath(tmp_path / 'runs.sqlite')!r}")
    run_ok(shell, "%agent reset")
    session = get_session()
    session.register_model("function", FunctionModel(answer))
    session.register_tool(charge)
    session.register_tool(lookup)
    capsys.readouterr()
    plans = _count_plans(monkeypatch)
    run_ok(shell, "%agent resume")
    out = capsys.readouterr().out
    assert plans == [1]  # the journal is read into a plan once, and the run is built from it
    run = shell.user_ns["_agent"]
    assert run.status == "completed"
    assert (tmp_path / "charge.log").read_text().count("x") == 1  # replayed, never run again
    assert (tmp_path / "lookup.log").read_text().count("x") == 2  # cut off, idempotent: run again
    assert "[completed · 3 model calls · 2 tool calls · 330 tokens" in out  # the record's last line: the job's
    plain = run._repr_mimebundle_()["text/plain"]
    assert "tool calls (2):" in plain
    assert 'charge (from before the restart) {"amount": 5} → charged 5' in plain
    assert 'lookup {"key": "k"} → k=42' in plain  # run now: not marked
    assert "charge</code> · from before the restart" in run._repr_mimebundle_()["text/markdown"]
    assert (run.dashboard.details().model_calls, run.dashboard.details().tool_calls) == (3, 2)
    notes = [s.text for s in run.dashboard.transcript.segments.values() if s.kind == "note"]
    assert "↪ resumed from step 5: 2 model calls before the restart" in notes
    assert run.outcome.tool_calls == 2
    runs = run_ok(shell, "%agent runs").result
    (row,) = runs[runs["run"] == run.label].to_dict("records")
    assert (row["model_calls"], row["tool_calls"]) == (3, 2)  # %agent runs agrees with the record


def test_loading_the_extension_says_there_are_interrupted_runs(
    shell: InteractiveShell, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kill._kill_in(tmp_path, "lookup")
    run_ok(shell, "%unload_ext tinyagents_nb")
    run_ok(shell, f"%config AgentMagics.store_path = {os.fspath(tmp_path / 'runs.sqlite')!r}")
    capsys.readouterr()
    run_ok(shell, "%load_ext tinyagents_nb")
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert "1 interrupted run in" in out
    assert "%agent resume" in out


def test_variables_the_run_made_are_named_to_the_model_and_offered_as_a_cell(
    shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = tmp_path / "runs.sqlite"
    with RunStore(store_path) as store:  # a run whose kernel died after two run_code calls
        store.start_run("run-old", agent=None, model="function", prompt="analyse")
        store.add_step("run-old", "input", {"messages": [{"role": "user", "text": "analyse"}]})
        calls = [
            {"id": "a", "name": "run_code", "arguments": {"code": "import math\ntotal = math.pi\ndef f(x): return x"}},
            {"id": "b", "name": "run_code", "arguments": {"code": "kept = 1\nbroken = 1 / 0"}},
        ]
        store.add_step("run-old", "model", {"message": {"role": "assistant", "tool_calls": calls}, "usage": {}})
        for call_id, error in (("a", False), ("b", True)):
            message = {"role": "tool", "tool_call_id": call_id, "name": "run_code", "text": "ok", "is_error": error}
            store.add_step("run-old", "tool.done", {"message": message})
    with sqlite3.connect(store_path) as conn:  # its kernel is gone
        conn.execute("UPDATE tinyagents_runs SET owner = 'elsewhere:1:x'")
    run_ok(shell, f"%config AgentMagics.store_path = {os.fspath(store_path)!r}")
    run_ok(shell, "%agent reset")
    seen: list[str] = []

    def model(request: ModelRequest) -> str:
        seen.append(request.messages[-1].text)
        return "redone"

    get_session().register_model("function", FunctionModel(model))
    offered: list[str] = []
    monkeypatch.setattr(shell, "set_next_input", lambda text, replace=False: offered.append(text))
    shell.user_ns["f"] = lambda x: x  # still defined in this kernel
    capsys.readouterr()
    run_ok(shell, "%agent resume run-old")
    out = capsys.readouterr().out
    assert "gone with the restart: math, total" in out
    assert "redone" in out
    assert "math, total" in seen[0]  # the model is told
    assert "kept" not in seen[0]  # a failed call's names were never made
    (cell,) = offered  # offered, never run: the names are still missing
    assert "total = math.pi" in cell
    assert "total" not in shell.user_ns
    with RunStore(store_path) as store:
        (resumed,) = [r for r in store.runs() if r.resumed_from == "run-old"]
        assert resumed.prompt == "analyse"  # labelled by the job's prompt, not by the note
        assert resumed.from_step == 3


def test_a_stopped_run_resumes_when_named_and_is_never_offered_unnamed(
    shell: InteractiveShell, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = tmp_path / "runs.sqlite"
    with RunStore(store_path) as store:  # a run someone stopped (e.g. its resume, on the approval card)
        store.start_run("run-stopped", agent=None, model="function", prompt="sum up")
        store.add_step("run-stopped", "input", {"messages": [{"role": "user", "text": "sum up"}]})
        store.end_run("run-stopped", "cancelled")
    run_ok(shell, f"%config AgentMagics.store_path = {os.fspath(store_path)!r}")
    run_ok(shell, "%agent reset")
    get_session().register_model("function", FunctionModel(lambda request: "summed"))
    capsys.readouterr()
    unnamed = shell.run_cell("%agent resume")
    assert unnamed.error_in_exec is not None  # nothing interrupted, no run of this session: nothing to resume
    run_ok(shell, "%agent resume stopped")
    out = capsys.readouterr().out
    assert "summed" in out
    assert "resumed run run-stopped from step 0" in out
    with RunStore(store_path) as store:
        assert store.get("run-stopped").status == "resumed"  # type: ignore[union-attr]


wiped: list[str] = []


@tool(requires_approval=True)
def wipe(table: str) -> str:
    """Drop a table."""
    wiped.append(table)
    return "dropped"


def _awaiting_approval(store: RunStore, run_id: str, table: str) -> None:
    """A run that died while its call of ``wipe`` waited for approval."""
    store.start_run(run_id, agent=None, model="function", prompt="clean up")
    store.add_step(run_id, "input", {"messages": [{"role": "user", "text": "clean up"}]})
    call = {"id": "w0", "name": "wipe", "arguments": {"table": table}}
    store.add_step(run_id, "model", {"message": {"role": "assistant", "tool_calls": [call]}, "usage": {}, "model": "m"})
    store.end_run(run_id, "failed")


def _approve_after(shell: InteractiveShell, pause_s: float, seen: list[int]) -> None:
    """A person at the resumed run's card: clicks Approve ``pause_s`` after it shows (``seen``: cards still open)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        run = shell.user_ns.get("_agent")
        if run is not None and run.stream.pending_approvals():
            time.sleep(pause_s)
            seen.append(len(run.stream.pending_approvals()))
            run.stream.approvals.approve("w0")
            return
        time.sleep(0.01)


def test_a_resumed_run_follows_the_notebooks_approval_and_token_settings(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    # %agent resume's run is a %%agent cell's run: its card waits for the person unless
    # AgentMagics.approval_timeout is set (not RunPolicy's 300 s for scripts), and it counts tokens as configured.
    wiped.clear()
    store_path = tmp_path / "runs.sqlite"
    with RunStore(store_path) as store:
        _awaiting_approval(store, "run-first", "users")
        _awaiting_approval(store, "run-second", "logs")
    run_ok(shell, f"%config AgentMagics.store_path = {os.fspath(store_path)!r}")
    run_ok(shell, "%agent reset")
    run_ok(shell, '%config AgentMagics.approvals = "ask"')
    run_ok(shell, '%config AgentMagics.token_counting = "exact"')
    session = get_session()
    session.register_model("function", FunctionModel(lambda request: "finished"))
    session.register_tool(wipe)

    seen: list[int] = []
    clicker = threading.Thread(target=_approve_after, args=(shell, 0.5, seen))
    clicker.start()
    run_ok(shell, "%agent resume first")
    clicker.join()
    first = last_run(shell)
    assert first.harness.policy.approval_timeout_s is None
    assert first.harness.policy.token_counting == "exact"
    assert seen == [1]  # still waiting after half a second, then the click ran it
    assert wiped == ["users"]

    run_ok(shell, "%config AgentMagics.approval_timeout = 0.2")
    rec = EventRecorder(session.context.events)
    started = time.monotonic()
    run_ok(shell, "%agent resume second")  # nobody clicks: the configured bound denies the call
    assert time.monotonic() - started < 15
    assert last_run(shell).harness.policy.approval_timeout_s == 0.2
    (decided,) = rec.of_type(ApprovalDecided)
    assert (decided.approved, decided.decided_by) == (False, "timeout")
    assert wiped == ["users"]


def test_a_run_that_cannot_resume_is_named_by_its_short_id(shell: InteractiveShell, tmp_path: Path) -> None:
    store_path = tmp_path / "runs.sqlite"
    run_id = "run-0123456789ab-000001-deadbeef"
    with RunStore(store_path) as store:  # a run whose kernel died before its input was journaled
        store.start_run(run_id, agent=None, model="function", prompt="go")
    with sqlite3.connect(store_path) as conn:
        conn.execute("UPDATE tinyagents_runs SET owner = 'elsewhere:1:x'")
    run_ok(shell, f"%config AgentMagics.store_path = {os.fspath(store_path)!r}")
    run_ok(shell, "%agent reset")
    error = str(run_error(shell, "%agent resume deadbeef"))
    assert "run deadbeef has no journaled input" in error
    assert run_id not in error
