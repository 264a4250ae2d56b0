"""The checks behind ``TreeBudget``: bind a run's limits to its subtree, reserve before a request, reconcile after.

See ``_budget`` for what a tree budget is and the bound it keeps. ``reserve`` checks every budget
binding the run against *spent + reserved by requests in flight + this request's estimate* and
reserves the estimate in the same step (under the shared ``Holds`` lock, so concurrent siblings,
on one event loop or several threads, see each other's reservations); ``Reservation.settle``
gives it back once the call's usage is recorded (or nothing was spent).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

from ._budget import BudgetExceeded, BudgetReconciled, BudgetReserved, TreeBudget
from ._cost import CostUnknownWarning
from ._events import LimitReached
from ._holds import Holds
from ._limits import RunLimits
from ._messages import Message
from ._usage import Usage

if TYPE_CHECKING:
    from ._context import RunContext
    from ._cost import CostRecord
    from ._model import ChatModel

__all__ = ["Reservation", "bind_budgets", "reserve"]

_ZERO = Decimal(0)
_RAISE = {
    "cost_usd": "raise RunLimits(max_cost_usd=...) to allow more",
    "total_tokens": "raise RunLimits(max_total_tokens=...) to allow more",
    "input_tokens_per_request": "raise RunLimits(max_input_tokens_per_request=...) or shorten the conversation",
}


def bind_budgets(ctx: RunContext[Any], limits: RunLimits) -> tuple[TreeBudget, ...]:
    """``ctx``'s inherited budgets, plus one anchored at this run when ``limits`` sets any."""
    if not limits.has_budget:
        return ctx.budgets
    cost = limits.max_cost_usd
    own = TreeBudget(
        anchor_run_id=ctx.run_id,
        max_cost_usd=None if cost is None else Decimal(cost),
        max_total_tokens=limits.max_total_tokens,
        max_input_tokens_per_request=limits.max_input_tokens_per_request,
        unknown_price=limits.unknown_price,
    )
    return (*ctx.budgets, own)


@dataclass(slots=True)
class Reservation:
    """One request's hold on the budgets of its run; ``settle`` it exactly once when the call ends."""

    holds: Holds
    anchors: tuple[str | None, ...]
    tokens: int
    usd: Decimal
    priced: bool
    prompt_tokens: int
    model: str
    call_id: str | None
    open: bool = True

    def settle(
        self,
        ctx: RunContext[Any],
        record: CostRecord | None,
        outcome: Literal["completed", "failed", "cancelled"] = "completed",
    ) -> None:
        """Give the hold back, after ``record`` (the call's recorded usage, if any) reached the trackers.

        Recording first and releasing second means a concurrent check in between counts the call
        twice (refusing more, never less).
        """
        if not self.open:
            return
        self.open = False
        self.holds.remove(self.anchors, self.tokens, self.usd)
        usage = record.usage if record is not None else Usage()
        cost = record.cost if record is not None else None
        ctx.emit(
            BudgetReconciled,
            call_id=self.call_id,
            model=self.model,
            outcome=outcome,
            reserved_tokens=self.tokens,
            reserved_usd=self.usd if self.priced else None,
            tokens=usage.total_tokens,
            usd=cost.total_usd if cost is not None else (None if record is not None else _ZERO),
            estimated=usage.estimated,
        )


def reserve(
    ctx: RunContext[Any],
    model: ChatModel,
    prompt_tokens: int,
    output_cap: int | None,
    messages: Sequence[Message],
    *,
    call_id: str | None = None,
) -> Reservation | None:
    """Reserve a request's estimate on every budget of ``ctx``, or refuse it (``None``: no budgets).

    ``prompt_tokens`` is the request's prompt estimate, ``output_cap`` its ``max_output_tokens``;
    the price is the serving ``model``'s. Emits ``budget.reserved``, or ``limit.reached`` and raises
    ``BudgetExceeded`` (the request must then not be sent).
    """
    budgets = ctx.budgets
    if not budgets:
        return None
    cap = output_cap or 0
    tokens = prompt_tokens + cap
    name, provider = model.model_name, model.provider
    usd, priced = _ZERO, True
    if any(b.max_cost_usd is not None for b in budgets):  # priced outside the lock (a first lookup loads a table)
        estimate = Usage(input_tokens=prompt_tokens, output_tokens=cap)
        price, _ = ctx.costs.price(name, estimate, provider, warn=False)
        priced = price is not None
        usd = price.total_usd if price is not None else _ZERO
    holds = ctx.usage.holds
    try:
        with holds.lock:
            for budget in budgets:
                _check(ctx, budget, holds, name, prompt_tokens, tokens, usd, priced, messages)
            anchors = tuple({b.anchor_run_id: None for b in budgets})  # one hold per scope
            holds.add(anchors, tokens, usd)
    except BudgetExceeded as exc:
        ctx.emit(LimitReached, limit=exc.limit, maximum=exc.maximum)
        raise
    ctx.emit(BudgetReserved, call_id=call_id, model=name, tokens=tokens, usd=usd if priced else None)
    return Reservation(
        holds=holds,
        anchors=anchors,
        tokens=tokens,
        usd=usd,
        priced=priced,
        prompt_tokens=prompt_tokens,
        model=name,
        call_id=call_id,
    )


