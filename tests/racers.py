"""Processes that race on shared files: each imports once, then every round starts in all of them at once.

``race(script, args, rounds)`` starts one interpreter per entry of ``args`` running ``script``; a script
prints ``ready`` after its imports, then for each line it reads (one round's argument, written to every
process back to back) does its step and prints ``done``. Releasing the rounds over pipes once all are
ready replaces a fixed wall-clock start: nothing waits for the slowest import with a margin, and each
interpreter imports the package once however many rounds it races.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def race(script: str, args: Sequence[Sequence[str]], rounds: Sequence[str]) -> None:
    """Run ``rounds`` in every process at once; fails with a process's stderr if it does not say ``done``."""
    pipe = subprocess.PIPE
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, *extra], cwd=REPO, text=True, stdin=pipe, stdout=pipe, stderr=pipe
        )
        for extra in args
    ]

    def expect(word: str) -> None:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if line.strip() != word:
                proc.kill()
                raise AssertionError(f"expected {word!r}, got {line!r}: {proc.communicate()[1]}")

    try:
        expect("ready")
        for argument in rounds:
            for proc in procs:  # back to back: every process is blocked reading, all start together
                assert proc.stdin is not None
                proc.stdin.write(argument + "\n")
                proc.stdin.flush()
            expect("done")
        for proc in procs:
            _, stderr = proc.communicate(timeout=60)  # closes stdin: the script's loop ends
            assert proc.returncode == 0, stderr
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
