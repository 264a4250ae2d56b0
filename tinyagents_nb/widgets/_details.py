"""``RunDetails``: a plain copy of what the dashboard's panes know, for the end-of-run record.

The live panes (tool calls, agents, cost, steering) are widgets, which a saved notebook, an HTML
export or GitHub cannot show. The record keeps them as static text, so it needs their content as
values: one snapshot, taken under the dashboard's lock once the run ended, with the same counts the
header shows (every model call and tool call of the run's tree, an RLM run's code steps apart).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

__all__ = ["AgentLine", "CostLine", "RunDetails", "ToolLine"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentLine:
    """One node of the run tree with its subtree's tokens and USD (``None``: a price is unknown)."""

    name: str
    depth: int
    status: str
    tokens: int
    usd: Decimal | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolLine:
    """One tool call: who made it, its arguments (JSON, cut) and its result or error."""

    name: str
    caption: str
    status: str
    arguments: str
    output: str
    error_type: str
    duration_s: float | None
    replayed: bool = False
    """Answered before the run was interrupted (a resumed run's call from its journal, not run again)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CostLine:
    """Tokens and USD for one agent and model (``agent == "total"`` sums several)."""

    agent: str
    model: str
    calls: int
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    usd: Decimal | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunDetails:
    """What the record keeps of the panes.

    Attributes:
        model_calls: Finished model calls in the run's tree (sub-agents included).
        tool_calls: Tool calls in the tree, an RLM run's code-running calls excluded.
        code_steps: An RLM run's code-running calls (each runs the blocks of one reply).
        sent: Steering messages sent from the dashboard, oldest first.
        delivered: How many of ``sent`` a model call read (the rest came too late).
    """

    model_calls: int
    tool_calls: int
    code_steps: int
    agents: tuple[AgentLine, ...]
    agents_dropped: int
    tools: tuple[ToolLine, ...]
    tools_dropped: int
    costs: tuple[CostLine, ...]
    sent: tuple[str, ...]
    delivered: int

    @property
    def undelivered(self) -> tuple[str, ...]:
        """Messages no model call read: the run had no further step when they arrived."""
        return self.sent[self.delivered :]
