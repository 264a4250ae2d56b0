"""The RLM's own event kinds: the run's start, each executed code block and what it printed.

``rlm.started`` opens an RLM run (before its first model call) and names the tool its code runs
through, so a view knows before the first call that those calls are reported as steps.
``rlm.code`` is emitted before a block runs and ``rlm.output`` after, both by the RLM run (depth of
the run, ``call_id`` of the reply that carried the block), so a dashboard can show each iteration's
code, highlighted, with its output under it. They are ordinary ``AgentEvent`` subclasses: journals
store them and ``event_from_dict`` reads them back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tinyagents_nb.harness import AgentEvent

__all__ = ["RLMCode", "RLMOutput", "RLMPartialAnswer", "RLMStarted"]


@dataclass(frozen=True, kw_only=True, slots=True)
class RLMStarted(AgentEvent):
    """An RLM run began: its calls of ``tool_name`` run its code, and ``rlm.code``/``rlm.output`` report them.

    A dashboard shows those calls once, as code steps, instead of also listing them as tool calls.
    """

    kind: Literal["rlm.started"] = "rlm.started"
    tool_name: str
    environment: str = "kernel"


@dataclass(frozen=True, kw_only=True, slots=True)
class RLMCode(AgentEvent):
    """A code block about to run: ``iteration`` counts the model's replies, ``index`` the block in it.

    ``prose`` is the reply's text before the block (after the previous one), ``prose_after`` the
    text after a reply's last block; each stripped and cut to 4,000 characters.
    """

    kind: Literal["rlm.code"] = "rlm.code"
    call_id: str
    iteration: int
    index: int
    code: str
    environment: str = "kernel"
    prose: str = ""
    prose_after: str = ""


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


@dataclass(frozen=True, kw_only=True, slots=True)
class RLMPartialAnswer(AgentEvent):
    """A run ended by a limit (or an error) before its answer was ready: the best answer it had.

    ``source`` is ``"answer"`` (the last ``answer["content"]`` the code set) or ``"extracted"``
    (no answer was set: the last output the REPL printed, marked as such, never checked by the model).
    """

    kind: Literal["rlm.partial"] = "rlm.partial"
    answer: str
    source: Literal["answer", "extracted"] = "answer"
    error_type: str = ""
