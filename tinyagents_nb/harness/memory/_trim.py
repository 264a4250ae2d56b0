"""Trimming a transcript without breaking it.

Trimming drops messages silently, so it cuts only where nothing left behind loses its meaning:

- system messages are always kept (the stable prefix, summaries, notes);
- an earlier turn (a user question and every message that answers it, tool traffic included) is
  kept whole or dropped whole: an answer without its question, or a question without its answer,
  misleads the model more than either being absent;
- the current turn's question (the last user message that is not retrieved context nor a
  structured-output repair request) is always kept;
  inside the current turn, whose work is still going on, the oldest rounds (an assistant message
  with its tool results, or a single message) may go, so a single long agentic turn stays trimmable;
- a tool result is never separated from the assistant message that called it, and no tool call is
  left unanswered: a provider rejects either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from .._errors import ConfigurationError
from .._messages import REPAIR_TAG, RETRIEVED_TAG, AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from .._tokens import TokenEstimator

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


def _is_question(m: Message) -> bool:
    """A user message that opens a turn: not retrieved context, not a structured-output repair request."""
    return isinstance(m, UserMessage) and RETRIEVED_TAG not in m.tags and REPAIR_TAG not in m.tags


def trim_units(messages: Sequence[Message]) -> tuple[list[list[int]], int | None]:
    """The transcript's removable units, oldest first, and the index of the current question.

    A unit is removed whole or kept whole: each earlier turn (and any preamble before the first
    question) is one unit; after the current question, each round is one (an assistant message with
    the tool results that follow it, or one other message). System messages and the current question
    belong to no unit: they are never removed.
    """
    questions = [i for i, m in enumerate(messages) if _is_question(m)]
    current = questions[-1] if questions else None
    units: list[list[int]] = []
    open_call = False
    for i, m in enumerate(messages):
        if isinstance(m, SystemMessage) or i == current:
            continue
        if current is not None and i < current:  # an earlier turn: a new unit at each question
            if _is_question(m) or not units:
                units.append([i])
            else:
                units[-1].append(i)
            continue
        if isinstance(m, ToolMessage) and open_call and units and (current is None or units[-1][0] > current):
            units[-1].append(i)
            continue
        open_call = isinstance(m, AssistantMessage) and bool(m.tool_calls)
        units.append([i])
    return units, current


def _whole_units(messages: Sequence[Message], chosen: set[int]) -> list[Message]:
    """``messages`` restricted to system messages, the current question and the units wholly in ``chosen``."""
    units, current = trim_units(messages)
    keep = {i for unit in units if chosen.issuperset(unit) for i in unit}
    if current is not None:
        keep.add(current)
    return [m for i, m in enumerate(messages) if i in keep or isinstance(m, SystemMessage)]


def trim_messages(
    messages: Sequence[Message], strategy: TrimStrategy, *, estimator: TokenEstimator | None = None
) -> list[Message]:
    """Return a trimmed copy of ``messages`` (the input is not modified); see the module docstring.

    Each strategy first picks the messages it would keep, counting only non-system messages; the
    pick is then narrowed to whole units, so the result may hold fewer messages than asked for, plus
    the current question when the pick missed it.

    Args:
        messages: The transcript.
        strategy: What to keep.
        estimator: Token estimator for ``MaxTokens`` (defaults to an ``o200k_base`` estimate).
    """
    body = [i for i, m in enumerate(messages) if not isinstance(m, SystemMessage)]
    if isinstance(strategy, KeepLast):
        chosen = set(body[len(body) - strategy.n :]) if strategy.n else set()
    elif isinstance(strategy, KeepFirstAndLast):
        tail = body[len(body) - strategy.last :] if strategy.last else []
        chosen = set(body[: strategy.first]) | set(tail)
    else:
        est = estimator if estimator is not None else TokenEstimator.for_model(None)
        _, current = trim_units(messages)
        budget = strategy.limit - sum(est.count_message(m) for m in messages if isinstance(m, SystemMessage))
        if current is not None:
            budget -= est.count_message(messages[current])  # the question is kept whatever else goes
        chosen = set()
        for i in reversed(body):
            if i == current:
                continue
            budget -= est.count_message(messages[i])
            if budget < 0:
                break
            chosen.add(i)
    return _whole_units(messages, chosen)


def keep_ends(lines: list[str], budget: int) -> list[str]:
    """``lines`` cut to about ``budget`` characters: a quarter for the first lines, the rest for the last."""
    if sum(len(line) + 1 for line in lines) <= budget:
        return lines
    head: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > budget // 4:
            break
        head.append(line)
        used += len(line) + 1
    tail: list[str] = []
    for line in reversed(lines[len(head) :]):
        if used + len(line) + 1 > budget:
            break
        tail.append(line)
        used += len(line) + 1
    omitted = len(lines) - len(head) - len(tail)
    return [*head, f"[… {omitted} earlier messages omitted …]", *reversed(tail)]
