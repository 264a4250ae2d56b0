"""Notebook-wide spending and approval defaults: a dollar cap per run, a session cap across runs.

The session cap is kept by giving each new run the smaller of the per-run cap and what the session
has left (``RunLimits.max_cost_usd`` then binds the run's whole tree, so sub-agents count too). A
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

from tinyagents_nb.harness import ConfigurationError, CostTotals

__all__ = ["ApprovalMode", "frontend_can_answer", "run_cost_cap", "unattended_decision"]

ApprovalMode = Literal["auto", "ask", "deny", "approve"]
_MODES = ("auto", "ask", "deny", "approve")


def run_cost_cap(per_run: float | None, session_cap: float | None, spent: CostTotals) -> Decimal | None:
    """The dollar cap of the next run: the per-run cap, lowered to what the session cap leaves (>= 0)."""
    caps: list[Decimal] = []
    if per_run is not None:
        caps.append(Decimal(str(per_run)))
    if session_cap is not None:
        caps.append(max(Decimal(str(session_cap)) - spent.known_usd, Decimal(0)))
    return min(caps) if caps else None


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
