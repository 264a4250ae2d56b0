"""A finished run's static record: what the saved notebook keeps once the live dashboard is gone.

The live dashboard is a widget, and widget views need their kernel: a reopened notebook, an HTML
export or GitHub shows "model not found" or nothing. So when a run ends, its dashboard's output is
replaced by this record: the run's own part of the transcript (assistant text, tool calls and their
results, a failure or stop), then the one-line summary, as ``text/markdown`` with a ``text/plain``
twin; its untrusted parts go through ``safe_markdown`` (raw HTML and script links from a model never run),
and so does the joined document, once, as a whole: a renderer reads the record as one document (a
reply's unclosed fence would otherwise run on into the next piece), so that pass is what decides.
Terminal control sequences (OSC 52 clipboard writes, BEL, colours) are removed from both twins.
Both are deterministic for a given run (no ids, no timings) so nbval can compare them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Final

from tinyagents_nb.harness import AssistantMessage, Message, ToolMessage, UserMessage
from tinyagents_nb.notebook import describe_call
from tinyagents_nb.rlm import REPL_TOOL, reply_parts
from tinyagents_nb.widgets import Alert, CodeStep, Decision, safe_markdown, strip_controls

from ._display import error_line, limit_hint, short_ids, summary_line
from ._handle import NotebookRun
from ._notebook import proposals_of
from ._record_details import details_blocks, undelivered_blocks
from ._rerun import RERUN
from ._shutdown import RESTART, SHUTDOWN

__all__ = ["live_text", "record_bundle"]

_ARGS = 80
_RESULT = 160
_STEP_OUTPUT = 1_500  # per code step: enough to follow the run; the whole output is in the journal
_TICKS: Final = re.compile(r"`+")
_PUNCTUATION: Final = re.compile(r"([\\`*_\[\]{}!|~$#])")
_DOLLARS: Final = re.compile(r"\$+[\w.,]*(?<![.,])")


def _clip(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _own_messages(messages: Sequence[Message], prompt: str) -> Sequence[Message]:
    """The messages this run added: everything after its prompt (the loaded history comes before it)."""
    asked = prompt.strip()
    opening = (f"Task:\n{asked}\n", f"Next task:\n{asked}\n")  # an RLM run's task message (a session's next)
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, UserMessage) and (message.text.strip() == asked or message.text.startswith(opening)):
            return messages[index + 1 :]
    return [m for m in messages if isinstance(m, AssistantMessage | ToolMessage)]


def _log(run: NotebookRun) -> tuple[list[CodeStep], list[Decision], list[Alert]]:
    dashboard = run.dashboard
    return dashboard.log_snapshot() if dashboard is not None else ([], [], [])


def _blocks(run: NotebookRun) -> list[tuple[str, str]]:
    """``(markdown, plain)`` pieces of the transcript, in order.

    Code steps of an RLM run replace its ``repl`` calls, each in its reply's place for its block
    (see ``_reply_with_steps``); each approval decision follows its call;
    decisions and alerts elsewhere in the run's tree (sub-agents) come after the transcript.
    """
    outcome = run.outcome
    messages = _own_messages(outcome.messages, run.prompt) if outcome is not None else []
    steps, decisions, alerts = _log(run)
    root = run.run_id
    steps_of: dict[str, list[CodeStep]] = {}
    for step in steps:
        if step.run_id == root:
            steps_of.setdefault(step.call_id, []).append(step)
    decided: dict[str, list[Decision]] = {}
    for decision in decisions:
        if decision.run_id == root:
            decided.setdefault(decision.call_id, []).append(decision)
    pieces = _messages(messages, steps_of, decided)
    if run.status == "failed" and run.dashboard is not None and run.dashboard.interrupted()[0] > 0:
        pieces.append(("*— stopped here —*", "— stopped here —"))  # a timeout cut the answer, as a Stop does
    answered = any(isinstance(m, AssistantMessage) and m.text.strip() for m in messages)
    if not answered and run.status == "completed" and run.final_text:  # e.g. a structured answer with no text
        pieces.append((safe_markdown(run.final_text), run.final_text))  # (a failed run's would be an older answer)
    pieces += [_line(d.text()) for ds in decided.values() for d in ds]  # calls no kept message shows
    pieces += [_line(d.text()) for d in decisions if d.run_id != root]
    failed = run.status == "failed"
    for alert in alerts:  # a failed run's own error line below says why
        pieces.append(_line(f"⛔ {alert.what}" if failed and alert.run_id == root else alert.text()))
    error = run.crash if outcome is None else outcome.error if outcome.status == "failed" else None
    if error is not None:
        line = short_ids(f"run failed: {error_line(error)}", [run])
        pieces.append((f"**{_escape(line)}**", line))
        hint = limit_hint(error)
        if hint is not None:
            lead, command, tail = hint
            pieces.append((f"{_escape(lead)} {_code(command)}{_escape(tail)}", f"{lead} {command}{tail}"))
        partial = getattr(error, "partial_answer", None)  # an RLM run's best answer before the limit
        if isinstance(partial, str) and partial:
            text = _clip(partial, _RESULT)
            pieces.append(("**partial answer:**\n\n" + safe_markdown(text), "partial answer: " + text))
    details = run.dashboard.details() if run.dashboard is not None else None
    if details is not None:
        pieces += undelivered_blocks(details, _escape)
    if run.status == "cancelled":
        reason = run.stop_reason
        mark = f"— stopped: {reason} —" if reason in (RERUN, SHUTDOWN, RESTART) else "— stopped here —"
        pieces.append((f"*{mark}*", mark))
    return pieces + _proposed(run)


def _notebook_call(phrase: str, name: str, arguments: object) -> tuple[str, str]:
    """A notebook tool call as a sentence; ``run_code`` shows its code under it."""
    words = "".join(_code(part) if i % 2 else _escape(part) for i, part in enumerate(phrase.split("`")))
    code = arguments.get("code") if isinstance(arguments, dict) and name == "run_code" else None
    if not isinstance(code, str):
        return f"🔧 {words}", phrase
    fence = _fence(code)
    block = f"{fence}python\n{code.rstrip()}\n{fence}"
    return f"🔧 {words}\n\n{safe_markdown(block)}", f"{phrase}\n{block}"


def _proposed(run: NotebookRun) -> list[tuple[str, str]]:
    """Every cell the run proposed, with its code (a frontend inserts only the first; copy the others)."""
    proposals = proposals_of(run.run_id)
    pieces: list[tuple[str, str]] = []
    for number, proposal in enumerate(proposals, 1):
        where = "sent to the notebook as a new cell below" if proposal.inserted else "copy it into a new cell"
        title = f"proposed cell {number} of {len(proposals)} ({where})"
        note = f": {proposal.note.strip()}" if proposal.note.strip() else ""
        fence = _fence(proposal.code)
        block = f"{fence}python\n{proposal.code.rstrip()}\n{fence}"
        pieces.append((f"📝 {_escape(title + note)}\n\n{safe_markdown(block)}", f"{title}{note}\n{block}"))
    return pieces


def _messages(
    messages: Sequence[Message], steps_of: dict[str, list[CodeStep]], decided: dict[str, list[Decision]]
) -> list[tuple[str, str]]:
    """The run's own messages; takes the decisions it places out of ``decided``."""
    pieces: list[tuple[str, str]] = []
    hidden: set[str] = set()  # repl calls shown as their steps (or protocol turns): their results are in them
    answer = _rlm_answer(messages)
    for message in messages:
        if isinstance(message, AssistantMessage):
            text = message.text.strip()
            steps = [s for c in message.tool_calls if c.name == REPL_TOOL for s in steps_of.get(c.id, [])]
            if steps:
                pieces += _reply_with_steps(message.text, steps)
            elif text:
                final = message is answer
                label = ("**answer:**\n\n", "answer: ") if final else ("", "")
                pieces.append((label[0] + safe_markdown(text), label[1] + text))
            for call in message.tool_calls:
                if call.name == REPL_TOOL and (call.id in steps_of or not call.arguments.get("blocks")):
                    hidden.add(call.id)
                    continue
                phrase = describe_call(call.name, call.arguments)
                if phrase is not None:  # a notebook tool: what it did, in words (code calls show their code)
                    pieces.append(_notebook_call(phrase, call.name, call.arguments))
                else:
                    args = _clip(json.dumps(dict(call.arguments), ensure_ascii=False, default=str), _ARGS)
                    pieces.append((f"🔧 {_code(call.name)} {_code(args)}", f"tool call: {call.name} {args}"))
                pieces += [_line(d.text()) for d in decided.pop(call.id, [])]
        elif isinstance(message, ToolMessage):
            if message.tool_call_id in hidden:
                continue
            mark = "✗ error" if message.is_error else "→"
            text = _clip(message.text, _RESULT)
            pieces.append((f"&nbsp;&nbsp;{mark} {_code(text)}", f"  {mark} {text}"))
        elif isinstance(message, UserMessage) and message.text.strip():  # steering sent during the run
            text = message.text.strip()
            pieces.append((f"↪ *steered:* {_escape(text)}", f"steered: {text}"))  # typed as plain text
    return pieces


