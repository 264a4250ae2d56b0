"""Notebook-wide spending and approval defaults: a dollar cap per run, a session cap across runs.

The per-run cap is a ``TreeBudget`` anchored at the run (it binds the run's whole tree, so
sub-agents and RLM sub-queries count too); the session cap is a ``TreeBudget`` over everything the
session's shared trackers record. Both go on the context of every run the notebook starts
(``%%agent``, ``%%agent --rlm``, background runs), so every request of every run, concurrent ones
included, reserves its estimate against what the whole session has spent and reserved. A
spend the price table cannot price counts as unknown, and a dollar cap refuses it (see
``RunLimits.unknown_price``), so an unknown price never reads as free money.

Approvals in a notebook: someone can answer when the cell was executed by a frontend that can
answer ``input()`` (the kernel's ``allow_stdin`` for the current request: JupyterLab, Notebook and
VS Code set it; nbclient, papermill and nbval do not). ``AgentMagics.approvals`` overrides the
guess: ``ask`` always waits for a click, ``deny``/``approve`` decide every request at once.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any, Literal

from tinyagents_nb.harness import ConfigurationError, TreeBudget

__all__ = ["ApprovalMode", "frontend_can_answer", "notebook_budgets", "session_budget", "unattended_decision"]

ApprovalMode = Literal["auto", "ask", "deny", "approve"]
_MODES = ("auto", "ask", "deny", "approve")


def session_budget(cap: float | None, unknown_price: Literal["allow", "refuse"]) -> tuple[TreeBudget, ...]:
    """The budget a session puts on each run's context: ``cap`` dollars over every run of the session."""
    if cap is None:
        return ()
    hint = "raise the session's cap, e.g. %config AgentMagics.session_max_cost_usd = {needed}"
    return (TreeBudget(anchor_run_id=None, max_cost_usd=Decimal(str(cap)), unknown_price=unknown_price, hint=hint),)


def notebook_budgets(
    run_id: str, run_cap: float | None, session_cap: float | None, unknown_price: Literal["allow", "refuse"]
) -> tuple[TreeBudget, ...]:
    """The budgets of one notebook run: the session's cap, and ``run_cap`` over the run's own tree."""
    budgets = session_budget(session_cap, unknown_price)
    if run_cap is None:
        return budgets
    hint = "raise the cap per run, e.g. %config AgentMagics.max_cost_usd = {needed}"
    own = TreeBudget(anchor_run_id=run_id, max_cost_usd=Decimal(str(run_cap)), unknown_price=unknown_price, hint=hint)
    return (*budgets, own)


def frontend_can_answer(shell: Any) -> bool:
    """Whether the request being executed came from a frontend that can answer (``allow_stdin``)."""
    kernel = getattr(shell, "kernel", None)
    return bool(getattr(kernel, "_allow_stdin", False))


def unattended_decision(mode: str, can_answer: Callable[[], bool]) -> tuple[bool, Literal["deny", "approve"] | None]:
    """(whether a person can answer, what to decide when nobody can) for an approval mode."""
    if mode not in _MODES:
        raise ConfigurationError(f"approvals must be one of {', '.join(_MODES)}, got {mode!r}")
    if mode == "ask":
        return True, None
    if mode in ("deny", "approve"):
        return False, mode  # type: ignore[return-value]
    return can_answer(), "deny"