def _check(
    ctx: RunContext[Any],
    budget: TreeBudget,
    holds: Holds,
    model: str,
    prompt_tokens: int,
    tokens: int,
    usd: Decimal,
    priced: bool,
    messages: Sequence[Message],
) -> None:
    anchor = budget.anchor_run_id
    if anchor is None:
        scope = "all runs of this session together"
    elif anchor == ctx.run_id:
        scope = "this run and its sub-agents"
    else:
        scope = "the run that started this one, with all its sub-agents"

    def refuse(
        limit: str, maximum: float, text: str, spent: float, held: float, asked: float, hint: str = ""
    ) -> BudgetExceeded:
        hint = (hint or budget.hint or _RAISE[limit]).replace(
            "{needed}", f"{max(spent + held + asked, maximum) * 2:.2g}"
        )
        return BudgetExceeded(
            limit,
            f"{text}; the request was not sent. To continue, {hint}",
            maximum=maximum,
            anchor_run_id=anchor,
            usage=budget.usage_in(ctx),
            cost=budget.cost_in(ctx),
            messages=messages,
            spent=spent,
            reserved=held,
            requested=asked,
        )

    cap = budget.max_input_tokens_per_request
    if cap is not None and prompt_tokens > cap:
        raise refuse(
            "input_tokens_per_request",
            cap,
            f"the next request's prompt is about {prompt_tokens} tokens, over the {cap}-token limit per request",
            0,
            0,
            prompt_tokens,
        )
    cap = budget.max_total_tokens
    if cap is not None:
        used, held = budget.usage_in(ctx).total_tokens, holds.tokens(anchor)
        if used + held + tokens > cap:
            pending = f" and {held} are held by requests still running" if held else ""
            raise refuse(
                "total_tokens",
                cap,
                f"{scope} used {used} of {cap} tokens{pending}; the next request (about {tokens} tokens) would go over",
                used,
                held,
                tokens,
            )
    dollars = budget.max_cost_usd
    if dollars is None:
        return
    spent = budget.cost_in(ctx)
    unknown = not priced or not spent.is_complete
    if unknown and not _unknown_allowed(budget, model):
        raise refuse(
            "cost_usd",
            float(dollars),
            f"the price of model {model!r} is unknown, so the {_usd(dollars)} budget of {scope} cannot be kept",
            float(spent.known_usd),
            float(holds.usd(anchor)),
            0,
            f"register its price (CostTracker.register_price({model!r}, ModelPricing(...))) or allow unpriced "
            "models (RunLimits(unknown_price='allow'))",
        )
    held_usd = holds.usd(anchor)
    if spent.known_usd + held_usd + usd > dollars:
        pending = f" and {_usd(held_usd)} is held by requests still running" if held_usd else ""
        raise refuse(
            "cost_usd",
            float(dollars),
            f"{scope} spent {_usd(spent.known_usd)} of {_usd(dollars)}{pending}; the next request "
            f"(about {_usd(usd)}) would go over",
            float(spent.known_usd),
            float(held_usd),
            float(usd),
        )


def _usd(amount: Decimal) -> str:
    """Dollars to the micro-dollar, the one money format of records and dashboards (``$0.000409``)."""
    return f"${amount:,.6f}"


def _unknown_allowed(budget: TreeBudget, model: str) -> bool:
    if budget.unknown_price == "refuse":
        return False
    if budget.unknown_price == "warn" and model not in budget._warned:
        budget._warned.add(model)
        warnings.warn(
            f"no price is known for model {model!r}: its calls count as $0 against a ${budget.max_cost_usd:,.6f} budget",
            CostUnknownWarning,
            stacklevel=2,
        )
    return True
