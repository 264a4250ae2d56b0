"""JupyterLab and Notebook 7 in headless Debian Chromium: re-running a waiting cell stops its run, a
budget refusal's money (and a record's cost line) is never typeset as math, while a Markdown output
with math written on purpose is (the control), the record keeps the run's details (collapsed)
through save and an nbconvert HTML export, and Kernel ▸ Shut Down mid-run leaves a record.

Screenshots land in ``artifacts/`` (ignored by git) for a person to look at.
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

from .conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, TOKEN, Notebook, fresh_notebook, serve_notebook
from .test_jupyterlab import _accept_dialogs, _run_cell

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

SETUP = """\
from tinyagents_nb.harness import AgentHarness, ModelPricing, SubAgent, Usage, tool
from tinyagents_nb.harness.testkit import ScriptedModel, StreamingMock
from tinyagents_nb.magics import get_session
session = get_session()
session.register_model('slow', StreamingMock([f'word{i} ' for i in range(400)], chunk_delay_s=0.1))
session.context.costs.register_price('scripted', ModelPricing(input_per_mtok=1000, output_per_mtok=1000))
session.register_model('priced', ScriptedModel(['never sent']))

@tool
def lookup(topic: str) -> str:
    \"\"\"Look a figure up.\"\"\"
    return f'{topic}: 0.5 GW (2023), about $1.2bn'

sub = ScriptedModel([ScriptedModel.tool_call('lookup', {'topic': 'tidal'}, usage=Usage(input_tokens=10, output_tokens=2)),
                     ScriptedModel.text('About 0.5 GW.', usage=Usage(input_tokens=12, output_tokens=3))])
session.register_tool(SubAgent('researcher', AgentHarness(model=sub, tools=[lookup]), description='Researches.').as_tool())
session.register_model('orchestrator', ScriptedModel([
    ScriptedModel.tool_call('researcher', {'input': 'tidal capacity?'}, usage=Usage(input_tokens=20, output_tokens=2)),
    ScriptedModel.text('Tidal power: about 0.5 GW.', usage=Usage(input_tokens=30, output_tokens=4))]))
"""

CELLS = [
    "%load_ext tinyagents_nb",
    SETUP,
    "%%agent --model slow --name s1\nTell me a long story.",
    "%config AgentMagics.max_cost_usd = 0.0001",
    "%%agent --model priced --name costly\nWhat does it cost?",
    "%config AgentMagics.max_cost_usd = None",
    "%%agent --model orchestrator --name tides\nHow much tidal power is there?",
    "from IPython.display import Markdown\nMarkdown('control: $x^2 + y^2$ is math written on purpose')",
    "%%agent --model slow --background --name bg\nA story the kernel will not see the end of.",
]
RERUN, BUDGET, TIDES, CONTROL, SHUTDOWN = 2, 4, 6, 7, 8
MATH = "mjx-container, .MathJax, .MathJax_Preview, .katex, .katex-display, script[type^='math/tex']"
"""Whatever MathJax 2/3 or KaTeX leaves where it typeset something."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One Jupyter server for the module (its base URL and root); each test opens a fresh notebook in it."""
    folder = tmp_path_factory.mktemp("lab")
    with serve_notebook(folder, CELLS) as base:
        yield base, folder / "root"


@pytest.fixture
def lab(server: tuple[str, Path]) -> Notebook:
    return fresh_notebook(*server, CELLS)


def _open(page: Any, url: str) -> Any:
    from playwright.sync_api import expect

    page.goto(url)
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    expect(panel).to_be_visible(timeout=60_000)
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget", timeout=60_000)
    page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.sessionContext?.session?.kernel?.status === 'idle'",
        timeout=60_000,
    )
    return panel


def _run_and_wait(page: Any, panel: Any, index: int, count: int) -> None:
    from playwright.sync_api import expect

    _run_cell(page, panel, index)
    prompt = panel.locator(".jp-Cell").nth(index).locator(".jp-InputPrompt")
    expect(prompt).to_contain_text(f"[{count}]", timeout=60_000)


