"""What the magics print and return: one-line summaries and the ``%agent …`` tables.

Plain text and pandas only (pandas imported inside each function). Every line printed into a cell
is deterministic for a given run (no ids, no timings), so nbval can compare it; the cost is the
one varying field and always has the shape ``$0.000123`` or ``cost unknown`` for easy sanitizing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

from tinyagents_nb.harness import (
    AssistantMessage,
    BudgetExceeded,
    ContextWindow,
    CostTotals,
    CostTracker,
    LimitExceeded,
    Message,
    RunTimeout,
    ToolMessage,
    ToolRegistry,
    Usage,
    UsageTracker,
)
from tinyagents_nb.harness.providers import known_providers
from tinyagents_nb.harness.runtime import CostRecord

from ._handle import NotebookRun

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "context_text",
    "cost_frame",
    "error_line",
    "history_frame",
    "limit_hint",
    "models_frame",
    "runs_frame",
    "short_id",
    "short_ids",
    "summary_line",
    "tools_frame",
    "usd_text",
]

_PREVIEW = 80


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _clip(text: str, width: int = _PREVIEW) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def usd_text(usd: Decimal | None) -> str:
    """``$0.000123`` (micro-dollars), or ``cost unknown``: an unknown price is never shown as $0."""
    return "cost unknown" if usd is None else f"${usd:.6f}"


def _usd_float(usd: Decimal | None) -> float:
    return float("nan") if usd is None else float(usd)


def error_line(exc: BaseException) -> str:
    """``Type: message (hint)`` on one line."""
    hint = getattr(exc, "hint", None)
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" + (f" ({hint})" if hint else "")


_RUN_ID: Final = re.compile(r"\brun-[0-9a-f]{12}-[0-9a-f]{6}-[0-9a-f]{8}\b")


def short_ids(text: str, runs: Sequence[NotebookRun]) -> str:
    """``text`` with each full run id replaced by its run's name (``--name`` or the id's last 8 characters)."""
    labels = {run.run_id: run.label for run in runs}
    return _RUN_ID.sub(lambda m: labels.get(m.group(), m.group()[-8:]), text)


def short_id(run_id: str) -> str:
    """A run id as user-facing lines show it: a generated id's random tail (``%agent resume`` takes it); any other whole."""
    return run_id[-8:] if _RUN_ID.fullmatch(run_id) else run_id


def limit_hint(exc: BaseException) -> tuple[str, str, str] | None:
    """How to change the notebook setting behind a limit that stopped a run: ``(lead, command, tail)``.

    ``None`` when no notebook setting applies, or when the error's own hint already says how (the
    notebook's budget refusals do). The command is kept apart so Markdown can show it as code.
    """
    if getattr(exc, "hint", None):
        return None
    if isinstance(exc, BudgetExceeded) and exc.limit == "cost_usd":
        setting = "session_max_cost_usd" if exc.anchor_run_id is None else "max_cost_usd"
        return "raise the cap with", f"%config AgentMagics.{setting} = …", " (None: no cap)"
    if isinstance(exc, RunTimeout):
        return "give the run more time with", "%%agent --timeout S", ", or leave --timeout out"
    if isinstance(exc, LimitExceeded) and exc.limit == "model_calls":
        return "allow more with", "%config AgentMagics.max_model_calls = N", " (or %%agent --max-model-calls N)"
    return None


def summary_line(run: NotebookRun) -> str:
    """``[completed · 1 model call · 0 tool calls · 42 tokens (30 in, 12 out) · $0.000000]``."""
    outcome = run.outcome
    status = run.status
    if outcome is None:
        return f"[{status}]"
    if status == "cancelled" and outcome.error is not None:
        reason = run.stop_reason
        status = f"cancelled ({reason})" if reason else status
    usage = outcome.usage
    cost = outcome.cost.total_usd if outcome.cost is not None else None
    calls, estimate = run.dashboard.interrupted() if run.dashboard is not None else (0, 0)
    approx = "~" if usage.estimated else ""  # the harness estimated part of it (no usage reported, a stop)
    model_calls, tool_calls, code_steps = outcome.model_calls, outcome.tool_calls, 0
    if run.dashboard is not None:  # the dashboard's counts: the whole tree, as its header said
        details = run.dashboard.details()
        model_calls, tool_calls, code_steps = details.model_calls, details.tool_calls, details.code_steps
    parts = [
        _plural(model_calls, "model call") + (f" + {calls:,} interrupted" if calls else ""),
        _plural(tool_calls, "tool call"),
        *([_plural(code_steps, "code step")] if code_steps else []),
        f"{approx}{usage.total_tokens:,} tokens ({usage.input_tokens:,} in, {usage.output_tokens:,} out"
        + (", estimated)" if usage.estimated else ")")
        + (f" + ~{estimate:,} streamed (estimate)" if estimate else ""),
        "cost unknown"
        if cost is None or (calls and not usage.estimated)  # a provider bills what streamed before the stop
        else approx + usd_text(cost) + (" (estimated)" if usage.estimated else ""),
    ]
    return "[" + " · ".join([status, *parts]) + "]"


