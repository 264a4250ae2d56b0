"""Tree-wide spending limits, checked before each request so a request that would break one is never sent.

``RunLimits.max_cost_usd``, ``max_total_tokens`` and ``max_input_tokens_per_request`` bind the run
that sets them *and everything beneath it*: the run anchors a ``TreeBudget`` on ``ctx.budgets``,
children inherit the tuple through ``RunContext.child``, and each check sums the usage and cost
ledgers over the anchor's subtree. A child's own, stricter limits add a budget anchored at the
child; every budget in the tuple must hold. A budget anchored at ``None`` binds everything the
ledgers record: a notebook session puts one on each run's context to cap all its runs together.

The check compares the spend so far plus the next request's estimate: its prompt tokens (the
estimate the loop already makes against the context window) and, when the request caps its output,
that cap at the model's output price. A response may still take the spend past a cap by its own
output; the request after it is then refused.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ._cost import CostTotals, CostUnknownWarning
from ._errors import LimitExceeded
from ._events import LimitReached
from ._limits import RunLimits, UnknownPrice
from ._messages import Message
from ._usage import Usage

if TYPE_CHECKING:
    from ._context import RunContext
    from ._harness import AgentHarness
    from ._model import ModelRequest

__all__ = ["BudgetExceeded", "TreeBudget", "bind_budgets", "check_request_budget"]


class BudgetExceeded(LimitExceeded):
    """A tree-wide budget would be broken by the next request, which was therefore not sent.

    Attributes:
        limit: ``"cost_usd"``, ``"total_tokens"`` or ``"input_tokens_per_request"``.
        maximum: The cap.
        anchor_run_id: The run that set the budget (the root of the subtree it binds); ``None`` for a
            budget over the whole ledger (a session's).
        usage: What the subtree had used when the request was refused.
        cost: What it had cost.
        messages: The refusing run's transcript so far.
    """

    def __init__(
        self,
        limit: str,
        message: str,
        *,
        maximum: float | None,
        anchor_run_id: str | None,
        usage: Usage,
        cost: CostTotals,
        messages: Sequence[Message],
    ) -> None:
        super().__init__(limit, message, maximum=maximum)
        self.anchor_run_id = anchor_run_id
        self.usage = usage
        self.cost = cost
        self.messages = messages


@dataclass(frozen=True, kw_only=True, slots=True)
class TreeBudget:
    """One set of spending limits and the run whose subtree they bind (``None``: all the ledgers hold)."""

    anchor_run_id: str | None
    max_cost_usd: Decimal | None = None
    max_total_tokens: int | None = None
    max_input_tokens_per_request: int | None = None
    unknown_price: UnknownPrice = "refuse"
    _warned: set[str] = field(default_factory=set, compare=False, repr=False)

    def usage_in(self, ctx: RunContext[Any]) -> Usage:
        """What the runs this budget binds have used so far (the anchor's subtree, or the whole ledger)."""
        anchor = self.anchor_run_id
        return ctx.usage.total() if anchor is None else ctx.usage.for_subtree(anchor)

    def cost_in(self, ctx: RunContext[Any]) -> CostTotals:
        """What they have cost so far."""
        anchor = self.anchor_run_id
        return ctx.costs.total() if anchor is None else ctx.costs.for_subtree(anchor)


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


def check_request_budget(
    ctx: RunContext[Any], harness: AgentHarness[Any], request: ModelRequest, messages: Sequence[Message]
) -> None:
    """Emit ``limit.reached`` and raise ``BudgetExceeded`` when sending ``request`` could break a budget."""
    prompt_tokens = harness.request_tokens(request)
    output_cap = request.max_output_tokens or 0
    model = harness.model
    try:
        for budget in ctx.budgets:
            _check(ctx, budget, model.model_name, model.provider, prompt_tokens, output_cap, messages)
    except BudgetExceeded as exc:
        ctx.emit(LimitReached, limit=exc.limit, maximum=exc.maximum)
        raise


def _check(
    ctx: RunContext[Any],
    budget: TreeBudget,
    model: str,
    provider: str | None,
    prompt_tokens: int,
    output_cap: int,
    messages: Sequence[Message],
) -> None:
    anchor = budget.anchor_run_id
    scope = "every run on these ledgers" if anchor is None else f"run {anchor}'s tree"

    def refuse(limit: str, maximum: float, text: str) -> BudgetExceeded:
        return BudgetExceeded(
            limit,
            text,
            maximum=maximum,
            anchor_run_id=anchor,
            usage=budget.usage_in(ctx),
            cost=budget.cost_in(ctx),
            messages=messages,
        )

    cap = budget.max_input_tokens_per_request
    if cap is not None and prompt_tokens > cap:
        raise refuse(
            "input_tokens_per_request", cap, f"the next request's prompt is ~{prompt_tokens} tokens, over {cap}"
        )
    cap = budget.max_total_tokens
    if cap is not None:
        used = budget.usage_in(ctx).total_tokens
        if used + prompt_tokens + output_cap > cap:
            raise refuse(
                "total_tokens",
                cap,
                f"{used} tokens used by {scope}; the next request (~{prompt_tokens + output_cap} "
                f"tokens) would pass its {cap}-token budget",
            )
    dollars = budget.max_cost_usd
    if dollars is None:
        return
    spent = budget.cost_in(ctx)
    estimate = Usage(input_tokens=prompt_tokens, output_tokens=output_cap)
    price, _ = ctx.costs.price(model, estimate, provider, warn=False)  # the policy below decides what unknown means
    unknown = price is None or not spent.is_complete
    if unknown and not _unknown_allowed(budget, model):
        raise refuse(
            "cost_usd",
            float(dollars),
            f"the price of model {model!r} is unknown, so the ${dollars} budget of {scope} cannot be kept "
            "(register a price with CostTracker.register_price, or set RunLimits(unknown_price='allow'|'warn'))",
        )
    total = spent.known_usd + (price.total_usd if price is not None else Decimal(0))
    if total > dollars:
        raise refuse(
            "cost_usd",
            float(dollars),
            f"${spent.known_usd:.6f} spent by {scope}; the next request (~${total - spent.known_usd:.6f}) "
            f"would pass its ${dollars} budget",
        )


def _unknown_allowed(budget: TreeBudget, model: str) -> bool:
    if budget.unknown_price == "refuse":
        return False
    if budget.unknown_price == "warn" and model not in budget._warned:
        budget._warned.add(model)
        warnings.warn(
            f"no price is known for model {model!r}: its calls count as $0 against a ${budget.max_cost_usd} budget",
            CostUnknownWarning,
            stacklevel=2,
        )
    return True
