"""Item 6: what an MCP server costs: start, one tool call through the harness, and Stop during a call.

(a) starting the test suite's stdio calc server (spawn, negotiate, list tools); (b) one ``calc_add``
call, timed three ways, interleaved: the SDK's own ``Client`` on the caller's loop (the floor),
``MCPServer.call_tool`` (the hop to the server's owner loop and back, plus result mapping), and a
whole harness run (model -> ``calc_add`` -> model, scripted model); (c) Stop during a slow call,
from ``cancel()`` to the run having ended ``cancelled`` (the SDK sends ``notifications/cancelled``
on the owner loop first). Needs the ``mcp`` extra.

Run alone: ``python -m benchmarks.bench_mcp [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import header, interleaved, line, spread
from tinyagents_nb.harness import AgentHarness, MCPServer, RunCancelled, RunContext
from tinyagents_nb.harness.testkit import ScriptedModel

SERVER = Path(__file__).resolve().parent.parent / "tests" / "harness" / "mcp" / "calc_server.py"


def _ms(seconds: list[float]) -> str:
    s = spread([x * 1000 for x in seconds])
    return f"p50 {s.median:.2f} ms, p25-p75 {s.p25:.2f}-{s.p75:.2f}, p99 {s.p99:.2f} (n={s.n})"


def _us(seconds: list[float]) -> str:
    s = spread([x * 1e6 for x in seconds])
    return f"p50 {s.median:,.0f} µs, p25-p75 {s.p25:,.0f}-{s.p75:,.0f}, p99 {s.p99:,.0f} (n={s.n})"


async def _starts(reps: int, markers: str) -> list[float]:
    times = []
    for _ in range(reps):
        server = MCPServer.stdio("calc", sys.executable, [str(SERVER)], env={"MARKER_DIR": markers})
        t0 = time.perf_counter()
        await server.list_tools()
        times.append(time.perf_counter() - t0)
        await server.aclose()
    return times


async def _calls(rounds: int, markers: str) -> dict[str, list[float]]:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)], env={"MARKER_DIR": markers})
    server = MCPServer.stdio("calc", sys.executable, [str(SERVER)], env={"MARKER_DIR": markers})
    script = [ScriptedModel.tool_call("calc_add", {"a": 2, "b": 3}), ScriptedModel.text("5")]
    agent = AgentHarness(model=ScriptedModel(script * (rounds + 20)), tools=[server])
    with open(os.devnull, "w") as devnull:  # noqa: ASYNC230 - opening /dev/null does not block
        async with Client(stdio_client(params, errlog=devnull), cache=None) as sdk:

            async def direct() -> object:
                return await sdk.call_tool("add", {"a": 2, "b": 3})

            async def through_server() -> object:
                return await server.call_tool("add", {"a": 2, "b": 3})

            async def whole_run() -> object:
                return await agent.invoke("add")

            await server.list_tools()
            times = await interleaved(
                [("sdk", direct), ("server", through_server), ("run", whole_run)], rounds=rounds, warmup=10
            )
    await agent.aclose()
    return times


async def _stops(reps: int, markers: Path) -> list[float]:
    server = MCPServer.stdio("calc", sys.executable, [str(SERVER)], env={"MARKER_DIR": str(markers)})
    calls = [ScriptedModel.tool_call("calc_slow", {"seconds": 60}) for _ in range(reps)]  # each run is cancelled
    agent = AgentHarness(model=ScriptedModel(calls), tools=[server])
    times = []
    for _ in range(reps):
        (markers / "started").unlink(missing_ok=True)
        ctx = RunContext()
        task = asyncio.create_task(agent.invoke_in_context(ctx, "sleep"))
        while not (markers / "started").exists():  # noqa: ASYNC110 - the marker is written by another process
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.01)
        t0 = time.perf_counter()
        ctx.cancellation.cancel("Stop")
        try:
            await task
        except RunCancelled:
            times.append(time.perf_counter() - t0)
    await agent.aclose()
    return times


async def _run(quick: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        starts = await _starts(2 if quick else 10, tmp)
        line(f"(a) start a stdio server and list its tools: {_ms(starts)}")
        calls = await _calls(20 if quick else 500, tmp)
        line(f"(b) calc_add via the SDK's Client on the caller's loop: {_us(calls['sdk'])}")
        line(f"    calc_add via MCPServer.call_tool (owner-loop hop): {_us(calls['server'])}")
        line(f"    a whole run, model -> calc_add -> model: {_us(calls['run'])}")
        stops = await _stops(3 if quick else 30, Path(tmp))
        line(f"(c) Stop during a slow MCP call -> run ended cancelled: {_ms(stops)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short smoke run (few repetitions)")
    args = parser.parse_args(argv)
    header("7. MCP servers")
    asyncio.run(_run(args.quick))


if __name__ == "__main__":
    main()