@pytest.mark.parametrize("frontend", ["lab", "notebook"])
def test_rerun_stops_the_old_run_money_is_not_math_and_the_record_keeps_details(
    lab: Notebook, frontend: str, tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    path = f"/lab/tree/{lab.name}?reset" if frontend == "lab" else f"/notebooks/{lab.name}?"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            panel = _open(page, f"{lab.base}{path}&token={TOKEN}")
            count = 0
            for index in (0, 1):
                count += 1
                _run_and_wait(page, panel, index, count)

            # 1. re-running a waiting cell stops its run first, and the new run says so
            cell = panel.locator(".jp-Cell").nth(RERUN)
            output = cell.locator(".jp-Cell-outputArea")
            _run_cell(page, panel, RERUN)
            expect(output).to_contain_text("word3", timeout=60_000)
            rerun_at = time.monotonic()
            _run_cell(page, panel, RERUN)  # Ctrl-Enter again while the cell is still [*]
            expect(output).to_contain_text("stopped the earlier run s1 of this cell", timeout=20_000)
            expect(output).to_contain_text("word3", timeout=20_000)  # the new run streams
            waited = time.monotonic() - rerun_at
            assert waited < 15, f"the re-run took {waited:.1f} s to start (the old run ran to its end?)"
            page.screenshot(path=str(ARTIFACTS / f"polish-{frontend}-rerun.png"), full_page=True)
            _accept_dialogs(page)
            output.locator("button", has_text="Stop").first.click()
            count += 2
            expect(cell.locator(".jp-InputPrompt")).to_contain_text(f"[{count}]", timeout=30_000)

            # 2. a budget refusal: every $ stays text, none is typeset
            for index in (3, BUDGET, 5):
                count += 1
                _run_and_wait(page, panel, index, count)
            refused = panel.locator(".jp-Cell").nth(BUDGET).locator(".jp-Cell-outputArea")
            expect(refused).to_contain_text("BudgetExceeded", timeout=30_000)
            text = refused.inner_text()
            assert "$0.0001" in text
            assert "%config AgentMagics.max_cost_usd" in text
            assert refused.locator(MATH).count() == 0, "money was typeset as math"
            assert not re.search(r"run-[0-9a-f]{12}-", text), "a full run id is shown"
            refused.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / f"polish-{frontend}-budget.png"), full_page=True)

            # 3. the record keeps the details, collapsed
            count += 1
            _run_and_wait(page, panel, TIDES, count)
            record = panel.locator(".jp-Cell").nth(TIDES).locator(".jp-Cell-outputArea")
            summary = record.locator("details > summary")
            expect(summary).to_contain_text("details: 2 agents, 2 tool calls", timeout=30_000)
            summary.first.click()
            expect(record.locator("details")).to_contain_text("researcher")
            expect(record.locator("details")).to_contain_text('{"topic": "tidal"}')
            expect(record).to_contain_text(re.compile(r"\$0\.\d{6}\]"))  # the summary line; the cost table has more $
            assert record.locator(MATH).count() == 0
            record.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / f"polish-{frontend}-details.png"), full_page=True)

            # 4. the control: this frontend does typeset $…$ in Markdown output, so the zero counts above mean it
            count += 1
            _run_and_wait(page, panel, CONTROL, count)
            control = panel.locator(".jp-Cell").nth(CONTROL).locator(".jp-Cell-outputArea")
            expect(control.locator(MATH).first).to_be_attached(timeout=30_000)
            outputs = panel.locator(".jp-Cell-outputArea")
            typeset = [i for i in range(outputs.count()) if i != CONTROL and outputs.nth(i).locator(MATH).count()]
            assert typeset == [], f"package text in cells {typeset} was typeset as math"

            # 5. Kernel ▸ Shut Down mid-run: the run's record replaces its dashboard, no live Stop is left
            count += 1
            _run_and_wait(page, panel, SHUTDOWN, count)
            gone = panel.locator(".jp-Cell").nth(SHUTDOWN).locator(".jp-Cell-outputArea")
            expect(gone).to_contain_text("word3", timeout=30_000)
            page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
            expect(gone).to_contain_text("stopped: the kernel was shut down", timeout=30_000)
            expect(gone).to_contain_text("cancelled (the kernel was shut down)")
            assert gone.locator("button").count() == 0, "a control is left on a run whose kernel is gone"
            assert "●" not in gone.inner_text()
            assert "■ interrupt" not in gone.inner_text()  # jupyter_client interrupts first: no line is left
            gone.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / f"polish-{frontend}-shutdown.png"), full_page=True)

            # saved, then exported without a kernel: the details and the stop are still there
            page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
            saved = lab.path
            deadline = time.monotonic() + 30
            while "<details>" not in saved.read_text() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert "<details><summary>details: 2 agents" in saved.read_text()
            html = tmp_path / "agent.html"
            subprocess.run(
                [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", str(saved), "--output", str(html)],
                check=True, capture_output=True, timeout=120,
            )  # fmt: skip
            page.goto(html.as_uri())
            body = page.locator("body")
            expect(body.locator("details > summary").first).to_contain_text("details: 2 agents", timeout=15_000)
            body.locator("details > summary").first.click()
            expect(body.locator("details").first).to_contain_text("researcher")
            expect(body).to_contain_text("BudgetExceeded")
            expect(body).to_contain_text("stopped: the kernel was shut down")
            cells = body.locator(".jp-Cell").all()
            assert [i for i, c in enumerate(cells) if i != CONTROL and c.locator(MATH).count()] == []
            page.screenshot(path=str(ARTIFACTS / f"polish-{frontend}-export.png"), full_page=True)
        finally:
            browser.close()


NARROW_CELLS = [
    "%load_ext tinyagents_nb",
    """\
from tinyagents_nb.harness.testkit import ScriptedModel, StreamingMock
from tinyagents_nb.magics import agent_tool, get_session

@agent_tool(requires_approval=True)
def delete_rows(table: str) -> str:
    \"\"\"Delete every row of a table.\"\"\"
    return f'deleted {table}'

get_session().register_model('wiper', ScriptedModel([ScriptedModel.tool_call('delete_rows', {'table': 'logs'}), 'Done.']))
get_session().register_model('talker', StreamingMock('word ' * 3000, chunk_delay_s=0.01))
""",
    "%%agent --model wiper --name wipe\nClean the logs table.",
    "%%agent --model talker --timeout 1.5 --name t1\nTalk.",
]


@pytest.fixture
def narrow_lab(server: tuple[str, Path]) -> Notebook:
    return fresh_notebook(*server, NARROW_CELLS)


@pytest.mark.parametrize("frontend", ["lab", "notebook"])
def test_at_620_px_approval_buttons_keep_their_labels_and_a_timeout_is_marked(
    narrow_lab: Notebook, frontend: str
) -> None:
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    path = f"/lab/tree/{narrow_lab.name}?reset" if frontend == "lab" else f"/notebooks/{narrow_lab.name}?"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 620, "height": 1000})
        try:
            panel = _open(page, f"{narrow_lab.base}{path}&token={TOKEN}")
            for index in (0, 1):
                _run_and_wait(page, panel, index, index + 1)
            _run_cell(page, panel, 2)
            output = panel.locator(".jp-Cell").nth(2).locator(".jp-Cell-outputArea")
            approve = output.locator("button", has_text="Approve")
            expect(approve).to_be_visible(timeout=30_000)
            deny = output.locator("button", has_text="Deny")
            for button in (approve, deny):
                clipped = button.evaluate("b => b.scrollWidth > b.clientWidth + 1")
                assert not clipped, f"{button.inner_text()!r} is cut off at 620 px"
                assert button.bounding_box()["width"] >= 60
            approve.scroll_into_view_if_needed()
            output.locator("input[placeholder^='Reason']").fill("checking the status bar")  # a widget message
            time.sleep(1.5)
            status = page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status")
            assert status == "busy", f"the kernel indicator says {status!r} while the cell still waits"
            page.screenshot(path=str(ARTIFACTS / f"polish-620-{frontend}-approval.png"), full_page=False)
            approve.click()
            expect(output).to_contain_text("approved delete_rows", timeout=30_000)
            _run_and_wait(page, panel, 3, 4)
            timed_out = panel.locator(".jp-Cell").nth(3).locator(".jp-Cell-outputArea")
            expect(timed_out).to_contain_text("RunTimeout", timeout=30_000)
            expect(timed_out).to_contain_text("— stopped here —")
            expect(timed_out).to_contain_text("1 interrupted")
            timed_out.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / f"polish-620-{frontend}-timeout.png"), full_page=False)
        finally:
            browser.close()
