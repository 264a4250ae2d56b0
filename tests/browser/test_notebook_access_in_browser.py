"""``propose_cell`` and ``%agent fix`` in a real JupyterLab and Notebook 7: the proposed code lands as a new
cell right below the agent's cell, unexecuted, and the run's record lists it (issue 25).

Screenshots go to ``artifacts/`` (``{frontend}-propose-cell.png``, ``{frontend}-agent-fix.png``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, TOKEN, fresh_notebook, serve_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

PROPOSED = "total = 1 + 1\ntotal"
FIXED = "undefined_thing = 0\nundefined_thing + 1"
CELLS = [
    "%load_ext tinyagents_nb",
    (
        "from tinyagents_nb.harness import ToolCall\n"
        "from tinyagents_nb.harness.testkit import ScriptedModel\n"
        "from tinyagents_nb.magics import get_session\n"
        "def proposer(name, code):\n"
        "    call = ToolCall(id=name, name='propose_cell', arguments={'code': code, 'note': 'try this'})\n"
        "    get_session().register_model(name, ScriptedModel([ScriptedModel.tool_calls([call]), 'Proposed.']))\n"
        f"proposer('pc', {PROPOSED!r})\n"
        f"proposer('fx', {FIXED!r})"
    ),
    "%%agent --model pc --access auto\nPropose a cell that adds one and one.",
    "undefined_thing + 1",
    "%agent model fx",
    "%agent fix",
]


def _run_cell(page: Any, index: int) -> None:
    page.evaluate(
        """(i) => { const panel = window.jupyterapp.shell.currentWidget;
            panel.content.activeCellIndex = i; window.jupyterapp.commands.execute('notebook:run-cell'); }""",
        index,
    )


def _sources(page: Any) -> list[str]:
    return list(
        page.evaluate(
            "() => window.jupyterapp.shell.currentWidget.content.widgets.map(c => c.model.sharedModel.getSource())"
        )
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One Jupyter server for both frontends (its base URL and root); each test opens a fresh notebook in it."""
    folder = tmp_path_factory.mktemp("lab")
    with serve_notebook(folder, CELLS) as base:
        yield base, folder / "root"


@pytest.mark.parametrize("frontend", ["lab", "notebook"])
def test_propose_cell_and_agent_fix_put_a_new_cell_below(server: tuple[str, Path], frontend: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    notebook = fresh_notebook(*server, CELLS)
    path = f"/lab/tree/{notebook.name}?reset&" if frontend == "lab" else f"/notebooks/{notebook.name}?"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1100})
        try:
            page.goto(f"{notebook.base}{path}token={TOKEN}")
            panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
            expect(panel).to_be_visible(timeout=60_000)
            page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget", timeout=60_000)
            page.wait_for_function(
                "() => window.jupyterapp.shell.currentWidget.sessionContext?.session?.kernel?.status === 'idle'",
                timeout=60_000,
            )
            cells = panel.locator(".jp-Cell")
            for index in range(2):
                _run_cell(page, index)
                expect(cells.nth(index).locator(".jp-InputPrompt")).to_contain_text(f"[{index + 1}]", timeout=60_000)

            _run_cell(page, 2)  # the agent proposes a cell: it appears right below, not run
            expect(cells.nth(2).locator(".jp-InputPrompt")).to_contain_text("[3]", timeout=60_000)
            expect(cells.nth(2).locator(".jp-Cell-outputArea")).to_contain_text("proposed cell 1 of 1", timeout=30_000)
            page.wait_for_function("() => window.jupyterapp.shell.currentWidget.content.widgets.length === 7")
            sources = _sources(page)
            assert sources[3] == PROPOSED, sources
            expect(cells.nth(3).locator(".jp-InputPrompt")).to_have_text(re.compile(r"^\[ \]:$"))  # never executed
            page.screenshot(path=str(ARTIFACTS / f"{frontend}-propose-cell.png"), full_page=True)

            for index in (4, 5, 6):  # the error, the fixer model, then %agent fix (one below the other now)
                _run_cell(page, index)
                expect(cells.nth(index).locator(".jp-InputPrompt")).to_contain_text(f"[{index}]", timeout=60_000)
            fix = cells.nth(6).locator(".jp-Cell-outputArea")
            expect(fix).to_contain_text("proposed cell 1 of 1", timeout=30_000)
            page.wait_for_function("() => window.jupyterapp.shell.currentWidget.content.widgets.length === 8")
            sources = _sources(page)
            assert sources[7] == FIXED, sources
            cells.nth(7).scroll_into_view_if_needed()
            expect(cells.nth(7)).to_contain_text("undefined_thing = 0")
            page.screenshot(path=str(ARTIFACTS / f"{frontend}-agent-fix.png"), full_page=True)
        finally:
            browser.close()
