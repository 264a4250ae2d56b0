"""Run every benchmark in sequence and print each figure: ``python -m benchmarks [--quick] [names...]``.

``--quick`` is a short smoke run (the test suite runs it); names pick a subset, e.g.
``python -m benchmarks cancel memory``; ``realserver`` (against the llama-server ``./dev test``
builds) runs only when named. Each benchmark runs in a fresh interpreter, so one's imports
and heap (the peers load hundreds of thousands of objects) never skew another's CPU or RSS figures;
each module also runs alone: ``python -m benchmarks.bench_cancel``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from benchmarks._common import describe_machine, package_version

BENCHMARKS = (
    "overhead", "cancel", "stream", "context", "memory", "adapters", "mcp", "rlm", "sanitise", "map", "notebook",
    "browser", "otel", "budget", "nbaccess", "durable",
)  # fmt: skip
OPT_IN = ("realserver", "rlm_vs_rlms", "rlm_transport")  # by name only: llama-server; rlms (bench extra); 1 GB


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short smoke run of every benchmark")
    parser.add_argument(
        "--jobs", type=int, default=1, help="benchmarks run at once (for smoke runs: they skew each other's figures)"
    )
    parser.add_argument(
        "names", nargs="*", choices=[[], *BENCHMARKS, *OPT_IN], metavar="name", help=", ".join((*BENCHMARKS, *OPT_IN))
    )
    args = parser.parse_args(argv)
    names = args.names or list(BENCHMARKS)
    print(f"TinyAgents-NB benchmarks{' (quick)' if args.quick else ''}: {describe_machine()}")
    print(
        "deps: "
        + ", ".join(f"{p} {package_version(p)}" for p in ("ipykernel", "ipywidgets", "anyio", "pydantic", "tiktoken")),
        flush=True,
    )
    started = time.perf_counter()
    failed = []
    commands = [
        [sys.executable, "-m", f"benchmarks.bench_{name}", *(["--quick"] if args.quick else [])] for name in names
    ]
    if args.jobs <= 1:
        for name, command in zip(names, commands, strict=True):
            if subprocess.run(command, check=False).returncode != 0:
                failed.append(name)
    else:  # each one's output is held and printed whole, in the usual order
        with ThreadPoolExecutor(args.jobs) as pool:
            runs = [pool.submit(subprocess.run, c, stdout=subprocess.PIPE, text=True, check=False) for c in commands]
            for name, run in zip(names, runs, strict=True):
                proc = run.result()
                print(proc.stdout, end="", flush=True)
                if proc.returncode != 0:
                    failed.append(name)
    print(f"\nall benchmarks done in {time.perf_counter() - started:.0f} s", flush=True)
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
