"""The dashboard as a person sees it in JupyterLab: live text in view, cost without a click, readable dark.

A real JupyterLab in headless Debian Chromium. It checks what a unit test cannot: that the
transcript grows with the page instead of scrolling inside a box, that the frontend's own Markdown
renderer draws the answer (code highlighting, links, a table, math) while raw HTML from the model
stays inert, that the Cost pane is on screen with no click, that the status colour passes WCAG AA
against the real dark-theme background, and that a dashboard left open across a kernel restart
stops claiming to run. Screenshots (narrow 620 px, dark theme) land in ``artifacts/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tinyagents_nb.widgets._style import contrast_ratio

from .conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, start_lab

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

ANSWER = (
    [f"word{i} " + ("\n\n" if i % 25 == 24 else "") for i in range(150)]
    + ["\n\n## Totals\n\n", "| item | USD |\n|---|---:|\n| revenue | 60 |\n| costs | 42 |\n\n"]
    + ["```python\n", "margin = revenue - costs  # 18\n", "```\n\n"]
    + ["Euler: $e^{i\\pi} + 1 = 0$. ", "See [the docs](https://example.org/docs). ", "Use `Vec<T>` here. "]
    + ['<img src="x" onerror="window.__tinyagentsXss = 1"> ', "[bad](javascript:window.__tinyagentsXss=2)\n"]
)
CELLS = [
    "%load_ext tinyagents_nb",
    (
        "from decimal import Decimal\n"
        "from tinyagents_nb.harness import ModelPricing, ModelProfile, Usage\n"
        "from tinyagents_nb.harness.testkit import StreamingMock\n"
        "from tinyagents_nb.magics import get_session\n"
        "profile = ModelProfile(name='streaming-mock', provider='test', context_window=8_000)\n"
        f"get_session().register_model('slow', StreamingMock({ANSWER!r}, chunk_delay_s=0.04, profile=profile,\n"
        "    usage=Usage(input_tokens=40, output_tokens=600)))\n"
        "get_session().context.costs.register_price('streaming-mock', ModelPricing(\n"
        "    input_per_mtok=Decimal('0.15'), output_per_mtok=Decimal('0.60')))\n"
        "get_session().register_model('endless', StreamingMock(['more '] * 5000, chunk_delay_s=0.05))"
    ),
    "%%agent --model slow --background --name story\nTell me a long story, then the totals.",
    "story.dashboard  # the live panes again, once the record has replaced them",
    "%%agent --model endless --background --new-thread\nKeep going.",
]

_GROWTH_JS = """(el) => ({scroll: el.scrollHeight, client: el.clientHeight,
    overflow: getComputedStyle(el).overflowY, maxHeight: getComputedStyle(el).maxHeight})"""
_COLOURS_JS = """(el) => {
    const rgb = (s) => { const m = s.match(/\\d+(\\.\\d+)?/g).map(Number);
        return '#' + m.slice(0, 3).map((v) => Math.round(v).toString(16).padStart(2, '0')).join(''); };
    let node = el, bg = 'rgba(0, 0, 0, 0)';
    while (node && (bg === 'rgba(0, 0, 0, 0)' || bg === 'transparent')) {
        bg = getComputedStyle(node).backgroundColor; node = node.parentElement; }
    return {fg: rgb(getComputedStyle(el).color), bg: rgb(bg)};
}"""


def _run_cell(page: Any, index: int) -> None:
    page.evaluate(
        """(i) => { const panel = window.jupyterapp.shell.currentWidget;
            panel.content.activeCellIndex = i; window.jupyterapp.commands.execute('notebook:run-cell'); }""",
        index,
    )


def test_the_dashboard_reads_well_in_jupyterlab(tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with start_lab(tmp_path, CELLS) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 620, "height": 900})
        try:
            page.goto(url)
            panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
            expect(panel).to_be_visible(timeout=60_000)
            page.evaluate("() => window.jupyterapp.shell.collapseLeft()")  # a narrow window has no file browser
            expect(page.locator("#jp-main-statusbar")).to_contain_text("Idle", timeout=60_000)
            for index in range(2):
                _run_cell(page, index)
                expect(panel.locator(".jp-Cell").nth(index).locator(".jp-InputPrompt")).to_contain_text(
                    f"[{index + 1}]", timeout=60_000
                )
            _run_cell(page, 2)
            dash = panel.locator(".jp-Cell").nth(2).locator(".ta-dash")
            transcript = dash.locator(".ta-transcript")
            expect(transcript).to_contain_text("word30", timeout=60_000)

            # streaming: the transcript has no scroll box of its own; it grows with the page
            first = transcript.evaluate(_GROWTH_JS)
            expect(transcript).to_contain_text("word90", timeout=60_000)
            later = transcript.evaluate(_GROWTH_JS)
            assert later["client"] > first["client"] + 50, (first, later)  # the box grew with the text
            assert later["scroll"] - later["client"] <= 2, later  # nothing hidden inside it
            assert later["maxHeight"] == "none", later

            # finished: the run's static record replaces the dashboard in its cell (rendered Markdown)
            record = panel.locator(".jp-Cell").nth(2).locator(".jp-Cell-outputArea")
            expect(record).to_contain_text("[completed", timeout=60_000)
            expect(record.locator("table").first).to_be_visible()
            expect(record).not_to_contain_text("running")
            # the dashboard itself, displayed again: the answer rendered by the frontend, raw HTML inert
            _run_cell(page, 3)
            dash = panel.locator(".jp-Cell").nth(3).locator(".ta-dash")
            transcript = dash.locator(".ta-transcript")
            expect(dash.locator(".ta-head")).to_contain_text("● completed", timeout=60_000)
            expect(transcript.locator("table")).to_be_visible()
            expect(transcript.locator("code", has_text="Vec<T>")).to_be_visible()  # inline code, shown as written
            expect(transcript.locator("a[href='https://example.org/docs']")).to_be_visible()
            assert transcript.locator("pre .cm-keyword, pre [class*='cm-'], pre span[class]").count() > 0  # highlighted
            expect(transcript.locator("mjx-container, .MathJax").first).to_be_attached(timeout=15_000)
            assert transcript.locator("img").count() == 0
            assert transcript.locator("a[href^='javascript']").count() == 0
            assert page.evaluate("() => window.__tinyagentsXss") is None
            answer = transcript.locator(".ta-answer")
            expect(answer).to_contain_text("Totals")

            # the Cost pane is on screen with no click, and the header carries tokens and USD
            cost_table = dash.locator("table.ta-table", has_text="streaming-mock")
            cost_table.scroll_into_view_if_needed()
            expect(cost_table).to_be_visible()
            expect(dash.get_by_text("Cost", exact=True)).to_be_visible()
            expect(dash.locator(".ta-head")).to_contain_text("640 tokens")
            expect(dash.locator(".ta-head")).to_contain_text("$0.000366")
            expect(dash.locator("[class*=progress]").first).to_be_visible()  # the gauge has a window to show
            stop = dash.locator("button", has_text="Stop")
            expect(stop).to_be_disabled()
            assert "mod-danger" not in (stop.get_attribute("class") or "")  # a dead Stop is not red
            dash.locator(".ta-head").scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "dashboard-narrow-620.png"), full_page=True)

            # the dark theme: the status colour passes WCAG AA on the real background
            page.set_viewport_size({"width": 1200, "height": 900})
            page.evaluate(
                "() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})"
            )
            page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=30_000)
            page.wait_for_timeout(1_000)
            colours = dash.locator(".ta-status.ta-tone-ok").evaluate(_COLOURS_JS)
            ratio = contrast_ratio(colours["fg"], colours["bg"])
            assert ratio >= 4.5, (colours, ratio)
            dash.locator(".ta-head").scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "dashboard-dark.png"), full_page=True)

            # a kernel restart while a run streams: the open dashboard stops claiming to run
            _run_cell(page, 4)
            live = panel.locator(".jp-Cell").nth(4).locator(".ta-dash")
            expect(live.locator(".ta-transcript")).to_contain_text("more", timeout=60_000)
            page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()")
            expect(live.locator(".ta-gone")).to_be_visible(timeout=30_000)
            expect(live.locator(".ta-live")).to_be_hidden()
            live.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "dashboard-after-restart.png"), full_page=False)
        finally:
            browser.close()
