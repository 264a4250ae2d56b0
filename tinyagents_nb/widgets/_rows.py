"""``HtmlRows``: a bounded column of ``HTML`` widgets, one per row, resent only when their row changes.

The transcript (one row per segment) and the tool-call list (one row per call) both grow for the
whole run. Re-sending one ever-growing ``HTML`` value would cost O(total size) per update, so each
row is its own widget: a new row costs one ``comm_open`` plus one ``children`` update, a changed
row one ``value`` update, and rows beyond the bound are closed and summarised in a note.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["HtmlRows"]

_NOTE_STYLE = "opacity:.7;font-size:90%;font-style:italic"


class HtmlRows:
    """A ``VBox`` of keyed ``HTML`` rows plus an "… N earlier" note.

    Args:
        noun: What a row is, for the note ("segment", "tool call").
        layout: Optional ``ipywidgets.Layout`` keyword arguments for the box.
    """

    def __init__(self, *, noun: str, layout: Mapping[str, str] | None = None) -> None:
        import ipywidgets as widgets

        self._html = widgets.HTML
        self._noun = noun
        self.note: Any = widgets.HTML(value="")
        self.box: Any = widgets.VBox(children=(), layout=widgets.Layout(**(layout or {})))
        self._rows: dict[int, Any] = {}
        self._order: tuple[int, ...] = ()
        self._dropped = 0

    def sync(self, keys: Sequence[int], changed: Mapping[int, str], dropped: int) -> None:
        """Show ``keys`` in order; ``changed`` holds new HTML for new or updated rows.

        Call on the loop thread only (it writes widgets). Rows no longer in ``keys`` are closed.
        """
        order = tuple(keys)
        structure = order != self._order or (dropped > 0) != (self._dropped > 0)
        if structure:
            keep = set(order)
            for key in [key for key in self._rows if key not in keep]:
                _close_row(self._rows.pop(key))
        for key, html in changed.items():
            row = self._rows.get(key)
            if row is None:
                if key in order:
                    self._rows[key] = self._html(value=html)
                    structure = True
            elif row.value != html:
                row.value = html
        if dropped != self._dropped:
            noun = self._noun if dropped == 1 else f"{self._noun}s"
            self.note.value = f'<div style="{_NOTE_STYLE}">… {dropped:,} earlier {noun} not shown</div>'
        if structure:
            rows = tuple(self._rows[key] for key in order if key in self._rows)
            self.box.children = ((self.note,) if dropped else ()) + rows
        self._order, self._dropped = order, dropped

    def close(self) -> None:
        """Close every row widget (their comms), the note and the box."""
        for row in self._rows.values():
            _close_row(row)
        self._rows.clear()
        self.note.close()
        self.box.close()


def _close_row(row: Any) -> None:
    """Close an ``HTML`` row and the ``Layout``/``HTMLStyle`` widgets it created (each is a live comm)."""
    layout, style = row.layout, row.style
    row.close()
    layout.close()
    style.close()
