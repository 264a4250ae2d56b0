"""Model text made safe for the frontend's own Markdown renderer.

The transcript hands answer text to JupyterLab's (or Notebook 7's, or VS Code's) Markdown renderer
as a ``text/markdown`` output, so code is highlighted, math typeset and tables styled as in any
Markdown cell. That renderer treats widget outputs as *trusted*: raw HTML in the source is inserted
as is, scripts included. Model output is untrusted (a prompt-injected web page can put anything in
it), so before it is sent:

- every ``<`` outside code becomes ``&lt;``, so no tag (``<img onerror=…>``, ``<script>``, an
  autolink) survives, while ``a < b`` still reads the same;
- a link whose target is not ``http(s)``, ``mailto`` or an in-page ``#anchor`` (``javascript:``,
  ``data:``, entity-obfuscated schemes, relative paths) is left as plain text;
- an image becomes a plain link, so nothing is fetched from an address the model chose.

Fenced code blocks are sent byte for byte (the renderer shows them literally and highlights them).
An inline code span becomes ``<code>`` written here, its text escaped: where a code span ends is
subtle (backslash escapes, table cells, blank lines), and if the renderer disagreed with this module
about it, a ``<`` left raw inside a presumed span would be live HTML. A presumed span that the
renderer would not have seen as one only changes how it looks, never what runs.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["safe_markdown"]

_FENCE: Final = re.compile(r"^ {0,3}(`{3,}(?=[^`]*$)|~{3,})")  # a backtick fence's info string has no backtick
_CODE_SPAN: Final = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)
_CODE_PUNCTUATION: Final = re.compile(r"([\\`*_\[\]{}()!|~$#+\-.>])")
_LINK_TARGET: Final = re.compile(r"\]\(\s*")
_REFERENCE: Final = re.compile(r"^( {0,3})\[([^\]\n]+)\]:[ \t]*(\S*)", re.MULTILINE)
_SAFE_TARGET: Final = re.compile(r"(?:https?://|mailto:|#)", re.IGNORECASE)


def safe_markdown(text: str) -> str:
    """Return ``text`` with raw HTML, unsafe link targets and images neutralised (code untouched)."""
    out: list[str] = []
    prose: list[str] = []
    fence: str | None = None
    for line in text.splitlines(keepends=True):
        opener = _FENCE.match(line)
        if fence is None:
            if opener:
                out.append(_prose("".join(prose)))
                prose.clear()
                fence = opener.group(1)
                out.append(line)
            else:
                prose.append(line)
        else:
            out.append(line)
            if (
                opener
                and opener.group(1)[0] == fence[0]
                and len(opener.group(1)) >= len(fence)
                and not line.strip("`~ \t\r\n")
            ):
                fence = None
    out.append(_prose("".join(prose)))
    return "".join(out)


def _prose(text: str) -> str:
    """Neutralise everything outside code spans."""
    parts: list[str] = []
    last = 0
    for span in _CODE_SPAN.finditer(text):
        parts.append(_plain(text[last : span.start()]))
        parts.append(_code(span.group(2)))
        last = span.end()
    parts.append(_plain(text[last:]))
    return "".join(parts)


def _code(content: str) -> str:
    """A code span as ``<code>``: HTML-escaped, and Markdown/math punctuation backslash-escaped."""
    content = content.replace("\n", " ")
    if len(content) > 2 and content[0] == content[-1] == " " and content.strip():
        content = content[1:-1]
    escaped = content.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "<code>" + _CODE_PUNCTUATION.sub(r"\\\1", escaped) + "</code>"


def _plain(text: str) -> str:
    text = text.replace("<", "&lt;").replace("![", "\\![")
    text = _REFERENCE.sub(_reference, text)
    return _LINK_TARGET.sub(_link_target, text)


def _link_target(match: re.Match[str]) -> str:
    rest = match.string[match.end() :]
    if _SAFE_TARGET.match(rest):
        return match.group(0)
    return "]\\(" + match.group(0)[2:]  # an escaped parenthesis: the renderer shows the text, no link


def _reference(match: re.Match[str]) -> str:
    if _SAFE_TARGET.match(match.group(3)):
        return match.group(0)
    return f"{match.group(1)}\\[{match.group(2)}]: {match.group(3)}"
