"""JupyterLab in headless Debian Chromium: a `%%agent` cell streams, Stop cancels it, a screenshot is saved.

Runs a real ``jupyter lab`` on 127.0.0.1 with a token and no network needs, and drives Debian's
``/usr/bin/chromium`` through Playwright's Python driver (no browser download). The screenshot lands
in ``artifacts/`` (ignored by git) for a person to look at.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, start_lab

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


CELLS = [
    "%load_ext tinyagents_nb",
    (
        "from tinyagents_nb.harness.testkit import StreamingMock\n"
        "from tinyagents_nb.magics import get_session\n"
        "words = [f'word{i} ' for i in range(400)]\n"
        "get_session().register_model('slow', StreamingMock(words, chunk_delay_s=0.25))"
    ),
    "%%agent --model slow\nTell me a very long story.",
]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[str]:
    with start_lab(tmp_path, CELLS) as url:
        yield url


def test_agent_cell_streams_and_stop_cancels(lab: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            page.goto(lab)
            panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
            expect(panel).to_be_visible(timeout=60_000)
            expect(page.locator("#jp-main-statusbar")).to_contain_text("Idle", timeout=60_000)
            for index in range(len(CELLS)):
                page.evaluate(
                    """(i) => {
                        const panel = window.jupyterapp.shell.currentWidget;
                        panel.content.activeCellIndex = i;
                        window.jupyterapp.commands.execute('notebook:run-cell');
                    }""",
                    index,
                )
                if index < len(CELLS) - 1:
                    cell = panel.locator(".jp-Cell").nth(index)
                    expect(cell.locator(".jp-InputPrompt")).to_contain_text(f"[{index + 1}]", timeout=60_000)
            output = panel.locator(".jp-Cell").nth(len(CELLS) - 1).locator(".jp-Cell-outputArea")
            expect(output).to_contain_text("word3", timeout=60_000)  # text streams in
            page.screenshot(path=str(ARTIFACTS / "jupyterlab-agent-streaming.png"), full_page=True)
            stop = output.locator("button", has_text="Stop").first
            stop.click()
            expect(output).to_contain_text("cancelled", timeout=15_000)
            shown = output.inner_text()
            assert "word3" in shown
            assert "word399" not in shown  # it stopped long before the end
            page.screenshot(path=str(ARTIFACTS / "jupyterlab-agent-stop.png"), full_page=True)
        finally:
            browser.close()
