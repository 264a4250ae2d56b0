"""■ while the kernel is idle: cancel the active background runs instead of doing nothing.

ipykernel ignores SIGINT between requests: it installs Python's default handler for the length of
each request (``pre_handler_hook``) and afterwards restores the handler it saved,
``kernel.saved_sigint_handler`` (``SIG_IGN`` at start). Replacing that saved handler, during the
cell that loads the extension, makes ours the idle-time handler from then on; a running cell still
gets ``KeyboardInterrupt`` as usual. The handler only schedules the work on the session's loop
(a signal handler must not take locks the interrupted code may hold).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType
from typing import Any

from ._session import NotebookSession

__all__ = ["install_idle_interrupt", "uninstall_idle_interrupt"]

_ATTR = "saved_sigint_handler"


class _IdleInterrupt:
    def __init__(self, previous: Any, session: Callable[[], NotebookSession]) -> None:
        self.previous = previous
        self._session = session

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        session = self._session()
        if any(r.mode == "background" for r in session.active_runs()):
            session.loop.call_soon(session.interrupt_background)
        elif callable(self.previous):
            self.previous(signum, frame)


def install_idle_interrupt(shell: Any, session: Callable[[], NotebookSession]) -> bool:
    """Make ■ on an idle kernel cancel background runs; returns whether this kernel allows it."""
    kernel = getattr(shell, "kernel", None)
    if kernel is None or not hasattr(kernel, _ATTR):
        return False
    current = getattr(kernel, _ATTR)
    if not isinstance(current, _IdleInterrupt):
        setattr(kernel, _ATTR, _IdleInterrupt(current, session))
    return True


def uninstall_idle_interrupt(shell: Any) -> None:
    """Put back the handler ipykernel had before ``install_idle_interrupt``."""
    kernel = getattr(shell, "kernel", None)
    current: Any = getattr(kernel, _ATTR, None)
    if isinstance(current, _IdleInterrupt):
        previous = current.previous
        setattr(kernel, _ATTR, previous)
        if signal.getsignal(signal.SIGINT) is current:
            try:
                signal.signal(signal.SIGINT, previous)
            except ValueError:  # not the main thread
                pass