def _reply_with_steps(text: str, steps: Sequence[CodeStep]) -> list[tuple[str, str]]:
    """An RLM reply with each code block replaced by its step: prose, code, its output, in the reply's order.

    The reply carries the code and the step carries the same code plus its output, so showing both
    would say every block twice; a reader of the record wants the code once, with what it printed
    right under it. A block that never ran (not approved, after a failing block, or a stop) stays
    as the reply wrote it, marked so.
    """
    pieces: list[tuple[str, str]] = []
    left = {step.index: step for step in steps}
    for part in reply_parts(text):
        if part.index is None:
            prose = part.text.strip()
            if prose:
                pieces.append((safe_markdown(prose), prose))
        elif (step := left.pop(part.index, None)) is not None:
            markdown = step.markdown(output_chars=_STEP_OUTPUT, collapse_code=False)
            pieces.append((markdown, step.plain(output_chars=_STEP_OUTPUT, code=True)))
        else:
            fence = _fence(part.text)
            block = f"{fence}python\n{part.text}\n{fence}"
            pieces.append((f"{safe_markdown(block)}\n\n*(did not run)*", f"{block}\n(did not run)"))
    for step in left.values():  # a step the reply's text does not show (an edited history): still kept
        pieces.append(
            (
                step.markdown(output_chars=_STEP_OUTPUT, collapse_code=False),
                step.plain(output_chars=_STEP_OUTPUT, code=True),
            )
        )
    return pieces


