"""The transcript's Markdown renderer: formatting, and that untrusted input can never inject markup."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings, strategies as st

from tinyagents_nb.widgets import render_markdown

ALLOWED_TAGS = {
    "p", "br", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "pre", "code", "strong", "em", "del",
    "ul", "ol", "li", "blockquote", "table", "thead", "tbody", "tr", "th", "td", "a",
}  # fmt: skip


@pytest.mark.parametrize(
    "source",
    [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "**<script>x</script>**",
        "`<script>`",
        "```\n<script>alert(1)</script>\n```",
        "- <script>\n- b",
        "| <script> | b |\n|---|---|\n| <iframe> | d |",
        "> <script>",
        "# <script>",
    ],
)
def test_html_in_the_input_never_survives(source: str) -> None:
    out = render_markdown(source)
    assert "<script" not in out
    assert "<img" not in out
    assert "<iframe" not in out
    assert "&lt;" in out


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        "data:text/html,<b>x</b>",
        "vbscript:x",
        "/relative/path",
        "ftp://x",
    ],
)
def test_links_are_emitted_for_http_urls_only(url: str) -> None:
    out = render_markdown(f"[click]({url})")
    assert "<a " not in out
    assert "href" not in out


def test_a_quote_in_a_url_cannot_leave_the_href_attribute() -> None:
    out = render_markdown('[x](https://a.com/"onmouseover="alert(1))')
    assert out.startswith('<p><a href="https://a.com/&quot;onmouseover=&quot;alert(1" target="_blank"')


def test_http_links_are_escaped_and_open_in_a_new_tab() -> None:
    out = render_markdown('see [the **docs**](https://ex.com/a?b=1&c="2") and https://ex.org/page.')
    assert (
        '<a href="https://ex.com/a?b=1&amp;c=&quot;2&quot;" target="_blank" rel="noopener noreferrer">'
        "the <strong>docs</strong></a>"
    ) in out
    assert '<a href="https://ex.org/page" target="_blank" rel="noopener noreferrer">https://ex.org/page</a>.' in out


def test_inline_formatting() -> None:
    assert render_markdown("**b** *i* _j_ __k__ ~~s~~ `a*b*c`") == (
        "<p><strong>b</strong> <em>i</em> <em>j</em> <strong>k</strong> <del>s</del> <code>a*b*c</code></p>"
    )
    assert render_markdown("snake_case_name and 2*3*4") == "<p>snake_case_name and 2*3*4</p>"
    assert render_markdown("an **unclosed bold") == "<p>an **unclosed bold</p>"


def test_paragraphs_line_breaks_headings_and_rules() -> None:
    assert render_markdown("## Title\n\nline one\nline two\n\n---\n\nnext") == (
        "<h2>Title</h2>\n<p>line one<br>\nline two</p>\n<hr>\n<p>next</p>"
    )


def test_code_fences_keep_their_content_verbatim() -> None:
    out = render_markdown("```python\nx = '**not bold**' < 3\n\n  indented\n```\nafter")
    assert '<code class="language-python">x = &#x27;**not bold**&#x27; &lt; 3\n\n  indented</code></pre>' in out
    assert out.endswith("<p>after</p>")


def test_an_unclosed_fence_mid_stream_renders_as_an_open_code_block() -> None:
    out = render_markdown("intro\n\n```\nprint(1)\n**x**")
    assert out.startswith("<p>intro</p>\n<pre")
    assert "<code>print(1)\n**x**</code></pre>" in out


def test_lists_nest_and_number() -> None:
    assert render_markdown("- a\n- b\n  - c\n    continued\n- d") == (
        "<ul><li>a</li><li>b<ul><li>c<br>continued</li></ul></li><li>d</li></ul>"
    )
    assert render_markdown("3. three\n4. four") == '<ol start="3"><li>three</li><li>four</li></ol>'
    assert render_markdown("- [ ] todo\n- [x] done") == "<ul><li>☐ todo</li><li>☑ done</li></ul>"


def test_blockquotes_and_tables() -> None:
    assert (
        render_markdown("> quoted *text*\n> more") == "<blockquote><p>quoted <em>text</em><br>\nmore</p></blockquote>"
    )
    table = render_markdown("| a | b |\n|:--|--:|\n| 1 | **2** |")
    assert table == (
        '<table><thead><tr><th style="text-align:left">a</th><th style="text-align:right">b</th></tr></thead>'
        '<tbody><tr><td style="text-align:left">1</td><td style="text-align:right"><strong>2</strong></td></tr>'
        "</tbody></table>"
    )
    assert render_markdown("a | b\nno separator") == "<p>a | b<br>\nno separator</p>"


def test_control_characters_cannot_forge_internal_placeholders() -> None:
    assert render_markdown("x\x000\x00 `code`") == "<p>x0 <code>code</code></p>"


def test_empty_input() -> None:
    assert render_markdown("") == ""
    assert render_markdown("\n\n  \n") == ""


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*"<>\"'&`*_~[]()#|-:>/ \nabcjs=!1.", "http://", "javascript:", "```"])).map("".join))
def test_only_our_own_tags_and_attributes_appear(source: str) -> None:
    out = render_markdown(source)
    for tag in re.findall(r"</?([a-zA-Z][a-zA-Z0-9]*)", out):
        assert tag in ALLOWED_TAGS, (tag, out)
    for attrs in re.findall(r"<[a-z0-9]+(\s[^>]*)>", out):
        leftover = re.sub(r'\s(href|target|rel|style|class|start)="[^"<>]*"', "", attrs)
        assert leftover == "", (attrs, out)  # only our attributes, every value quoted and closed
    for href in re.findall(r'href="([^"]*)"', out):
        assert href.startswith(("http://", "https://")), out
