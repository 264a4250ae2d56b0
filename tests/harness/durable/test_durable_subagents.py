"""Durable runs with sub-agents: a process killed while a child runs is resumed with the child inside its parent."""

from __future__ import annotations

from pathlib import Path

from tinyagents_nb.harness.durable import RunStore

from .test_durable_resume import _every_call_answered, _kill_in, _lines, _resume

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


def test_the_trees_spend_counts_against_the_budget_once(tmp_path: Path) -> None:
    _kill_in(tmp_path, "model", **TREE)
    result = _resume(tmp_path, MAX_TOKENS="400", **TREE)  # 330 carried + the child's next request breaks 400
    assert result["error"] == "BudgetExceeded"
