"""Reading a model reply: the fenced ``python``/``repl`` code blocks it wants run, in order.

Only blocks tagged ``python``, ``py`` or ``repl`` (or untagged) count, so a reply that shows a shell
command or some JSON in a fence is not executed by accident. A bare ``FINAL(...)`` line outside any
fence is the paper's way of answering in prose; ``final_from_text`` reads it when a reply has no code.
``reply_parts`` keeps the prose between the blocks too, so a view can show each block once, in place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["PROSE_LIMIT", "ReplyPart", "extract_code_blocks", "final_from_text", "reply_parts", "split_reply"]

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<tag>[\w+-]*)[^\n]*\n", re.MULTILINE)
_RUNNABLE = frozenset({"", "python", "py", "python3", "repl"})
_FINAL_LINE = re.compile(r"^[ \t]*FINAL\((?P<answer>.*)\)[ \t]*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class ReplyPart:
    """A piece of a reply: prose (``index`` is ``None``) or the runnable block ``index`` (as it runs)."""

    text: str
    index: int | None = None


def reply_parts(text: str) -> list[ReplyPart]:
    """``text`` cut into prose and runnable blocks, in order; block ``i`` is ``extract_code_blocks(text)[i]``.

    The prose keeps everything that is not a runnable block (a ``bash`` or ``json`` fence stays in
    it, as does an empty block, which never runs); a block's fences and common indent are removed.
    An unclosed fence runs to the end of the text (a reply cut off by the token limit still shows
    its code, and running it surfaces the ``SyntaxError`` to the model).
    """
    parts: list[ReplyPart] = []
    prose_from = pos = blocks = 0
    while (opening := _FENCE.search(text, pos)) is not None:
        fence, indent = opening["fence"], opening["indent"]
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        end = closing.search(text, opening.end())
        body = text[opening.end() : end.start() if end else len(text)]
        pos = end.end() if end else len(text)
        if opening["tag"].lower() not in _RUNNABLE:
            continue
        lines = body.splitlines()
        if indent:
            lines = [line[len(indent) :] if line.startswith(indent) else line for line in lines]
        code = "\n".join(lines).strip("\n")
        if not code.strip():
            continue
        if opening.start() > prose_from:
            parts.append(ReplyPart(text[prose_from : opening.start()]))
        parts.append(ReplyPart(code, blocks))
        prose_from, blocks = pos, blocks + 1
    if prose_from < len(text):
        parts.append(ReplyPart(text[prose_from:]))
    return parts


PROSE_LIMIT = 4_000
"""What a trajectory keeps of the prose around one block (a reply's prose is the model's own, and short)."""


def split_reply(text: str) -> tuple[list[str], list[str]]:
    """``(blocks, prose)``: the runnable blocks, and the prose before each and after the last (one more).

    Each prose piece is stripped and cut to ``PROSE_LIMIT`` characters (the cut is marked).
    """
    blocks: list[str] = []
    prose = [""]
    for part in reply_parts(text):
        if part.index is None:
            prose[-1] += part.text
        else:
            blocks.append(part.text)
            prose.append("")
    return blocks, [_bounded(piece.strip()) for piece in prose]


def _bounded(text: str) -> str:
    if len(text) <= PROSE_LIMIT:
        return text
    return text[:PROSE_LIMIT] + f"\n[… {len(text) - PROSE_LIMIT:,} more characters]"


def extract_code_blocks(text: str) -> list[str]:
    """The runnable fenced blocks of ``text``, in order, with their fences and common indent removed."""
    return [part.text for part in reply_parts(text) if part.index is not None]


def final_from_text(text: str) -> str | None:
    """The answer of a prose ``FINAL(answer)`` line (quotes around it removed), or ``None``."""
    match = _FINAL_LINE.search(text)
    if match is None:
        return None
    answer = match["answer"].strip()
    if len(answer) >= 2 and answer[0] == answer[-1] and answer[0] in "\"'":
        answer = answer[1:-1]
    return answer
