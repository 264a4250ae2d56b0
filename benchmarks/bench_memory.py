"""Item 5: memory stays bounded while 1,000,000 events flow through a live run view.

A ``RunDashboard`` (default ``max_history``, recording dummy comm) watches a run that stays alive
(its model waits an hour for its second chunk) while events for that run are emitted on its sink in
bursts, the loop yielding between bursts so the dashboard's flusher runs as it would live: text
deltas split into many model calls, and a tool call every 1,000 events, so every bounded pane
rotates. RSS (``/proc/self/statm``, after a ``gc.collect()``) is sampled at 0, 25, 50, 75 and 100 %.
The panes fill up (2,000 segments of 100 events) by 200,000 events; from half-way on, RSS must be
flat. Growth is reported in bytes per event.

Run alone: ``python -m benchmarks.bench_memory [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import subprocess
import sys

import anyio

from benchmarks._common import header, line, rss_mib
from benchmarks.bench_stream import recording_comms
from tinyagents_nb.harness import (
    AgentEvent,
    AgentHarness,
    ModelCompleted,
    ModelDelta,
    ModelStarted,
    TextDelta,
    ToolCompleted,
    ToolStarted,
    Usage,
)
from tinyagents_nb.harness.testkit import StreamingMock

BURST = 5_000


async def _run(total: int, *, iterate: bool) -> None:
    from tinyagents_nb.widgets import RunDashboard

    stream = AgentHarness(model=StreamingMock(["first ", "second"], chunk_delay_s=3600)).invoke_streaming("go")
    ctx = stream.context
    dash = RunDashboard(stream, title="memory")
    dash.start()
    consumer = None
    if iterate:  # someone also iterates the AgentStream (as `async for event in stream:` would)

        async def consume() -> None:
            async for _ in stream:
                pass

        consumer = asyncio.get_running_loop().create_task(consume())
    parked = asyncio.Event()  # set once the run sits in its hour-long wait for the second chunk

    def on_event(offset: int, event: AgentEvent) -> None:
        if event.kind == "model.delta":
            parked.set()

    remove = ctx.events.add_listener(on_event)
    with anyio.fail_after(30):
        await parked.wait()
    remove()
    deltas = [TextDelta(text=f"tok{i} ") for i in range(100)]
    no_usage = Usage()
    checkpoints = {round(total * q) for q in (0.25, 0.5, 0.75, 1.0)}
    gc.collect()
    samples = [(0, rss_mib())]
    emitted = 0
    call = 0
    while emitted < total:
        for _ in range(BURST):
            if emitted % 100 == 0:  # a new model call every 100 events
                call += 1
                ctx.emit(ModelStarted, call_id=f"m{call}", model="bench")
            elif emitted % 100 == 99:
                ctx.emit(
                    ModelCompleted,
                    call_id=f"m{call}",
                    model="bench",
                    usage=no_usage,
                    finish_reason="stop",
                    duration_s=0.0,
                )
            elif emitted % 1_000 == 50:
                ctx.emit(ToolStarted, call_id=f"t{call}", tool_name="lookup", arguments={"key": call})
            elif emitted % 1_000 == 51:
                ctx.emit(
                    ToolCompleted, call_id=f"t{call}", tool_name="lookup", output="ok", is_error=False, duration_s=0.0
                )
            else:
                ctx.emit(ModelDelta, call_id=f"m{call}", delta=deltas[emitted % 100])
            emitted += 1
            if emitted in checkpoints:
                gc.collect()
                samples.append((emitted, rss_mib()))
        await anyio.sleep(0.002)  # let the flusher run, as a provider's network waits would
    stream.cancel("done")
    await dash.wait_flushed()
    if consumer is not None:
        await consumer
    segments, rows = len(dash.transcript.segments), len(dash.tools.rows)
    dash.close()
    for count, rss in samples:
        line(f"RSS after {count:>9,} events: {rss:7.1f} MiB")
    half, end = samples[2], samples[-1]  # the panes are full (2,000 segments) from 200,000 events on
    per_event = (end[1] - half[1]) * 2**20 / max(end[0] - half[0], 1)
    verdict = "plateau" if per_event < 16 else "GROWING"
    line(
        f"growth from {half[0]:,} to {end[0]:,} events: {end[1] - half[1]:+.1f} MiB "
        f"({per_event:.1f} bytes/event) -> {verdict}; kept {segments} transcript segments, {rows} tool rows"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short smoke run (100,000 events)")
    parser.add_argument("--variant", choices=["a", "b"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    total = 100_000 if args.quick else 1_000_000
    if args.variant is not None:  # one measurement, in a fresh interpreter so RSS starts clean
        with recording_comms():
            asyncio.run(_run(total, iterate=args.variant == "a"))
        return
    header("5. Memory under a long stream")
    for variant, title in (
        ("a", f"(a) {total:,} events through a RunDashboard (default bounded history), the AgentStream also iterated"),
        ("b", "(b) the same, the dashboard alone, started as %%agent does (nobody iterates the AgentStream)"),
    ):
        line(title)
        command = [sys.executable, "-m", "benchmarks.bench_memory", "--variant", variant]
        subprocess.run([*command, *(["--quick"] if args.quick else [])], check=True)


if __name__ == "__main__":
    main()
