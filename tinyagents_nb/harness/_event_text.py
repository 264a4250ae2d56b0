"""How the loop shortens what it puts in events: previews of text, one line per error."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._errors import TinyAgentsError, describe_error

if TYPE_CHECKING:
    from ._messages import Message

__all__ = ["PREVIEW_CHARS", "error_text", "last_user_text", "preview"]

PREVIEW_CHARS = 2_000
"""Events carry at most this much of an input, answer or tool output; the transcript keeps it all."""


def preview(text: str) -> str:
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def error_text(error: BaseException | None) -> str:
    """A project error's own message, else the exception's type and message; shortened."""
    if error is None:
        return ""
    text = str(error) if isinstance(error, TinyAgentsError) else describe_error(error)
    return preview(text)


def last_user_text(messages: Sequence[Message]) -> str:
    """The text of the last user message (a run's input, for ``run.started``)."""
    for message in reversed(messages):
        if message.role == "user":
            return message.text
    return ""
