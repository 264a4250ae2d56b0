"""OS resource limits on the child kernel: memory (``RLIMIT_DATA``) and CPU time (``RLIMIT_CPU``).

Both are set from the notebook's side with ``prlimit`` on the kernel's pid (Linux), not by code in
the kernel, so the model's code does not choose them:

- **memory**: ``RLIMIT_DATA`` (the kernel's heap and private anonymous mappings, where every Python
  object and array lives; a memory-mapped file does not count), soft and hard, so the kernel cannot
  raise it again. An allocation beyond it fails: Python raises ``MemoryError`` in the block (or, in
  C code that does not check, the kernel dies). A kernel already running under another limit is
  restarted, since a hard limit cannot be raised.
- **CPU time**: ``RLIMIT_CPU`` counts the whole process's CPU seconds, so it is armed again before
  each block at "used so far + ``cpu_seconds``". Past it the kernel gets ``SIGXCPU``, which ends it
  even inside C code (core dumps are turned off). Only the soft limit is set: a hard one could
  not be raised for the next block. So code that means to could lift it; it guards against
  runaway code, not hostile code (the kernel is no security boundary anyway).

Either way the kernel is restarted and the model is told, with the limit's name, that its
variables are gone and the context values are back.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from ._config import RLMError, RLMLimits

__all__ = ["CPU_LIMIT", "MEMORY_LIMIT", "OSLimits", "limit_error"]

MEMORY_LIMIT = "MemoryLimitExceeded"
"""``ExecutionResult.error_type`` of a block that hit ``RLMLimits.memory_mb``."""
CPU_LIMIT = "CPULimitExceeded"
"""``ExecutionResult.error_type`` of a block that hit ``RLMLimits.cpu_seconds``."""
_MB = 1 << 20
_CRASH_SIGNALS = {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS}  # not SIGKILL: the OOM killer, or our own Stop


class OSLimits:
    """The memory and CPU limits one run asks of its kernel, applied to the kernel's pid."""

    def __init__(self, memory_mb: int | None, cpu_seconds: int | None) -> None:
        self.memory_mb = memory_mb
        self.cpu_seconds = cpu_seconds

    @classmethod
    def of(cls, limits: RLMLimits | None) -> OSLimits:
        if limits is None:
            return cls(None, None)
        return cls(limits.memory_mb, limits.cpu_seconds)

    @property
    def any(self) -> bool:
        return self.memory_mb is not None or self.cpu_seconds is not None

    def check_platform(self) -> None:
        if self.any and not hasattr(_resource(), "prlimit"):
            raise RLMError(
                f"RLMLimits.memory_mb and cpu_seconds need Linux (resource.prlimit); this is {sys.platform}",
                hint="leave them unset here",
            )

    def apply_at_start(self, pid: int) -> None:
        """A new kernel: its memory limit (hard), and no core file if it is ever killed by the CPU limit."""
        resource = _resource()
        if self.memory_mb is not None:
            cap = self.memory_mb * _MB
            resource.prlimit(pid, resource.RLIMIT_DATA, (cap, cap))
        if self.cpu_seconds is not None:
            resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))

    def arm_cpu(self, pid: int) -> None:
        """Before a block: the CPU time it may use, counted from what the kernel used so far (none: no limit)."""
        resource = _resource()
        _, hard = resource.prlimit(pid, resource.RLIMIT_CPU)
        soft = hard
        if self.cpu_seconds is not None:
            soft = int(cpu_time(pid) + self.cpu_seconds + 0.999)
            if hard != resource.RLIM_INFINITY:
                soft = min(soft, hard)
        resource.prlimit(pid, resource.RLIMIT_CPU, (soft, hard))

    def classify(self, error_type: str | None, returncode: int | None) -> str | None:
        """Which limit a block hit, from its error or the kernel's end (``None``: none of ours)."""
        if self.memory_mb is not None and error_type is not None and "MemoryError" in error_type:
            return MEMORY_LIMIT
        if returncode is None or returncode >= 0:
            return None
        if self.cpu_seconds is not None and -returncode == signal.SIGXCPU:
            return CPU_LIMIT
        if self.memory_mb is not None and -returncode in _CRASH_SIGNALS:
            return MEMORY_LIMIT
        return None


def limit_error(kind: str, limits: OSLimits, returncode: int | None) -> str:
    """What the model reads when a block hit a limit (the kernel is restarted after it)."""
    if kind == CPU_LIMIT:
        what = f"{kind}: the block used more than its {limits.cpu_seconds:g} s of CPU time (RLMLimits.cpu_seconds)"
    elif returncode is None:
        what = f"{kind}: the block needed more than the REPL's {limits.memory_mb:,} MB (RLMLimits.memory_mb)"
    else:
        what = (
            f"{kind}: the REPL kernel died ({_signal_name(-returncode)}) under its {limits.memory_mb:,} MB limit "
            "(RLMLimits.memory_mb), most likely by reaching it"
        )
    return (
        f"[{what}; the REPL kernel was restarted: the context values are back, every other variable is lost. "
        "Work in smaller pieces.]\n"
    )


def cpu_time(pid: int) -> float:
    """CPU seconds (user + system, every thread) the process used so far, from ``/proc``."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime and stime: fields 14 and 15 of stat(5)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _resource() -> Any:
    import resource  # POSIX only; imported here so the module loads anywhere

    return resource
