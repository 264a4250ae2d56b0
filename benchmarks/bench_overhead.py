"""Item 1: per-run harness overhead with an instant fake model, side by side with the peers.

Workloads: (a) one text reply; (b) model -> one async tool -> model; (c) a conversation in memory
(5 and 25 turns, to show cost grows linearly in turns); (d) the 25-turn conversation with the SQLite
event journal on (and, as a second row, with the thread history in SQLite too). Every framework
gets an instant, stateless async fake model and an async tool; agents are built once, warmed up,
then timed round-robin with a rotating start (python-peers.md §4.6). Figures are medians with the
interquartile range, in microseconds per run (per conversation for (c) and (d)), and the ratio of
the fastest peer's median to ours.

Run alone: ``python -m benchmarks.bench_overhead [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import itertools
import pstats
import statistics
import tempfile
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks._common import header, interleaved, line, package_version, spread
from benchmarks._peers import Peer, load_peers
from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    EventSink,
    Message,
    ModelRequest,
    ModelResponse,
    RunConfig,
    RunContext,
    SQLiteStore,
    TextDelta,
    ToolCall,
    ToolMessage,
    UserMessage,
    tool,
)
from tinyagents_nb.harness.memory import MemoryMiddleware, ShortTermMemory, StoreChatHistory
from tinyagents_nb.harness.models import ModelStreamItem, StreamFinish
from tinyagents_nb.harness.observability import JournalSink, SQLiteEventJournal

OURS = "tinyagents-nb"
Runner = Callable[[], Awaitable[None]]


@dataclass(frozen=True, kw_only=True)
class Settings:
    warmup: int
    rounds: int
    conv_rounds: int
    durable_rounds: int
    profile_runs: int


FULL = Settings(warmup=30, rounds=300, conv_rounds=30, durable_rounds=20, profile_runs=200)
QUICK = Settings(warmup=3, rounds=20, conv_rounds=3, durable_rounds=2, profile_runs=10)


# ------------------------------------------------------------------------------------------ our side
class InstantModel:
    """A stateless ``ChatModel`` that answers at once, like the peers' fakes (no request recording).

    It calls ``add_one`` until a tool result is the last message, then says ``done``; with
    ``calls_tools=False`` it always says ``done``. Responses name their model and provider, as a real
    provider's do.
    """

    model_name = "instant"
    provider = "bench"
    profile = None

    def __init__(self, *, calls_tools: bool) -> None:
        self.calls_tools = calls_tools
        self._done = ModelResponse(
            message=AssistantMessage(text="done"), finish_reason="stop", model="instant", provider="bench"
        )
        self._call = ModelResponse(
            message=AssistantMessage(tool_calls=[ToolCall(id="c1", name="add_one", arguments={"x": 1})]),
            finish_reason="tool_calls",
            model="instant",
            provider="bench",
        )

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        if self.calls_tools and not isinstance(request.messages[-1], ToolMessage):
            return self._call
        return self._done

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        yield TextDelta(text=(await self.invoke(request)).message.text)
        yield StreamFinish(finish_reason="stop", model=self.model_name)


@tool
async def add_one(x: int) -> int:
    """Add one."""
    return x + 1


@dataclass(kw_only=True)
class Ours:
    text: Runner
    tool: Runner
    conversation: Callable[[int], Runner]
    durable: Callable[[int], Runner]
    durable_memory: Callable[[int], Runner]
    closers: list[Callable[[], None]]


def build_ours(workdir: Path) -> Ours:
    text_harness: AgentHarness[None] = AgentHarness(model=InstantModel(calls_tools=False))
    tool_harness: AgentHarness[None] = AgentHarness(model=InstantModel(calls_tools=True), tools=[add_one])

    async def text() -> None:
        assert (await text_harness.invoke("go")).final_text == "done"

    async def tool_run() -> None:
        assert (await tool_harness.invoke("go")).final_text == "done"

    def conversation(turns: int) -> Runner:
        async def run() -> None:
            history: list[Message] = []
            for i in range(turns):
                history = (await text_harness.invoke([*history, UserMessage(text=f"question {i}")])).messages
            assert len(history) == 2 * turns

        return run

    journal = SQLiteEventJournal(workdir / "journal.db")
    sink = EventSink()  # one sink for the whole "session", as a notebook kernel has
    sink.add_listener(JournalSink(journal))

    def durable(turns: int) -> Runner:
        async def run() -> None:
            history: list[Message] = []
            for i in range(turns):
                messages = [*history, UserMessage(text=f"question {i}")]
                history = (await text_harness.invoke_in_context(RunContext(events=sink), messages)).messages

        return run

    store = SQLiteStore(workdir / "store.db")
    memory = MemoryMiddleware(ShortTermMemory(StoreChatHistory(store)))
    memory_harness: AgentHarness[None] = AgentHarness(model=InstantModel(calls_tools=False), middleware=[memory])
    threads = itertools.count()

    def durable_memory(turns: int) -> Runner:
        async def run() -> None:
            thread = f"t{next(threads)}"
            for i in range(turns):
                ctx = RunContext(config=RunConfig(thread_id=thread), events=sink)
                await memory_harness.invoke_in_context(ctx, f"question {i}")

        return run

    return Ours(
        text=text,
        tool=tool_run,
        conversation=conversation,
        durable=durable,
        durable_memory=durable_memory,
        closers=[journal.close, store.close],
    )


# ------------------------------------------------------------------------------------------ reporting
def _report(title: str, times: dict[str, list[float]], *, target: float | None = None) -> float | None:
    """Print one workload; returns fastest-peer median / our median (None without peers)."""
    line(title)
    stats = {name: spread([t * 1e6 for t in samples]) for name, samples in times.items()}
    ours = next((s for name, s in stats.items() if name.startswith(OURS)), None)
    for name, s in stats.items():
        rel = ""
        if ours is not None and not name.startswith(OURS):
            rel = f"   {s.median / ours.median:6.1f}x ours"
        line(f"  {name:<42} median {s.median:9.1f} µs  (p25 {s.p25:.1f}, p75 {s.p75:.1f}, n={s.n}){rel}")
    peers = {n: s for n, s in stats.items() if not n.startswith(OURS)}
    if ours is None or not peers:
        return None
    fastest = min(peers, key=lambda n: peers[n].median)
    ratio = peers[fastest].median / ours.median
    goal = f"; target >= {target:g}x: {'met' if ratio >= target else 'MISSED'}" if target else ""
    line(f"  -> {ratio:.2f}x less overhead than the fastest peer ({fastest}){goal}")
    return ratio


def _calls_per_run(fn: Runner, runs: int) -> float:
    """Python function calls per run (a hardware-independent signal of the work done)."""

    async def many() -> None:
        for _ in range(runs):
            await fn()

    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(many())
    profiler.disable()
    return float(pstats.Stats(profiler).total_calls) / runs  # type: ignore[attr-defined]


async def _run_all(settings: Settings, workdir: Path) -> tuple[Ours, list[Peer]]:
    ours = build_ours(workdir)
    peers, skipped = load_peers(workdir)
    line(f"versions: {OURS} {package_version('tinyagents-nb')}; " + "; ".join(f"{p.name} {p.version}" for p in peers))
    for reason in skipped:
        line(reason)
    s = settings
    line(f"instant fake models, async tools; interleaved round-robin, warm-up {s.warmup} rounds")

    def both(mine: Runner, theirs: Callable[[Peer], Runner | None]) -> Sequence[tuple[str, Runner]]:
        out: list[tuple[str, Runner]] = [(OURS, mine)]
        for peer in peers:
            fn = theirs(peer)
            if fn is not None:
                out.append((peer.name, fn))
        return out

    times = await interleaved(both(ours.text, lambda p: p.text), rounds=s.rounds, warmup=s.warmup)
    _report("(a) one text reply, µs per run", times)
    times = await interleaved(both(ours.tool, lambda p: p.tool), rounds=s.rounds, warmup=s.warmup)
    _report("(b) model -> tool -> model, µs per run", times, target=10)

    line("(b) back to back: each framework alone, 5 batches of consecutive runs (caches warm), µs per run")
    for name, fn in both(ours.tool, lambda p: p.tool):
        batch = s.rounds // 3 if name == OURS else max(2, s.rounds // 30)
        per_run = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(batch):
                await fn()
            per_run.append((time.perf_counter() - t0) / batch * 1e6)
        line(f"  {name:<42} median {statistics.median(per_run):9.1f} µs  (min {min(per_run):.1f}, {batch} runs/batch)")

    warm = max(1, s.warmup // 10)
    c5 = await interleaved(
        both(ours.conversation(5), lambda p: p.conversation(5)), rounds=s.conv_rounds * 3, warmup=warm
    )
    _report("(c) 5-turn conversation in memory, µs per conversation", c5)
    c25 = await interleaved(
        both(ours.conversation(25), lambda p: p.conversation(25)), rounds=s.conv_rounds, warmup=warm
    )
    _report("(c) 25-turn conversation in memory, µs per conversation", c25)
    c100 = await interleaved([(OURS, ours.conversation(100))], rounds=max(2, s.conv_rounds // 3), warmup=1)
    line("(c) growth in turns: cost(25 turns) / cost(5 turns); 5.0 = linear, 21.7 = quadratic (n(n+1)/2)")
    for name in c5:
        ratio = spread(c25[name]).median / spread(c5[name]).median
        line(f"  {name:<42} {ratio:5.2f}")
    ratio = spread(c100[OURS]).median / spread(c25[OURS]).median
    line(f"  {OURS + ' 100/25 turns':<42} {ratio:5.2f}   (4.0 = linear, 15.5 = quadratic)")

    durable_runners: list[tuple[str, Runner]] = [
        (f"{OURS} (journal)", ours.durable(25)),
        (f"{OURS} (journal + thread in SQLite)", ours.durable_memory(25)),
    ]
    for peer in peers:
        if peer.durable is not None:
            durable_runners.append((peer.name, peer.durable(25)))
    times = await interleaved(durable_runners, rounds=s.durable_rounds, warmup=warm)
    _report("(d) 25-turn conversation, SQLite on, µs per conversation", times)
    for peer in peers:
        line(f"  note {peer.name}: {peer.durable_note}")
    return ours, peers


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short smoke run (few rounds)")
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else FULL
    header("1. Harness overhead vs peers")
    with tempfile.TemporaryDirectory(prefix="tinyagents-bench-") as tmp:
        ours, peers = asyncio.run(_run_all(settings, Path(tmp)))
        line("(b) Python function calls per run (cProfile):")
        line(f"  {OURS:<42} {_calls_per_run(ours.tool, settings.profile_runs):10,.0f}")
        for peer in peers:
            line(f"  {peer.name:<42} {_calls_per_run(peer.tool, settings.profile_runs):10,.0f}")
        for closer in [*ours.closers, *(c for p in peers for c in p.closers)]:
            closer()


if __name__ == "__main__":
    main()
