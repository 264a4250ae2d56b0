"""A finished run's static record: what the saved notebook keeps once the live dashboard is gone.

The live dashboard is a widget, and widget views need their kernel: a reopened notebook, an HTML
export or GitHub shows "model not found" or nothing. So when a run ends, its dashboard's output is
replaced by this record: the run's own part of the transcript (assistant text, tool calls and their
results, a failure or stop), then the one-line summary, as ``text/markdown`` with a ``text/plain``
twin; the Markdown goes through ``safe_markdown`` (raw HTML and script links from a model never run).
Both are deterministic for a given run (no ids, no timings) so nbval can compare them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from tinyagents_nb.harness import AssistantMessage, Message, ToolMessage, UserMessage
from tinyagents_nb.widgets import safe_markdown

from ._display import error_line, summary_line
from ._handle import NotebookRun

__all__ = ["live_text", "record_bundle"]

_ARGS = 80
_RESULT = 160


def _clip(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _own_messages(messages: Sequence[Message], prompt: str) -> Sequence[Message]:
    """The messages this run added: everything after its prompt (the loaded history comes before it)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, UserMessage) and message.text.strip() == prompt.strip():
            return messages[index + 1 :]
    return [m for m in messages if isinstance(m, AssistantMessage | ToolMessage)]


def _blocks(run: NotebookRun) -> list[tuple[str, str]]:
    """``(markdown, plain)`` pieces of the transcript, in order."""
    outcome = run.outcome
    pieces: list[tuple[str, str]] = []
    messages = _own_messages(outcome.messages, run.prompt) if outcome is not None else []
    for message in messages:
        if isinstance(message, AssistantMessage):
            if message.text.strip():
                pieces.append((message.text.strip(), message.text.strip()))
            for call in message.tool_calls:
                args = _clip(json.dumps(dict(call.arguments), ensure_ascii=False, default=str), _ARGS)
                pieces.append((f"🔧 `{call.name}` `{args}`", f"tool call: {call.name} {args}"))
        elif isinstance(message, ToolMessage):
            mark = "✗ error" if message.is_error else "→"
            text = _clip(message.text, _RESULT)
            pieces.append((f"&nbsp;&nbsp;{mark} `{text}`", f"  {mark} {text}"))
        elif isinstance(message, UserMessage) and message.text.strip():  # steering sent during the run
            pieces.append((f"↪ *steered:* {message.text.strip()}", f"steered: {message.text.strip()}"))
    if not any(isinstance(m, AssistantMessage) and m.text.strip() for m in messages) and run.final_text:
        pieces.append((run.final_text, run.final_text))  # e.g. a structured answer with no message text
    if outcome is not None and outcome.error is not None and outcome.status == "failed":
        line = f"run failed: {error_line(outcome.error)}"
        pieces.append((f"**{line}**", line))
    elif outcome is None and run.crash is not None:
        line = f"run failed: {error_line(run.crash)}"
        pieces.append((f"**{line}**", line))
    if run.status == "cancelled":
        pieces.append(("*— stopped here —*", "— stopped here —"))
    return pieces


def record_bundle(run: NotebookRun) -> dict[str, str]:
    """The ``text/markdown`` + ``text/plain`` record of an ended run."""
    title = f'agent run "{run.name}"' if run.name else "agent run"
    pieces = _blocks(run)
    summary = summary_line(run)
    # The frontend renders this Markdown as trusted output, and model text, tool results and errors are
    # untrusted: raw HTML, script links and remote images are neutralised like the live transcript's.
    model = run.model.replace("`", "").replace("<", "")
    markdown = [f"**{title}** · `{model}`", *(safe_markdown(md) for md, _ in pieces), f"`{summary}`"]
    plain = [f"{title} · {run.model}", *(text for _, text in pieces), summary]
    return {"text/markdown": "\n\n".join(markdown), "text/plain": "\n".join(plain)}


def live_text(run: NotebookRun) -> str:
    """The ``text/plain`` beside the live widget: what a viewer without the kernel sees if the record never came."""
    name = f" {run.name}" if run.name else ""  # never the random id: nbval compares this line
    return f"<tinyagents run{name}: live dashboard (shown while its kernel runs; its record replaces it at the end)>"
