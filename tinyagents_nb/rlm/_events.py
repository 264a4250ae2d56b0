"""The RLM's own event kinds: each executed code block and what it printed.

``rlm.code`` is emitted before a block runs and ``rlm.output`` after, both by the RLM run (depth of
the run, ``call_id`` of the reply that carried the block), so a dashboard can show each iteration's
code, highlighted, with its output under it. They are ordinary ``AgentEvent`` subclasses: journals
store them and ``event_from_dict`` reads them back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tinyagents_nb.harness import AgentEvent

__all__ = ["RLMCode", "RLMOutput"]


@dataclass(frozen=True, kw_only=True, slots=True)
class RLMCode(AgentEvent):
    """A code block about to run: ``iteration`` counts the model's replies, ``index`` the block in it."""

    kind: Literal["rlm.code"] = "rlm.code"
    call_id: str
    iteration: int
    index: int
    code: str
    environment: str = "kernel"


@dataclass(frozen=True, kw_only=True, slots=True)
class RLMOutput(AgentEvent):
    """What a block printed (already truncated to the RLM's output limit) and how it ended.

    ``error_type`` names the exception the block raised (``None`` when it ran cleanly); ``truncated``
    says the output was cut to fit.
    """

    kind: Literal["rlm.output"] = "rlm.output"
    call_id: str
    iteration: int
    index: int
    output: str
    error_type: str | None = None
    duration_s: float = 0.0
    truncated: bool = False
