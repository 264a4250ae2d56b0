"""The ``%agent context`` figure: where a run's window figure came from, or an estimate of a thread's history."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tinyagents_nb.harness import ConfigurationError, ContextWindow, ModelNotFound
from tinyagents_nb.harness.models import TokenEstimator

if TYPE_CHECKING:
    from tinyagents_nb.harness import Message

    from ._handle import NotebookRun

__all__ = ["fallback_window", "window_source"]


def window_source(window: ContextWindow) -> str:
    """What the figure of a run's window is: exact (the host counted before sending), measured, or estimated."""
    measured = window.measured_prompt_tokens
    if window.exact:
        if measured is None:
            return "exact: counted by the host's tokenizer before the last model call"
        agreed = "agreed" if measured == window.estimated_prompt_tokens else f"reported {measured:,}"
        return f"exact: counted by the host's tokenizer before the last model call (its usage {agreed})"
    if measured is not None:
        return "measured: the provider's count at the last model call"
    return "estimated before the last model call, calibrated from reported counts"


def fallback_window(
    model: str, last: NotebookRun | None, records: Sequence[Any], messages: Callable[[], list[Message]]
) -> tuple[ContextWindow | None, str, str]:
    """``(window, model, source)``: the model's window with an estimate of the saved history.

    Without a known window size, the provider's last reported prompt count is still worth showing.
    """
    try:
        known = last.harness.context_window if last is not None else None
        window = known if known is not None else ContextWindow.for_model(model)
    except (ModelNotFound, ConfigurationError):
        reported = [r.usage.input_tokens for r in records if last is not None and str(r.run_id) == last.run_id]
        if reported:
            return (
                None,
                model,
                f"no size known for this model; measured: {reported[-1]:,} prompt tokens at the last call",
            )
        return None, model, "no size known for this model"
    return (
        window.with_estimate(TokenEstimator.for_model(model).estimate(messages())),
        model,
        "estimated from the saved history",
    )