def _fence(code: str) -> str:
    """A backtick fence longer than any backtick run in ``code`` (so nothing inside can close it)."""
    return "`" * max(3, max((len(run) for run in _TICKS.findall(code)), default=0) + 1)


def _rlm_answer(messages: Sequence[Message]) -> AssistantMessage | None:
    """An RLM run's answer: its last reply, when that ends the REPL protocol (calls no tool)."""
    replies = [m for m in messages if isinstance(m, AssistantMessage)]
    if not any(c.name == REPL_TOOL for m in replies for c in m.tool_calls):
        return None
    last = replies[-1]
    return last if not last.tool_calls and last.text.strip() else None


def _escape(text: str) -> str:
    r"""Plain text as Markdown that renders as itself: no HTML, no emphasis or link syntax, no math.

    A backslash does not keep ``$`` from being typeset in JupyterLab (its renderer turns ``\\$`` into
    a bare ``$`` before MathJax reads the page), so every ``$`` word (money, mostly) becomes a code
    span: JupyterLab's math pass skips code spans and MathJax skips ``<code>``.
    """
    out: list[str] = []
    start = 0
    for match in _DOLLARS.finditer(text):
        out.append(_escape_words(text[start : match.start()]))
        if out[-1].endswith("\\"):  # a code span right after a backslash is not one to JupyterLab's math pass
            out.append("&#8203;")
        out.append(_code(match.group()))
        start = match.end()
    out.append(_escape_words(text[start:]))
    return "".join(out)


def _escape_words(text: str) -> str:
    return _PUNCTUATION.sub(r"\\\1", text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))


def _line(text: str) -> tuple[str, str]:
    return _escape(text), text


def _code(text: str) -> str:
    """An inline code span that holds any text (fenced by more backticks than it contains)."""
    longest = max((len(run) for run in _TICKS.findall(text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def record_bundle(run: NotebookRun) -> dict[str, str]:
    """The ``text/markdown`` + ``text/plain`` record of an ended run."""
    title = f'agent run "{run.name}"' if run.name else "agent run"
    pieces = _blocks(run)
    summary = summary_line(run)
    if run.dashboard is not None:
        block = details_blocks(run.dashboard.details(), handle=run.name, escape=_escape, code=_code)
        if block is not None:
            pieces.append(block)
    # The pieces made their untrusted parts safe (_blocks); the model name is a registry key.
    model = run.model.replace("`", "").replace("<", "")
    markdown = [f"**{title}** · `{model}`", *(md for md, _ in pieces), f"`{summary}`"]
    plain = [f"{title} · {run.model}", *(text for _, text in pieces), summary]
    for note in run.notes:  # a served model name comes from the server: shown as code, never as Markdown
        markdown.append(f"`{note.replace('`', '')}`")
        plain.append(note)
    # One pass over the document as the renderer will read it; the package's own layout tags stay.
    document = safe_markdown("\n\n".join(markdown), layout_tags=True)
    return {"text/markdown": document, "text/plain": strip_controls("\n".join(plain))}


def live_text(run: NotebookRun) -> str:
    """The ``text/plain`` beside the live widget: what a viewer without the kernel sees if the record never came."""
    name = f" {run.name}" if run.name else ""  # never the random id: nbval compares this line
    return f"<tinyagents run{name}: live dashboard (shown while its kernel runs; its record replaces it at the end)>"
