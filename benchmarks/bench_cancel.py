"""Item 2: cancellation latency, from ``cancel()`` to the run having ended ``cancelled``.

Four situations, each repeated: (a) a stream whose provider sends one chunk every 2 s; (b) a retry
backoff of 30 s; (c) the stream of (a) cancelled from another thread, as a widget click on a
subshell thread would; (d) a tree of 50 concurrent sub-agents, each waiting on such a stream. Each
repetition waits until the run is parked in the long wait, lets a random 1-10 ms pass (so the
cancel lands mid-wait, not at a checkpoint), then cancels and times until ``await stream.wait()``
returns with ``status == "cancelled"``. The waits are interrupted, so every repetition is fast.

Run alone: ``python -m benchmarks.bench_cancel [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import threading
import time
from collections.abc import Callable

import anyio

from benchmarks._common import header, line, spread
from tinyagents_nb.harness import (
    AgentEvent,
    AgentHarness,
    AgentStream,
    ProviderError,
    RetryPolicy,
    RunLimits,
    RunPolicy,
    SubAgent,
)
from tinyagents_nb.harness.testkit import ScriptedModel, StreamingMock

TARGET_MS = 10.0
CHILDREN = 50


async def _one(
    stream: AgentStream,
    ready: Callable[[AgentEvent], bool],
    *,
    need: int,
    from_thread: bool,
    rng: random.Random,
) -> tuple[float, int]:
    """One cancel; returns (seconds from cancel to the ended run, runs that ended cancelled)."""
    seen = 0
    cancelled_runs = 0
    parked = asyncio.Event()

    def listen(offset: int, event: AgentEvent) -> None:
        nonlocal seen, cancelled_runs
        if ready(event):
            seen += 1
            if seen >= need:
                parked.set()
        if event.kind == "run.cancelled":
            cancelled_runs += 1

    remove = stream.context.events.add_listener(listen)
    stream.start()
    with anyio.fail_after(60):
        await parked.wait()
    await anyio.sleep(rng.uniform(0.001, 0.010))
    if from_thread:
        stamp: list[float] = []

        def click() -> None:
            stamp.append(time.perf_counter())
            stream.cancel("benchmark")

        thread = threading.Thread(target=click)
        thread.start()
        run = await stream.wait()
        ended = time.perf_counter()
        thread.join()
        started = stamp[0]
    else:
        started = time.perf_counter()
        stream.cancel("benchmark")
        run = await stream.wait()
        ended = time.perf_counter()
    remove()
    await stream.aclose()
    if run.status != "cancelled" or stream.status.status != "cancelled":
        raise AssertionError(f"expected a cancelled run, got {run.status} / {stream.status.status}")
    return ended - started, cancelled_runs


def _report(title: str, samples: list[float], note: str = "") -> None:
    s = spread([x * 1e3 for x in samples])
    verdict = "met" if s.p99 < TARGET_MS else "MISSED"
    line(
        f"{title:<44} p50 {s.median:6.2f} ms  p99 {s.p99:6.2f} ms  max {s.maximum:6.2f} ms  "
        f"(n={s.n}; target p99 < {TARGET_MS:g} ms: {verdict}){note}"
    )


async def _run(reps: int, tree_reps: int) -> None:
    rng = random.Random(7)
    slow = StreamingMock(["one ", "two ", "three ", "four"], chunk_delay_s=2.0)  # reusable: never consumed
    stream_harness: AgentHarness[None] = AgentHarness(model=slow)
    first_delta: Callable[[AgentEvent], bool] = lambda e: e.kind == "model.delta"  # noqa: E731

    samples = [
        (await _one(stream_harness.invoke_streaming("go"), first_delta, need=1, from_thread=False, rng=rng))[0]
        for _ in range(reps)
    ]
    _report("(a) during a stream (1 chunk / 2 s)", samples)

    retry_policy = RunPolicy(retry=RetryPolicy(initial_backoff_s=30.0, max_backoff_s=30.0))
    samples = []
    for _ in range(reps):
        model = ScriptedModel([ProviderError("overloaded", status=529, retryable=True), "ok"])
        stream = AgentHarness(model=model, policy=retry_policy).invoke_streaming("go")
        samples.append(
            (await _one(stream, lambda e: e.kind == "retry.scheduled", need=1, from_thread=False, rng=rng))[0]
        )
    _report("(b) during a 30 s retry backoff", samples)

    samples = [
        (await _one(stream_harness.invoke_streaming("go"), first_delta, need=1, from_thread=True, rng=rng))[0]
        for _ in range(reps)
    ]
    _report("(c) from another thread, during the stream", samples)

    worker = SubAgent("worker", AgentHarness(model=slow), description="Works slowly.")
    tree_policy = RunPolicy(limits=RunLimits(max_concurrency=CHILDREN, max_tool_calls=CHILDREN))
    fan_out = ScriptedModel.tool_calls([("worker", {"input": f"task {i}"}) for i in range(CHILDREN)])
    samples, all_cancelled = [], True
    for _ in range(tree_reps):
        parent: AgentHarness[None] = AgentHarness(
            model=ScriptedModel([fan_out, "done"]), tools=[worker.as_tool()], policy=tree_policy
        )
        latency, cancelled_runs = await _one(
            parent.invoke_streaming("fan out"),
            lambda e: e.kind == "model.started" and e.depth == 1,
            need=CHILDREN,
            from_thread=False,
            rng=rng,
        )
        samples.append(latency)
        all_cancelled = all_cancelled and cancelled_runs == CHILDREN + 1
    note = "; every child ended cancelled" if all_cancelled else "; NOT every child ended cancelled"
    _report(f"(d) a tree of {CHILDREN} concurrent sub-agents", samples, note)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short smoke run (few repetitions)")
    args = parser.parse_args(argv)
    header("2. Cancellation latency")
    reps, tree_reps = (5, 3) if args.quick else (100, 30)
    line("cancel() -> await stream.wait() returns with status 'cancelled'")
    asyncio.run(_run(reps, tree_reps))


if __name__ == "__main__":
    main()
