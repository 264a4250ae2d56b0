"""``CellView``: shows a run in the cell that started it, from whichever thread the run ends on.

The cell displays the live dashboard under a ``display_id``; when the run ends (on the session's
loop thread, maybe long after the cell returned) that same output is replaced by the run's static
record. IPython's display machinery addresses the *current* cell, which on another thread or later
is the wrong one (ipykernel 6 keeps one global parent), so in a kernel the messages are sent with
the starting cell's parent header captured at display time. Without a kernel (plain IPython) the
shell's own display publisher is used. A background run started headless gives its record to a
``RecordRelay`` instead, which sends it as part of the cell executing when it ends (see ``_headless``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from IPython.display import publish_display_data as _publish_display_data

from ._handle import NotebookRun
from ._headless import RecordRelay
from ._record import live_text, record_bundle

__all__ = ["CellView"]

publish_display_data: Callable[..., None] = _publish_display_data  # untyped in IPython
_WIDGET = "application/vnd.jupyter.widget-view+json"


class CellView:
    """The run's place in its cell: the live dashboard first, the record once the run ended.

    Args:
        run: The run to show.
        shell: The IPython shell running the cell (its ``kernel``, when there is one, is used).
        relay: Sends the record when the run ends after its cell, for a headless executor to apply.
        widget: Whether the live bundle holds the dashboard's view (not when no frontend can show it).
    """

    def __init__(self, run: NotebookRun, shell: Any, *, relay: RecordRelay | None = None, widget: bool = True) -> None:
        self.run = run
        self._widget = widget
        self.display_id = f"tinyagents-{run.run_id}"
        kernel: Any = getattr(shell, "kernel", None)
        ready = all(hasattr(kernel, a) for a in ("session", "iopub_socket", "get_parent"))
        self._kernel: Any = kernel if ready else None
        self._parent: Any = kernel.get_parent() if ready else None
        self._relay = relay if ready else None
        self._lock = threading.Lock()
        self.record_shown = False
        self._live_note = ""

    # ------------------------------------------------------------------ bundles
    def live_bundle(self) -> dict[str, Any]:
        """The widget view plus a ``text/plain`` that never claims the run is running."""
        data: dict[str, Any] = {}
        dashboard = self.run.dashboard
        if dashboard is not None and self._widget:  # it says itself when its kernel is gone (widgets' stylesheet)
            widget = dashboard.widget._repr_mimebundle_() or {}
            if _WIDGET in widget:
                data[_WIDGET] = widget[_WIDGET]
        data["text/plain"] = live_text(self.run) + (f"\n{self._live_note}" if self._live_note else "")
        return data

    def bundle(self) -> dict[str, Any]:
        ended = self.run.outcome is not None or self.run.crash is not None
        return record_bundle(self.run) if ended else self.live_bundle()

    # ------------------------------------------------------------------ publishing (any thread)
    def show(self) -> None:
        """Display the live dashboard (on the cell's thread, while it runs)."""
        self._publish(self.live_bundle(), update=False)

    def ended(self) -> None:
        """Replace the live dashboard by the record (once)."""
        with self._lock:  # held while sending: a late ``transient`` update never lands after the record
            if self.record_shown:
                return
            self.record_shown = True
            self._publish(record_bundle(self.run), update=True)

    def show_record_again(self) -> None:
        """Send the record again (its reason changed: the kernel shut down right after ■ stopped the run)."""
        with self._lock:
            if self.record_shown:
                self._publish(record_bundle(self.run), update=True)

    def transient(self, text: str) -> None:
        """A line that holds only while the run is live (what ■ did): its record replaces it.

        The dashboard shows it under its header; without a visible widget (headless) the live
        bundle's ``text/plain`` carries it. Either way it is part of the output the record takes
        over, so the saved cell never keeps "stopping the run" below a record that says it stopped.
        """
        dashboard = self.run.dashboard
        if dashboard is not None:
            dashboard.note(text)
        if self._kernel is None:
            print(text)
            return
        if self._widget and dashboard is not None:
            return
        with self._lock:
            if self.record_shown:
                return
            self._live_note = text
            self._publish(self.live_bundle(), update=True)

    def note(self, text: str) -> None:
        """A line of text in the run's cell (e.g. why a kernel interrupt stopped it)."""
        if self._kernel is None:
            print(text)
            return
        self._send("stream", {"name": "stdout", "text": text.rstrip("\n") + "\n"}, topic=b"stream.stdout")

    def _publish(self, data: dict[str, Any], *, update: bool) -> None:
        transient = {"display_id": self.display_id}
        if self._kernel is None:
            publish_display_data(data, transient=transient, update=update)
            return
        kind = "update_display_data" if update else "display_data"
        content = {"data": data, "metadata": {}, "transient": transient}
        if update and self._relay is not None:
            self._relay.deliver(lambda parent: self._send(kind, content, topic=b"display_data", parent=parent))
            return
        self._send(kind, content, topic=b"display_data")

    def _send(self, kind: str, content: dict[str, Any], *, topic: bytes, parent: Any = None) -> None:
        kernel = self._kernel
        parent = self._parent if parent is None else parent
        kernel.session.send(kernel.iopub_socket, kind, content, parent=parent, ident=topic)
