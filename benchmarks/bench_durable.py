"""Durable runs: what journaling every step to SQLite costs a run, and how long a resume takes.

A 25-turn run (model → tool → model, a scripted model so only the harness is measured) with and
without a ``DurableJournal`` on a SQLite ``RunStore`` (WAL, ``synchronous=normal``: every step
committed, safe against a killed process); then a 200-step run is journaled, failed, and resumed
(``plan_resume`` reads and rebuilds it; ``resume`` also finishes it with one more model call). A
notebook session's run is also timed with the default store on disk against a store in memory: that
adds the event journal and the thread history to the run journal. A sub-agent's 25 turns inside a
parent are timed with and without the journal (its steps go in the root run's journal). Last, ``RunStore.runs()`` lists
200 runs of which 100 are still running (half this process's, half another host's, by their lease),
as ``%agent runs`` and the extension's first cell do: what telling interrupted runs apart costs.

Run alone: ``python -m benchmarks.bench_durable [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks._common import header, line
from tinyagents_nb.harness import (
    AgentHarness,
    Middleware,
    ModelResponse,
    ProviderError,
    RunLimits,
    RunPolicy,
    SubAgent,
    tool,
)
from tinyagents_nb.harness.durable import DurableJournal, RunStore, plan_resume
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import NotebookSession

POLICY = RunPolicy(limits=RunLimits(max_model_calls=1_000, max_tool_calls=1_000))


@tool
def step(i: int) -> str:
    """One step of work."""
    return f"ok {i}"


def _script(turns: int) -> list[ModelResponse | BaseException | str]:
    return [ScriptedModel.tool_call("step", {"i": i}) for i in range(turns)]


async def _once(middleware: list[Middleware], turns: int) -> float:
    model = ScriptedModel([*_script(turns), "done"])
    harness: AgentHarness[None] = AgentHarness(model=model, tools=[step], middleware=middleware, policy=POLICY)
    started = time.perf_counter()
    await harness.invoke("go")
    return time.perf_counter() - started


async def overhead(store: RunStore, rounds: int) -> None:
    plain, durable = [], []
    for _ in range(rounds):  # interleaved, so drift in the machine's load hits both alike
        plain.append(await _once([], 25))
        durable.append(await _once([DurableJournal(store)], 25))
    off, on = statistics.median(plain) * 1e3, statistics.median(durable) * 1e3
    line(f"25 turns without a journal: {off:.1f} ms median; with DurableJournal: {on:.1f} ms")
    line(f"journal overhead per turn (3 committed steps): {(on - off) / 25:.2f} ms")


async def _tree_once(journaled: RunStore | None, turns: int) -> float:
    """A parent that delegates once to a sub-agent doing ``turns`` tool turns (journaled in the root's steps)."""
    child = AgentHarness(model=ScriptedModel([*_script(turns), "child done"]), tools=[step], policy=POLICY)
    helper = SubAgent("helper", child).as_tool()
    parent_script: list[ModelResponse | BaseException | str] = [
        ScriptedModel.tool_call("helper", {"input": "go"}),
        "done",
    ]
    middleware: list[Middleware] = [DurableJournal(journaled)] if journaled is not None else []
    harness: AgentHarness[None] = AgentHarness(
        model=ScriptedModel(parent_script), tools=[helper], middleware=middleware, policy=POLICY
    )
    started = time.perf_counter()
    await harness.invoke("go")
    return time.perf_counter() - started


async def tree_overhead(store: RunStore, rounds: int) -> None:
    plain, durable = [], []
    for _ in range(rounds):
        plain.append(await _tree_once(None, 25))
        durable.append(await _tree_once(store, 25))
    off, on = statistics.median(plain) * 1e3, statistics.median(durable) * 1e3
    line(f"sub-agent doing 25 turns inside a parent: {off:.1f} ms median without a journal; journaled {on:.1f} ms")
    line(f"journal overhead per sub-agent turn: {(on - off) / 25:.2f} ms")


async def _session_once(session: NotebookSession, turns: int) -> float:
    session.register_model("scripted", ScriptedModel([*_script(turns), "done"]))
    run = session.new_run("go", model="scripted", max_model_calls=1_000)
    started = time.perf_counter()
    await run.result()
    return time.perf_counter() - started


async def session_overhead(folder: Path, rounds: int) -> None:
    """A notebook session's run with its default store (a file) against one kept in memory."""
    on_disk = NotebookSession(store_path=folder / "notebook.sqlite", continue_thread=False)
    in_memory = NotebookSession(store_path=None)
    for session in (on_disk, in_memory):
        session.register_tool(step)
    try:
        memory, disk = [], []
        for _ in range(rounds):
            memory.append(await _session_once(in_memory, 25))
            disk.append(await _session_once(on_disk, 25))
        off, on = statistics.median(memory) * 1e3, statistics.median(disk) * 1e3
        line(f"notebook session, 25 turns: store in memory {off:.1f} ms median; default store on disk {on:.1f} ms")
        line(f"default store overhead per turn (run journal, event journal, history): {(on - off) / 25:.2f} ms")
    finally:
        on_disk.close()
        in_memory.close()


async def resume(store: RunStore, steps: int) -> None:
    failing = ScriptedModel([*_script(steps), ProviderError("gone", retryable=False)])
    harness: AgentHarness[None] = AgentHarness(
        model=failing, tools=[step], middleware=[DurableJournal(store)], policy=POLICY
    )
    try:
        await harness.invoke("go")
    except ProviderError:
        pass
    failed = next(r for r in store.runs() if r.status == "failed")
    started = time.perf_counter()
    plan = plan_resume(store, failed.run_id)
    read = time.perf_counter() - started
    later: AgentHarness[None] = AgentHarness(model=ScriptedModel(["done"]), tools=[step], policy=POLICY)
    started = time.perf_counter()
    await later.resume(failed.run_id, store=store)
    whole = time.perf_counter() - started
    line(
        f"{steps}-step run ({len(plan.messages)} messages): plan_resume {read * 1e3:.1f} ms; resume to the end {whole * 1e3:.1f} ms"
    )


def listing(folder: Path, runs: int) -> None:
    path = folder / "listing.sqlite"
    with RunStore(path) as store:
        for i in range(runs):
            store.start_run(f"run-{i}", agent=None, model="m", prompt="p")
            store.add_step(f"run-{i}", "input", {"messages": [{"role": "user", "text": "p"}]})
            if i % 2:
                store.end_run(f"run-{i}", "completed")
    with sqlite3.connect(path) as conn:  # another host's kernel runs half of the running ones
        conn.execute("INSERT INTO tinyagents_leases VALUES ('far:7:x', 'far', 7, 1.0, ?)", (time.time(),))
        conn.execute("UPDATE tinyagents_runs SET owner = 'far:7:x' WHERE status = 'running' AND rowid % 4 = 1")
    with RunStore(path) as reader:
        started = time.perf_counter()
        listed = reader.runs()
        took = time.perf_counter() - started
    running = sum(1 for r in listed if r.status == "running")
    line(f"runs() over {len(listed)} runs ({running} running, leases checked): {took * 1e3:.1f} ms")


async def amain(quick: bool) -> None:
    header("durable runs: journal overhead per turn, resume time")
    with tempfile.TemporaryDirectory() as folder:
        store = RunStore(Path(folder) / "runs.sqlite")
        await overhead(store, 3 if quick else 30)
        await tree_overhead(store, 3 if quick else 30)
        await session_overhead(Path(folder), 3 if quick else 20)
        await resume(store, 20 if quick else 200)
        store.close()
        listing(Path(folder), 40 if quick else 200)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    asyncio.run(amain(parser.parse_args(argv).quick))


if __name__ == "__main__":
    main()
