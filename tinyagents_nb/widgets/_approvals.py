"""Approval cards: one card per tool call waiting for a person, with Approve, Deny and a reason.

A resumed run asks about a call its interruption cut off (``ApprovalRequest.rerun``) on the same
card, worded for that choice: **Run again** or **Skip** with a note to the model.

The cards mirror the run tree's ``ApprovalDesk`` (its pending calls, read at each flush), so a call
decided elsewhere (``%agent approve``, another dashboard, a sub-agent's own handle) disappears here
too. Button callbacks may run on any thread (see ``_controls``): they only call the run handle's
thread-safe ``approve``/``deny`` and set plain fields; the flusher builds and removes widgets.
The arguments box is editable: Approve with changed JSON approves the edited arguments, which the
tool validates before the call runs (a bad edit shows its error on the card and the call waits).
"""

from __future__ import annotations

import json
from typing import Any

from tinyagents_nb.harness import AgentStream, ApprovalRequest, TinyAgentsError

from ._format import esc

__all__ = ["ApprovalCard", "ApprovalCards"]


def _pretty(arguments: Any) -> str:
    try:
        return json.dumps(arguments, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(arguments)


class ApprovalCard:
    """One pending call: its tool, editable arguments, a reason box and Approve / Deny."""

    def __init__(self, stream: AgentStream, request: ApprovalRequest) -> None:
        import ipywidgets as widgets

        self._stream = stream
        self.request = request
        self._original = _pretty(request.arguments)
        rerun = request.rerun
        ask = "Run this call again?" if rerun else "Approve tool call?"
        why = " The run was interrupted while it ran: it may already have taken effect." if rerun else ""
        self.title: Any = widgets.HTML(
            f"<b>{ask}</b> <code>{esc(request.tool_name)}</code> "
            f"<span style='opacity:.6'>({esc(request.call_id)})</span>{why}"
        )
        self.arguments: Any = widgets.Textarea(
            value=self._original, layout=widgets.Layout(width="100%", height="6em"), description=""
        )
        self.reason: Any = widgets.Text(
            value="",
            placeholder="Note to the model (on Skip)" if rerun else "Reason (told to the model on Deny)",
            layout=widgets.Layout(flex="1 1 14em", min_width="14em"),
        )
        keep = {"flex": "0 0 auto", "width": "auto", "min_width": "7.5em"}  # never squeezed to a bare ✓/✗ square
        self.approve: Any = widgets.Button(
            description="Run again" if rerun else "Approve",
            icon="redo" if rerun else "check",
            button_style="success",
            layout=widgets.Layout(**keep),
        )
        self.deny: Any = widgets.Button(
            description="Skip" if rerun else "Deny",
            icon="forward" if rerun else "times",
            button_style="warning",
            layout=widgets.Layout(**keep),
        )
        self.error: Any = widgets.HTML("")
        self.approve.on_click(self._on_approve)
        self.deny.on_click(self._on_deny)
        self.widget: Any = widgets.VBox(
            children=(
                self.title,
                self.arguments,
                widgets.HBox(  # a narrow notebook wraps the reason box under the buttons
                    children=(self.approve, self.deny, self.reason), layout=widgets.Layout(flex_flow="row wrap")
                ),
                self.error,
            ),
            layout=widgets.Layout(border="1px solid #d4a72c", padding="4px", margin="2px 0"),
        )
        self.notice: str | None = None
        """Why the last click failed (plain field, shown by the next flush)."""
        self.decided = False

    # ------------------------------------------------------------------ callbacks (any thread)
    def _on_approve(self, _button: object) -> None:
        text = str(self.arguments.value)
        edited: Any = None
        if text.strip() != self._original.strip():
            try:
                edited = json.loads(text)
            except ValueError as exc:
                self.notice = f"the arguments are not valid JSON: {exc}"
                return
        self._decide(
            lambda: self._stream.approve(
                self.request.call_id, run_id=self.request.run_id, arguments=edited, by="dashboard"
            )
        )

    def _on_deny(self, _button: object) -> None:
        reason = str(self.reason.value).strip() or None
        self._decide(
            lambda: self._stream.deny(self.request.call_id, reason, run_id=self.request.run_id, by="dashboard")
        )

    def _decide(self, action: Any) -> None:
        try:
            action()
        except TinyAgentsError as exc:
            self.notice = str(exc)
            return
        self.notice = None
        self.decided = True

    # ------------------------------------------------------------------ flusher side
    def render(self, *, frozen: bool) -> None:
        self.approve.disabled = self.deny.disabled = frozen or self.decided
        text = f"<span style='color:#cf222e'>{esc(self.notice)}</span>" if self.notice else ""
        if self.error.value != text:
            self.error.value = text

    def close(self) -> None:
        self.widget.close()


class ApprovalCards:
    """The dashboard's approval area: empty (and taking no room) unless a call waits.

    Args:
        stream: The run whose tree's approvals to show.
    """

    def __init__(self, stream: AgentStream) -> None:
        import ipywidgets as widgets

        self._stream = stream
        self.cards: dict[str, ApprovalCard] = {}
        """The shown cards by call id, oldest first."""
        self.widget: Any = widgets.VBox(children=())

    @property
    def pending(self) -> int:
        """How many calls wait now (read from the desk; cheap, thread-safe)."""
        return len(self._stream.approvals.pending())

    def render(self, *, terminal: bool) -> None:
        """Add a card per newly pending call and drop the cards of decided or withdrawn ones."""
        waiting = {r.call_id: r for r in self._stream.approvals.pending()} if not terminal else {}
        changed = False
        for call_id in [c for c in self.cards if c not in waiting]:
            self.cards.pop(call_id).close()
            changed = True
        for call_id, request in waiting.items():
            if call_id not in self.cards:
                self.cards[call_id] = ApprovalCard(self._stream, request)
                changed = True
        for card in self.cards.values():
            card.render(frozen=terminal)
        if changed:
            self.widget.children = tuple(card.widget for card in self.cards.values())

    def close(self) -> None:
        for card in self.cards.values():
            card.close()
        self.cards.clear()
        self.widget.close()
