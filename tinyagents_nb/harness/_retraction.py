"""Retracting a final answer an output guardrail blocked, after it may already have been shown.

The answer may have streamed to a dashboard already, and (a structured answer, or one checked when
the run ends) it may sit in the transcript with the results answering its schema call. Consumers
are told to hide it (``model.retracted``: hidden, not struck through, since it was blocked for its
content) and the transcript drops it, so neither the thread nor the notebook record keeps it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._events import ModelRetracted

if TYPE_CHECKING:
    from ._context import RunContext
    from ._errors import GuardrailTripped
    from ._messages import Message

__all__ = ["retract_answer"]


def retract_answer(
    ctx: RunContext[Any], messages: list[Message], at: int | None, call_id: str | None, error: GuardrailTripped
) -> None:
    """Drop the answer at ``messages[at]`` (and what follows it), and emit ``model.retracted`` for ``call_id``."""
    if at is not None and at < len(messages):
        del messages[at:]
    if call_id is not None:
        ctx.emit(ModelRetracted, call_id=call_id, reason=error.reason, guardrail=error.guardrail)
