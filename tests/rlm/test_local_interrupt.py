"""The in-process REPL interrupts only its own block's thread, never one that took over its thread id.

Python reuses a finished thread's id for the next thread it starts. A block's runner that is closed
after its block ended (its run's task cancelled, or a run left pending and garbage-collected later,
in another test or another run) must not send its interrupt: it would land in whatever thread has
the id now, e.g. another run's block, which then fails with a ``KeyboardInterrupt`` out of nowhere.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine
from typing import Any

import pytest

from tinyagents_nb.harness import AgentHarness, RunContext
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.rlm import LocalEnvironment, RLMLimits, SubQueries

pytestmark = pytest.mark.anyio


class Victim(threading.Thread):
    """A thread that records any ``KeyboardInterrupt`` it is sent while it waits to be told to end."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.interrupted = 0
        self.ready = threading.Event()
        self.end = threading.Event()

    def run(self) -> None:
        self.ready.set()
        while not self.end.is_set():
            try:
                time.sleep(0.001)
            except KeyboardInterrupt:
                self.interrupted += 1


async def _finished_block(env: LocalEnvironment) -> tuple[int, Coroutine[Any, Any, Any]]:
    """A block that ran to its end while its runner was suspended; returns its thread id and the runner."""
    code = "import threading, time\ntime.sleep(0.05)\ntid = threading.get_ident()"
    runner = env.execute(code, timeout_s=None, should_stop=lambda: False)
    runner.send(None)  # starts the block's thread and suspends at the runner's first poll
    assert env.namespace is not None
    deadline = time.monotonic() + 10
    while "tid" not in env.namespace or any(t.ident == env.namespace["tid"] for t in threading.enumerate()):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.005)  # until the block's thread has exited: its id is free again
    return int(env.namespace["tid"]), runner


async def test_closing_a_runner_after_its_block_ended_interrupts_no_other_thread() -> None:
    env = LocalEnvironment()
    await env.start_run({}, SubQueries(RunContext(), AgentHarness(model=ScriptedModel([])), RLMLimits()))
    reused = 0
    for _ in range(20):
        tid, runner = await _finished_block(env)
        victim = Victim()
        victim.start()
        victim.ready.wait(5)
        reused += victim.ident == tid
        runner.close()  # what cancelling or collecting the pending run does
        await asyncio.sleep(0.01)
        victim.end.set()
        victim.join(5)
        assert victim.interrupted == 0
    assert reused > 0  # the id was taken over at least once: the case above was exercised
    await env.end_run()
