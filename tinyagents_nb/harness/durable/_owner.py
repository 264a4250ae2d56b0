"""Who runs a journaled run, and whether they are still there: host, process id, start time and a lease.

A run left ``running`` in the store is ``interrupted`` once its owner is gone. A process id alone
cannot tell: the id is reused after the kernel dies (a container restarted with the same hostname
often gets the very same small pid), and a process on another host that shares the store's folder
cannot be probed at all. So every process that starts runs records, once, a lease row with its host,
pid and the process's start time (from ``/proc`` on Linux, ``psutil`` elsewhere when installed), and
refreshes the row's heartbeat every ``lease_s / 3`` from a daemon thread (one small ``UPDATE``).

The owner of a running run is judged in this order:

1. this process: alive;
2. the same host and the owner's start time is known: alive while a process with that pid exists
   *and* started at that time (a reused pid started later, so its run is interrupted);
3. otherwise (another host, or no start time on this platform): alive while its heartbeat is
   younger than ``lease_s``. Hosts' clocks are assumed to agree to well within the lease.

Rows written before leases existed (no lease row) keep the earlier rule: a live pid on this host.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["LEASE_S", "LEASE_SCHEMA", "Lease", "Heartbeat", "alive", "me", "process_start"]

LEASE_S = 60.0
"""How long a heartbeat vouches for its process (refreshed every third of it)."""
LEASE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS tinyagents_leases (owner TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, "
    "started REAL, heartbeat_at REAL NOT NULL)"
)
"""A table of its own (not a column of the runs table), so a store written by an earlier version keeps its schema version."""


@dataclass(frozen=True, slots=True)
class Lease:
    """One process's lease: its token (the runs' ``owner``), host, pid, start time and last heartbeat."""

    owner: str
    host: str
    pid: int
    started: float | None
    heartbeat_at: float


_btime: float | None = None


def _boot_time() -> float | None:
    global _btime
    if _btime is None:
        try:
            with open("/proc/stat", encoding="ascii") as f:
                for line in f:
                    if line.startswith("btime "):
                        _btime = float(line.split()[1])
                        break
        except (OSError, ValueError):
            return None
    return _btime


def process_start(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch, to 1/100 s), or ``None`` if it is unknown or gone."""
    boot = _boot_time()
    if boot is not None:
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
                text = f.read()
            ticks = int(text.rsplit(")", 1)[1].split()[19])  # field 22; the name before ")" may hold spaces
            return round(boot + ticks / os.sysconf("SC_CLK_TCK"), 2)
        except (OSError, ValueError, IndexError):
            return None
    try:
        import psutil  # type: ignore[import-untyped]  # optional: macOS, Windows
    except ImportError:
        return None
    try:
        return round(float(psutil.Process(pid).create_time()), 2)
    except Exception:  # psutil.NoSuchProcess, AccessDenied
        return None


class _Me:
    """This process's lease identity, made again after a fork (the child is another owner)."""

    def __init__(self) -> None:
        self.pid = -1
        self.token = ""
        self.started: float | None = None
        self.host = socket.gethostname()

    def current(self) -> _Me:
        if self.pid != os.getpid():
            self.pid = os.getpid()
            self.token = f"{self.host}:{self.pid}:{uuid.uuid4().hex}"
            self.started = process_start(self.pid)
        return self


_ME = _Me()


def me() -> _Me:
    """This process's host, pid, start time and owner token."""
    return _ME.current()


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def alive(owner: str, lease: Lease | None, *, lease_s: float, now: float | None = None) -> bool:
    """Whether the process that owns a running run is still there (see the module's rules)."""
    mine = me()
    if owner == mine.token:
        return True
    if lease is None:  # written before leases: a live pid on this host, never our own pid under another token
        host, _, rest = owner.partition(":")
        pid_text = rest.partition(":")[0]
        if host != mine.host or not pid_text.isdigit() or int(pid_text) == mine.pid:
            return False
        return _pid_exists(int(pid_text))
    if lease.host == mine.host and lease.started is not None:
        if not _pid_exists(lease.pid):
            return False
        started = process_start(lease.pid)
        if started is not None:
            return abs(started - lease.started) < 0.011  # ticks of 1/100 s; a reused pid started later
    return (time.time() if now is None else now) - lease.heartbeat_at < lease_s


_T = TypeVar("_T")


class Heartbeat(Generic[_T]):
    """A daemon thread that calls ``beat`` every ``interval_s`` until stopped or its owner is collected.

    It holds only a weak reference to the store, so a store nobody closed does not live forever.
    """

    def __init__(self, owner: _T, beat: Callable[[_T], object], interval_s: float) -> None:
        self._stop = threading.Event()
        ref = weakref.ref(owner)
        stop = self._stop

        def run() -> None:
            while not stop.wait(interval_s):
                target = ref()
                if target is None:
                    return
                try:
                    beat(target)
                except Exception:  # a closed or busy store: the next beat tries again
                    pass
                del target

        self._thread = threading.Thread(target=run, name="tinyagents-run-lease", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
