"""``RunLog``: what a run did that its messages do not say, for the dashboard and the end-of-run record.

A run's messages hold its text and tool calls, but not which code step of an RLM raised or was cut,
who approved a gated call (or that nobody could and it was denied unattended), or which guardrail or
budget stopped it. The event router keeps those here, as plain state, for the run's tree; the
dashboard shows them live and the magics' static record reads them once the run ended. Every text
below is deterministic for a given run (no ids, no timings), so a saved notebook compares stably.

Code and output are untrusted (the model wrote the code; the code wrote the output): they only ever
go into fenced blocks whose fence is longer than any backtick run inside, so a renderer shows them
literally, and every other character this module writes is escaped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Final

from ._format import esc, format_duration, format_usd, truncate
from ._safe_markdown import safe_markdown

__all__ = ["Alert", "CodeStep", "Decision", "RunLog", "alert_for_guardrail", "alert_for_limit"]

_TICKS: Final = re.compile(r"`+")
_LIMIT_ERRORS: Final = ("Exceeded", "Timeout")  # LimitExceeded, BudgetExceeded, RunTimeout and their kin
_LIMIT_LABELS: Final = {
    "cost_usd": "cost budget",
    "total_tokens": "token budget",
    "input_tokens_per_request": "input tokens per request",
    "model_calls": "model calls",
    "tool_calls": "tool calls",
    "wall_clock": "time limit",
    "depth": "sub-agent depth",
    "rlm_iterations": "RLM iterations",
    "rlm_block_timeout": "RLM code block time",
    "rlm_sub_queries": "RLM sub-queries",
    "rlm_consecutive_errors": "RLM consecutive errors",
}


def _fence(text: str) -> str:
    """A backtick fence longer than any backtick run in ``text`` (so nothing inside can close it)."""
    return "`" * max(3, max((len(run) for run in _TICKS.findall(text)), default=0) + 1)


def fenced(text: str, info: str = "") -> str:
    """``text`` in a backtick fence longer than any backtick run in it, made safe as Markdown."""
    fence = _fence(text)
    return safe_markdown(f"{fence}{info}\n{text.rstrip(chr(10))}\n{fence}\n").rstrip("\n")


@dataclass(slots=True, kw_only=True)
class CodeStep:
    """One code block of an RLM run: its code, then (once it ran) its output and how it ended."""

    run_id: str
    call_id: str
    iteration: int
    index: int
    code: str
    caption: str = ""
    output: str | None = None
    """``None`` while the block runs."""
    error_type: str | None = None
    truncated: bool = False
    duration_s: float | None = None

    @property
    def title(self) -> str:
        return f"step {self.iteration}" + (f" · block {self.index + 1}" if self.index else "")

    def status(self) -> str:
        """``running``, ``ok`` or the error's type name."""
        if self.output is None:
            return "running"
        return self.error_type or "ok"

    def markdown(self, *, output_chars: int, timing: bool = False, collapse_code: bool = True) -> str:
        """The step as Markdown: a heading line, the code, the output under it.

        ``collapse_code``: the code goes in a collapsed block, for a view that shows the reply carrying
        it just above (the live transcript); the end-of-run record cuts it out of the reply instead.
        """
        status = self.status()
        mark = {"running": "⋯ running", "ok": "✓"}.get(status, f"✗ {status}")
        facts = [f"<b>{esc(self.title)}</b>", esc(mark)]
        if timing and self.duration_s is not None:
            facts.append(format_duration(self.duration_s))
        who = f"{esc(self.caption)} · " if self.caption else ""
        parts = [f'<div class="ta-step">{who}{" · ".join(facts)}</div>']
        if collapse_code:
            lines = self.code.count("\n") + 1
            summary = f"<details><summary>code · {lines:,} line{'s' if lines != 1 else ''}</summary>"
            parts += [summary, fenced(self.code, "python"), "</details>"]
        else:
            parts.append(fenced(self.code, "python"))
        if self.output is not None:
            shown = truncate(self.output, output_chars)
            parts.append(fenced(shown, "text") if shown.strip() else "*(no output)*")
            if self.truncated or shown != self.output:
                parts.append("*output cut to fit: the model saw the same cut*" if self.truncated else "*output cut*")
        return "\n\n".join(parts)

    def plain(self, *, output_chars: int, code: bool = False) -> str:
        """The step as text: heading, the code if ``code`` (else it is in the reply just above), ``→`` and the output."""
        status = self.status()
        mark = {"running": "running", "ok": "ok"}.get(status, f"error: {status}")
        who = f"{self.caption} · " if self.caption else ""
        lines = [f"{who}{self.title} ({mark})"]
        if code:
            fence = _fence(self.code)
            lines += [f"{fence}python", self.code.rstrip("\n"), fence]
        if self.output is not None:
            shown = truncate(self.output, output_chars).rstrip("\n") or "(no output)"
            lines += [f"  → {line}" for line in shown.splitlines()]
            if self.truncated:
                lines.append("  (output cut to fit)")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """How an approval-gated tool call was decided (``approval.decided``)."""

    run_id: str
    call_id: str
    tool_name: str
    approved: bool
    decided_by: str
    decider: str | None = None
    reason: str | None = None
    edited: bool = False
    caption: str = ""
    rerun: bool = False
    """About a call an interruption cut off (a resumed run's **Run again** / **Skip** card)."""

    def text(self) -> str:
        """``✓ approved send_email (by alice)``, ``✗ denied wipe (unattended: …)``, ``✓ ran charge again (by dashboard)``."""
        verb = "approved" if self.approved else "withdrawn" if self.decided_by == "withdrawn" else "denied"
        if self.rerun and verb != "withdrawn":
            verb = "ran again:" if self.approved else "skipped:"
        mark = "✓" if self.approved else "✗"
        edited = " with edited arguments" if self.edited else ""
        reason = " ".join((self.reason or "").split())
        if self.decided_by == "person":
            why = f"by {self.decider or 'a person'}" + (f": {reason}" if reason else "")
        elif self.decided_by == "unattended":
            why = f"unattended: {reason or 'nobody could answer'}"
        elif self.decided_by == "policy":
            why = "policy: " + (reason or "the tool's approval rule")
        else:
            why = reason or self.decided_by
        who = f"{self.caption} · " if self.caption else ""
        return f"{who}{mark} {verb} {self.tool_name}{edited} ({why})"


