"""The budget bars beside the cost: how much of each spending limit the run's tree has used.

A run with ``RunLimits(max_cost_usd=…)`` or ``max_total_tokens=…`` (or a notebook session cap) binds
``TreeBudget``s on its context while it runs; the harness refuses a request that would break one.
This pane shows, per budget, the spend so far against the cap as a bar, coloured like the context
gauge, so a person sees the money running out before the refusal. The budgets are read while the
run is live (at each of its model calls; the loop unbinds them when it ends) and kept, so the finished dashboard still shows
where the spend ended. Nothing is shown for a run without budgets.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from tinyagents_nb.harness import RunContext, TreeBudget

from ._format import esc, format_int, format_usd
from ._gauge import bar_style_for

__all__ = ["BudgetBars", "budget_lines"]


def budget_lines(ctx: RunContext[Any], budgets: Sequence[TreeBudget]) -> list[tuple[float, str]]:
    """``(fraction used, label)`` per capped quantity of each budget, in order (plain values, testable)."""
    lines: list[tuple[float, str]] = []
    for budget in budgets:
        scope = "session" if budget.anchor_run_id is None else "run tree"
        if budget.max_cost_usd is not None:
            spent = budget.cost_in(ctx)
            cap = budget.max_cost_usd
            used = float(spent.known_usd / cap) if cap > 0 else 1.0
            unknown = "" if spent.is_complete else " + unknown-price calls"
            held = ctx.usage.holds.usd(budget.anchor_run_id)  # requests in flight: spend that is coming
            pending = f" + ${_usd(held)} in flight" if held else ""
            label = f"{scope} budget: ${_usd(spent.known_usd)}{unknown}{pending} of ${_usd(cap)} ({used:.0%})"
            lines.append((used, label))
        if budget.max_total_tokens is not None:
            tokens = budget.usage_in(ctx).total_tokens
            cap_tokens = budget.max_total_tokens
            used = tokens / cap_tokens if cap_tokens > 0 else 1.0
            lines.append(
                (used, f"{scope} budget: {format_int(tokens)} of {format_int(cap_tokens)} tokens ({used:.0%})")
            )
    return lines


def _usd(amount: Decimal) -> str:
    return format_usd(amount).removeprefix("$")  # the one money shape (see format_usd)


class BudgetBars:
    """One ``FloatProgress`` and label per capped quantity; hidden while there is none."""

    def __init__(self) -> None:
        import ipywidgets as widgets

        self._widgets = widgets
        self.widget: Any = widgets.VBox(children=(), layout=widgets.Layout(display="none"))
        self.budgets: tuple[TreeBudget, ...] = ()
        """The budgets last seen on the run's context (kept after the run unbinds them)."""
        self._shown: list[tuple[float, str]] = []

    def capture(self, budgets: tuple[TreeBudget, ...]) -> None:
        """Remember the budgets binding the run (called from the event listener while it runs)."""
        if budgets:
            self.budgets = budgets

    def render(self, ctx: RunContext[Any]) -> None:
        """Refresh from ``ctx``'s ledgers; writes only what changed."""
        self.capture(ctx.budgets)
        lines = budget_lines(ctx, self.budgets) if self.budgets else []
        if lines == self._shown:
            return
        widgets = self._widgets
        if len(lines) != len(self._shown):
            rows = []
            for _ in lines:
                bar = widgets.FloatProgress(value=0.0, min=0.0, max=1.0, layout=widgets.Layout(width="320px"))
                rows.append(widgets.HBox(children=(bar, widgets.HTML(value=""))))
            self.widget.children = tuple(rows)
        for row, (used, label) in zip(self.widget.children, lines, strict=True):
            bar, text = row.children
            with bar.hold_sync():
                bar.value = min(max(used, 0.0), 1.0)
                bar.bar_style = bar_style_for(used)
            text.value = esc(label)
        self.widget.layout.display = None if lines else "none"
        self._shown = lines
