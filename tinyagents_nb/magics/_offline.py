"""The model a notebook gets when none is configured: it answers locally, saying how to set one up.

A first ``%%agent`` cell should work with no key and no network, and its answer should be the
instructions the user needs next, streamed like a real model's so the dashboard shows what it does.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from tinyagents_nb.harness import (
    AssistantMessage,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    TextDelta,
    Usage,
    UserMessage,
)
from tinyagents_nb.harness.models import ModelStreamItem, StreamFinish

__all__ = ["OFFLINE_MODEL", "OFFLINE_WINDOW", "OfflineModel"]

OFFLINE_MODEL = "offline-demo"
"""The name runs show when no model is configured."""
OFFLINE_WINDOW = 32_000
"""The context window the offline model claims, so a first dashboard shows a working gauge."""
_WORDS = re.compile(r"\S+\s*")


class OfflineModel:
    """A ``ChatModel`` that never leaves the process: it quotes the prompt and explains how to configure a model."""

    @property
    def model_name(self) -> str:
        return OFFLINE_MODEL

    @property
    def provider(self) -> str:
        return "offline"

    @property
    def profile(self) -> ModelProfile:
        return ModelProfile(
            name=OFFLINE_MODEL, provider="offline", context_window=OFFLINE_WINDOW, max_output_tokens=1_024
        )

    @staticmethod
    def reply(request: ModelRequest) -> str:
        """The answer to ``request`` (deterministic: it depends only on the last user message)."""
        last = next((m.text for m in reversed(request.messages) if isinstance(m, UserMessage)), "")
        asked = " ".join(last.split())
        asked = asked if len(asked) <= 60 else asked[:59] + "…"
        return (
            f"(offline demo model: no model is configured, so nothing was sent anywhere.) You asked: {asked!r}. "
            "To use a real model, run %env OPENAI_API_KEY=<your key> and then %agent model openai:gpt-4o-mini "
            "(%agent models lists every provider and its key variable), "
            'or register your own with get_session().register_model("name", model).'
        )

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        text = self.reply(request)
        return ModelResponse(
            message=AssistantMessage(text=text), usage=Usage(), finish_reason="stop", model=OFFLINE_MODEL
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        for word in _WORDS.findall(self.reply(request)):
            yield TextDelta(text=word)
        yield StreamFinish(finish_reason="stop", model=OFFLINE_MODEL)

    def __repr__(self) -> str:
        return "OfflineModel()"