# ------------------------------------------------------------------------------------------ tables
def runs_frame(runs: Sequence[NotebookRun], usage: UsageTracker, costs: CostTracker) -> pd.DataFrame:
    """One row per notebook run: name, status, model, thread, calls, tokens (sub-agents included), cost."""
    import pandas as pd

    rows = []
    for run in runs:
        tokens = usage.for_subtree(run.run_id)
        outcome = run.outcome
        live = run.stream.status
        rows.append(
            {
                "run": run.label,
                "status": run.status,
                "mode": run.mode,
                "model": run.model,
                "thread_id": run.thread_id,
                "model_calls": outcome.model_calls if outcome is not None else live.model_calls,
                "tool_calls": outcome.tool_calls if outcome is not None else live.tool_calls,
                "input_tokens": tokens.input_tokens,
                "output_tokens": tokens.output_tokens,
                "total_tokens": tokens.total_tokens,
                "cost_usd": _usd_float(costs.for_subtree(run.run_id).total_usd),
                "prompt": _clip(run.prompt),
                "run_id": run.run_id,
            }
        )
    columns = ["run", "status", "mode", "model", "thread_id", "model_calls", "tool_calls", "input_tokens"]
    columns += ["output_tokens", "total_tokens", "cost_usd", "prompt", "run_id"]
    return pd.DataFrame(rows, columns=columns)


def cost_frame(
    records: Iterable[CostRecord], run_labels: Mapping[str, str], agent_names: Mapping[str, str]
) -> pd.DataFrame:
    """Cost and tokens grouped by notebook run, agent (``main`` or the sub-agent's name) and model.

    Prompt-cache reads and writes are shown beside the input they are part of: they explain a bill
    that input tokens alone cannot (reads cost a tenth of input on Anthropic, writes 1.25x or 2x).
    """
    import pandas as pd

    groups: dict[tuple[str, str, int, str], tuple[Usage, CostTotals, int]] = {}
    for record in records:
        root, run_id = str(record.root_run_id), str(record.run_id)
        agent = "main" if record.depth == 0 else agent_names.get(run_id, run_id[-8:])
        key = (run_labels.get(root, root[-8:]), agent, record.depth, record.model)
        usage, totals, calls = groups.get(key, (Usage(), CostTotals(), 0))
        call = (
            CostTotals(unpriced_calls=1)
            if record.cost is None
            else CostTotals(known_usd=record.cost.total_usd, priced_calls=1)
        )
        groups[key] = (usage + record.usage, totals + call, calls + 1)
    rows = [
        {
            "run": run,
            "agent": agent,
            "depth": depth,
            "model": model,
            "calls": calls,
            "input_tokens": usage.input_tokens,
            "cached_input_tokens": usage.cached_input_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
            "cost_usd": _usd_float(totals.total_usd),
        }
        for (run, agent, depth, model), (usage, totals, calls) in groups.items()
    ]
    columns = [
        "run",
        "agent",
        "depth",
        "model",
        "calls",
        "input_tokens",
        "cached_input_tokens",
        "cache_write_tokens",
        "output_tokens",
        "total_tokens",
        "cost_usd",
    ]
    return pd.DataFrame(rows, columns=columns)


def history_frame(messages: Sequence[Message]) -> pd.DataFrame:
    """One row per message of a thread: role, text preview, tool calls."""
    import pandas as pd

    rows = []
    for message in messages:
        calls = ""
        if isinstance(message, AssistantMessage) and message.tool_calls:
            calls = ", ".join(call.name for call in message.tool_calls)
        elif isinstance(message, ToolMessage):
            calls = message.name
        rows.append({"role": message.role, "text": _clip(message.text, 120), "tools": calls})
    return pd.DataFrame(rows, columns=["role", "text", "tools"])


def models_frame(registered: Sequence[str], default: str | None) -> pd.DataFrame:
    """Registered models and built-in providers with whether their key is set (names only, never values)."""
    import pandas as pd

    rows: list[dict[str, Any]] = [
        {"model": name, "source": "registered", "api_key_env": "", "ready": True, "default": name == default}
        for name in registered
    ]
    for spec, ready in known_providers():
        prefix = f"{spec.name}:"
        rows.append(
            {
                "model": f"{prefix}<model>",
                "source": "provider",
                "api_key_env": spec.api_key_env or "",  # "" (not NaN) for hosts without a key
                "ready": ready,
                "default": bool(default and default.startswith(prefix)),
            }
        )
    return pd.DataFrame(rows, columns=["model", "source", "api_key_env", "ready", "default"])


def tools_frame(tools: ToolRegistry) -> pd.DataFrame:
    """One row per registered tool: name, model-visible parameters, description."""
    import pandas as pd

    rows = []
    for item in tools:
        properties = item.schema.parameters.get("properties", {})
        params = ", ".join(properties) if isinstance(properties, Mapping) else ""
        rows.append({"tool": item.name, "parameters": params, "description": _clip(item.description)})
    return pd.DataFrame(rows, columns=["tool", "parameters", "description"])


def context_text(window: ContextWindow | None, *, thread_id: str, model: str, source: str) -> str:
    """A one-line gauge: ``thread … · model … · [████░░] 12.3% · 1,234 of 10,000 tokens · 8,766 left``."""
    if window is None:
        return f"thread {thread_id} · model {model} · context window unknown ({source})"
    tokens = window.estimated_prompt_tokens if window.measured_prompt_tokens is None else window.measured_prompt_tokens
    utilization = tokens / window.usable_tokens
    used = min(max(utilization, 0.0), 1.0)
    filled = round(used * 20)
    bar = "█" * filled + "░" * (20 - filled)
    return (
        f"thread {thread_id} · model {model} · [{bar}] {utilization:.1%} · "
        f"{tokens:,} of {window.usable_tokens:,} prompt tokens · "
        f"{window.usable_tokens - tokens:,} left ({source})"
    )
