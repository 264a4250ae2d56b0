"""JupyterLab and Notebook 7 in headless Debian Chromium: a waiting `%%agent` cell streams, its Stop
button cancels it while the cell is still executing, and the saved notebook shows the answer without
a kernel (its HTML export, opened in the browser).

Runs a real ``jupyter lab`` (which also serves Notebook 7's ``/notebooks/`` pages) on 127.0.0.1 with a
token and no network needs, and drives Debian's ``/usr/bin/chromium`` through Playwright's Python
driver (no browser download). No tinyagents setting is made: the cell waits by default. Screenshots
land in ``artifacts/`` (ignored by git) for a person to look at.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import ARTIFACTS, CHROMIUM, TOKEN, Notebook, fresh_notebook, serve_notebook

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


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One Jupyter server for the module: its base URL and root folder."""
    folder = tmp_path_factory.mktemp("lab")
    with serve_notebook(folder, CELLS) as base:
        yield base, folder / "root"


@pytest.fixture
def lab(server: tuple[str, Path]) -> Notebook:
    """A notebook of ``CELLS`` that no other test opened: its own kernel session and saved copy."""
    return fresh_notebook(*server, CELLS)


def _accept_dialogs(page: Any) -> None:
    """Accept a "Select Kernel" dialog, which the frontend may show while the kernel is still starting."""
    accept = page.locator(".jp-Dialog button.jp-mod-accept")
    if accept.count() and accept.first.is_visible():
        accept.first.click()


def _run_cell(page: Any, panel: Any, index: int) -> None:
    """Run cell ``index`` through the app's command (retried: before the kernel is connected it does nothing)."""
    from playwright.sync_api import expect

    prompt = panel.locator(".jp-Cell").nth(index).locator(".jp-InputPrompt")
    for _ in range(30):
        _accept_dialogs(page)
        page.evaluate(
            """(i) => {
                const panel = window.jupyterapp.shell.currentWidget;
                panel.content.activeCellIndex = i;
                window.jupyterapp.commands.execute('notebook:run-cell');
            }""",
            index,
        )
        try:
            expect(prompt).to_contain_text(re.compile(r"\[[0-9*]+\]"), timeout=2_000)
            return
        except AssertionError:
            continue
    raise AssertionError(f"cell {index} never started")


@pytest.mark.parametrize("frontend", ["lab", "notebook"])
def test_stop_cancels_a_waiting_cell_and_the_saved_notebook_shows_the_answer(
    lab: Notebook, frontend: str, tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    args = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ]  # fmt: skip
    path = f"/lab/tree/{lab.name}?reset" if frontend == "lab" else f"/notebooks/{lab.name}?"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            page.goto(f"{lab.base}{path}&token={TOKEN}")
            panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
            expect(panel).to_be_visible(timeout=60_000)
            page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget", timeout=60_000)
            page.wait_for_function(
                "() => window.jupyterapp.shell.currentWidget.sessionContext?.session?.kernel?.status === 'idle'",
                timeout=60_000,
            )
            for index in range(len(CELLS) - 1):
                _run_cell(page, panel, index)
                prompt = panel.locator(".jp-Cell").nth(index).locator(".jp-InputPrompt")
                expect(prompt).to_contain_text(f"[{index + 1}]", timeout=60_000)
            last = panel.locator(".jp-Cell").nth(len(CELLS) - 1)
            _run_cell(page, panel, len(CELLS) - 1)
            output = last.locator(".jp-Cell-outputArea")
            expect(output).to_contain_text("word3", timeout=60_000)  # text streams in while the cell waits
            expect(last.locator(".jp-InputPrompt")).to_contain_text("[*]")
            page.screenshot(path=str(ARTIFACTS / f"{frontend}-waiting-streaming.png"), full_page=True)
            _accept_dialogs(page)
            stop = output.locator("button", has_text="Stop").first
            expect(stop).to_be_enabled()
            stop.click()
            expect(output).to_contain_text("cancelled", timeout=15_000)
            expect(last.locator(".jp-InputPrompt")).to_contain_text(f"[{len(CELLS)}]", timeout=15_000)
            shown = output.inner_text()
            assert "word3" in shown
            assert "word399" not in shown  # it stopped long before the end
            assert "running" not in shown
            page.screenshot(path=str(ARTIFACTS / f"{frontend}-waiting-stopped.png"), full_page=True)
            page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
            saved = lab.path
            deadline = time.monotonic() + 30
            while "stopped here" not in saved.read_text() and time.monotonic() < deadline:
                time.sleep(0.2)
            html = tmp_path / "agent.html"
            subprocess.run(
                [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", str(saved), "--output", str(html)],
                check=True, capture_output=True, timeout=120,
            )  # fmt: skip
            page.goto(html.as_uri())  # the saved notebook, no kernel and no widget state
            body = page.locator("body")
            expect(body).to_contain_text("word3", timeout=15_000)
            expect(body).to_contain_text("cancelled (stop button)")
            assert "running" not in body.inner_text()
            page.screenshot(path=str(ARTIFACTS / f"{frontend}-saved-export.png"), full_page=True)
        finally:
            browser.close()


def test_after_a_kernel_restart_a_live_dashboard_says_the_kernel_is_gone(lab: Notebook) -> None:
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            page.goto(f"{lab.base}/lab/tree/{lab.name}?reset&token={TOKEN}")
            panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
            expect(panel).to_be_visible(timeout=60_000)
            page.wait_for_function(
                "() => window.jupyterapp.shell.currentWidget.sessionContext?.session?.kernel?.status === 'idle'",
                timeout=60_000,
            )
            page.evaluate(
                """() => window.jupyterapp.shell.currentWidget.content.widgets[2].model.sharedModel.setSource(
                    '%%agent --background --model slow\\nTell me a very long story.')"""
            )
            for index in range(len(CELLS)):
                _run_cell(page, panel, index)
                prompt = panel.locator(".jp-Cell").nth(index).locator(".jp-InputPrompt")
                expect(prompt).to_contain_text(f"[{index + 1}]", timeout=60_000)
            output = panel.locator(".jp-Cell").nth(len(CELLS) - 1).locator(".jp-Cell-outputArea")
            expect(output).to_contain_text("word3", timeout=60_000)
            gone = output.locator(".ta-gone")
            expect(gone).to_be_hidden()  # the kernel is alive: no note
            page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()")
            expect(gone).to_be_visible(timeout=30_000)
            expect(gone).to_contain_text("not running: the kernel restarted")
            assert output.locator(".ta-live").is_hidden()  # it no longer claims to run
            page.screenshot(path=str(ARTIFACTS / "lab-kernel-restarted.png"), full_page=True)
        finally:
            browser.close()
