"""Model text handed to the frontend's Markdown renderer carries no HTML, no unsafe link and no image."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tinyagents_nb.widgets import safe_markdown, strip_controls

from .markdown_check import live_html


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


def test_an_unclosed_fence_mid_stream_keeps_its_code_closed_and_math_is_untouched() -> None:
    assert safe_markdown("intro\n```python\nif a<b:") == "intro\n\n```python\nif a<b:\n```"
    assert safe_markdown("$e^{i\\pi} + 1 = 0$ and $$\\sum_i x_i$$") == "$e^{i\\pi} + 1 = 0$ and $$\\sum_i x_i$$"


# ------------------------------------------------------------------ what a real renderer makes of it
_HOSTILE = '<img src=x onerror="alert(1)">'
_PIECES = [
    "```",
    "````",
    "```python",
    "~~~",
    "`",
    "``",
    "\\`",
    "\n",
    "\n\n",
    "   ",
    "    ",
    "\t",
    "> ",
    "- ",
    "1. ",
    "| a | b |\n|---|---|\n| ",
    _HOSTILE,
    "<script>alert(1)</script>",
    "<details>",
    "<pre>",
    "<!--",
    "-->",
    '<div class="ta-step">',
    "</div>",
    "[x](javascript:alert(1))",
    "![p](https://evil.example/p.png)",
    "text",
    "*",
    "\u2028",
    "\x1b]52;c;aGk=\x07",
    "&lt;",
    "\\",
]
_texts = st.lists(st.sampled_from(_PIECES), max_size=14).map("".join)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_texts)
def test_no_text_becomes_live_html_in_a_commonmark_renderer(text: str) -> None:
    assert live_html(safe_markdown(text)) == []


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_texts, min_size=1, max_size=5))
def test_pieces_sanitised_one_by_one_stay_safe_joined_and_after_the_final_pass(pieces: list[str]) -> None:
    # How the end-of-run record is built: each untrusted piece sanitised, joined, then one pass over it all.
    joined = "\n\n".join(safe_markdown(piece) for piece in pieces)
    assert live_html(joined) == []
    final = safe_markdown(joined, layout_tags=True)
    assert live_html(final) == []
    assert safe_markdown(final, layout_tags=True) == final  # a second pass changes nothing


def test_the_audit_case_a_reply_ending_in_an_open_fence_then_a_fenced_tag() -> None:
    first = "Here is the code:\n\n```python\nprint('unfinished')"
    second = f"```\n{_HOSTILE}\n```\nAll done."
    old_style = "\n\n".join(
        [first, safe_markdown(second)]
    )  # the renderer closes the first fence at the second's opener
    assert live_html("\n\n".join([safe_markdown(first), safe_markdown(second)])) == []
    assert live_html(safe_markdown(old_style, layout_tags=True)) == []


def test_a_fence_inside_a_list_item_that_the_next_line_ends() -> None:
    attack = f"- item\n\n  ```\n{_HOSTILE}\n  ```\n"  # the renderer ends the item (and its fence) at the tag
    assert live_html(safe_markdown(attack)) == []


def test_layout_tags_survive_the_final_pass_and_nothing_with_a_handler_does() -> None:
    doc = '<div class="ta-step"><b>step 1</b> · ✓</div>\n\n<details open><summary>more</summary>\n\nx\n\n</details>'
    assert safe_markdown(doc, layout_tags=True) == doc
    out = safe_markdown('<b onclick="x()">hi</b><details ontoggle=alert(1)>', layout_tags=True)
    assert out == '&lt;b onclick="x()">hi</b>&lt;details ontoggle=alert(1)>'


# ------------------------------------------------------------------ control sequences
def test_terminal_escapes_are_stripped_from_markdown_and_plain_text() -> None:
    hostile = "ok \x1b]52;c;cm0gLXJmIH4=\x07done \x1b[31mred\x1b[0m bell\x07 \x9b2J title\x1b]0;pwned\x1b\\ end\r!"
    for out in (safe_markdown(hostile), strip_controls(hostile)):
        assert not any((ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F for c in out), repr(out)
        assert "52;" not in out
        assert "pwned" not in out
    assert strip_controls(hostile) == "ok done red bell  title end\n!"
    assert strip_controls("tab\tand\nnewline stay, ünïcödé too") == "tab\tand\nnewline stay, ünïcödé too"


# ------------------------------------------------------------------ linear time
def _distinct_backtick_runs(size: int) -> str:
    parts: list[str] = []
    length = 1
    total = 0
    while total < size:
        parts.append("`" * length + " x ")
        total += length + 3
        length += 1
    return "".join(parts)[:size]


@pytest.mark.parametrize(
    "make",
    [
        _distinct_backtick_runs,
        lambda size: ("a](b " * size)[:size],
        lambda size: ("<x ![y](z) " * size)[:size],
        lambda size: ("```\n`` a\n" * size)[:size],
        lambda size: ("\x1b]" * size)[:size],
        lambda size: ("```\n`a`\n" * size)[:size],
        lambda size: ("- a\n  - b\n    - c\n      - ```\n" * size)[:size],
        lambda size: ("| a | `b` | <c> |\n" * size)[:size],
    ],
    ids=[
        "backtick-runs",
        "link-targets",
        "tags-and-images",
        "fences",
        "escapes",
        "fences-and-spans",
        "lists",
        "tables",
    ],
)
def test_a_megabyte_of_any_text_is_sanitised_in_linear_time(make: Callable[[int], str]) -> None:
    # Four times the text must take about four times as long (the old sanitiser: about 16 times, and
    # 12 s for the megabyte). A ratio holds on a loaded machine where an absolute bound would not.
    def best(text: str) -> float:
        times = []
        for _ in range(2):
            started = time.perf_counter()
            safe_markdown(text)
            times.append(time.perf_counter() - started)
        return min(times)

    quarter, whole = best(make(1 << 18)), best(make(1 << 20))
    assert whole < 12 * max(quarter, 0.01), f"{quarter:.3f} s for 256 KiB, {whole:.3f} s for 1 MiB"
    assert whole < 10.0, f"{whole:.2f} s for 1 MiB"  # generous: ~0.1-1 s on an idle 2-vCPU VM
