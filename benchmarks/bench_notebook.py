"""Notebook latencies in a real kernel, driven like a frontend: click → cancelled, execute → first visible text.

For each ipykernel major available (7.x from this interpreter, 6.x from ``.venv-k6`` or
``TINYAGENTS_K6_PYTHON``) it measures:

- **Stop click → cancelled**, in a *waiting* cell (the default) and for a ``--background`` run: the
  time from sending the frontend's ``comm_msg`` click to receiving the ``update_display_data`` that
  replaces the dashboard by the cancelled run's record (so it includes the cancel, the run's end
  and the record reaching the client).
- **execute → first text**: from sending the ``%%agent`` cell to the first transcript widget update
  holding the first token (the model streams its first token after ``FIRST_TOKEN_S``).

``python -m benchmarks.bench_notebook [--quick]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import header, line, spread
from tests.kernel._kernel import KernelHarness, LiveCell

REPO = Path(__file__).resolve().parents[1]
FIRST_TOKEN_S = 0.05
SETUP = f"""
%load_ext tinyagents_nb
from tinyagents_nb.harness.testkit import StreamingMock
from tinyagents_nb.magics import get_session
get_session().register_model('slow', StreamingMock([f'word{{i}} ' for i in range(2000)], chunk_delay_s={FIRST_TOKEN_S}))
"""


def _ms(samples: list[float]) -> str:
    s = spread([x * 1000 for x in samples])
    return f"p50 {s.median:.0f} ms · p99 {s.p99:.0f} ms · max {s.maximum:.0f} ms (n={s.n})"


def _trial(kernel: KernelHarness, flags: str) -> tuple[float, float]:
    sent = time.monotonic()
    cell = LiveCell(kernel, f"%%agent --model slow --new-thread {flags}\nTell me a long story")
    if not cell.pump(lambda c: "word0" in c.html(), timeout=60):
        raise RuntimeError("the run never streamed")
    first = time.monotonic() - sent
    cell.pump(lambda c: "word5" in c.html(), timeout=60)
    stop = cell.widget("ButtonModel", description="Stop")
    clicked = time.monotonic()
    kernel.click(stop)
    if not cell.pump(lambda c: "cancelled" in c.markdown(), timeout=30):
        raise RuntimeError("the click did not cancel the run")
    latency = time.monotonic() - clicked
    cell.finish()
    return latency, first


def measure(python: str, trials: int) -> None:
    kernel = KernelHarness(python, Path(tempfile.mkdtemp(prefix="bench-nb-")))
    try:
        kernel.execute(SETUP)
        for mode, flags in (("waiting", ""), ("background", "--background")):
            _trial(kernel, flags)  # warm-up
            clicks, firsts = [], []
            for _ in range(trials):
                click, first = _trial(kernel, flags)
                clicks.append(click)
                firsts.append(first)
            line(f"ipykernel {kernel.version} · {mode:<10} · Stop click → cancelled record: {_ms(clicks)}")
            line(f"ipykernel {kernel.version} · {mode:<10} · execute → first text visible: {_ms(firsts)}")
    finally:
        kernel.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    header("notebook: click → cancelled and execute → first text (real kernel, jupyter_client as the frontend)")
    line(f"model's first token after {FIRST_TOKEN_S * 1000:.0f} ms; the figures include it")
    trials = 3 if args.quick else 30
    measure(sys.executable, trials)
    k6 = Path(os.environ.get("TINYAGENTS_K6_PYTHON", REPO / ".venv-k6" / "bin" / "python"))
    if not args.quick and k6.exists():
        measure(str(k6), trials)
    return 0


if __name__ == "__main__":
    sys.exit(main())
