"""Model text handed to the frontend's Markdown renderer carries no HTML, no unsafe link and no image."""

from __future__ import annotations

import pytest

from tinyagents_nb.widgets._safe_markdown import safe_markdown


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


def test_code_is_left_exactly_as_written() -> None:
    text = "Use `a < b && <br>` here.\n\n```html\n<script>ok()</script>\n[x](javascript:y)\n```\n\nthen 1 < 2"
    out = safe_markdown(text)
    assert "`a < b && <br>`" in out
    assert "```html\n<script>ok()</script>\n[x](javascript:y)\n```" in out
    assert out.endswith("then 1 &lt; 2")


def test_an_unclosed_fence_mid_stream_keeps_its_code_and_math_is_untouched() -> None:
    assert safe_markdown("intro\n```python\nif a<b:") == "intro\n```python\nif a<b:"
    assert safe_markdown("$e^{i\\pi} + 1 = 0$ and $$\\sum_i x_i$$") == "$e^{i\\pi} + 1 = 0$ and $$\\sum_i x_i$$"
