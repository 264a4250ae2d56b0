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
    out: list[str] = []
    pos = 0  # where the text not yet written starts (always a line's start)
    line = _FENCE_LINE.search(text)
    while line is not None:
        indent, mark, rest = len(line.group(1)), line.group(2), line.group(3)
        if mark[0] == "`" and "`" in rest:  # not an opener (a backtick fence's info string has no backtick)
            line = _FENCE_LINE.search(text, line.end())
            continue
        close = _FENCE_LINE.search(text, line.end())
        while close is not None and not (
            close.group(2)[0] == mark[0] and len(close.group(2)) >= len(mark) and not close.group(3).strip(" \t")
        ):
            close = _FENCE_LINE.search(text, close.end())
        body_end, after = (close.start(), close.end()) if close is not None else (len(text), len(text))
        code = text[line.end() : body_end]
        if indent:
            code = re.sub(f"^ {{1,{indent}}}", "", code, flags=re.MULTILINE)
        if pos < line.start():
            out.append(_prose(text[pos : line.start()], layout_tags))
        info = _INFO.sub("", rest).strip() if rest.strip() else ""
        out.append(_fenced(out, info, code, close.group(4) if close is not None else ""))
        pos = after
        line = _FENCE_LINE.search(text, pos) if pos < len(text) else None
    if pos < len(text):
        out.append(_prose(text[pos:], layout_tags))
    return "".join(out)


def _fenced(before: list[str], info: str, code: str, ending: str) -> str:
    """A code block in the one form every renderer reads alike (see the module docstring)."""
    lead = ""
    if before:
        last = before[-1]
        lead = "" if last.endswith("\n\n") or last == "\n" else "\n" if last.endswith("\n") else "\n\n"
    if code and not code.endswith("\n"):
        code += "\n"
    longest = max(map(len, _TICKS.findall(code)), default=0) if "`" in code else 0
    ticks = "`" * max(3, longest + 1)
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
    if text.count("`") < 2:
        return []
    runs = [(m.start(), m.end()) for m in _TICKS.finditer(text)]
    if len(runs) < 2:
        return []
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
    if "``" in text or "~~~" in text:  # a line that could open or close a fence in some renderer's reading
        text = _FENCE_LIKE.sub(r"\1\\", text)
    return text


def _reference(match: re.Match[str]) -> str:
    if _SAFE_TARGET.match(match.group(3)):
        return match.group(0)
    return f"{match.group(1)}\\[{match.group(2)}]: {match.group(3)}"
