"""The context-window gauge: prompt estimate against the usable window, and the pressure chain's marks.

The run keeps ``RunContext.context_window`` current (its estimate is refreshed before every model
call); the gauge reads it at flush time and colours the bar by pressure. Each ``context.pressure``
event (the chain trimmed, summarised or gave up) becomes a mark, so a user can see *why* the
prompt shrank.

A turn that failed with ``ContextLimitError`` never got a window estimate published, so the gauge
takes the numbers from the error: the request that did not fit, as a full red bar. With no window
known at all (a model whose profile has no size), the gauge is hidden rather than shown empty.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Final

from tinyagents_nb.harness import ContextLimitError, ContextWindow

from ._format import esc, format_int, plural

__all__ = ["ContextGauge", "bar_style_for"]

_WARNING_AT: Final = 0.60
_DANGER_AT: Final = 0.85
_NO_WINDOW: Final = "no window configured"


def bar_style_for(utilization: float) -> str:
    """``success`` below 60 %, ``warning`` below 85 %, ``danger`` from 85 % (over budget included)."""
    if utilization >= _DANGER_AT:
        return "danger"
    return "warning" if utilization >= _WARNING_AT else "success"


class ContextGauge:
    """A ``FloatProgress`` (0..1 of the usable window), its label, and the list of pressure marks.

    Args:
        max_marks: How many marks to keep (the count of older ones is still shown).
    """

    def __init__(self, *, max_marks: int) -> None:
        import ipywidgets as widgets

        self.bar: Any = widgets.FloatProgress(
            value=0.0, min=0.0, max=1.0, bar_style="", description="context", layout=widgets.Layout(width="320px")
        )
        self.label: Any = widgets.HTML(
            value=_NO_WINDOW,
            tooltip="estimated before each model call with the local token counter; "
            "the provider's billed input count (in the Cost table) may differ slightly",
        )
        self.marks_view: Any = widgets.HTML(value="")
        self.widget: Any = widgets.VBox(
            children=(widgets.HBox(children=(self.bar, self.label)), self.marks_view),
            layout=widgets.Layout(display="none"),
        )
        self.marks: deque[str] = deque(maxlen=max_marks)
        """Recent marks as text, e.g. ``"trim: 9,800 → 6,100"`` (plain state)."""
        self.mark_count = 0
        self.cache_read = 0
        """Prompt-cache tokens read by the latest model call (the provider's count; 0: none or unknown)."""
        self.cache_write = 0
        """Prompt-cache tokens the latest model call wrote."""
        self._marks_dirty = False
        self._shown: tuple[float, str, str] | None = None

    # ------------------------------------------------------------------ listener side (plain state)
    def add_mark(
        self, action: str, tokens_before: int, tokens_after: int, *, detail: str = "", caption: str = ""
    ) -> None:
        text = f"{action}: {format_int(tokens_before)} → {format_int(tokens_after)}"
        if detail:
            text += f" ({detail})"
        if caption:
            text = f"{caption} · {text}"
        self.marks.append(text)
        self.mark_count += 1
        self._marks_dirty = True

    def record_cache(self, read: int, written: int) -> None:
        """The latest model call's prompt-cache figures, shown beside the estimate."""
        self.cache_read, self.cache_write = read, written

    # ------------------------------------------------------------------ flusher side (widgets)
    def render(self, window: ContextWindow | None, failure: BaseException | None = None) -> None:
        """Show ``window``'s utilization, or the request a ``failure`` could not fit; writes only what changed."""
        if isinstance(failure, ContextLimitError) and failure.estimated_tokens and failure.limit_tokens:
            value, style = 1.0, "danger"
            text = (
                f"did not fit: the request needs {format_int(failure.estimated_tokens)} tokens, "
                f"{format_int(failure.limit_tokens)} usable"
            )
        elif window is None:
            value, style, text = 0.0, "", _NO_WINDOW
        else:
            used = window.utilization
            value, style = min(max(used, 0.0), 1.0), bar_style_for(used)
            text = (
                f"{format_int(window.estimated_prompt_tokens)} / {format_int(window.usable_tokens)} tokens ({used:.0%})"
            )
        if text != _NO_WINDOW and (self.cache_read or self.cache_write):
            text += f" · last call: {format_int(self.cache_read)} cached"
            if self.cache_write:
                text += f", {format_int(self.cache_write)} written to the cache"
        if self.mark_count:
            text += f" · {plural(self.mark_count, 'pressure action')}"
        shown = (value, style, text)
        if shown != self._shown:
            visible = text != _NO_WINDOW
            self.widget.layout.display = None if visible else "none"
            with self.bar.hold_sync():
                self.bar.value = value
                self.bar.bar_style = style
            self.label.value = esc(text)
            self._shown = shown
        if self._marks_dirty:
            self._marks_dirty = False
            older = self.mark_count - len(self.marks)
            items = "".join(f"<li>{esc(mark)}</li>" for mark in self.marks)
            note = f"<li><i>… {older:,} earlier</i></li>" if older else ""
            self.marks_view.value = f'<ul style="margin:2px 0;font-size:90%">{note}{items}</ul>'
