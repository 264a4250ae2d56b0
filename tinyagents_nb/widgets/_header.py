"""The run header: title, status, model, run id, elapsed time, counts, and the error of a failed run.

``RunState`` is the plain record the event listener and the run's done-callback fill in; the
header renders it. A failed background run's error (type, message and the harness's one-line
hint) stays in the header, since nobody else may ever await that run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from tinyagents_nb.harness import AgentRun

from ._format import STATUS_COLOURS, esc, format_duration, plural, truncate

__all__ = ["RunHeader", "RunState"]

_ERROR_CHARS: Final = 1_000
_ERROR_STYLE: Final = (
    "margin-top:4px;padding:6px 8px;border-left:3px solid #cf222e;background:rgba(207,34,46,.08);"
    "white-space:pre-wrap;word-break:break-word"
)


@dataclass(slots=True, kw_only=True)
class RunState:
    """What the dashboard knows about its run (plain values; guarded by the dashboard's lock).

    Attributes:
        terminal: ``completed``, ``failed`` or ``cancelled`` once the run ended.
        finished: The run's task is done and its result has been read.
        error: The exception that ended a failed run (from its result).
        error_text: The ``run.failed`` event's text, shown until the result arrives.
    """

    run_id: str
    title: str
    model: str | None = None
    started: float | None = None
    ended: float | None = None
    terminal: str | None = None
    finished: bool = False
    error: BaseException | None = None
    error_text: str | None = None
    cancel_reason: str | None = None
    result: AgentRun | None = None
    model_calls: int = 0
    tool_calls: int = 0


class RunHeader:
    """An ``HTML`` line with the run's vital signs, plus an error box when it failed."""

    def __init__(self) -> None:
        import ipywidgets as widgets

        self.widget: Any = widgets.HTML(value="")

    def render(self, state: RunState, *, status: str, now: float, notice: str | None = None) -> None:
        """Write the header if its text changed (elapsed is in whole seconds while running)."""
        html = header_html(state, status=status, now=now, notice=notice)
        if html != self.widget.value:
            self.widget.value = html


def header_html(state: RunState, *, status: str, now: float, notice: str | None = None) -> str:
    colour = STATUS_COLOURS.get(status, "inherit")
    facts = [
        f"<b>{esc(state.title)}</b>",
        f'<span style="color:{colour};font-weight:600">● {esc(status)}</span>',
        f"model <code>{esc(state.model or '?')}</code>",
        f'<span style="opacity:.7">run <code>{esc(state.run_id)}</code></span>',
    ]
    if state.started is not None:
        end = state.ended if state.ended is not None else now
        facts.append(format_duration(end - state.started, precise=state.ended is not None))
    facts.append(f"{plural(state.model_calls, 'model call')} · {plural(state.tool_calls, 'tool call')}")
    html = '<div style="display:flex;flex-wrap:wrap;gap:.9em;align-items:baseline">'
    html += "".join(f"<span>{fact}</span>" for fact in facts) + "</div>"
    if state.terminal == "failed":
        html += _error_box(state)
    elif state.terminal == "cancelled" and state.cancel_reason:
        html += f'<div style="opacity:.8">cancelled: {esc(state.cancel_reason)}</div>'
    if notice:
        html += f'<div style="color:{STATUS_COLOURS["pausing"]}">{esc(notice)}</div>'
    return html


def _error_box(state: RunState) -> str:
    error = state.error
    if error is None:
        text = state.error_text or "the run failed"
        return f'<div style="{_ERROR_STYLE}">{esc(truncate(text, _ERROR_CHARS))}</div>'
    message = truncate(str(error), _ERROR_CHARS)
    html = f"<b>{esc(type(error).__name__)}</b>: {esc(message)}"
    hint = getattr(error, "hint", None)
    if hint:
        html += f'<br><span style="opacity:.85">hint: {esc(hint)}</span>'
    return f'<div style="{_ERROR_STYLE}">{html}</div>'
