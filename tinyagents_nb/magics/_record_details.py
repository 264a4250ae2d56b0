"""The record's collapsed details: what the live panes showed, kept as static Markdown.

When a run ends its dashboard (a widget) is replaced by the record, and a saved notebook, an HTML
export or GitHub can show only the record. So the record ends with a collapsed ``<details>``
block holding what the panes held: the run tree (status, tokens, cost per agent), every tool call
with its arguments and result, the cost table, and the steering messages sent (delivered or not).
Markdown inside the block renders in JupyterLab, Notebook 7, nbconvert and GitHub alike. Every
untrusted value (tool arguments and results, agent names) is a code span, a fenced block or
escaped text; money is always in a code span, so no ``$`` is ever typeset as math.

Nothing here has ids or timings: the record stays deterministic for nbval.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Final

from tinyagents_nb.widgets import RunDetails

from ._display import usd_text

__all__ = ["details_blocks", "undelivered_blocks"]

_REPLAYED: Final = "from before the restart"  # a resumed run's call from its journal (the pane says the same)
_ARGS: Final = 600
_RESULT: Final = 1_500
_TICKS: Final = re.compile(r"`+")


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _fenced(text: str, info: str = "") -> str:
    fence = "`" * max(3, max((len(run) for run in _TICKS.findall(text)), default=0) + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def _money(usd: Decimal | None) -> str:
    return f"`{usd_text(usd)}`"


def undelivered_blocks(details: RunDetails, escape: Callable[[str], str]) -> list[tuple[str, str]]:
    """One line per steering message that no model call read (the run had no further step)."""
    return [
        (
            f"↪ *not delivered (the run had no further step):* {escape(text)}",
            f"not delivered (the run had no further step): {text}",
        )
        for text in details.undelivered
    ]


def details_blocks(
    details: RunDetails, *, handle: str | None, escape: Callable[[str], str], code: Callable[[str], str]
) -> tuple[str, str] | None:
    """``(markdown, plain)`` of the collapsed details, or ``None`` when the panes held nothing more.

    Args:
        details: The dashboard's snapshot.
        handle: The variable the run is bound to (``--name``), for the "show it again" hint.
        escape: Plain text to Markdown that renders as itself (the record's own escaper).
        code: Text to an inline code span that holds any text.
    """
    markdown: list[str] = []
    plain: list[str] = []
    subagents = len(details.agents) > 1
    if subagents:
        markdown += ["**Agents** (tokens and cost of each agent include its own sub-agents)"]
        rows = ["| agent | status | tokens | cost |", "|:--|:--|--:|--:|"]
        for agent in details.agents:
            indent = "&nbsp;&nbsp;" * agent.depth + ("└ " if agent.depth else "")
            rows.append(
                f"| {indent}{escape(agent.name)} | {escape(agent.status)} | {agent.tokens:,} | {_money(agent.usd)} |"
            )
            plain.append(
                f"{'  ' * agent.depth}{agent.name}: {agent.status} · {agent.tokens:,} tokens · {usd_text(agent.usd)}"
            )
        if details.agents_dropped:
            rows.append(f"| … {details.agents_dropped:,} earlier agents | | | |")
        markdown.append("\n".join(rows))
        plain.insert(0, "agents:")
    if details.tools:
        count = len(details.tools) + details.tools_dropped
        markdown.append(f"**Tool calls** ({count:,})")
        plain.append(f"tool calls ({count:,}):")
        if details.tools_dropped:
            markdown.append(f"*… {details.tools_dropped:,} earlier calls not kept*")
        for tool in details.tools:
            mark = {"ok": "✓", "error": "✗", "running": "⋯"}.get(tool.status, "·")
            who = f" by {escape(tool.caption)}" if tool.caption else ""
            error = f" · {escape(tool.error_type or 'error')}" if tool.status == "error" else ""
            error += f" · {_REPLAYED}" if tool.replayed else ""
            markdown.append(f"{mark} {code(tool.name)}{who}{error}")
            markdown.append(_fenced(_clip(tool.arguments, _ARGS), "json"))
            if tool.status != "running":
                markdown.append(_fenced(_clip(tool.output, _RESULT) or "(empty)", "text"))
            shown = " ".join(_clip(tool.output, 160).split())
            before = f" ({_REPLAYED})" if tool.replayed else ""
            plain.append(
                f"  {mark} {tool.name}{' by ' + tool.caption if tool.caption else ''}{before} {tool.arguments} → {shown}"
            )
    if _cost_table_says_more(details):
        markdown.append("**Cost** (by agent and model)")
        rows = ["| agent | model | calls | input | cached | output | cost |", "|:--|:--|--:|--:|--:|--:|--:|"]
        for line in details.costs:
            rows.append(
                f"| {escape(line.agent)} | {code(line.model) if line.model else ''} | {line.calls:,} | "
                f"{line.input_tokens:,} | {line.cached_input_tokens:,} | {line.output_tokens:,} | {_money(line.usd)} |"
            )
            plain.append(f"cost: {line.agent} {line.model} · {line.calls:,} calls · {usd_text(line.usd)}".rstrip())
        markdown.append("\n".join(rows))
    if details.sent:
        markdown.append("**Steering** (messages sent from the dashboard)")
        for index, text in enumerate(details.sent):
            fate = "delivered" if index < details.delivered else "not delivered (the run had no further step)"
            markdown.append(f"- {fate}: {escape(text)}")
            plain.append(f"steering {fate}: {text}")
    if not markdown:
        return None
    if handle:
        hint = f"display({handle}.dashboard)"
        markdown.append(f"{code(hint)} shows the live dashboard again while this kernel runs.")
    counted = " (the counts in the last line cover the whole run tree, sub-agents included)" if subagents else ""
    summary = f"details: {_what(details)}{counted}"
    body = "\n\n".join(markdown)
    return (
        f"<details><summary>{escape(summary)}</summary>\n\n{body}\n\n</details>",
        "\n".join([summary, *plain]),
    )


def _what(details: RunDetails) -> str:
    parts = []
    if len(details.agents) > 1:
        parts.append(f"{len(details.agents):,} agents")
    if details.tools:
        count = len(details.tools) + details.tools_dropped
        parts.append(f"{count:,} tool call{'' if count == 1 else 's'}")
    if _cost_table_says_more(details):
        parts.append("cost")
    if details.sent:
        parts.append("steering")
    return ", ".join(parts)


def _cost_table_says_more(details: RunDetails) -> bool:
    """One agent on one model with no cache: the summary line already says all the table would."""
    return len(details.costs) > 1 or any(line.cached_input_tokens for line in details.costs)
