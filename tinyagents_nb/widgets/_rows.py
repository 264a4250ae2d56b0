"""``HtmlRows``: a bounded column of row widgets, one per row, resent only when their row changes.

The transcript (one row per segment) and the tool-call list (one row per call) both grow for the
whole run. Re-sending one ever-growing ``HTML`` value would cost O(total size) per update, so each
row is its own widget: a new row costs one ``comm_open`` plus one ``children`` update, a changed
row one ``value`` update, and rows beyond the bound are closed and summarised in a note.

A row is HTML (an ``HTML`` widget), or ``Markdown``: an ``Output`` widget holding one
``text/markdown`` output, which the frontend renders with its own Markdown renderer (code
highlighting, math, tables). Its classes can change without resending the text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["HtmlRows", "Markdown", "markdown_of"]


@dataclass(frozen=True, slots=True)
class Markdown:
    """A Markdown row: ``source`` must already be safe (see ``safe_markdown``); ``plain`` is its text/plain."""

    source: str
    plain: str
    classes: tuple[str, ...] = ()

    def outputs(self) -> tuple[dict[str, Any], ...]:
        data = {"text/markdown": self.source, "text/plain": self.plain}
        return ({"output_type": "display_data", "data": data, "metadata": {}},)


def markdown_of(row: Any) -> str:
    """The Markdown source an ``Output`` row shows (``""`` for an HTML row)."""
    outputs = getattr(row, "outputs", ())
    return str(outputs[0]["data"]["text/markdown"]) if outputs else ""


_NOTE_STYLE = "opacity:.7;font-size:90%;font-style:italic"


class HtmlRows:
    """A ``VBox`` of keyed ``HTML`` rows plus an "… N earlier" note.

    Args:
        noun: What a row is, for the note ("segment", "tool call").
        layout: Optional ``ipywidgets.Layout`` keyword arguments for the box.
        classes: CSS classes of the box.
    """

    def __init__(self, *, noun: str, layout: Mapping[str, str] | None = None, classes: Sequence[str] = ()) -> None:
        import ipywidgets as widgets

        self._html = widgets.HTML
        self._output = widgets.Output
        self._noun = noun
        self.note: Any = widgets.HTML(value="")
        self.box: Any = widgets.VBox(children=(), layout=widgets.Layout(**(layout or {})), _dom_classes=list(classes))
        self._rows: dict[int, Any] = {}
        self._order: tuple[int, ...] = ()
        self._dropped = 0

    def sync(self, keys: Sequence[int], changed: Mapping[int, str | Markdown], dropped: int) -> None:
        """Show ``keys`` in order; ``changed`` holds new HTML (or ``Markdown``) for new or updated rows.

        Call on the loop thread only (it writes widgets). Rows no longer in ``keys`` are closed.
        """
        order = tuple(keys)
        structure = order != self._order or (dropped > 0) != (self._dropped > 0)
        if structure:
            keep = set(order)
            for key in [key for key in self._rows if key not in keep]:
                _close_row(self._rows.pop(key))
        for key, content in changed.items():
            row = self._rows.get(key)
            if row is None:
                if key in order:
                    self._rows[key] = self._new_row(content)
                    structure = True
            elif isinstance(content, Markdown):
                _update_markdown(row, content)
            elif row.value != content:
                row.value = content
        if dropped != self._dropped:
            noun = self._noun if dropped == 1 else f"{self._noun}s"
            self.note.value = f'<div style="{_NOTE_STYLE}">… {dropped:,} earlier {noun} not shown</div>'
        if structure:
            rows = tuple(self._rows[key] for key in order if key in self._rows)
            self.box.children = ((self.note,) if dropped else ()) + rows
        self._order, self._dropped = order, dropped

    def _new_row(self, content: str | Markdown) -> Any:
        if not isinstance(content, Markdown):
            return self._html(value=content)
        row = self._output()
        _update_markdown(row, content)
        return row

    def close(self) -> None:
        """Close every row widget (their comms), the note and the box."""
        for row in self._rows.values():
            _close_row(row)
        self._rows.clear()
        self.note.close()
        self.box.close()


def _update_markdown(row: Any, content: Markdown) -> None:
    outputs = content.outputs()
    if tuple(row.outputs) != outputs:
        row.outputs = outputs
    classes = list(content.classes)
    if list(row._dom_classes) != classes:
        row._dom_classes = classes


def _close_row(row: Any) -> None:
    """Close a row and the ``Layout``/style widgets it created (each is a live comm)."""
    layout, style = row.layout, getattr(row, "style", None)
    row.close()
    layout.close()
    if style is not None:
        style.close()
