"""Side by side with the official RLM implementation (``rlms`` 0.1.3, the ``bench`` extra).

Both run against one 127.0.0.1 OpenAI-compatible server (``_rlm_server``, its own process) that
replays the same scripted replies (```` ```repl ```` blocks, the ``answer`` dict) to both, so the
figures differ only by the harness. Each (implementation, scenario) runs in a fresh interpreter:

- **overhead**: 20 trivial blocks and the answer (21 model calls, no model latency): wall and
  CPU per iteration;
- **batch**: one ``llm_query_batched`` of 1,000 prompts, the sub-model taking 50 ms each, at
  concurrency 16 (``rlms``' fixed batch concurrency; ours is set to match): wall against the ideal
  (1,000 / 16 * 50 ms = 3.125 s) and this process's CPU per sub-call;
- **stop**: a block running ``time.sleep(60)`` is stopped 0.5 s in. Ours: ``Stop`` (the run's
  cancellation, what the dashboard's button does). ``rlms`` has no Stop API: the only way is
  Ctrl+C (``SIGINT`` to the process), which it turns into ``CancellationError``; that is measured;
- **memory**: a 10 MB context, three blocks (look, search, answer): peak RSS of the process that
  runs the REPL (``VmHWM``, printed by the block itself) and of the harness process.

Implementations: ``ours-local`` (in-process REPL), ``ours-kernel`` (the default child kernel),
``rlms-local`` (its default in-process REPL), ``rlms-kernel`` (its ``ipython`` environment with
``kernel_mode="subprocess"``: a child ipykernel, started afresh for each ``completion()``). Run alone: ``python -m benchmarks.bench_rlm_vs_rlms [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
import warnings
from typing import Any

from benchmarks._common import header, line, package_version

IMPLEMENTATIONS = ("ours-local", "ours-kernel", "rlms-local", "rlms-kernel")
SCENARIOS = ("overhead", "batch", "stop", "memory")
SUB_DELAY_S = 0.05
CONCURRENCY = 16


def _context(size: int) -> str:
    rows, total, i = [], 0, 0
    while total < size:
        row = f"2026-11-26T12:00:{i % 60:02d} INFO request={i} ok latency_ms={i % 900}"
        rows.append(row)
        total += len(row) + 1
        i += 1
    rows[len(rows) * 2 // 3] = "2026-11-26T12:00:00 ERROR NEEDLE the answer is 4711"
    return "\n".join(rows)


def _rss_peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---------------------------------------------------------------------------------------- workers
def _ours(impl: str, scenario: str, base_url: str, quick: bool) -> dict[str, Any]:
    from tinyagents_nb.harness import AgentEvent, RunCancelled, RunContext
    from tinyagents_nb.harness.providers import OpenAIChatModel
    from tinyagents_nb.rlm import RLM, RLMCode, RLMLimits, RLMOutput

    environment = "local" if impl == "ours-local" else "kernel"
    limits = RLMLimits(max_concurrency=CONCURRENCY, max_sub_queries=5000, max_iterations=30, max_output_chars=20_000)

    def make(model: str, env: Any = environment) -> Any:
        root = OpenAIChatModel(f"root-{model}", base_url=base_url, api_key="bench")
        sub = OpenAIChatModel("sub", base_url=base_url, api_key="bench")
        return RLM(model=root, sub_model=sub, environment=env, limits=limits)

    rlm = make(scenario if scenario != "stop" else "sleep")
    # warm up: imports, the kernel's start
    asyncio.run(make("warmup", rlm.environment).invoke("Warm up.", context={"context": "x"}))
    result: dict[str, Any] = {}
    if scenario in ("overhead", "batch"):
        question = "Count." if scenario == "batch" else "Loop."
        walls, cpus = [], []
        for _ in range(1 if quick else 3):
            c0, t0 = time.process_time(), time.perf_counter()
            run = asyncio.run(rlm.invoke(question, context={"context": "x"}))
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
            assert run.final_text == "done", run.final_text
        result = {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus)}
    elif scenario == "stop":
        latencies = []
        for _ in range(1 if quick else 3):
            ctx: RunContext[Any] = RunContext()
            stopped: list[float] = []

            def on_event(
                offset: int, event: AgentEvent, ctx: RunContext[Any] = ctx, stopped: list[float] = stopped
            ) -> None:
                if isinstance(event, RLMCode):

                    def stop() -> None:
                        stopped.append(time.perf_counter())
                        ctx.cancellation.cancel("Stop")

                    threading.Timer(0.5, stop).start()

            ctx.events.add_listener(on_event)
            try:
                asyncio.run(rlm.invoke_in_context(ctx, "Sleep.", context={"context": "x"}))
            except RunCancelled:
                latencies.append(time.perf_counter() - stopped[0])
        result = {"stop_ms": statistics.median(latencies) * 1000}
    else:
        base = _rss_peak_mib()
        text = _context((1 if quick else 10) << 20)
        repl_peak: list[str] = []

        def on_event(offset: int, event: AgentEvent) -> None:
            if isinstance(event, RLMOutput) and "VmHWM" in event.output:
                repl_peak.append(event.output)

        ctx = RunContext()
        ctx.events.add_listener(on_event)
        run = asyncio.run(rlm.invoke_in_context(ctx, "Find the needle.", context={"context": text}))
        assert run.final_text == "done", run.final_text
        result = {"harness_peak_mib": _rss_peak_mib(), "harness_base_mib": base, "repl_peak_mib": _vmhwm(repl_peak)}
    rlm.close()
    return result


def _rlms(impl: str, scenario: str, base_url: str, quick: bool) -> dict[str, Any]:
    from rlm import RLM
    from rlm.environments.ipython_repl import IPythonREPL
    from rlm.environments.local_repl import LocalREPL
    from rlm.utils.exceptions import CancellationError

    kernel = impl == "rlms-kernel"
    REPL: Any = IPythonREPL if kernel else LocalREPL

    # rlms 0.1.3 keeps on_iteration_start but never calls it: the block's start is seen by wrapping
    # the REPL's execute_code (a measuring hook only; the interrupt is the user's Ctrl+C)
    execute_code = REPL.execute_code
    sent: list[float] = []

    def interrupt() -> None:
        sent.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl+C: rlms has no other way to stop a run

    printed: list[str] = []

    def watched(self: Any, code: str) -> Any:
        if "time.sleep(60)" in code:
            threading.Timer(0.5, interrupt).start()
        result = execute_code(self, code)
        if "VmHWM" in result.stdout:
            printed.append(result.stdout)
        return result

    REPL.execute_code = watched
    # a process started in the background inherits an ignored SIGINT (and Python then installs no
    # KeyboardInterrupt handler): give it Ctrl+C as an interactive terminal would
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def make(model: str, **kw: Any) -> Any:
        return RLM(
            backend="openai",
            backend_kwargs={"model_name": f"root-{model}", "base_url": base_url, "api_key": "bench"},
            other_backends=["openai"],
            other_backend_kwargs=[{"model_name": "sub", "base_url": base_url, "api_key": "bench"}],
            environment="ipython" if kernel else "local",
            environment_kwargs={"kernel_mode": "subprocess"} if kernel else None,
            max_iterations=30,
            **kw,
        )

    make("warmup").completion("x", root_prompt="Warm up.")
    result: dict[str, Any] = {}
    if scenario in ("overhead", "batch"):
        rlm = make(scenario)
        walls, cpus = [], []
        for _ in range(1 if quick else 3):
            c0, t0 = time.process_time(), time.perf_counter()
            out = rlm.completion("x", root_prompt="Count." if scenario == "batch" else "Loop.")
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
            assert out.response == "done", out.response
        result = {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus)}
    elif scenario == "stop":
        latencies = []
        missed = 0
        for _ in range(1 if quick else 3):
            sent.clear()
            try:
                make("sleep").completion("x", root_prompt="Sleep.")
                missed += 1  # the Ctrl+C was swallowed: the run went on to its answer
            except CancellationError:
                latencies.append(time.perf_counter() - sent[0])
        result = {"stop_ms": statistics.median(latencies) * 1000 if latencies else float("nan"), "missed": missed}
    else:
        base = _rss_peak_mib()
        text = _context((1 if quick else 10) << 20)
        out = make("memory").completion(text, root_prompt="Find the needle.")
        assert out.response == "done", out.response
        peak = _rss_peak_mib()
        repl = _vmhwm(printed) if kernel else peak  # the block printed its process's peak
        result = {"harness_peak_mib": peak, "harness_base_mib": base, "repl_peak_mib": repl}
    return result


def _vmhwm(outputs: list[str]) -> float:
    for output in outputs:
        return int(output.split("VmHWM")[1].split()[0]) / 1024
    return float("nan")


# ---------------------------------------------------------------------------------------- driver
def _run_worker(impl: str, scenario: str, port: int, quick: bool) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.bench_rlm_vs_rlms", "--worker", impl, scenario, str(port)]
    done = subprocess.run([*command, *(["--quick"] if quick else [])], capture_output=True, text=True, check=False)
    for row in reversed(done.stdout.splitlines()):
        if row.startswith("{"):
            parsed: dict[str, Any] = json.loads(row)
            return parsed
    print(f"{impl} {scenario} failed:\n{done.stdout[-1000:]}\n{done.stderr[-2000:]}", file=sys.stderr)
    nan = float("nan")
    return {
        "wall_s": nan,
        "cpu_s": nan,
        "stop_ms": nan,
        "harness_peak_mib": nan,
        "harness_base_mib": nan,
        "repl_peak_mib": nan,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--worker", nargs=3, metavar=("IMPL", "SCENARIO", "PORT"))
    args = parser.parse_args(argv)
    if args.worker:
        warnings.simplefilter("ignore")  # the scripted models have no price: the cost warnings are noise here
        impl, scenario, port = args.worker
        base_url = f"http://127.0.0.1:{port}/v1"
        if impl.startswith("ours"):
            result = _ours(impl, scenario, base_url, args.quick)
        else:
            result = _rlms(impl, scenario, base_url, args.quick)
        print(json.dumps(result), flush=True)
        return 0
    header(f"RLM side by side: TinyAgents-NB vs rlms {package_version('rlms')} (scripted 127.0.0.1 server)")
    try:
        import rlm  # noqa: F401
    except ImportError:
        line("rlms is not installed (pip install -e '.[bench]'): skipped")
        return 0
    server = subprocess.Popen(
        [sys.executable, "-m", "benchmarks._rlm_server", str(SUB_DELAY_S)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        line(f"load before: {os.getloadavg()[0]:.2f} (1 min)")
        results = {impl: {s: _run_worker(impl, s, port, args.quick) for s in SCENARIOS} for impl in IMPLEMENTATIONS}
        line(f"load after: {os.getloadavg()[0]:.2f} (1 min)")
    finally:
        server.terminate()
        server.wait()
    _report(results, args.quick)
    return 0


def _report(results: dict[str, dict[str, dict[str, Any]]], quick: bool) -> None:
    iterations = 21
    subcalls = 1000
    ideal = subcalls / CONCURRENCY * SUB_DELAY_S
    for impl in IMPLEMENTATIONS:
        r = results[impl]
        ov, ba, st, me = r["overhead"], r["batch"], r["stop"], r["memory"]
        missed = f" (Ctrl+C missed {st['missed']} time(s))" if st.get("missed") else ""
        line(
            f"{impl:<12} overhead {ov['wall_s'] / iterations * 1000:6.2f} ms/iteration wall, "
            f"{ov['cpu_s'] / iterations * 1000:6.2f} ms CPU | "
            f"batch 1,000 x 50 ms @16: {ba['wall_s']:5.2f} s (ideal {ideal:.3f} s, x{ba['wall_s'] / ideal:.2f}), "
            f"{ba['cpu_s'] / subcalls * 1000:.2f} ms CPU/sub-call | stop {st['stop_ms']:6.0f} ms"
            f"{missed} | "
            f"{'1' if quick else '10'} MB context: REPL peak {me['repl_peak_mib']:.0f} MiB, "
            f"harness peak {me['harness_peak_mib']:.0f} MiB (base {me['harness_base_mib']:.0f})"
        )
    ours, theirs = results["ours-local"], results["rlms-local"]
    line(
        "ratios ours-local / rlms-local: "
        f"overhead wall x{ours['overhead']['wall_s'] / theirs['overhead']['wall_s']:.2f}, "
        f"CPU x{ours['overhead']['cpu_s'] / theirs['overhead']['cpu_s']:.2f}; "
        f"batch wall x{ours['batch']['wall_s'] / theirs['batch']['wall_s']:.2f}, "
        f"CPU x{ours['batch']['cpu_s'] / theirs['batch']['cpu_s']:.2f}; "
        f"stop x{ours['stop']['stop_ms'] / theirs['stop']['stop_ms']:.2f}; "
        f"memory peak x{ours['memory']['harness_peak_mib'] / theirs['memory']['harness_peak_mib']:.2f}"
    )


if __name__ == "__main__":
    sys.exit(main())
