"""Durable RLM runs in the notebook: journaled like chat runs, listed when interrupted, resumed in a fresh REPL."""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from tinyagents_nb.harness import ModelRequest, ModelResponse
from tinyagents_nb.harness.durable import RunStore, plan_resume
from tinyagents_nb.harness.testkit import FunctionModel, ScriptedModel
from tinyagents_nb.magics import get_session

from .conftest import run_ok
from .test_durable_magic import _count_plans


def py(code: str) -> ModelResponse:
    return ScriptedModel.text(f"```python\n{code}\n```")


def test_an_rlm_cell_is_journaled_with_its_context_names(shell: InteractiveShell, tmp_path: Path) -> None:
    store_path = tmp_path / "runs.sqlite"
    run_ok(shell, f"%config AgentMagics.store_path = {os.fspath(store_path)!r}")
    run_ok(shell, "%agent reset")
    get_session().register_model("fake", ScriptedModel([py("n = len(logs)"), py("FINAL(n)")]))
    shell.user_ns["logs"] = ["ERROR a", "INFO b"]
    run_ok(shell, "%%agent --rlm local --context logs --model fake --wait\nHow many lines?")
    with RunStore(store_path) as store:
        (run,) = store.runs()
        assert run.status == "completed"
        assert run.model_calls == 3  # two blocks, then the turn that returns the FINAL answer
        plan_meta = [s.data for s in store.steps(run.run_id) if s.kind == "meta"]
        assert plan_meta == [{"kind": "rlm", "context": ["logs"], "environment": "local"}]
        assert "ERROR a" not in str(store.steps(run.run_id)[0].data)  # the values themselves are never journaled


def test_an_interrupted_rlm_run_is_listed_and_resumes_in_a_fresh_repl(
    shell: InteractiveShell, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store_path = tmp_path / "runs.sqlite"
    run_ok(shell, f"%config AgentMagics.store_path = {os.fspath(store_path)!r}")
    run_ok(shell, "%agent reset")
    seen: list[str] = []

    def first(request: ModelRequest) -> ModelResponse:
        return py("n = len(logs)\nprint(n)") if len(request.messages) < 3 else py("hang_here = 1")

    session = get_session()
    session.register_model("function", FunctionModel(first))
    shell.user_ns["logs"] = ["ERROR a", "INFO b", "ERROR c"]
    run_ok(shell, "%%agent --rlm local --context logs --model function --wait --max-model-calls 1\nHow many?")
    with RunStore(store_path) as store:  # make it look like its kernel died mid-run: the end row is undone
        (run,) = store.runs()
        steps = store.steps(run.run_id)
    with sqlite3.connect(store_path) as conn:
        conn.execute("UPDATE tinyagents_runs SET status = 'running', ended_at = NULL, owner = 'elsewhere:1:x'")
        last_model = max(s.seq for s in steps if s.kind == "model")
        conn.execute("DELETE FROM tinyagents_steps WHERE seq > ?", (last_model,))  # cut off in its first block
    with RunStore(store_path) as store:
        assert plan_resume(store, run.run_id).pending  # its block has no answer: it was cut off

    def resumed(request: ModelRequest) -> ModelResponse:
        seen.append(request.messages[-1].text)
        return py("n = len(logs)\nFINAL(n)")

    run_ok(shell, "%agent reset")  # a new session, as after a kernel restart
    session = get_session()
    session.register_model("function", FunctionModel(resumed))
    runs = run_ok(shell, "%agent runs").result
    (row,) = runs[runs["status"] == "interrupted"].to_dict("records")
    capsys.readouterr()
    plans = _count_plans(monkeypatch)
    run_ok(shell, f"%agent resume {row['run'].split()[-1]}")
    out = capsys.readouterr().out
    assert plans == [1]  # read once (it was read four times: the cell, the RLM, the resume, the harness)
    assert "resumed RLM run" in out
    handle = shell.user_ns["_agent"]  # shown and waited for as a %%agent --rlm cell's run: dashboard, then record
    assert handle.mode == "waiting"
    assert handle.dashboard is not None
    assert handle.final_text == "3"  # computed in a fresh REPL holding the notebook's logs again
    assert "answer: 3" in out
    details = handle.dashboard.details()
    assert (details.code_steps, details.tool_calls) == (2, 0)  # the skipped block and the new one: code steps
    assert "· 0 tool calls · 2 code steps ·" in out
    assert re.search(rf"\[completed · run [0-9a-f]{{8}} resumed RLM run {row['run'].split()[-1]} from step 2 ", out)
    assert "namespace is not saved" in seen[0]  # always told its REPL is new
    assert "code blocks created are gone" not in seen[0]  # its only block never finished: nothing it made is lost
    assert not (run_ok(shell, "%agent runs").result["status"] == "interrupted").any()
    with RunStore(store_path) as store:
        (new,) = [r for r in store.runs() if r.resumed_from == run.run_id]
        assert new.status == "completed"
