"""Model text made safe for the frontend's own Markdown renderer.

The transcript hands answer text to JupyterLab's (or Notebook 7's, or VS Code's) Markdown renderer
as a ``text/markdown`` output, so code is highlighted, math typeset and tables styled as in any
Markdown cell. That renderer treats widget outputs as *trusted*: raw HTML in the source is inserted
as is, scripts included. Model output is untrusted (a prompt-injected web page can put anything in
it), so before it is sent:

- terminal control sequences (ANSI colours, OSC 52 clipboard writes, BEL) and other control
  characters are removed (``strip_controls``);
- every ``<`` outside code becomes ``&lt;``, so no tag (``<img onerror=…>``, ``<script>``, an
  autolink) survives, while ``a < b`` still reads the same;
- a link whose target is not ``http(s)``, ``mailto`` or an in-page ``#anchor`` (``javascript:``,
  ``data:``, entity-obfuscated schemes, relative paths) is left as plain text;
- an image becomes a plain link, so nothing is fetched from an address the model chose.

Fenced code keeps its text byte for byte, but not its framing: the only HTML that could run is raw
text the renderer sees *outside* a fence while this module thought it was inside one (a fence in a
list item that the next line ends, a fence the next piece of a joined document closes). So every
fence is written again in one form no renderer can read differently: after a blank line, at the
line's start, in backticks longer than any backtick run of its code, always closed. Any other line
that could open a fence is escaped. The result therefore stays safe when joined with other safe
pieces, and a document the package assembled goes through once more as a whole (``layout_tags``
keeps the package's own attribute-free layout tags, which no piece of model text can produce).

An inline code span becomes ``<code>`` written here, its text escaped: where a code span ends is
subtle (backslash escapes, table cells, blank lines), and if the renderer disagreed with this module
about it, a ``<`` left raw inside a presumed span would be live HTML. A presumed span that the
renderer would not have seen as one only changes how it looks, never what runs.

Everything is one pass over the text (linear time: a megabyte of any text in milliseconds).
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["safe_markdown", "strip_controls"]

_FENCE_LINE: Final = re.compile(r"^( {0,3})(`{3,}|~{3,})([^\n]*)(\n|$)", re.MULTILINE)
_FENCE_LIKE: Final = re.compile(r"^( {0,3})(?=```|~~~)", re.MULTILINE)  # such a prose line gets its first mark escaped
_TICKS: Final = re.compile(r"`+")
_FEW_RUNS: Final = 12
_CODE_ESCAPES: Final = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", "`": "&#96;"} | {c: "\\" + c for c in "\\*_[]{}()!|~$#+-."}
)
_INFO: Final = re.compile(r"[^\w+#.\- ]")
_LINK_TARGET: Final = re.compile(r"\](?=\((?!\s*(?:https?://|mailto:|#)))", re.IGNORECASE)  # a link to anything else
_REFERENCE: Final = re.compile(r"^( {0,3})\[([^\]\n]+)\]:[ \t]*(\S*)", re.MULTILINE)
_SAFE_TARGET: Final = re.compile(r"(?:https?://|mailto:|#)", re.IGNORECASE)
_IMAGE: Final = re.compile(r"(?<!\\)((?:\\\\)*)!\[")  # an unescaped ``![`` (so a second pass changes nothing)
_LAYOUT_TAG: Final = re.compile(
    r"</?(?:b|i|em|strong|code|kbd|sub|sup|small|br|hr|span|div|p|details|summary|table|thead|tbody|tr|th|td|ul|ol|li)"
    r"(?:\s+(?:class=\"[\w -]*\"|open))*\s*/?>"
)
_ANY_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # one class: a fast first look
_CONTROLS: Final = re.compile(
    r"\x1b\][^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"  # OSC (titles, hyperlinks, OSC 52 clipboard writes)
    r"|\x9d[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"  # the same, as an 8-bit C1 control
    r"|\x1b[P^_X][^\x1b\x9c\n]*(?:\x1b\\|\x9c)?"  # DCS, PM, APC, SOS strings
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"  # CSI (colours, cursor moves, screen clears)
    r"|\x1b[ -/]*[0-~]?"  # any other escape
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"  # any other control character (tab and newline stay)
)


def strip_controls(text: str) -> str:
    """``text`` without terminal control sequences or control characters; a lone carriage return becomes a newline.

    A record's ``text/plain`` is printed by terminals (``jupyter nbconvert --to markdown``, ``cat``
    of an export), where an escape from a model could rewrite the screen or the clipboard.
    """
    if _ANY_CONTROL.search(text) is None:
        return text
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROLS.sub("", text)


def safe_markdown(text: str, *, layout_tags: bool = False) -> str:
    """Return ``text`` with raw HTML, unsafe link targets, images and control sequences neutralised.

    Args:
        text: Untrusted Markdown (a model's reply, a tool's output), or a whole document built from
            pieces that already went through here.
        layout_tags: Keep attribute-free layout tags (``<details>``, ``<summary>``, ``<code>``,
            ``<b>``, table tags…, a ``class`` or ``open`` attribute at most): for the final pass over
            a document the package assembled, never for model text (it would keep the model's tags).
    """
    text = strip_controls(text)
    if "```" not in text and "~~~" not in text:  # no line can open a fence: all prose
        return _prose(text, layout_tags)
    out: list[str] = []
    pos = 0  # where the text not yet written starts (always a line's start)
    lines = _FENCE_LINE.finditer(text)  # every line that could open or close a fence, in one pass
    for line in lines:
        indent, mark, rest = line[1], line[2], line[3]
        if mark[0] == "`" and "`" in rest:  # not an opener (a backtick fence's info string has no backtick)
            continue
        start = line.start()
        if pos < start:
            out.append(_prose(text[pos:start], layout_tags))
        char, size = mark[0], len(mark)
        body_end, pos, ending = len(text), len(text), ""  # unclosed: the code runs to the end
        for close in lines:  # the closer: the same mark, at least as long, nothing after it
            closing = close[2]
            if closing[0] == char and len(closing) >= size and not close[3].strip(" \t"):
                body_end, pos, ending = close.start(), close.end(), close[4]
                break
        code = text[line.end() : body_end]
        if indent:
            code = re.sub(f"^ {{1,{len(indent)}}}", "", code, flags=re.MULTILINE)
        info = _INFO.sub("", rest).strip() if rest.strip() else ""
        lead = ""  # a blank line before the fence, whatever came before it
        if out:
            tail = out[-1][-2:]
            lead = "" if tail in ("\n\n", "\n") else "\n" if tail[-1:] == "\n" else "\n\n"
        out.append(_fenced(lead, info, code, ending))
    if pos < len(text):
        out.append(_prose(text[pos:], layout_tags))
    return "".join(out)


def _fenced(lead: str, info: str, code: str, ending: str) -> str:
    """A code block in the one form every renderer reads alike (see the module docstring)."""
    if code and code[-1] != "\n":
        code += "\n"
    ticks = "```"
    if ticks in code:  # longer than any backtick run of the code
        ticks = "`" * (max(map(len, _TICKS.findall(code))) + 1)
    return f"{lead}{ticks}{info}\n{code}{ticks}{ending}"


def _prose(text: str, layout_tags: bool) -> str:
    """Neutralise everything outside code spans (found in one pass, see ``_code_spans``)."""
    spans = _code_spans(text)
    if not spans:
        return _plain(text, layout_tags)
    parts: list[str] = []
    last = 0
    for start, content_start, content_end, end in spans:
        parts.append(_plain(text[last:start], layout_tags))
        parts.append(_code(text[content_start:content_end]))
        last = end
    parts.append(_plain(text[last:], layout_tags))
    return "".join(parts)


def _code_spans(text: str) -> list[tuple[int, int, int, int]]:
    """``(start, content start, content end, end)`` of each code span: a backtick run up to the next run as long.

    Each run length keeps a cursor into its runs' positions, so the whole search is linear (a regex
    looking ahead from every opener is quadratic on runs of distinct lengths).
    """
    first = _TICKS.search(text)
    if first is None or text.find("`", first.end()) < 0:  # fewer than two runs: no span
        return []
    runs = [m.span() for m in _TICKS.finditer(text, first.start())]
    if len(runs) <= _FEW_RUNS:  # the common case: a few spans, where a plain scan beats the bookkeeping
        return _few_spans(runs)
    by_length: dict[int, list[int]] = {}
    for index, (start, end) in enumerate(runs):
        by_length.setdefault(end - start, []).append(index)
    cursor: dict[int, int] = {}
    spans: list[tuple[int, int, int, int]] = []
    index = 0
    while index < len(runs):
        start, end = runs[index]
        same = by_length[end - start]
        at = cursor.get(end - start, 0)
        while at < len(same) and same[at] <= index:
            at += 1
        cursor[end - start] = at
        if at == len(same):
            index += 1  # no closer: the backticks are literal
            continue
        closer = same[at]
        spans.append((start, end, runs[closer][0], runs[closer][1]))
        index = closer + 1
    return spans


def _few_spans(runs: list[tuple[int, int]]) -> list[tuple[int, int, int, int]]:
    """``_code_spans`` for at most ``_FEW_RUNS`` runs (the same pairing, by a quadratic scan of a bounded list)."""
    spans: list[tuple[int, int, int, int]] = []
    index, count = 0, len(runs)
    while index < count:
        start, end = runs[index]
        index += 1
        for closer in range(index, count):
            close_start, close_end = runs[closer]
            if close_end - close_start == end - start:
                spans.append((start, end, close_start, close_end))
                index = closer + 1
                break
    return spans


def _code(content: str) -> str:
    """A code span as ``<code>``: HTML-escaped, and Markdown/math punctuation escaped."""
    content = content.replace("\n", " ")
    if len(content) > 2 and content[0] == content[-1] == " " and content.strip():
        content = content[1:-1]
    return "<code>" + content.translate(_CODE_ESCAPES) + "</code>"


def _plain(text: str, layout_tags: bool) -> str:
    if "<" in text:
        if layout_tags:
            text = re.sub("<", lambda m: "<" if _LAYOUT_TAG.match(text, m.start()) else "&lt;", text)
        else:
            text = text.replace("<", "&lt;")
    if "![" in text:  # (a literal replace when no backslash comes before one: the common, fast case)
        text = _IMAGE.sub(r"\1\\![", text) if "\\![" in text else text.replace("![", "\\![")
    if "]:" in text:
        text = _REFERENCE.sub(_reference, text)
    if "](" in text:
        text = _LINK_TARGET.sub("]\\\\", text)  # an escaped parenthesis: the renderer shows the text, no link
    if "```" in text or "~~~" in text:  # a line that could open or close a fence in some renderer's reading
        text = _FENCE_LIKE.sub(r"\1\\", text)
    return text


def _reference(match: re.Match[str]) -> str:
    if _SAFE_TARGET.match(match.group(3)):
        return match.group(0)
    return f"{match.group(1)}\\[{match.group(2)}]: {match.group(3)}"
