"""Per-run harness overhead with an instant scripted model (the model itself costs ~nothing).

Workloads: (a) one text reply; (b) model -> one async tool -> model; (c) a 25-turn conversation in
memory (cost must grow linearly in turns). Reports the median and spread over repeated batches of
runs, in microseconds per run, measured with ``time.perf_counter`` in one process.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable

from tinyagents_nb.harness import AgentHarness, AssistantMessage, Message, UserMessage, tool
from tinyagents_nb.harness.testkit import ScriptedModel


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


def _text_run() -> Callable[[], Awaitable[object]]:
    async def run() -> object:
        harness = AgentHarness(model=ScriptedModel(["hello"]))
        return await harness.invoke("hi")

    return run


def _tool_run() -> Callable[[], Awaitable[object]]:
    async def run() -> object:
        model = ScriptedModel([ScriptedModel.tool_call("lookup", {"key": "k"}), "done"])
        return await AgentHarness(model=model, tools=[lookup]).invoke("go")

    return run


def _conversation(turns: int) -> Callable[[], Awaitable[object]]:
    async def run() -> object:
        model = ScriptedModel([f"answer {i}" for i in range(turns)])
        harness = AgentHarness(model=model)
        history: list[Message] = []
        for i in range(turns):
            result = await harness.invoke([*history, UserMessage(text=f"question {i}")])
            history = list(result.messages)
        assert isinstance(history[-1], AssistantMessage)
        return history

    return run


async def _measure(fn: Callable[[], Awaitable[object]], *, runs: int, batches: int) -> list[float]:
    for _ in range(max(10, runs // 10)):  # warm up caches, imports, adapters
        await fn()
    per_run: list[float] = []
    for _ in range(batches):
        gc.collect()
        start = time.perf_counter()
        for _ in range(runs):
            await fn()
        per_run.append((time.perf_counter() - start) / runs * 1e6)
    return per_run


def _report(name: str, samples: list[float]) -> float:
    median = statistics.median(samples)
    print(f"  {name:<42} median {median:8.1f} µs/run   (min {min(samples):.1f}, max {max(samples):.1f})")
    return median


async def _main(runs: int, batches: int) -> None:
    print(f"Harness overhead, instant scripted model ({batches} batches x {runs} runs)")
    _report("(a) one text reply", await _measure(_text_run(), runs=runs, batches=batches))
    _report("(b) model -> tool -> model", await _measure(_tool_run(), runs=runs, batches=batches))
    small = _report(
        "(c) 5-turn conversation", await _measure(_conversation(5), runs=max(1, runs // 5), batches=batches)
    )
    big = _report(
        "(c) 25-turn conversation", await _measure(_conversation(25), runs=max(1, runs // 25), batches=batches)
    )
    print(f"  25-turn / 5-turn cost ratio: {big / small:.2f} (5.0 = linear in turns)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--batches", type=int, default=7)
    args = parser.parse_args(argv)
    asyncio.run(_main(args.runs, args.batches))


if __name__ == "__main__":
    main()
