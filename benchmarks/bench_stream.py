"""Item 3: streaming 100,000 token deltas through the event sink into the run dashboard.

Headless part (a recording dummy comm swapped in for ``comm.create_comm``, as ipywidgets' own
tests do): CPU per token (``time.process_time``) of the harness alone and of harness plus
dashboard, and the comm messages the dashboard sent per second of stream, for an unpaced stream
(the provider never makes the loop wait) and a paced one (a real timer between chunks, lasting
several seconds). Kernel part: a real ipykernel streams into a ``RunDashboard`` in the background
(started from a cell that returns at once) while the benchmark times ``1+1`` execute round trips,
against the same round trips on the idle kernel.

Run alone: ``python -m benchmarks.bench_stream [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import queue
import time
from collections.abc import AsyncGenerator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

from benchmarks._common import header, line, percentile, spread
from tinyagents_nb.harness import AgentHarness, AssistantMessage, ModelRequest, ModelResponse, TextDelta
from tinyagents_nb.harness.models import ModelStreamItem, StreamFinish

TARGET_MSGS_PER_S = 20.0


@contextmanager
def recording_comms() -> Iterator[list[str]]:
    """Every comm message the widgets publish, by type, without a kernel; restored afterwards."""
    import comm

    sent: list[str] = []

    class RecordingComm(comm.DummyComm):
        def publish_msg(self, msg_type: str, *args: Any, **kwargs: Any) -> None:
            sent.append(msg_type)

    original = comm.create_comm
    comm.create_comm = lambda *args, **kwargs: RecordingComm(*args, **kwargs)
    try:
        yield sent
    finally:
        comm.create_comm = original


def _chunks(n: int, *, paragraph: int | None = 80) -> list[str]:
    """``n`` one-token deltas; a paragraph break every ``paragraph`` tokens (``None``: one endless line)."""
    return [f"t{i % 1000}\n\n" if paragraph and i % paragraph == paragraph - 1 else f"t{i % 1000} " for i in range(n)]


class BurstModel:
    """A ``ChatModel`` streaming ``n`` one-token deltas in bursts, with a real timer between bursts.

    A provider's tokens arrive a few per network read, and the loop waits on the socket between
    reads; one timer per token would measure asyncio's 1 ms timer granularity instead (100,000
    deltas would take minutes). ``interval_s=0`` never waits: the unpaced case.
    """

    model_name = "burst"
    provider = "bench"
    profile = None

    def __init__(self, n: int, *, burst: int = 20, interval_s: float = 0.001, paragraph: int | None = 80) -> None:
        self.chunks = _chunks(n, paragraph=paragraph)
        self.burst = burst
        self.interval_s = interval_s

    def text(self) -> str:
        return "".join(self.chunks)

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(message=AssistantMessage(text=self.text()), finish_reason="stop")

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        interval, burst = self.interval_s, self.burst
        for i, chunk in enumerate(self.chunks):
            if interval and i and i % burst == 0:
                await anyio.sleep(interval)
            yield TextDelta(text=chunk)
        yield StreamFinish(finish_reason="stop", model=self.model_name)


async def _harness_only(n: int, interval: float, paragraph: int | None) -> tuple[float, float]:
    stream = AgentHarness(model=BurstModel(n, interval_s=interval, paragraph=paragraph)).invoke_streaming("stream")
    cpu, wall = time.process_time(), time.perf_counter()
    run = await stream.wait()
    assert run.ok, run.error
    assert len(run.final_text) > n
    return time.process_time() - cpu, time.perf_counter() - wall


async def _with_dashboard(
    n: int, interval: float, sent: list[str], paragraph: int | None = 80
) -> tuple[float, float, int, int]:
    from tinyagents_nb.widgets import RunDashboard

    model = BurstModel(n, interval_s=interval, paragraph=paragraph)
    stream = AgentHarness(model=model).invoke_streaming("stream")
    dash = RunDashboard(stream, title="bench")
    sent.clear()  # count only what the stream causes, not the widgets' creation
    cpu, wall = time.process_time(), time.perf_counter()
    await dash.wait_flushed()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert dash.transcript.text() == model.text(), "the dashboard lost text"
    messages = sum(1 for kind in sent if kind == "comm_msg")
    flushes = dash._flusher.flushes
    dash.close()
    return cpu, wall, messages, flushes


async def _headless(n: int) -> None:
    with recording_comms() as sent:
        await _with_dashboard(min(n, 2_000), 0.0, sent)  # warm-up: imports, widget classes
        cases: tuple[tuple[str, float, int | None], ...] = (
            ("unpaced (never waits)", 0.0, 80),
            ("paced (20 tokens per 1 ms timer wait)", 0.001, 80),
            ("paced, worst case: one line, no paragraph breaks", 0.001, None),
        )
        for label, interval, paragraph in cases:
            base_cpu, _ = await _harness_only(n, interval, paragraph)
            cpu, wall, messages, flushes = await _with_dashboard(n, interval, sent, paragraph)
            line(f"{label}: {n:,} deltas in {wall:.2f} s ({n / wall:,.0f} tokens/s)")
            line(
                f"  CPU per token: harness alone {base_cpu / n * 1e6:.1f} µs, harness + dashboard "
                f"{cpu / n * 1e6:.1f} µs (dashboard {max(cpu - base_cpu, 0.0) / n * 1e6:.1f} µs)"
            )
            if wall < 1.0:
                why = "the loop never yielded, so no live updates" if flushes <= 1 else "too short for a rate"
                line(f"  comm messages: {messages} in all ({flushes} flushes; {why})")
                continue
            rate = messages / wall
            verdict = "met" if rate <= TARGET_MSGS_PER_S else "MISSED"
            line(
                f"  comm messages: {messages} = {rate:.1f} per second of stream ({flushes} flushes) "
                f"[target <= {TARGET_MSGS_PER_S:g}/s: {verdict}]"
            )


async def _delivery_cpu(n: int, how: str) -> float:
    """CPU of one unpaced run of ``n`` deltas whose events reach a no-op consumer ``how``."""
    stream = AgentHarness(model=BurstModel(n, interval_s=0.0)).invoke_streaming("stream")
    seen = 0

    def listener(offset: int, event: Any) -> None:
        nonlocal seen
        seen += event.kind == "model.delta"

    cpu = time.process_time()
    if how == "listener":  # what the dashboard's router is
        remove = stream.context.events.add_listener(listener)
        await stream.wait()
        remove()
    elif how == "chunks":  # the stream modes the router would need (others, e.g. rlm.code, are in none)
        async for chunk in stream.chunks("messages", "tools", "updates"):
            listener(0, chunk.data)
    else:
        await stream.wait()
    cpu = time.process_time() - cpu
    await stream.aclose()
    assert how == "none" or seen == n, (how, seen)
    return cpu


async def _delivery(n: int) -> None:
    """Issue 13 asked whether the dashboard should read ``AgentStream.chunks()`` instead of a sink listener."""
    await _delivery_cpu(min(n, 2_000), "chunks")  # warm-up
    cpus: dict[str, list[float]] = {"none": [], "listener": [], "chunks": []}
    for _ in range(3):
        for how, runs in cpus.items():
            runs.append(await _delivery_cpu(n, how))
    base = min(cpus["none"])
    for how in ("listener", "chunks"):
        extra = max(min(cpus[how]) - base, 0.0)
        line(f"event delivery by {how}: +{extra / n * 1e6:.2f} µs per token over the harness's {base / n * 1e6:.2f} µs")


# ------------------------------------------------------------------------------------------ real kernel
_CELL = """
from benchmarks.bench_stream import BurstModel
from tinyagents_nb.harness import AgentHarness
from tinyagents_nb.widgets import RunDashboard
_bench_stream = AgentHarness(model=BurstModel({n})).invoke_streaming("stream")
_bench_dash = RunDashboard(_bench_stream, title="bench")
_bench_dash.start()
"""


class _Kernel:
    """A real ipykernel; counts every ``comm_msg`` it publishes on IOPub while we read replies."""

    def __init__(self) -> None:
        from jupyter_client.manager import start_new_kernel

        root = Path(__file__).resolve().parent.parent  # so the kernel can import benchmarks.bench_stream
        self.km, self.kc = start_new_kernel(kernel_name="python3", startup_timeout=120, cwd=str(root))
        self.comm_msgs = 0

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    def _iopub(self, timeout: float) -> dict[str, Any]:
        msg: dict[str, Any] = self.kc.get_iopub_msg(timeout=timeout)
        self.comm_msgs += msg["msg_type"] == "comm_msg"
        return msg

    def round_trip(self, code: str = "1+1") -> float:
        """Seconds from sending an execute request to its reply (what a person waits for a cell)."""
        t0 = time.perf_counter()
        msg_id = self.kc.execute(code, store_history=False)
        while True:
            reply = self.kc.get_shell_msg(timeout=60)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        elapsed = time.perf_counter() - t0
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"kernel cell failed: {reply['content'].get('evalue')}")
        return elapsed

    def value(self, expr: str) -> str:
        msg_id = self.kc.execute(f"print({expr})", store_history=False)
        out = ""
        while True:
            msg = self._iopub(60)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out += msg["content"]["text"]
            elif msg["msg_type"] == "error":
                raise RuntimeError(f"{expr} failed in the kernel: {msg['content']['evalue']}")
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return out.strip()

    def drain(self) -> None:
        while True:
            try:
                self._iopub(0.2)
            except queue.Empty:
                return


def _kernel(n: int, idle_pings: int) -> None:
    kernel = _Kernel()
    try:
        line(f"  kernel: {kernel.value('__import__(chr(115)+chr(121)+chr(115)).executable')}")
        kernel.round_trip("import tinyagents_nb.widgets, benchmarks.bench_stream")
        idle = []
        for _ in range(idle_pings):
            idle.append(kernel.round_trip())
            time.sleep(0.05)
        kernel.drain()
        kernel.comm_msgs = 0
        kernel.round_trip(_CELL.format(n=n))
        busy = []
        while kernel.value("_bench_stream.done") == "False":
            busy.append(kernel.round_trip())
            time.sleep(0.05)
        while kernel.value("_bench_dash.state.finished") != "True":
            time.sleep(0.1)
        duration = float(kernel.value("_bench_dash.state.ended - _bench_dash.state.started"))
        status = kernel.value("_bench_stream.status.status")
        kernel.drain()
        for label, samples in (("idle kernel", idle), ("while it streams", busy)):
            if not samples:
                line(f"  `1+1` round trip, {label}: no samples (the stream ended first)")
                continue
            ms = [x * 1e3 for x in samples]
            line(
                f"  `1+1` round trip, {label}: median {spread(ms).median:.2f} ms, p95 {percentile(ms, 95):.2f} ms "
                f"(n={len(ms)})"
            )
        line(
            f"  the run streamed {n:,} deltas in {duration:.1f} s ({status}); the kernel published "
            f"{kernel.comm_msgs} comm messages = {kernel.comm_msgs / max(duration, 1e-9):.1f}/s"
        )
    finally:
        kernel.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    args = parser.parse_args(argv)
    header("3. Streaming into the dashboard")
    n = 10_000 if args.quick else 100_000
    asyncio.run(_headless(n))
    asyncio.run(_delivery(n))
    line("real ipykernel, a background run streaming into RunDashboard (paced as above):")
    _kernel(n, idle_pings=10 if args.quick else 50)


if __name__ == "__main__":
    main()
