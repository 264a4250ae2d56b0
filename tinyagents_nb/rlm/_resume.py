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
from typing import TYPE_CHECKING, Any

from tinyagents_nb.harness import (
    AgentRun,
    ApprovalDesk,
    AssistantMessage,
    ConfigurationError,
    Message,
    RunConfig,
    ToolMessage,
)
from tinyagents_nb.harness.durable import DurableJournal, RunStore, bound_names, plan_resume

from ._dialect import REPL_TOOL, REPLDialect

if TYPE_CHECKING:
    from ._rlm import RLM

__all__ = ["missing_repl_note", "repl_variables", "resume_rlm", "rlm_journal"]

RLM_KIND = "rlm"


def rlm_journal(
    store: RunStore | str | os.PathLike[str], *, agent: str | None = "rlm", model: str | None = None
) -> DurableJournal:
    """A ``DurableJournal`` for ``RLM(middleware=[...])``: it marks the runs as RLM runs, for ``RLM.resume``."""
    return DurableJournal(store, agent=agent, model=model, meta={"kind": RLM_KIND})


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


def missing_repl_note(missing: Mapping[str, str]) -> str:
    """What the resumed run's model is told: its REPL is new, these variables are gone, this code made them."""
    codes = "\n\n".join(dict.fromkeys(missing.values()))
    return (
        "This run was interrupted and resumed in a new REPL: the REPL's namespace is not saved across a restart, "
        f"so the variables your earlier code blocks created are gone: {', '.join(sorted(missing))}. "
        "Re-create the ones you still need before you use them. The code that made them:\n"
        f"```python\n{codes}\n```"
    )


async def resume_rlm(
    rlm: RLM,
    run_id: str,
    *,
    store: RunStore | str | os.PathLike[str],
    context: Mapping[str, Any] | None = None,
    config: RunConfig | None = None,
    approvals: ApprovalDesk | None = None,
) -> AgentRun:
    """Continue the journaled RLM run ``run_id`` with ``rlm`` (see ``RLM.resume``)."""
    runs = store if isinstance(store, RunStore) else RunStore(store)
    plan = plan_resume(runs, run_id)
    if plan.meta.get("kind") != RLM_KIND:
        raise ConfigurationError(
            f"run {run_id} is not an RLM run", hint="resume it with AgentHarness.resume (or %agent resume)"
        )
    values = dict(context or {})
    harness, _ = rlm._build("(resumed)", values, rlm.environment, depth=0)
    dialect = harness.model
    if isinstance(dialect, REPLDialect):  # new blocks get new call ids, after the journaled ones
        dialect.state.iterations = sum(
            1 for m in plan.messages if isinstance(m, AssistantMessage) for c in m.tool_calls if c.name == REPL_TOOL
        )
    missing = {name: code for name, code in repl_variables(plan.messages).items() if name not in values}
    note = missing_repl_note(missing) if missing else None
    return await harness.resume(run_id, store=runs, config=config, approvals=approvals, note=note)
