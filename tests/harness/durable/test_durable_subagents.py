"""Durable runs with sub-agents: a process killed while a child runs is resumed with the child inside its parent."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tinyagents_nb.harness import AgentHarness, SubAgent
from tinyagents_nb.harness.durable import DurableJournal, RunStore
from tinyagents_nb.harness.testkit import FunctionModel

from .durable_script import HELPER_PROMPT, charge, lookup, tree_answer
from .test_durable_resume import CHILD, _env, _every_call_answered, _kill_in, _lines, _resume

TREE = {"TREE": "1"}


def _interrupted_spend(folder: Path) -> int:
    with RunStore(folder / "runs.sqlite") as store:
        (run,) = store.runs()
        assert run.status == "interrupted"
        return run.usage.total_tokens


def test_a_child_killed_in_its_tool_resumes_inside_its_parent(tmp_path: Path) -> None:
    _kill_in(tmp_path, "charge", **TREE)
    assert _interrupted_spend(tmp_path) == 2 * 110  # the parent's turn and the child's, both journaled
    result = _resume(tmp_path, **TREE)
    # the child went on from its last step: its cut-off charge skipped (not idempotent), lookup run, answer
    assert result["final_text"] == "parent got: all done"
    assert _lines(tmp_path / "charge.log") == 1
    assert _lines(tmp_path / "lookup.log") == 1
    _every_call_answered(result)
    assert result["calls"] == ["p1"]  # the parent did not call its sub-agent again
    assert result["total_tokens"] == 5 * 110  # parent 2 turns + child 3, each once across the tree


def test_a_child_killed_mid_stream_keeps_its_finished_tools(tmp_path: Path) -> None:
    _kill_in(tmp_path, "model", **TREE)
    assert _interrupted_spend(tmp_path) == 3 * 110  # the cut-off model call was never paid for
    result = _resume(tmp_path, **TREE)
    assert result["final_text"] == "parent got: all done"
    assert _lines(tmp_path / "charge.log") == 1  # the child's finished tools were not run again
    assert _lines(tmp_path / "lookup.log") == 1
    _every_call_answered(result)
    assert result["total_tokens"] == 5 * 110


def test_a_finished_child_is_not_run_again(tmp_path: Path) -> None:
    _kill_in(tmp_path, "parent", **TREE)
    assert _interrupted_spend(tmp_path) == 4 * 110
    result = _resume(tmp_path, **TREE)
    assert result["final_text"] == "parent got: all done"
    assert _lines(tmp_path / "charge.log") == 1
    assert _lines(tmp_path / "lookup.log") == 1
    assert result["total_tokens"] == 5 * 110


def test_a_resume_killed_while_it_continues_the_child_resumes_again(tmp_path: Path) -> None:
    _kill_in(tmp_path, "charge", **TREE)
    with open(tmp_path / "resume.err", "wb") as err:  # the first resume dies too, in the continued child
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(tmp_path), "resume"],
            env=_env(HANG_RESUME="model", **TREE),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        deadline = time.monotonic() + 30
        while not (tmp_path / "in_tool").exists():
            assert proc.poll() is None, (tmp_path / "resume.err").read_text()
            assert time.monotonic() < deadline, "the resumed child never reached its last turn"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    with RunStore(tmp_path / "runs.sqlite") as store:
        statuses = sorted(r.status for r in store.runs())
        assert statuses == ["interrupted", "resumed"]  # the first resume is the run to continue now
    result = _resume(tmp_path, **TREE)
    assert result["final_text"] == "parent got: all done"
    assert _lines(tmp_path / "charge.log") == 1
    assert _lines(tmp_path / "lookup.log") == 1  # done by the first resume's child, journaled, not repeated
    _every_call_answered(result)
    assert result["total_tokens"] == 5 * 110


def test_the_trees_spend_counts_against_the_budget_once(tmp_path: Path) -> None:
    _kill_in(tmp_path, "model", **TREE)
    result = _resume(tmp_path, MAX_TOKENS="400", **TREE)  # 330 carried + the child's next request breaks 400
    assert result["error"] == "BudgetExceeded"


def test_a_child_that_ended_answers_its_call_from_the_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed after the child ended but before the parent journaled its call's result: the child is not re-run."""
    monkeypatch.setenv("DURABLE_FOLDER", str(tmp_path))
    store = RunStore(tmp_path / "runs.sqlite")
    first = _tree(store).run_sync("pay and look up")
    assert first.final_text == "parent got: all done"
    steps = store.steps(first.run_id)
    answered = next(s.seq for s in steps if s.kind == "tool.done")  # the parent's answer to p1
    assert [s.kind for s in steps if s.seq < answered][-1] == "sub.end"
    with sqlite3.connect(tmp_path / "runs.sqlite") as conn:  # as if the process died right after the child ended
        conn.execute("DELETE FROM tinyagents_steps WHERE run_id = ? AND seq >= ?", (first.run_id, answered))
        conn.execute("UPDATE tinyagents_runs SET status = 'running', ended_at = NULL, owner = 'elsewhere:1:x'")
    resumed = _tree(store).resume_sync(first.run_id, store=store)
    assert resumed.final_text == "parent got: all done"
    assert _lines(tmp_path / "charge.log") == 1  # once, in the first run: the child was not run again
    assert _lines(tmp_path / "lookup.log") == 1
    assert resumed.usage.total_tokens == 5 * 110  # 4 carried (parent 1, child 3) and the parent's last turn
    store.close()


def _tree(store: RunStore) -> AgentHarness[None]:
    helper = AgentHarness(model=FunctionModel(tree_answer), tools=[charge, lookup])
    return AgentHarness(
        model=FunctionModel(tree_answer),
        tools=[SubAgent("helper", helper, system_prompt=HELPER_PROMPT).as_tool()],
        middleware=[DurableJournal(store, model="function")],
    )


def test_a_sub_agent_with_its_own_journal_is_journaled_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DURABLE_FOLDER", str(tmp_path))
    store = RunStore(tmp_path / "runs.sqlite")
    helper = AgentHarness(
        model=FunctionModel(tree_answer), tools=[charge, lookup], middleware=[DurableJournal(store, model="function")]
    )
    parent = AgentHarness(
        model=FunctionModel(tree_answer),
        tools=[SubAgent("helper", helper, system_prompt=HELPER_PROMPT).as_tool()],
        middleware=[DurableJournal(store, model="function")],
    )
    run = parent.run_sync("pay and look up")
    kinds = [s.kind for s in store.steps(run.run_id)]
    assert kinds.count("sub.model") == 3  # the child's three turns, not twice over
    assert kinds.count("sub.input") == 1
    (stored,) = store.runs()
    assert stored.usage.total_tokens == run.usage.total_tokens == 5 * 110
    store.close()
