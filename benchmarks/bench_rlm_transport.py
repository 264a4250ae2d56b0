"""A 1 GB DataFrame into the RLM's child kernel: Arrow IPC (the default for large frames) vs pickle.

Each path runs in a fresh interpreter, with a warm kernel (one trivial run first). Measured:
the time from the run's start to its first block (serialize, copy, load), the notebook process's
peak RSS above its level once the frame exists (``VmHWM`` reset through ``/proc/self/clear_refs``),
and the child kernel's peak RSS and anonymous RSS once the frame is loaded (printed by the block).
The frame: 15 float64 columns and one ``str`` column of short names, 8 M rows, about 1 GB.

Opt-in (1 GB, twice): ``python -m benchmarks rlm_transport`` or ``python -m benchmarks.bench_rlm_transport [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
import warnings
from typing import Any

from benchmarks._common import header, line

PROBE = (
    "status = open('/proc/self/status').read()\n"
    "field = lambda name: int(status.split(name + ':')[1].split()[0]) // 1024\n"
    "print('PROBE', df.shape, field('VmHWM'), field('RssAnon'), field('RssFile'))"
)


def _status(name: str) -> int:
    with open("/proc/self/status") as f:
        return int(f.read().split(name + ":")[1].split()[0]) // 1024


def _worker(path: str, rows: int) -> dict[str, Any]:
    import numpy as np
    import pandas as pd

    from tinyagents_nb.harness import AgentEvent, RunContext
    from tinyagents_nb.harness.testkit import ScriptedModel
    from tinyagents_nb.rlm import RLM, KernelEnvironment, RLMCode, RLMOutput

    warnings.simplefilter("ignore")
    rng = np.random.default_rng(1)
    names = np.array([f"name-{i}" for i in range(1000)], dtype=object)
    data = {f"x{i}": rng.random(rows) for i in range(15)}
    data["name"] = pd.Series(names[rng.integers(0, 1000, rows)], dtype="str")
    df = pd.DataFrame(data)
    size_mb = df.memory_usage(index=True).sum() / 2**20
    env = KernelEnvironment(arrow_min_bytes=None if path == "pickle" else 1 << 20)

    def reply(code: str) -> Any:
        return ScriptedModel.text(f"```python\n{code}\n```")

    asyncio.run(RLM(model=ScriptedModel([reply("FINAL(1)")]), environment=env).invoke("warm", context={}))
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := current RSS: the peak from here on is the transport's
    base = _status("VmHWM")
    first_block: list[float] = []
    probe: list[str] = []

    def on_event(offset: int, event: AgentEvent) -> None:
        if isinstance(event, RLMCode) and not first_block:
            first_block.append(time.perf_counter())
        if isinstance(event, RLMOutput) and "PROBE" in event.output:
            probe.append(event.output)

    ctx: RunContext[Any] = RunContext()
    ctx.events.add_listener(on_event)
    model = ScriptedModel([reply(PROBE), reply("FINAL('done')")])
    started = time.perf_counter()
    asyncio.run(RLM(model=model, environment=env).invoke_in_context(ctx, "Probe.", context={"df": df}))
    peak = _status("VmHWM")
    env.close()
    fields = probe[0].split("PROBE")[1].split(")")[1].split()
    return {
        "frame_mib": size_mb,
        "transport": env.transport["df"],
        "to_first_block_s": first_block[0] - started,
        "notebook_peak_above_mib": peak - base,
        "child_peak_mib": int(fields[0]),
        "child_anon_mib": int(fields[1]),
        "child_file_mib": int(fields[2]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--worker", nargs=2, metavar=("PATH", "ROWS"))
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(args.worker[0], int(args.worker[1]))), flush=True)
        return 0
    rows = 200_000 if args.quick else 8_000_000
    header(f"RLM child kernel: a {'small' if args.quick else '1 GB'} DataFrame, Arrow IPC vs pickle")
    for path in ("arrow", "pickle"):
        command = [sys.executable, "-m", "benchmarks.bench_rlm_transport", "--worker", path, str(rows)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        rows_out = [r for r in done.stdout.splitlines() if r.startswith("{")]
        if not rows_out:
            line(f"{path}: failed\n{done.stderr[-2000:]}")
            return 1
        r = json.loads(rows_out[-1])
        line(
            f"{r['transport']:<6} {r['frame_mib']:.0f} MiB frame: run start to first block {r['to_first_block_s']:.2f} s; "
            f"notebook peak +{r['notebook_peak_above_mib']} MiB; child peak {r['child_peak_mib']} MiB "
            f"(anonymous {r['child_anon_mib']}, file-backed {r['child_file_mib']} MiB after loading)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
