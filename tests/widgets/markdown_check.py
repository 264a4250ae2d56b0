"""What a real CommonMark renderer (markdown-it-py) makes of Markdown: every live tag and attribute.

The frontends render ``text/markdown`` outputs as trusted HTML, so the question a sanitiser must
answer is not "does the text contain ``<img``" but "does any renderer produce a live element or an
event-handler attribute from it". This renders with markdown-it-py (HTML allowed, as JupyterLab's
renderer allows it) and lists what is live.
"""

from __future__ import annotations

from html.parser import HTMLParser

from markdown_it import MarkdownIt

_RENDERERS = (MarkdownIt("commonmark"), MarkdownIt("commonmark").enable(["table", "strikethrough"]))
# Elements Markdown itself produces, plus the attribute-free layout tags ``layout_tags`` keeps.
_ALLOWED_TAGS = frozenset(
    "p h1 h2 h3 h4 h5 h6 em strong code pre a ul ol li blockquote hr br table thead tbody tr th td s del "
    "b i kbd sub sup small span div details summary".split()
)
_ALLOWED_ATTRIBUTES = frozenset({"href", "class", "start", "style", "title", "open"})
_SAFE_HREF = ("http://", "https://", "mailto:", "#")


class _Live(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _ALLOWED_TAGS:
            self.problems.append(f"live <{tag}>")
        for name, value in attrs:
            if name not in _ALLOWED_ATTRIBUTES:
                self.problems.append(f"live attribute {name}= on <{tag}>")
            elif name == "href" and not (value or "").lower().startswith(_SAFE_HREF):
                self.problems.append(f"link to {value!r}")
            elif name == "style" and tag not in ("th", "td"):
                self.problems.append(f"style on <{tag}>")


def live_html(markdown: str) -> list[str]:
    """Everything dangerous any of the renderers made live from ``markdown`` (empty when safe)."""
    problems: list[str] = []
    for renderer in _RENDERERS:
        parser = _Live()
        parser.feed(renderer.render(markdown))
        parser.close()
        problems += parser.problems
    return problems
