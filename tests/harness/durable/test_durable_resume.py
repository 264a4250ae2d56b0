"""Durable runs: a process killed with SIGKILL mid-run is resumed from its journal by another process."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tinyagents_nb.harness.durable import RunStore, RunStoreCorrupt, RunStoreVersionError

CHILD = Path(__file__).with_name("durable_child.py")
ROOT = str(Path(__file__).resolve().parents[3])


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def _kill_in(folder: Path, tool_name: str, **env: str) -> None:
    """Start a run and SIGKILL its process while ``tool_name`` is running (after its side effect)."""
    with open(folder / "child.err", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(folder), "run"],
            env=_env(HANG_IN=tool_name, **env),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        deadline = time.monotonic() + 30
        while not (folder / "in_tool").exists():
            if proc.poll() is not None:
                pytest.fail((folder / "child.err").read_text())
            assert time.monotonic() < deadline, "the child never reached the tool"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    (folder / "in_tool").unlink()


def _resume(folder: Path, **env: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(CHILD), str(folder), "resume"],
        env=_env(**env),
        capture_output=True,
        check=True,
        timeout=60,
    )
    result: dict[str, Any] = json.loads(out.stdout.decode().strip().splitlines()[-1])
    return result


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _every_call_answered(result: dict[str, Any]) -> None:
    answered = [m[2] for m in result["messages"] if m[0] == "ToolMessage"]
    assert sorted(answered) == sorted(result["calls"])


def test_killed_in_a_non_idempotent_tool_is_skipped_with_a_note(tmp_path: Path) -> None:
    _kill_in(tmp_path, "charge")
    with RunStore(tmp_path / "runs.sqlite") as store:
        (run,) = store.runs()
        assert run.status == "interrupted"
        assert run.model_calls == 1
        assert run.usage.total_tokens == 110
    result = _resume(tmp_path)
    assert result["final_text"] == "all done"
    assert _lines(tmp_path / "charge.log") == 1  # the side effect happened at most once
    assert _lines(tmp_path / "lookup.log") == 1
    notes = [m[1] for m in result["messages"] if m[0] == "ToolMessage" and m[2] == "c1"]
    assert len(notes) == 1
    assert "not run again" in notes[0]
    _every_call_answered(result)
    assert result["total_tokens"] == 3 * 110  # the killed process's call counted once, plus two new calls
    with RunStore(tmp_path / "runs.sqlite") as store:
        old, new = sorted(store.runs(), key=lambda r: r.resumed_from is not None)
        assert old.status == "resumed"
        assert old.resumed_by == result["run_id"]
        assert new.status == "completed"
        assert new.resumed_from == old.run_id
        assert new.from_step == old.steps - 1
        assert new.usage.total_tokens == 2 * 110  # the store charges each call to the run that made it
        assert not [r for r in store.runs() if r.status == "interrupted"]


def test_killed_in_an_idempotent_tool_is_run_again(tmp_path: Path) -> None:
    _kill_in(tmp_path, "lookup")
    result = _resume(tmp_path)
    assert result["final_text"] == "all done"
    assert _lines(tmp_path / "charge.log") == 1  # finished before the kill: its result was journaled, not re-run
    assert _lines(tmp_path / "lookup.log") == 2  # interrupted, idempotent: run again
    assert [m[1] for m in result["messages"] if m[2] == "c2"] == ["k=42"]
    _every_call_answered(result)
    assert result["total_tokens"] == 3 * 110


def test_resumed_spend_counts_against_the_budget(tmp_path: Path) -> None:
    _kill_in(tmp_path, "lookup", MAX_TOKENS="300")
    result = _resume(tmp_path, MAX_TOKENS="250")  # 220 carried + the next request's estimate breaks 250
    assert result["error"] == "BudgetExceeded"


def test_a_file_that_is_not_a_store_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    path.write_bytes(b"not a database at all" * 10)
    before = path.read_bytes()
    with pytest.raises(RunStoreCorrupt, match="not a SQLite database"):
        RunStore(path)
    assert path.read_bytes() == before


def test_a_store_from_a_newer_version_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    RunStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(RunStoreVersionError, match="newer"):
        RunStore(path)
    assert path.read_bytes() == before
