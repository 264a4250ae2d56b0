"""``safe_markdown`` on a megabyte of hostile text: the sanitiser every transcript row and record goes through.

Linear time is the claim: text built to defeat a regex that looks ahead from every backtick run
(runs of distinct lengths), every line a fence, link targets and tags everywhere. The earlier
sanitiser took about 12 s for the first of these on a 2-vCPU VM.

``python -m benchmarks.bench_sanitise [--quick]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from benchmarks._common import header, line
from tinyagents_nb.widgets import safe_markdown

SIZE = 1 << 20


def _backtick_runs(size: int) -> str:
    parts: list[str] = []
    length = total = 0
    while total < size:
        length += 1
        parts.append("`" * length + " x ")
        total += length + 3
    return "".join(parts)[:size]


TEXTS: dict[str, Callable[[int], str]] = {
    "plain prose": lambda n: ("The quick brown fox, 1 < 2. " * n)[:n],
    "backtick runs of distinct lengths": _backtick_runs,
    "every other line a fence": lambda n: ("```\n`` a\n" * n)[:n],
    "fences and a code span between each": lambda n: ("```\n`a`\n" * n)[:n],
    "every line a fence": lambda n: ("~~~\n" * n)[:n],
    "nested list items": lambda n: ("- a\n  - b\n    - c\n      - ```\n" * n)[:n],
    "table rows": lambda n: ("| a | `b` | <c> |\n" * n)[:n],
    "link targets": lambda n: ("a](b " * n)[:n],
    "tags and images": lambda n: ("<x ![y](z) " * n)[:n],
    "terminal escapes": lambda n: ("\x1b]52;c;aGk=\x07\x1b[31m" * n)[:n],
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else 5
    header(f"safe_markdown on 1 MiB of text (median of {repeats})")
    for name, make in TEXTS.items():
        text = make(SIZE)
        samples = []
        for _ in range(repeats):
            started = time.perf_counter()
            safe_markdown(text)
            samples.append(time.perf_counter() - started)
        median = statistics.median(samples)
        line(f"{name}: {median * 1000:.0f} ms ({SIZE / median / 1e6:.1f} MB/s)")


if __name__ == "__main__":
    main()
