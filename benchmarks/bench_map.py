"""Item 12: ``agent_map`` throughput, rows per second and CPU per row, local executor.

(a) an instant in-process model (the harness's own throughput: one full run per row, structured
output validated, concurrency 16); (b) a 127.0.0.1 model that answers after 20 ms, at concurrency
64, where the ideal is 64 / 0.020 s = 3,200 rows/s and the gap is the client's CPU per row; (c)
peak memory of a map, scaled to 100,000 rows; (d) the dask and ray executors with 2 workers; (e)
LOTUS ``sem_map`` (``lotus-ai``) against the same server. The server runs in its own process so its
CPU is not counted. Dask, Ray and LOTUS are reported as skipped when not installed.

Run alone: ``python -m benchmarks.bench_map [--quick]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pydantic

from benchmarks._common import header, line
from tinyagents_nb.harness import ModelProfile, OutputSpec
from tinyagents_nb.harness.batch import agent_map
from tinyagents_nb.harness.providers import OpenAIChatModel
from tinyagents_nb.harness.testkit import FunctionModel

DELAY_S = 0.020
TARGET_ROWS_PER_S = 1_000


class Label(pydantic.BaseModel):
    label: str
    score: int


def _rows(n: int) -> list[dict[str, str]]:
    return [{"review": f"review #{i}: it was fine"} for i in range(n)]


def _timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def instant(n: int) -> None:
    answer = json.dumps({"label": "pos", "score": 4})
    profile = ModelProfile(name="instant", provider="test", structured_output="native")
    model = FunctionModel(lambda request: answer, profile=profile)
    agent_map(_rows(50), "Classify: {{review}}", model=model, output=Label)  # warm up (imports, schema)
    before = _peak_mib()
    out, wall, cpu = _timed(
        lambda: agent_map(_rows(n), "Classify: {{review}}", model=model, output=OutputSpec.of(Label), concurrency=16)
    )
    assert (out["status"] == "done").all()
    rate = n / wall
    verdict = "met" if rate >= TARGET_ROWS_PER_S else "NOT met"
    line(f"(a) instant in-process model, {n:,} rows, structured output, concurrency 16")
    line(f"    {rate:,.0f} rows/s (target >= {TARGET_ROWS_PER_S:,}: {verdict}); CPU {cpu / n * 1e6:,.0f} µs per row")
    grown = max(_peak_mib() - before, 0.0)
    line(f"(c) peak RSS growth {grown:,.1f} MiB for {n:,} rows -> ~{grown * 100_000 / n:,.0f} MiB per 100,000 rows")


def served(n: int, concurrency: int, *, cluster: str = "", workers: int = 2) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks._map_server", str(DELAY_S)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        factory = functools.partial(
            OpenAIChatModel, "gpt-4o-mini-2024-07-18", base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-bench"
        )
        model = factory()
        if cluster == "lotus":
            _lotus(n, port)
            return
        if cluster:
            options = {"model_factory": factory, "workers": workers, "partition_rows": max(n // 8, 1)}
            out, wall, cpu = _timed(
                lambda: agent_map(
                    _rows(n),
                    "Classify: {{review}}",
                    model=model,
                    output=Label,
                    concurrency=concurrency,
                    executor=cluster,  # type: ignore[arg-type]
                    executor_options=options,
                )
            )
            line(f"(d) {cluster}, {workers} workers (a local cluster, started inside the timing), {n:,} rows")
            line(f"    {n / wall:,.0f} rows/s; {int((out['status'] == 'done').sum()):,} done")
            return
        agent_map(_rows(concurrency), "Classify: {{review}}", model=model, output=Label)  # warm up
        out, wall, cpu = _timed(
            lambda: agent_map(_rows(n), "Classify: {{review}}", model=model, output=Label, concurrency=concurrency)
        )
        assert (out["status"] == "done").all(), out["error"].dropna().head()
        ideal = concurrency / DELAY_S
        line(f"(b) 127.0.0.1 model answering in {DELAY_S * 1000:.0f} ms, {n:,} rows, concurrency {concurrency}")
        line(
            f"    {n / wall:,.0f} rows/s vs ideal {ideal:,.0f} ({n / wall / ideal:.0%}); "
            f"client CPU {cpu / n * 1e6:,.0f} µs per row; cost ${float(out['cost_usd'].sum()):.4f}"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _lotus(n: int, port: int) -> None:
    """LOTUS ``sem_map`` (through litellm) on the same server and rows, its batch of 64 as our concurrency."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download of litellm's price map
    import lotus  # type: ignore[import-not-found]
    import pandas as pd
    from lotus.models import LM  # type: ignore[import-not-found]

    lm = LM(model="openai/gpt-4o-mini", api_base=f"http://127.0.0.1:{port}/v1", api_key="sk-bench", max_batch_size=64)
    lotus.settings.configure(lm=lm)
    frame: Any = pd.DataFrame(_rows(n))  # LOTUS adds .sem_map to DataFrames at import
    frame.head(64).sem_map("Classify {review}")  # warm up
    _, wall, cpu = _timed(lambda: frame.sem_map("Classify {review}"))
    line(f"(e) LOTUS sem_map on the same server, {n:,} rows, batch 64")
    line(f"    {n / wall:,.0f} rows/s; client CPU {cpu / n * 1e6:,.0f} µs per row")


def peers(n: int, *, quick: bool = False) -> None:
    for package, what in (("ray", "ray"), ("lotus", "lotus")):
        if quick and what == "ray":
            # Ray starts five processes with a fixed 30 s for its raylet to register: under the test suite's
            # load that start, not the executor, is what fails; tests/harness/batch/test_ray_executor.py runs
            # the Ray executor (against the local frame) in every ./dev test.
            line("(d) ray: skipped by --quick (tests/harness/batch/test_ray_executor.py runs it)")
            continue
        try:
            __import__(package)
        except ImportError:
            line(f"(d/e) {what}: skipped, not installed (pip install {'lotus-ai' if what == 'lotus' else 'ray'})")
        else:
            served(n, 64, cluster=what)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    header("12. Agents over data: agent_map rows per second")
    load = os.getloadavg()[0]
    line(f"load average {load:.1f} on {os.cpu_count()} cores (figures scale with what else runs)")
    instant(1_000 if args.quick else 10_000)
    served(300 if args.quick else 10_000, 64)
    try:
        import distributed  # noqa: F401
    except ImportError:
        line("(d) dask: skipped, not installed (extra [dask])")
    else:
        served(300 if args.quick else 2_000, 64, cluster="dask")
    peers(300 if args.quick else 2_000, quick=args.quick)


if __name__ == "__main__":
    main()
