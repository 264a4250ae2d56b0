"""Headless execution (nbclient, nbconvert, papermill, nbval): where a late record can still land.

A run's record replaces its dashboard through an ``update_display_data`` sent when the run ends.
JupyterLab routes that message to every output that showed the ``display_id``, whenever it comes.
A headless executor does not: nbclient reads only the IOPub messages whose parent is the cell it is
executing (it then applies a display update to any earlier cell that showed the id), and after the
last cell it shuts the kernel down. So under such an executor a ``--background`` cell waits for its
run (``AgentMagics.headless_background = "wait"``, the default), or, when the notebook keeps it in
the background to control it from later cells (``"keep"``), its record is sent as part of whichever
cell is executing when the run ends (``RecordRelay``), or of the next one to start.

How the kernel knows: the execute request says whether its frontend can answer ``input()``
(``allow_stdin``): JupyterLab, Notebook and VS Code set it, nbclient (so nbconvert and papermill) and
nbval clear it. Outside a kernel (plain IPython) the terminal itself is live and nothing changes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ._budget import frontend_can_answer

__all__ = ["FOREGROUND_NOTE", "RecordRelay", "executed_headless", "unseen_widgets"]

FOREGROUND_NOTE = "ran in the foreground: no live frontend to update this cell later"
"""The line a ``--background`` cell prints when it waits because it is executed headless."""

Send = Callable[[Any], None]
"""Sends a message with the given parent header (a cell's execute request)."""


def executed_headless(shell: Any) -> bool:
    """Whether the cell being executed came from a kernel client that keeps no live view (``allow_stdin`` off).

    Read while the cell executes: it describes the current execute request, not the kernel.
    """
    return getattr(shell, "kernel", None) is not None and not frontend_can_answer(shell)


class RecordRelay:
    """Sends late messages (records of headless background runs) as part of the cell being executed.

    ``cell_started`` and ``cell_finished`` are IPython's ``pre_run_cell`` and ``post_run_cell`` (the
    kernel's main thread); ``deliver`` is called from the session's loop thread. A send holds the lock,
    so a cell cannot finish (and the kernel report it idle) between choosing its parent and sending:
    the message always precedes that cell's idle status on IOPub, where nbclient still reads it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parent: Any = None
        self._depth = 0  # a cell may run cells (``%run``, ``run_cell``): the outermost one decides
        self._pending: list[Send] = []

    @property
    def pending(self) -> int:
        """Messages waiting for the next cell to start."""
        with self._lock:
            return len(self._pending)

    def cell_started(self, parent: Any) -> None:
        """A cell started executing under ``parent``; messages that waited for one are sent now."""
        with self._lock:
            nested = self._depth > 0 and _msg_id(parent) == _msg_id(self._parent)
            self._depth = self._depth + 1 if nested else 1  # a new request: whatever ran before is over
            if nested:
                return
            self._parent = parent
            pending, self._pending = self._pending, []
            for send in pending:
                send(parent)

    def cell_finished(self) -> None:
        with self._lock:
            self._depth = max(0, self._depth - 1)
            if self._depth == 0:
                self._parent = None

    def deliver(self, send: Send) -> None:
        """``send(parent)`` with the executing cell's parent now, or with the next cell's when it starts."""
        with self._lock:
            if self._parent is None:
                self._pending.append(send)
            else:
                send(self._parent)


def _msg_id(parent: Any) -> Any:
    header = parent.get("header", {}) if isinstance(parent, dict) else {}
    return header.get("msg_id")


# ---------------------------------------------------------------------- no widgets nobody can see
_UNSEEN: ContextVar[bool] = ContextVar("tinyagents_unseen_widgets", default=False)


def _comm_factory(original: Callable[..., Any]) -> Callable[..., Any]:
    def create_comm(*args: Any, **kwargs: Any) -> Any:
        if _UNSEEN.get():
            import comm

            return comm.DummyComm(*args, **kwargs)  # its messages go nowhere
        return original(*args, **kwargs)

    create_comm.tinyagents = True  # type: ignore[attr-defined]
    return create_comm


@contextmanager
def unseen_widgets(active: bool) -> Iterator[None]:
    """While inside (and in every task started inside), widgets get comms that send nothing.

    A headless executor (nbclient, so nbconvert, papermill, nbval) stores the state of every
    widget whose messages it sees in the saved notebook, closed or not: about 68 KB per run of
    dashboards nobody could look at, already replaced by records. The run's tasks inherit this
    context (a task copies the context it is created in), so rows the dashboard adds later stay
    unseen too. Other cells' widgets are unaffected.
    """
    if not active:
        yield
        return
    import comm

    if not getattr(comm.create_comm, "tinyagents", False):
        comm.create_comm = _comm_factory(comm.create_comm)
    token = _UNSEEN.set(True)
    try:
        yield
    finally:
        _UNSEEN.reset(token)
