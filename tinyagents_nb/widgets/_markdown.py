"""A small, safe Markdown-to-HTML renderer for streamed model text.

ipywidgets' ``HTML`` widget inserts its value unsanitized, and model output is untrusted, so every
character of the input is HTML-escaped before any markup is added: the only tags in the output are
the ones this module writes, and links are emitted for ``http(s)`` URLs only. It covers what chat
models actually write (paragraphs, headings, fenced and inline code, bold/italic/strikethrough,
nested lists, block quotes, pipe tables, links) and tolerates half-streamed input: an unclosed code
fence renders as an open code block, unclosed emphasis stays literal.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from ._format import esc

__all__ = ["render_markdown"]

_FENCE: Final = re.compile(r"^\s{0,3}(`{3,}|~{3,})\s*([\w+.#-]*)")
_HEADING: Final = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_RULE: Final = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_ITEM: Final = re.compile(r"^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$")
_QUOTE: Final = re.compile(r"^\s{0,3}> ?(.*)$")
_TABLE_SEP: Final = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_CODE_SPAN: Final = re.compile(r"(`+)(.+?)\1")
_LINK: Final = re.compile(r"\[([^\]\n]+)\]\(([^)\s]+)\)")
_BARE_URL: Final = re.compile(r"(?<![\w/=])https?://(?:(?!&quot;|&#x27;|&lt;|&gt;)[^\s<>\"\x00])+")
_URL_TAIL: Final = ".,:!?)]"  # sentence punctuation after a bare URL is not part of it
_SAFE_URL: Final = re.compile(r"^https?://[^\s<>\"]+$", re.IGNORECASE)
_EMPHASIS: Final = (
    (re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*"), "strong"),
    (re.compile(r"(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)"), "strong"),
    (re.compile(r"(?<![*\w])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![*\w])"), "em"),
    (re.compile(r"(?<!\w)_(?=[^\s_])(.+?)(?<=[^\s_])_(?!\w)"), "em"),
    (re.compile(r"~~(?=\S)(.+?)(?<=\S)~~"), "del"),
)
_SLOT: Final = re.compile("\x00(\\d+)\x00")
_MAX_QUOTE_DEPTH: Final = 4
_PRE_STYLE: Final = "background:rgba(127,127,127,.12);padding:6px 8px;border-radius:4px;overflow-x:auto"


def render_markdown(text: str) -> str:
    """Render Markdown to HTML that is safe to put in an ``ipywidgets.HTML`` value.

    Args:
        text: Untrusted Markdown, possibly cut off mid-stream.

    Returns:
        HTML in which no tag, attribute or URL scheme comes from the input.
    """
    clean = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    return _blocks(clean.split("\n"), 0)


def _blocks(lines: list[str], depth: int) -> str:
    out: list[str] = []
    para: list[str] = []

    def end_paragraph() -> None:
        if para:
            out.append("<p>" + _inline("\n".join(para)).replace("\n", "<br>\n") + "</p>")
            para.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            end_paragraph()
            i += 1
            continue
        consumed, html = _block_at(lines, i, depth)
        if consumed:
            end_paragraph()
            out.append(html)
            i += consumed
        else:
            para.append(line.strip())
            i += 1
    end_paragraph()
    return "\n".join(out)


def _block_at(lines: list[str], i: int, depth: int) -> tuple[int, str]:
    """Try each block form at line ``i``; returns (lines consumed, HTML), or (0, "") for paragraph text."""
    line = lines[i]
    if fence := _FENCE.match(line):
        return _code_block(lines, i, fence.group(1), fence.group(2))
    if heading := _HEADING.match(line):
        level = len(heading.group(1))
        return 1, f"<h{level}>{_inline(heading.group(2))}</h{level}>"
    if _RULE.match(line):
        return 1, "<hr>"
    if _ITEM.match(line):
        return _list_block(lines, i)
    if depth < _MAX_QUOTE_DEPTH and _QUOTE.match(line):
        end = i
        inner: list[str] = []
        while end < len(lines) and (quoted := _QUOTE.match(lines[end])):
            inner.append(quoted.group(1))
            end += 1
        return end - i, f"<blockquote>{_blocks(inner, depth + 1)}</blockquote>"
    if "|" in line and i + 1 < len(lines) and _is_table_start(line, lines[i + 1]):
        return _table(lines, i)
    return 0, ""


def _code_block(lines: list[str], i: int, marker: str, lang: str) -> tuple[int, str]:
    end = i + 1
    body: list[str] = []
    closer = re.compile(rf"^\s{{0,3}}{re.escape(marker[0])}{{{len(marker)},}}\s*$")
    while end < len(lines) and not closer.match(lines[end]):
        body.append(lines[end])
        end += 1
    consumed = end - i + (1 if end < len(lines) else 0)  # an unclosed fence runs to the end (mid-stream)
    cls = f' class="language-{esc(lang)}"' if lang else ""
    return consumed, f'<pre style="{_PRE_STYLE}"><code{cls}>{esc(chr(10).join(body))}</code></pre>'


def _list_block(lines: list[str], i: int) -> tuple[int, str]:
    items: list[tuple[int, str, str, int]] = []  # indent, tag, text, ordinal
    end = i
    while end < len(lines):
        line = lines[end]
        if item := _ITEM.match(line):
            marker = item.group(2)
            ordered = marker[0].isdigit()
            items.append(
                (len(item.group(1)), "ol" if ordered else "ul", item.group(3), int(marker[:-1] or 1) if ordered else 1)
            )
        elif line.strip() and line[:1].isspace() and items:  # a continuation line of the last item
            indent, tag, text, ordinal = items[-1]
            items[-1] = (indent, tag, f"{text}\n{line.strip()}", ordinal)
        elif not line.strip() and end + 1 < len(lines) and _ITEM.match(lines[end + 1]):
            pass  # a blank line between items keeps the list going
        else:
            break
        end += 1
    parts: list[str] = []
    stack: list[tuple[int, str]] = []
    for indent, tag, text, ordinal in items:
        content = _item_text(text)
        while stack and indent < stack[-1][0]:
            parts.append(f"</li></{stack.pop()[1]}>")
        if stack and indent == stack[-1][0]:
            if tag == stack[-1][1]:
                parts.append(f"</li><li>{content}")
                continue
            parts.append(f"</li></{stack.pop()[1]}>")
        start = f' start="{ordinal}"' if tag == "ol" and ordinal != 1 else ""
        parts.append(f"<{tag}{start}><li>{content}")
        stack.append((indent, tag))
    parts.extend(f"</li></{tag}>" for _, tag in reversed(stack))
    return end - i, "".join(parts)


def _item_text(text: str) -> str:
    if text.startswith(("[ ] ", "[x] ", "[X] ")):
        box = "☐" if text[1] == " " else "☑"
        return f"{box} {_inline(text[4:])}".replace("\n", "<br>")
    return _inline(text).replace("\n", "<br>")


def _is_table_start(header: str, separator: str) -> bool:
    return "|" in separator and bool(_TABLE_SEP.match(separator)) and len(_cells(header)) == len(_cells(separator))


def _table(lines: list[str], i: int) -> tuple[int, str]:
    aligns = []
    for cell in _cells(lines[i + 1]):
        left, right = cell.startswith(":"), cell.endswith(":")
        aligns.append("center" if left and right else "right" if right else "left" if left else "")
    header = _cells(lines[i])
    end = i + 2
    rows: list[list[str]] = []
    while end < len(lines) and "|" in lines[end] and lines[end].strip():
        rows.append(_cells(lines[end]))
        end += 1

    def row(cells: list[str], tag: str) -> str:
        out = []
        for n in range(len(header)):
            align = aligns[n] if n < len(aligns) else ""
            style = f' style="text-align:{align}"' if align else ""
            out.append(f"<{tag}{style}>{_inline(cells[n]) if n < len(cells) else ''}</{tag}>")
        return "<tr>" + "".join(out) + "</tr>"

    body = "".join(row(cells, "td") for cells in rows)
    return end - i, f"<table><thead>{row(header, 'th')}</thead><tbody>{body}</tbody></table>"


def _cells(line: str) -> list[str]:
    stripped = line.strip()
    stripped = stripped.removeprefix("|").removesuffix("|")
    return [cell.strip() for cell in stripped.split("|")]


def _inline(text: str) -> str:
    """Escape, then add inline markup; code spans and links are parked in slots so nothing re-formats them."""
    slots: list[str] = []

    def park(html: str) -> str:
        slots.append(html)
        return f"\x00{len(slots) - 1}\x00"

    text = _CODE_SPAN.sub(lambda m: park(f"<code>{esc(m.group(2).strip() or m.group(2))}</code>"), text)
    text = esc(text)
    text = _LINK.sub(lambda m: _link(m, park), text)
    text = _BARE_URL.sub(lambda m: _bare_link(m.group(0), park), text)
    text = _emphasis(text)
    while _SLOT.search(text):  # slots can nest (code inside a link label)
        text = _SLOT.sub(lambda m: slots[int(m.group(1))], text)
    return text


def _emphasis(text: str) -> str:
    for pattern, tag in _EMPHASIS:
        text = pattern.sub(rf"<{tag}>\1</{tag}>", text)
    return text


def _link(match: re.Match[str], park: Callable[[str], str]) -> str:
    label, url = match.group(1), match.group(2)
    if not _SAFE_URL.match(url):  # javascript:, data:, relative paths: keep as plain text
        return match.group(0)
    return park(_anchor(url, _emphasis(label)))


def _bare_link(url: str, park: Callable[[str], str]) -> str:
    trimmed = url.rstrip(_URL_TAIL)
    return park(_anchor(trimmed, trimmed)) + url[len(trimmed) :]


def _anchor(url: str, label: str) -> str:
    # ``url`` is already escaped (``&`` → ``&amp;``, quotes → entities), so it cannot leave the attribute.
    return f'<a href="{url}" target="_blank" rel="noopener noreferrer">{label}</a>'
