"""The shut-down hook's records say the kernel went away, whatever order the interrupt and the request take.

jupyter_client interrupts the kernel, then sends ``shutdown_request`` on the control channel. The
interrupt can stop a background run and show its record ("interrupted") in the moment before the
run's future resolves, so the hook still finds it active: that record must be sent again with the
shut-down's reason (the CI failure of session 5).
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future
from typing import Any

from tinyagents_nb.magics._shutdown import SHUTDOWN, _ShutdownHook


class _View:
    def __init__(self, run: _Run) -> None:
        self.run = run
        self.sent: list[str | None] = []

    def show_record_again(self) -> None:
        self.sent.append(self.run.stop_reason)


class _Run:
    """What the hook reads of a ``NotebookRun``: an interrupt already ended it and showed its record."""

    def __init__(self, *, resolved: bool) -> None:
        self.mode = "background"
        self.future: Future[None] = Future()
        self.ended_at: float | None = time.monotonic()
        self.ended_by: str | None = None
        self.view = _View(self)
        self.cancelled: list[str] = []
        if resolved:
            self.future.set_result(None)

    @property
    def done(self) -> bool:
        return self.future.done()

    @property
    def stop_reason(self) -> str | None:
        return self.ended_by or "interrupted"

    def cancel(self, reason: str) -> None:
        self.cancelled.append(reason)
        threading.Timer(0.05, self.future.set_result, args=(None,)).start()  # the future resolves a moment later


def _shut_down(runs: list[Any]) -> list[dict[str, Any]]:
    asked: list[dict[str, Any]] = []

    def inner(stream: Any, ident: Any, parent: dict[str, Any]) -> None:
        asked.append(parent)

    hook = _ShutdownHook(inner, lambda: runs)
    asyncio.run(hook(None, None, {"content": {"restart": False}}))
    return asked


def test_a_record_shown_before_the_future_resolved_is_sent_again_with_the_shutdown() -> None:
    run = _Run(resolved=False)  # the record says "interrupted", but the run still counts as active
    asked = _shut_down([run])
    assert asked, "the kernel's own handler must still run"
    assert run.stop_reason == SHUTDOWN
    assert run.view.sent == [SHUTDOWN]


def test_a_run_the_interrupt_ended_just_before_is_sent_again() -> None:
    run = _Run(resolved=True)
    _shut_down([run])
    assert run.cancelled == []  # already over: nothing to cancel
    assert run.view.sent == [SHUTDOWN]


def test_a_run_interrupted_long_before_keeps_its_record() -> None:
    run = _Run(resolved=True)
    run.ended_at = time.monotonic() - 60  # a ■ a minute ago, not the shut-down's own interrupt
    _shut_down([run])
    assert run.stop_reason == "interrupted"
    assert run.view.sent == []
