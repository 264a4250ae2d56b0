"""The system prompt that teaches the REPL protocol, and the first message that describes the values."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._config import RLMLimits
from ._describe import describe_context

__all__ = ["RLM_SYSTEM_PROMPT", "first_message", "follow_up_message"]

RLM_SYSTEM_PROMPT = """\
You answer a task by working in a persistent Python REPL. The data you need is NOT in this \
conversation: it is held in REPL variables, which may be far larger than what you can read at once.

How to work:
- Reply with one or more fenced code blocks (```python ... ```). They run in order, in the same \
namespace, which persists across replies; the next message shows what they printed (cut to \
{max_output} characters, so print summaries, counts and short slices, never a whole large value).
- Inspect the data with code: len(), slicing, str methods, re, collections.Counter, pandas.
- `llm(prompt) -> str` asks a sub-model one question (give it the text it needs, e.g. a chunk of \
the data: it sees nothing else). `llm_batch(prompts) -> list[str]` asks many at once, in parallel; \
prefer it over llm in a loop. At most {max_sub} sub-queries per task.{recursion}
- `SHOW_VARS()` lists your variables. An exception is shown as output; fix the code and go on.
- To answer, set `answer["content"]` (a dict already in the REPL; keep your best answer so far in \
it), then `answer["ready"] = True`: the task ends after that block. Check the answer with code first.
- At most {max_iterations} replies with code.
"""

_RECURSION = """
- `rlm_query(prompt, context=None) -> str` gives a sub-task that needs code to a child with its own \
REPL, where `context` holds what you pass; `rlm_query_batched(prompts, contexts)` runs many in parallel."""


def first_message(task: str, values: Mapping[str, Any], *, environment: str, limits: RLMLimits) -> str:
    """The task, then a bounded description of each REPL value (never the values themselves)."""
    where = "a separate Python process (a child kernel)" if environment == "kernel" else "this Python process"
    return (
        f"Task:\n{task.strip()}\n\n"
        f"The REPL runs in {where}. Variables defined in it:\n{describe_context(values)}\n\n"
        "Start by exploring the variables with code."
    )


def follow_up_message(task: str, values: Mapping[str, Any]) -> str:
    """The next task of a session: the REPL still holds what earlier tasks made, plus any new values."""
    added = f"\n\nNew variables in the REPL:\n{describe_context(values)}" if values else ""
    return (
        f"Next task:\n{task.strip()}\n\n"
        "The REPL still holds every variable from the earlier tasks (SHOW_VARS() lists them); "
        f'`answer` is reset to {{"content": "", "ready": False}}.{added}'
    )


def system_prompt(limits: RLMLimits, *, depth: int = 0) -> str:
    """``RLM_SYSTEM_PROMPT`` with the run's limits filled in (``rlm_query`` taught only where it is allowed)."""
    return RLM_SYSTEM_PROMPT.format(
        max_output=f"{limits.max_output_chars:,}",
        max_sub=f"{limits.max_sub_queries:,}",
        max_iterations=limits.max_iterations,
        recursion=_RECURSION if depth < limits.max_depth else "",
    )
