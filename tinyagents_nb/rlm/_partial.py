"""The best partial answer of an RLM run that a limit (or an error, or Stop) ended early.

An RLM run that runs out of iterations, time, tokens or budget has often done most of the work:
the code may have set ``answer["content"]`` without marking it ready, or printed what it found.
``PartialAnswerMiddleware`` keeps the run's error as it is (the run still fails with the limit's
error) and adds the best answer it had: the last ``answer["content"]`` the REPL reported, else the
last output a block printed, marked as extracted. It is emitted as ``rlm.partial`` (journals and
dashboards keep it) and set on the error as ``partial_answer`` (the notebook record shows it).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Literal

from tinyagents_nb.harness import Middleware, RunContext

from ._events import RLMPartialAnswer

if TYPE_CHECKING:
    from ._dialect import RLMRunState

__all__ = ["EXTRACTED_MARK", "PartialAnswerMiddleware", "partial_answer"]

EXTRACTED_MARK = "[partial: extracted from the last REPL output; the run ended before an answer was set]\n"


def partial_answer(state: RLMRunState) -> tuple[str, Literal["answer", "extracted"]] | None:
    """The run's best answer so far and where it came from, or ``None`` when it has nothing."""
    queries = state.queries
    if queries is not None and queries.partial:
        return queries.partial, "answer"
    if state.last_output.strip():
        return EXTRACTED_MARK + state.last_output.strip(), "extracted"
    return None


class PartialAnswerMiddleware(Middleware):
    """On a run's error: emit ``rlm.partial`` and set ``error.partial_answer`` (see the module docstring)."""

    def __init__(self, state: RLMRunState) -> None:
        self.state = state

    async def on_error(self, ctx: RunContext[Any], error: BaseException) -> None:
        best = partial_answer(self.state)
        if best is None:
            return
        answer, source = best
        with contextlib.suppress(AttributeError):  # an exception type with slots keeps the event only
            error.partial_answer = answer  # type: ignore[attr-defined]
            error.partial_source = source  # type: ignore[attr-defined]
        ctx.emit(RLMPartialAnswer, answer=answer, source=source, error_type=type(error).__name__)