@dataclass(slots=True, kw_only=True)
class Alert:
    """A guardrail that tripped or a limit that was reached, with why when known."""

    run_id: str
    kind: str
    """``guardrail`` or ``limit``."""
    what: str
    why: str = ""
    caption: str = ""

    def text(self) -> str:
        who = f"{self.caption} · " if self.caption else ""
        return f"{who}⛔ {self.what}" + (f": {self.why}" if self.why else "")


def alert_for_guardrail(event: Any, caption: str) -> Alert:
    """From a ``guardrail.tripped`` event: which guardrail, where, and what it did."""
    where = f"the {str(event.stage).replace('_', ' ')}"
    if event.tool_name:
        where += f" of `{event.tool_name}`"
    action = "withheld the result" if event.action == "rejected" else "stopped the run"
    what = f"guardrail {event.guardrail!r} tripped on {where} ({action})"
    return Alert(
        run_id=event.run_id, kind="guardrail", what=what, why=" ".join(str(event.reason).split()), caption=caption
    )


def alert_for_limit(event: Any, caption: str) -> Alert:
    """From a ``limit.reached`` event: which limit and its cap (the why comes with the run's error)."""
    limit = str(getattr(event.limit, "value", event.limit))
    label = _LIMIT_LABELS.get(limit, limit.replace("_", " "))
    maximum = event.maximum
    cap = ""
    if maximum is not None:
        cap = (
            f" of {format_usd(Decimal(str(maximum)))}"  # one money format, as in the next line's error
            if limit == "cost_usd"
            else f" of {maximum:,g}" + (" s" if limit == "wall_clock" else "")
        )
    return Alert(run_id=event.run_id, kind="limit", what=f"limit reached: {label}{cap} ({limit})", caption=caption)


class RunLog:
    """Code steps, approval decisions and alerts of one run's tree, oldest first, each bounded.

    Plain state, filled by the router under the dashboard's lock; read ``snapshot()`` from elsewhere.

    Args:
        max_items: How many of each to keep (the oldest go first; dropped steps are counted in ``dropped_steps``).
    """

    def __init__(self, *, max_items: int) -> None:
        self.steps: dict[tuple[str, str, int], CodeStep] = {}
        self.decisions: list[Decision] = []
        self.alerts: list[Alert] = []
        self.dropped_steps = 0
        self._max = max_items

    def add_code(self, event: Any, caption: str) -> CodeStep:
        step = CodeStep(
            run_id=event.run_id,
            call_id=event.call_id,
            iteration=event.iteration,
            index=event.index,
            code=str(event.code),
            caption=caption,
        )
        self.steps[(step.run_id, step.call_id, step.index)] = step
        while len(self.steps) > self._max:
            del self.steps[next(iter(self.steps))]
            self.dropped_steps += 1
        return step

    def add_output(self, event: Any) -> CodeStep | None:
        step = self.steps.get((event.run_id, event.call_id, event.index))
        if step is not None:
            step.output = str(event.output)
            step.error_type = event.error_type
            step.truncated = bool(event.truncated)
            step.duration_s = float(event.duration_s)
        return step

    def end_call(self, run_id: str, call_id: str, error_type: str, duration_s: float) -> list[CodeStep]:
        """The call running these steps ended without their output (a Stop, a crash): say so on each."""
        ended = [
            step
            for (run, call, _), step in self.steps.items()
            if run == run_id and call == call_id and step.output is None
        ]
        for step in ended:
            step.output, step.error_type, step.duration_s = "", error_type, duration_s
        return ended

    def add_decision(self, event: Any, caption: str) -> Decision:
        decision = Decision(
            run_id=event.run_id,
            call_id=event.call_id,
            tool_name=event.tool_name,
            approved=event.approved,
            decided_by=event.decided_by,
            decider=event.decider,
            reason=event.reason,
            edited=event.edited,
            caption=caption,
            rerun=bool(getattr(event, "rerun", False)),
        )
        self.decisions = [*self.decisions[-(self._max - 1) :], decision] if self._max > 1 else [decision]
        return decision

    def add_alert(self, alert: Alert) -> None:
        self.alerts = [*self.alerts[-(self._max - 1) :], alert] if self._max > 1 else [alert]

    def explain(self, run_id: str, error_type: str, error: str) -> Alert | None:
        """A run failed: give its latest unexplained limit alert the error's text as its why."""
        for alert in reversed(self.alerts):
            if (
                alert.run_id == run_id
                and alert.kind == "limit"
                and not alert.why
                and error_type.endswith(_LIMIT_ERRORS)
            ):
                alert.why = " ".join(error.removeprefix("limit exceeded: ").split())
                return alert
        return None

    def snapshot(self) -> tuple[list[CodeStep], list[Decision], list[Alert]]:
        """Copies (call under the dashboard's lock, or once the run ended)."""
        return [replace(s) for s in self.steps.values()], list(self.decisions), [replace(a) for a in self.alerts]
