"""Durable RLM runs: a process killed while a code block runs is resumed in a fresh REPL, told what is gone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tinyagents_nb.harness.durable import RunStore

from .test_durable_resume import _env, _lines

CHILD = Path(__file__).with_name("durable_rlm_child.py")


def _kill_in_block(folder: Path) -> None:
    with open(folder / "run.err", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(folder), "run"], env=_env(), stdout=subprocess.DEVNULL, stderr=err
        )
        _wait_and_kill(folder, proc)


def _wait_and_kill(folder: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while not (folder / "in_tool").exists():
        if proc.poll() is not None:
            pytest.fail((folder / "run.err").read_text())
        assert time.monotonic() < deadline, "the RLM run never reached its second block"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def _resume(folder: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(CHILD), str(folder), "resume"], env=_env(), capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()
    result: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return result


def test_a_killed_rlm_run_is_listed_and_resumes_told_which_variables_are_gone(tmp_path: Path) -> None:
    _kill_in_block(tmp_path)
    with RunStore(tmp_path / "runs.sqlite") as store:
        (run,) = store.runs()
        assert run.status == "interrupted"
        assert run.agent == "rlm"
        assert run.model_calls == 3  # two root turns and the llm() sub-query, journaled as they finished
        assert run.usage.total_tokens == 2 * 110 + 7
    result = _resume(tmp_path)
    assert result["final_text"] == "42"
    (note,) = result["notes"]
    assert "reply, x" in note  # the finished block's variables; the cut-off block's y never was bound
    assert "x = 40 + 1\nreply = llm('hi')" in note  # the code that made them is offered
    assert _lines(tmp_path / "one.log") == 1  # the finished block was not run again
    assert _lines(tmp_path / "two.log") == 1  # the cut-off block was not run again (not approved)
    assert result["total_tokens"] == 3 * 110 + 7  # spent before the kill counted once, plus the new turn
    assert sorted(result["run_tokens"]) == [110, 2 * 110 + 7]
