"""``AgentMagics``'s settings of how runs count tokens (a mixin, so the magics module stays one concept long)."""

from __future__ import annotations

from typing import Any

from traitlets import Enum, HasTraits, observe

__all__ = ["RunSettings"]


class RunSettings(HasTraits):
    """``%config AgentMagics.token_counting``: the session's ``RunPolicy(token_counting=...)``."""

    token_counting = Enum(
        ("estimate", "exact"),
        "estimate",
        help="Prompt tokens before each request: the estimate, calibrated from reported counts (estimate), or "
        "counted by the model's host before sending (exact: llama.cpp's llama-server serves its tokenizer; a host "
        "that cannot count, or is slow to, gets the estimate). %agent context says which one it shows.",
    ).tag(config=True)

    _ready: bool
    session: Any

    def apply_run_settings(self, session: Any) -> None:
        """Hand the settings to the session, whose runs read them when they start."""
        session.token_counting = self.token_counting

    @observe("token_counting")
    def _run_settings_changed(self, change: Any) -> None:
        if self._ready:
            self.apply_run_settings(self.session)
