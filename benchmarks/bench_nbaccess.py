"""Notebook access costs: listing and inspecting variables, and ``run_code``'s round trip in a real kernel.

- ``notebook_variables()`` over a namespace of 10,000 variables (ints, strings, lists, small frames):
  time and the peak memory it allocates (``tracemalloc``, numpy and pandas buffers included).
- ``inspect_variable`` on a 10-million-row, 8-column float DataFrame: time and peak memory added.
- The tokens the notebook tools' schemas add to every request (``read``: four tools; ``ask``: six), as
  the Chat Completions ``tools`` JSON counted with gpt-4o's tokenizer (``o200k_base``).
- ``run_code("1+1")`` round trip (the tool call's own duration, from the journal's ``tool.completed``)
  in a waiting cell and for a background run, ``--access auto``, on each ipykernel major available.

``python -m benchmarks.bench_nbaccess [--quick]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from benchmarks._common import header, line, spread

REPO = Path(__file__).resolve().parents[1]
SETUP = """
%load_ext tinyagents_nb
from tinyagents_nb.harness import ToolCall
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import get_session
def script():
    call = ToolCall(id="rt", name="run_code", arguments={"code": "1+1"})
    get_session().register_model("rt", ScriptedModel([ScriptedModel.tool_calls([call]), "done"]))
def durations(run):
    return [e.event.duration_s for e in get_session().journal.read_from(0, kinds=["tool.completed"])
            if e.event.root_run_id == run.run_id]
"""


def _timed(fn: object, reps: int) -> tuple[float, float]:
    times = []
    for _ in range(reps):  # timed without tracemalloc, which slows every allocation
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    tracemalloc.start()
    fn()  # type: ignore[operator]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return spread(times).median, peak / 1e6


def in_process(rows: int, reps: int) -> None:
    import numpy as np
    import pandas as pd

    from tinyagents_nb.notebook import Masker, describe_variable, list_variables

    small = pd.DataFrame({"a": range(10), "b": list("abcdefghij")})
    kinds = [1, "text " * 20, list(range(50)), small, 3.5]
    namespace = {f"var_{i}": kinds[i % len(kinds)] for i in range(10_000)}
    masker = Masker()
    seconds, peak = _timed(lambda: list_variables(namespace, {}, masker, 4_000), reps)
    line(f"notebook_variables() over 10,000 variables: {seconds * 1000:.1f} ms, peak +{peak:.1f} MB")
    frame = pd.DataFrame({c: np.arange(rows, dtype="float64") for c in "abcdefgh"})
    seconds, peak = _timed(lambda: describe_variable("frame", frame, 4_000), reps)
    size = frame.memory_usage().sum() / 1e6
    line(f"inspect_variable on a {rows:,} x 8 DataFrame ({size:,.0f} MB): {seconds * 1000:.0f} ms, peak +{peak:.1f} MB")


def schema_tokens() -> None:
    from IPython.core.interactiveshell import InteractiveShell

    from tinyagents_nb.harness.models import estimate_tokens, tokenizer_for_model
    from tinyagents_nb.notebook import NotebookAccess, notebook_tools

    access = NotebookAccess(InteractiveShell.instance())
    try:
        for mode in ("read", "ask"):
            counts = {}
            for made in notebook_tools(access, mode, insert_cells=False):
                schema = made.schema
                function = {"name": schema.name, "description": schema.description, "parameters": schema.parameters}
                text = json.dumps({"type": "function", "function": function}, separators=(",", ":"))
                counts[schema.name] = estimate_tokens(text, "gpt-4o")
            each = ", ".join(f"{name} {n}" for name, n in counts.items())
            line(f"{mode} tools' schemas: {sum(counts.values())} tokens per request ({each})")
    finally:
        access.close()
    line(f"(counted with {tokenizer_for_model('gpt-4o').name})")


def round_trips(python: str, trials: int, *, modes: tuple[str, ...] = ("waiting", "background")) -> None:
    from tests.kernel._kernel import KernelHarness

    kernel = KernelHarness(python, Path(tempfile.mkdtemp(prefix="bench-nbaccess-")))
    try:
        kernel.execute(SETUP)
        for mode, flags in (("waiting", ""), ("background", "--background")):
            if mode not in modes:
                continue
            samples = []
            for index in range(trials + 1):
                kernel.execute("script()")
                kernel.execute(f"%%agent --model rt --access auto --name rt{index} {flags}\nadd")
                if flags:
                    kernel.execute("%agent wait")
                if index:  # the first is a warm-up
                    samples.extend(kernel.value(f"durations(rt{index})"))
            s = spread([x * 1000 for x in samples])
            line(
                f"ipykernel {kernel.version} · {mode:<10} · run_code('1+1') round trip: "
                f"p50 {s.median:.1f} ms · max {s.maximum:.1f} ms (n={s.n})"
            )
    finally:
        kernel.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    header("13. Notebook access: variables, a 10-million-row frame, run_code round trips")
    in_process(1_000_000 if args.quick else 10_000_000, 1 if args.quick else 3)
    schema_tokens()
    k6 = Path(os.environ.get("TINYAGENTS_K6_PYTHON", REPO / ".venv-k6" / "bin" / "python"))
    both = [sys.executable, *([str(k6)] if k6.exists() else [])]
    if args.quick:  # one kernel, one mode: the suite's quick run has a time budget
        round_trips(both[0], 1, modes=("waiting",))
        return 0
    for python in both:
        round_trips(python, 10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
