"""Shared helpers for the benchmarks: percentiles, fair interleaved timing, and uniform printing.

Every figure is printed as one line so ``./dev bench`` output can be pasted into ``docs/benchmarks.md``.
Nothing here asserts a time: benchmarks report, the test suite only checks that they run.
"""

from __future__ import annotations

import gc
import importlib.metadata
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "Spread",
    "describe_machine",
    "header",
    "interleaved",
    "line",
    "package_version",
    "percentile",
    "rss_mib",
    "spread",
]


def header(title: str) -> None:
    """A section header; the smoke test looks for these lines."""
    print(f"\n=== {title} ===", flush=True)


def line(text: str) -> None:
    print(f"  {text}", flush=True)


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation between closest ranks."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True, kw_only=True, slots=True)
class Spread:
    """Median with its interquartile range and tail, in the samples' unit."""

    n: int
    median: float
    p25: float
    p75: float
    p99: float
    minimum: float
    maximum: float


def spread(samples: Sequence[float]) -> Spread:
    return Spread(
        n=len(samples),
        median=statistics.median(samples),
        p25=percentile(samples, 25),
        p75=percentile(samples, 75),
        p99=percentile(samples, 99),
        minimum=min(samples),
        maximum=max(samples),
    )


async def interleaved(
    runners: Sequence[tuple[str, Callable[[], Awaitable[object]]]], *, rounds: int, warmup: int
) -> dict[str, list[float]]:
    """Time each runner ``rounds`` times, round-robin with a rotating start (python-peers.md §4.6).

    Machine noise (another process, a GC pause, a CPU frequency step) then hits every framework
    alike instead of whichever happened to run during it. Returns seconds per call.
    """
    for _ in range(warmup):
        for _, fn in runners:
            await fn()
    gc.collect()
    times: dict[str, list[float]] = {name: [] for name, _ in runners}
    k = len(runners)
    clock = time.perf_counter
    for i in range(rounds):
        start = i % k
        for name, fn in (*runners[start:], *runners[:start]):
            t0 = clock()
            await fn()
            times[name].append(clock() - t0)
    return times


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def rss_mib() -> float:
    """Current resident set size (not the peak) from ``/proc/self/statm``."""
    with open("/proc/self/statm") as f:
        resident_pages = int(f.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def describe_machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        if names:
            cpu = names[0]
    except OSError:
        pass
    return (
        f"Python {sys.version.split()[0]} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs ({cpu}), tinyagents-nb {package_version('tinyagents-nb')}"
    )
