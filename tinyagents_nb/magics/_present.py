"""Show a run in its cell and start it: the dashboard, the cell's view of it, then the session's loop.

Shared by ``%%agent`` cells and ``%agent resume``, so a resumed run is shown, controlled and waited
for exactly as a cell's run is (its Stop, its approval cards, its record replacing the dashboard).
"""

from __future__ import annotations

import sys
from typing import Any, Protocol

from tinyagents_nb.widgets import RunDashboard

from ._handle import NotebookRun, RunMode
from ._headless import FOREGROUND_NOTE, RecordRelay, executed_headless, unseen_widgets
from ._output import CellView
from ._session import NotebookSession
from ._waiting import UNREACHABLE, Delivery

__all__ = ["Presenter", "present"]


class Presenter(Protocol):
    """What ``present`` reads of ``AgentMagics``."""

    throttle_hz: float
    relay: RecordRelay

    @property
    def shell(self) -> Any: ...


def present(
    host: Presenter,
    session: NotebookSession,
    run: NotebookRun,
    *,
    mode: RunMode,
    delivery: Delivery,
    title: str | None,
    foreground: bool = False,
) -> None:
    """Make ``run``'s dashboard, show it in the cell and start the run (queued behind its thread's)."""
    headless = executed_headless(host.shell)
    with unseen_widgets(headless):  # the dashboard and the run's tasks: no widget state in a headless file
        dashboard = RunDashboard(run.stream, title=title, model=run.model, throttle_hz=host.throttle_hz)
        run.dashboard = dashboard
        after = session.predecessor(run)
        if after is not None:
            dashboard.queued = f"queued behind run {after.label} on this thread"
        if mode == "waiting" and delivery == "none":
            dashboard.controls.unreachable = UNREACHABLE
        dashboard.flush()
        late = mode == "background" and headless  # its record may come after the cell
        view = CellView(run, host.shell, relay=host.relay if late else None, widget=not headless)
        run.view = view
        if foreground:
            print(FOREGROUND_NOTE)
        sys.stdout.flush()  # earlier lines of this cell stay above the dashboard
        view.show()
        session.start(run, mode=mode)
