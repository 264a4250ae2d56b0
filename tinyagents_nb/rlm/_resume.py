"""Resume an RLM run a crash or restart interrupted, from its journal (``RLM.resume``).

The run's transcript, its finished code blocks' outputs and its spend (root turns and ``llm``
sub-queries) come back from the ``DurableJournal``; its REPL does not. A REPL namespace holds
arbitrary live objects (open files, models, DataFrames), so it is not saved: the resumed run starts
in a fresh REPL with the context values it is given again, and the model is told which variables its
earlier blocks made are gone, with the code that made them, to run again if it needs them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from tinyagents_nb.harness import AssistantMessage, ConfigurationError, Message, ToolMessage
from tinyagents_nb.harness.durable import DurableJournal, ResumePlan, RunStore, bound_names

from ._dialect import REPL_TOOL

__all__ = ["RLM_KIND", "missing_repl_note", "repl_calls", "repl_variables", "resume_note", "rlm_journal"]

RLM_KIND = "rlm"


def rlm_journal(
    store: RunStore | str | os.PathLike[str],
    *,
    agent: str | None = "rlm",
    model: str | None = None,
    context: Sequence[str] = (),
    environment: str | None = None,
) -> DurableJournal:
    """A ``DurableJournal`` for ``RLM(middleware=[...])``: it marks the runs as RLM runs, for ``RLM.resume``.

    ``context`` names the run's context values (their names only, never their contents), so a resume
    can ask for them again; ``environment`` is the REPL's kind (``kernel``/``local``).
    """
    meta = {"kind": RLM_KIND, "context": list(context), "environment": environment}
    return DurableJournal(store, agent=agent, model=model, meta=meta)


def repl_variables(messages: Sequence[Message]) -> dict[str, str]:
    """The variables an RLM run's finished code blocks bound at top level: name -> the block that bound it last."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    made: dict[str, str] = {}
    for message in messages:
        if not isinstance(message, AssistantMessage):
            continue
        for call in message.tool_calls:
            blocks = call.arguments.get("blocks") if isinstance(call.arguments, dict) else None
            if call.name != REPL_TOOL or call.id not in answered or not isinstance(blocks, list):
                continue
            for code in blocks:
                for name in bound_names(code) if isinstance(code, str) else ():
                    made[name] = code
    return made


def missing_repl_note(missing: Mapping[str, str], context: Sequence[str] = ()) -> str:
    """What the resumed run's model is told: its REPL is new, these variables are gone, this code made them.

    ``context`` names context values the resume was not given again (they cannot be re-made by code).
    """
    parts = ["This run was interrupted and resumed in a new REPL: the REPL's namespace is not saved across a restart."]
    if missing:
        codes = "\n\n".join(dict.fromkeys(missing.values()))
        parts.append(
            f"The variables your earlier code blocks created are gone: {', '.join(sorted(missing))}. Re-create the "
            f"ones you still need before you use them. The code that made them:\n```python\n{codes}\n```"
        )
    if context:
        parts.append(f"These context values were not given again and are missing: {', '.join(sorted(context))}.")
    return "\n".join(parts)


def resume_note(plan: ResumePlan, values: Mapping[str, Any]) -> str:
    """The note for a resumed RLM run: its REPL is new, and the variables and context values it no longer has."""
    if plan.meta.get("kind") != RLM_KIND:
        raise ConfigurationError(
            f"run {plan.run_id} is not an RLM run", hint="resume it with AgentHarness.resume (or %agent resume)"
        )
    missing = {name: code for name, code in repl_variables(plan.messages).items() if name not in values}
    lost = [str(n) for n in plan.meta.get("context") or () if n not in values]
    return missing_repl_note(missing, lost)


def repl_calls(messages: Sequence[Message]) -> int:
    """How many ``repl`` calls the transcript has: a resumed run numbers its new blocks after them."""
    return sum(1 for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls if c.name == REPL_TOOL)
