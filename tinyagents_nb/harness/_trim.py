"""Trimming a transcript without breaking it.

Every strategy keeps system messages, and cut points are repaired so a tool result is never
separated from the assistant turn that called it and no assistant tool call is left unanswered:
a provider rejects either, so a trim that produced them would turn context pressure into a crash.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from ._errors import ConfigurationError
from ._messages import AssistantMessage, Message, SystemMessage, ToolMessage
from ._tokens import TokenEstimator

__all__ = ["KeepFirstAndLast", "KeepLast", "MaxTokens", "TrimStrategy", "trim_messages"]


@dataclass(frozen=True, kw_only=True, slots=True)
class KeepLast:
    """Keep system messages and the last ``n`` other messages."""

    n: int

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ConfigurationError("KeepLast.n must be >= 0")


@dataclass(frozen=True, kw_only=True, slots=True)
class KeepFirstAndLast:
    """Keep system messages, the first ``first`` and the last ``last`` other messages."""

    first: int
    last: int

    def __post_init__(self) -> None:
        if self.first < 0 or self.last < 0:
            raise ConfigurationError("KeepFirstAndLast counts must be >= 0")


@dataclass(frozen=True, kw_only=True, slots=True)
class MaxTokens:
    """Keep system messages and as many of the most recent messages as fit in ``limit`` tokens."""

    limit: int

    def __post_init__(self) -> None:
        if self.limit <= 0:
            raise ConfigurationError("MaxTokens.limit must be > 0")


TrimStrategy: TypeAlias = KeepLast | KeepFirstAndLast | MaxTokens


def _repair_start(body: Sequence[Message], start: int) -> int:
    """Move a cut forward past tool results whose assistant turn was cut off."""
    while start < len(body) and isinstance(body[start], ToolMessage):
        start += 1
    return start


def _repair_end(body: Sequence[Message], end: int) -> int:
    """Move a cut backward so the kept head does not end in an unanswered tool call."""
    while end > 0:
        last = body[end - 1]
        if isinstance(last, ToolMessage):
            # keep the whole block only if every call of its assistant turn is answered inside the head
            turn = end - 1
            while turn > 0 and isinstance(body[turn], ToolMessage):
                turn -= 1
            owner = body[turn]
            answered = {m.tool_call_id for m in body[turn + 1 : end] if isinstance(m, ToolMessage)}
            if isinstance(owner, AssistantMessage) and {c.id for c in owner.tool_calls} <= answered:
                return end
            end = turn
        elif isinstance(last, AssistantMessage) and last.tool_calls:
            end -= 1
        else:
            return end
    return end


def trim_messages(
    messages: Sequence[Message], strategy: TrimStrategy, *, estimator: TokenEstimator | None = None
) -> list[Message]:
    """Return a trimmed copy of ``messages`` (the input is not modified).

    Args:
        messages: The transcript.
        strategy: What to keep.
        estimator: Token estimator for ``MaxTokens`` (defaults to an ``o200k_base`` estimate).
    """
    system = [m for m in messages if isinstance(m, SystemMessage)]
    body = [m for m in messages if not isinstance(m, SystemMessage)]
    if isinstance(strategy, KeepLast):
        start = _repair_start(body, max(0, len(body) - strategy.n))
        kept = body[start:]
    elif isinstance(strategy, KeepFirstAndLast):
        if strategy.first + strategy.last >= len(body):
            kept = body
        else:
            head = body[: _repair_end(body, strategy.first)]
            tail = body[_repair_start(body, len(body) - strategy.last) :]
            kept = head + tail
    else:
        est = estimator if estimator is not None else TokenEstimator.for_model(None)
        budget = strategy.limit - sum(est.count_message(m) for m in system)
        start = len(body)
        while start > 0 and budget - est.count_message(body[start - 1]) >= 0:
            start -= 1
            budget -= est.count_message(body[start])
        kept = body[_repair_start(body, start) :]
    out: list[Message] = []
    kept_ids = {id(m) for m in kept}
    # preserve the original interleaving of system and kept messages
    for message in messages:
        if isinstance(message, SystemMessage) or id(message) in kept_ids:
            out.append(message)
    return out
