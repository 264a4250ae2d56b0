"""Model text handed to the frontend's Markdown renderer carries no HTML, no unsafe link and no image."""

from __future__ import annotations

import pytest

from tinyagents_nb.widgets import safe_markdown


@pytest.mark.parametrize(
    "attack",
    [
        '<img src=x onerror="alert(1)">',
        "<script>alert(1)</script>",
        "<a href='javascript:alert(1)'>x</a>",
        "text <iframe src=//evil></iframe> more",
        "<details open ontoggle=alert(1)>",
    ],
)
def test_raw_html_becomes_text(attack: str) -> None:
    out = safe_markdown(attack)
    assert "<" not in out
    assert out.replace("&lt;", "<") == attack  # what the reader sees is exactly what the model wrote


@pytest.mark.parametrize(
    "link",
    [
        "[click](javascript:alert(1))",
        "[click]( javascript:alert(1))",
        "[click](jav&#x61;script:alert(1))",
        "[click](data:text/html;base64,PHNjcmlwdD4=)",
        "[click](relative/path)",
    ],
)
def test_links_to_anything_but_the_web_are_not_links(link: str) -> None:
    assert "](" not in safe_markdown(link)  # the parenthesis is escaped: the renderer shows plain text


def test_web_and_mail_links_stay_links_and_images_become_links() -> None:
    text = "see [docs](https://example.org/a?b=1) or [mail](mailto:a@b.c) or [top](#intro)"
    assert safe_markdown(text) == text
    assert safe_markdown("![chart](https://evil.example/pixel.png)") == "\\![chart](https://evil.example/pixel.png)"
    assert safe_markdown("[ref]: javascript:alert(1)") == "\\[ref]: javascript:alert(1)"
    assert safe_markdown("[ref]: https://example.org") == "[ref]: https://example.org"


def test_fenced_code_is_sent_byte_for_byte_and_code_spans_become_escaped_code() -> None:
    text = "Use `Vec<T>` and `a*b*c` here.\n\n```html\n<script>ok()</script>\n[x](javascript:y)\n```\n\nthen 1 < 2"
    out = safe_markdown(text)
    assert "<code>Vec&lt;T&gt;</code>" in out
    assert "<code>a\\*b\\*c</code>" in out  # no emphasis inside code
    assert "```html\n<script>ok()</script>\n[x](javascript:y)\n```" in out
    assert out.endswith("then 1 &lt; 2")


@pytest.mark.parametrize(
    "attack",
    [
        "\\`<img src=x onerror=alert(1)>`",  # an escaped backtick opens no code span
        "| a | `x | <img src=x onerror=alert(1)> | y` |\n|---|---|---|",  # table cells split first
        "`start\n\n<img src=x onerror=alert(1)>\n\nend`",  # a code span cannot cross paragraphs
        "``` info`with`backticks\n<img src=x onerror=alert(1)>\n```",  # not a fence at all
    ],
)
def test_where_a_code_span_ends_never_decides_whether_html_runs(attack: str) -> None:
    out = safe_markdown(attack)
    assert "<img" not in out
    assert "<" not in out.replace("<code>", "").replace("</code>", "")  # the only tags are ours


def test_an_unclosed_fence_mid_stream_keeps_its_code_and_math_is_untouched() -> None:
    assert safe_markdown("intro\n```python\nif a<b:") == "intro\n```python\nif a<b:"
    assert safe_markdown("$e^{i\\pi} + 1 = 0$ and $$\\sum_i x_i$$") == "$e^{i\\pi} + 1 = 0$ and $$\\sum_i x_i$$"
