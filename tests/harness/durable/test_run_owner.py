"""Interrupted-run detection: a run is ``interrupted`` once its owner is gone, told by host, pid, start time and lease.

Real processes own the runs: a child starts a run and is SIGKILLed, or lives on. A reused pid and a
second host sharing the folder are made the only ways one machine can: the dead owner's lease row is
pointed at a live process's pid (what a reused pid looks like to a reader), and a child records
another host name in its lease (what a second machine's kernel writes).
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tinyagents_nb.harness import ConfigurationError
from tinyagents_nb.harness.durable import RunStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")

CHILD = Path(__file__).with_name("owner_child.py")


def _child(store: Path, host: str = "-", lease_s: float = 60.0) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(store), host, str(lease_s)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def process_start(pid: int) -> float | None:
    """When ``pid`` started, to 1/100 s, as the operating system says (``None``: no such process)."""
    import psutil  # type: ignore[import-untyped]  # a dependency of ipykernel

    try:
        return round(float(psutil.Process(pid).create_time()), 2)
    except psutil.NoSuchProcess:
        return None


def _status(path: Path, lease_s: float = 60.0) -> str:
    with RunStore(path, lease_s=lease_s) as store:
        run = store.get("run-child")
        assert run is not None
        return run.status


@contextmanager
def _sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process that is not a run's owner (its pid stands for a reused one)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_run_of_this_process_is_running_and_a_killed_owner_interrupts_it(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with RunStore(path) as store:
        store.start_run("mine", agent=None, model="m", prompt="p")
    with RunStore(path) as store:  # another handle in the same process: still ours
        assert store.get("mine").status == "running"  # type: ignore[union-attr]
    proc = _child(path)
    assert _status(path) == "running"  # a live process on this host, started when its lease says
    _kill(proc)
    assert _status(path) == "interrupted"


def test_a_reused_pid_does_not_keep_a_dead_owners_run_running(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    _kill(_child(path))
    time.sleep(0.05)  # a pid is reused by a process started after its owner died
    with _sleeper() as sleeper:
        with sqlite3.connect(path) as conn:  # the dead kernel's pid now belongs to another process
            conn.execute("UPDATE tinyagents_leases SET pid = ?", (sleeper.pid,))
        assert _status(path) == "interrupted"
        with sqlite3.connect(path) as conn:  # the same pid *and* start time: that is the owner, alive
            conn.execute("UPDATE tinyagents_leases SET started = ?", (process_start(sleeper.pid),))
        assert _status(path) == "running"


def test_a_run_on_another_host_is_running_while_its_heartbeat_is_fresh(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    lease_s = 1.0
    proc = _child(path, host="other-host", lease_s=lease_s)
    try:
        time.sleep(lease_s * 2.5)  # longer than one lease: only the heartbeat keeps it running
        assert _status(path, lease_s) == "running"
        with RunStore(path, lease_s=lease_s) as store:
            assert not store.prune(keep_days=0).runs  # a live run is never pruned
    finally:
        _kill(proc)
    deadline = time.monotonic() + lease_s * 4
    while _status(path, lease_s) == "running":  # the heartbeat stopped with the process
        assert time.monotonic() < deadline, "the run never became interrupted after its owner died"
        time.sleep(0.1)
    assert _status(path, lease_s) == "interrupted"


def test_another_hosts_lease_and_rows_from_before_leases(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with RunStore(path, lease_s=30) as store:
        for run_id in ("fresh", "stale", "legacy-remote", "legacy-dead", "legacy-live"):
            store.start_run(run_id, agent=None, model="m", prompt="p")
    now = time.time()
    with sqlite3.connect(path) as conn:
        rows = [("fresh", now - 5), ("stale", now - 31)]
        for run_id, beat in rows:
            conn.execute(
                "INSERT INTO tinyagents_leases VALUES (?, 'other-host', 4242, 1.0, ?)",
                (f"other-host:4242:{run_id}", beat),
            )
            conn.execute("UPDATE tinyagents_runs SET owner = ? WHERE run_id = ?", (f"other-host:4242:{run_id}", run_id))
        # rows of a version before leases: only the owner text, host:pid:token
        conn.execute("UPDATE tinyagents_runs SET owner = 'other-host:1:x' WHERE run_id = 'legacy-remote'")
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
        conn.execute(
            "UPDATE tinyagents_runs SET owner = ? WHERE run_id = 'legacy-dead'",
            (f"{socket.gethostname()}:{dead.stdout.strip()}:x",),
        )
        conn.execute(
            "UPDATE tinyagents_runs SET owner = ? WHERE run_id = 'legacy-live'",
            (f"{socket.gethostname()}:{os.getppid()}:x",),
        )
    with RunStore(path, lease_s=30) as store:
        status = {r.run_id: r.status for r in store.runs()}
    assert status == {
        "fresh": "running",
        "stale": "interrupted",
        "legacy-remote": "interrupted",
        "legacy-dead": "interrupted",
        "legacy-live": "running",
    }


def test_a_lease_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError):
        RunStore(tmp_path / "x.sqlite", lease_s=0)


def test_prune_drops_leases_no_running_run_names(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with RunStore(path) as store:
        store.start_run("live", agent=None, model="m", prompt="p")  # this process: its lease stays
        store.start_run("done", agent=None, model="m", prompt="p")
        store.end_run("done", "completed")
    old = time.time() - 10 * 86_400
    with sqlite3.connect(path) as conn:  # a kernel of ten days ago, whose runs all ended
        conn.execute("UPDATE tinyagents_leases SET heartbeat_at = ?", (old,))  # ours too: kept for its run
        conn.execute("INSERT INTO tinyagents_leases VALUES ('gone:1:x', 'gone', 1, 1.0, ?)", (old,))
        conn.execute("UPDATE tinyagents_runs SET started_at = ?", (old,))
    with RunStore(path) as store:
        pruned = store.prune(keep_days=1)
        assert pruned.runs == 1  # "done"; "live" runs in a live process
        assert store.get("live").status == "running"  # type: ignore[union-attr]
    with sqlite3.connect(path) as conn:
        owners = {row[0] for row in conn.execute("SELECT owner FROM tinyagents_leases")}
    assert "gone:1:x" not in owners
    assert len(owners) == 1  # this process's, named by the running run
