"""The row replay server (``RowResponder`` on a ``ReplayServer``) in a child process, for big maps.

In the test process, the server's handler threads share the GIL with the event loop they answer,
so a 10,000-row map pays for both sides in turn on one core. In a child process the server runs on
the other core. The parent reads the per-row request counts over the child's stdin/stdout.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import TracebackType

__all__ = ["RowServerProcess"]

_ROOT = Path(__file__).resolve().parents[3]


class RowServerProcess:
    """A child process serving ``RowResponder`` answers on 127.0.0.1 (use as a context manager)."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.harness.batch.rows_process"],
            cwd=_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        self.base_url = self._proc.stdout.readline().strip()
        if not self.base_url.startswith("http://127.0.0.1:"):
            self.close()
            raise RuntimeError(f"the row server did not start: {self.base_url!r}")

    def _ask(self, command: str) -> str:
        assert self._proc.stdin is not None
        assert self._proc.stdout is not None
        self._proc.stdin.write(command + "\n")
        self._proc.stdin.flush()
        return self._proc.stdout.readline()

    def seen(self) -> Counter[int]:
        """Requests received per row number."""
        return Counter({int(n): c for n, c in json.loads(self._ask("seen")).items()})

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._ask("quit")
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        for pipe in (self._proc.stdin, self._proc.stdout):
            if pipe is not None:
                pipe.close()

    def __enter__(self) -> RowServerProcess:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _serve() -> None:
    from tests.harness.batch.rows_server import RowResponder
    from tests.harness.replay_server import ReplayServer

    server = ReplayServer().start()
    responder = RowResponder()
    server.respond_with(responder)
    print(server.base_url, flush=True)
    for line in sys.stdin:
        if line.strip() == "seen":
            print(json.dumps(dict(responder.seen)), flush=True)
        else:
            break
    server.stop()


if __name__ == "__main__":
    _serve()
