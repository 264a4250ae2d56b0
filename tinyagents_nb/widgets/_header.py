"""The run header: title, status, model, elapsed time, counts, tokens and USD, and a failed run's error.

``RunState`` is the plain record the event listener and the run's done-callback fill in; the
header renders it. A failed background run's error (type, message and the harness's one-line
hint) stays in the header, since nobody else may ever await that run.

A stopped run may have streamed text that no provider reported usage for: the header then shows
the interrupted call and an *estimate* of its tokens, labelled as one, and the cost as unknown
(a real provider bills those tokens), never "0 model calls · $0". While the run is live, a hidden
twin of the status says the kernel is gone; the stylesheet shows it instead when ipywidgets marks
the view disconnected (a kernel restart), so a dashboard never claims a run that no longer exists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from tinyagents_nb.harness import AgentRun

from ._format import esc, format_duration, format_int, format_usd, plural, truncate
from ._runlog import Alert
from ._style import status_class

__all__ = ["Notice", "RunHeader", "RunState", "Totals"]

_ERROR_CHARS: Final = 1_000
_GONE: Final = "● not running: the kernel restarted or disconnected (the run is lost)"


@dataclass(frozen=True, slots=True)
class Totals:
    """Billed tokens and USD of the run's tree, plus what a stop interrupted (estimated)."""

    tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usd: Decimal | None = Decimal(0)
    interrupted_calls: int = 0
    estimated_tokens: int = 0
    estimated: bool = False
    """Part of ``tokens``/``usd`` is the harness's estimate (a stream without usage, a stopped call)."""


@dataclass(frozen=True, slots=True)
class Notice:
    """A line under the header: ``info`` (an acknowledgement) or ``warn`` (a refused command)."""

    text: str
    tone: str = "info"


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
    """Finished model calls of the tree."""
    tool_calls: int = 0
    code_steps: int = 0
    """An RLM run's code-running calls (not counted as tool calls)."""
    live_calls: set[tuple[str, str]] = field(default_factory=set)
    """Model calls started, by ``(run_id, call_id)``: the header counts them while the run is live."""
    steers_delivered: int = 0
    alert: Alert | None = None
    """The latest guardrail trip or limit reached in the run's tree (shown under the header)."""


class RunHeader:
    """An ``HTML`` line with the run's vital signs, plus an error box when it failed."""

    def __init__(self) -> None:
        import ipywidgets as widgets

        self.widget: Any = widgets.HTML(value="")

    def render(
        self, state: RunState, *, status: str, now: float, totals: Totals = Totals(), notice: Notice | None = None
    ) -> None:
        """Write the header if its text changed (elapsed is in whole seconds while running)."""
        html = header_html(state, status=status, now=now, totals=totals, notice=notice)
        if html != self.widget.value:
            self.widget.value = html


def usage_text(model_calls: int, tool_calls: int, totals: Totals, *, code_steps: int = 0) -> str:
    """``2 model calls · 1 tool call · 1,234 tokens · $0.000409``, with a stopped call's estimate."""
    parts = [plural(model_calls, "model call")]
    if totals.interrupted_calls:
        parts[0] += f" + {totals.interrupted_calls:,} interrupted"
    parts.append(plural(tool_calls, "tool call"))
    if code_steps:
        parts.append(plural(code_steps, "code step"))
    if not (totals.tokens or totals.estimated_tokens or totals.interrupted_calls or totals.usd):
        return " · ".join(parts)  # nothing billed yet: no "0 tokens · $0.00" that reads like a fact
    approx = "~" if totals.estimated else ""
    parts.append(f"{approx}{format_int(totals.tokens)} tokens" + (" (estimated)" if totals.estimated else ""))
    if totals.estimated_tokens:
        parts[-1] += f" + ~{format_int(totals.estimated_tokens)} streamed (estimate)"
    if totals.usd is None or (totals.interrupted_calls and not totals.estimated):
        parts.append("cost unknown")
    else:
        parts.append(approx + format_usd(totals.usd) + (" (estimated)" if totals.estimated else ""))
    return " · ".join(parts)


def header_html(
    state: RunState, *, status: str, now: float, totals: Totals = Totals(), notice: Notice | None = None
) -> str:
    live = state.terminal is None
    status_html = f'<span class="ta-status {status_class(status)}">● {esc(status)}</span>'
    if live:
        status_html = f'<span class="ta-live">{status_html}</span><span class="ta-gone ta-status">{_GONE}</span>'
    facts = [
        f"<b>{esc(state.title)}</b>",
        status_html,
        f"model <code>{esc(state.model or '?')}</code>",
    ]
    if state.started is not None:
        end = state.ended if state.ended is not None else now
        facts.append(format_duration(end - state.started, precise=state.ended is not None))
    calls = state.model_calls if state.terminal is not None else max(state.model_calls, len(state.live_calls))
    facts.append(usage_text(calls, state.tool_calls, totals, code_steps=state.code_steps))
    html = f'<div class="ta-head" title="run {esc(state.run_id)}">'
    html += "".join(f"<span>{fact}</span>" for fact in facts) + "</div>"
    if state.terminal == "failed":
        html += _error_box(state)
    elif state.terminal == "cancelled" and state.cancel_reason:
        html += f'<div class="ta-dim">cancelled: {esc(state.cancel_reason)}</div>'
    if state.alert is not None:
        alert = state.alert  # a failed run's error box above already says why
        text = f"⛔ {alert.what}" if state.terminal == "failed" and alert.run_id == state.run_id else alert.text()
        html += f'<div class="ta-notice ta-tone-warn">{esc(text)}</div>'
    if notice is not None:
        tone = "ta-tone-warn" if notice.tone == "warn" else "ta-dim"
        html += f'<div class="ta-notice {tone}">{esc(notice.text)}</div>'
    return html


def _error_box(state: RunState) -> str:
    error = state.error
    if error is None:
        text = state.error_text or "the run failed"
        return f'<div class="ta-error">{esc(truncate(text, _ERROR_CHARS))}</div>'
    message = truncate(str(error), _ERROR_CHARS)
    html = f"<b>{esc(type(error).__name__)}</b>: {esc(message)}"
    hint = getattr(error, "hint", None)
    if hint:
        html += f'<br><span style="opacity:.85">hint: {esc(hint)}</span>'
    return f'<div class="ta-error">{html}</div>'
