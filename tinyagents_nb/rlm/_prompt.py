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
- `SHOW_VARS()` prints the variables you have made so far.
- An exception is shown to you as output; fix the code and go on.
- `answer` is a dict in the REPL: `answer = {{"content": "", "ready": False}}`. Put your answer so \
far in `answer["content"]` as you go; when it is checked and complete, set `answer["ready"] = True` \
in a code block: the task ends after that block, with `answer["content"]` as the answer. Do not \
answer in prose before you have checked it with code.
- You have at most {max_iterations} replies with code; if you run out, `answer["content"]` is \
taken as your partial answer.
"""

_RECURSION = """
- `rlm_query(prompt, context=None) -> str` hands a sub-task that needs code of its own to a child \
working in its own REPL, where `context` holds the value you pass (it sees nothing else). \
`rlm_query_batched(prompts, contexts) -> list[str]` starts many at once, in parallel. Children \
count as sub-queries."""


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
