"""Clicks in a real JupyterLab while a `%%agent` cell waits (the default mode): Pause, Send, Resume,
Stop, and the approval cards' Approve and Deny; then ``%agent resume`` of a run a dead kernel left,
whose cut-off call asks **Run again** and whose pending approval is asked again, in the same cell.

The kernel tests send the same clicks as comm messages; this checks what a person meets: the
buttons are live while the cell shows ``[*]``, each press is acknowledged in words, and the
approval decisions land in the cell's record. Screenshots go to ``artifacts/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, start_lab

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

CELLS = [
    "%load_ext tinyagents_nb",
    (
        "from tinyagents_nb.harness import ToolCall, tool\n"
        "from tinyagents_nb.harness.testkit import ScriptedModel, StreamingMock\n"
        "from tinyagents_nb.magics import get_session\n"
        "session = get_session()\n"
        "session.register_model('slow', StreamingMock([f'word{i} ' for i in range(300)], chunk_delay_s=0.2))\n"
        "@tool(requires_approval=True)\n"
        "def transfer(account: str, amount: int) -> str:\n"
        '    """Move money."""\n'
        "    return f'moved {amount} to {account}'\n"
        "session.register_tool(transfer)\n"
        "calls = [ToolCall(id='p1', name='transfer', arguments={'account': 'A', 'amount': 5}),\n"
        "         ToolCall(id='p2', name='transfer', arguments={'account': 'B', 'amount': 900})]\n"
        "session.register_model('payer', ScriptedModel([ScriptedModel.tool_calls(calls), 'Paid A; B was refused.']))"
    ),
    "%%agent --model slow --name story\nTell me a long story.",
    "%%agent --model payer --tools transfer\nPay A 5 and B 900.",
    (  # a run as a killed kernel leaves it in the store: transfer p3 cut off while it ran, p4 not started
        "import sqlite3\n"
        "from tinyagents_nb.harness.durable import RunStore\n"
        "session.register_model('resumer', ScriptedModel(['Resumed and done.']))\n"
        "with RunStore(session.store_path) as store:\n"
        "    store.start_run('run-dead', agent=None, model='resumer', prompt='pay C and D')\n"
        "    store.add_step('run-dead', 'input', {'messages': [{'role': 'user', 'text': 'pay C and D'}]})\n"
        "    early = [{'id': 'p2', 'name': 'transfer', 'arguments': {'account': 'E', 'amount': 1}}]\n"
        "    store.add_step('run-dead', 'model', {'message': {'role': 'assistant', 'tool_calls': early}, 'usage': {}})\n"
        "    store.add_step('run-dead', 'tool.started', {'id': 'p2', 'name': 'transfer'})\n"
        "    done = {'role': 'tool', 'tool_call_id': 'p2', 'name': 'transfer', 'text': 'paid E 1'}\n"
        "    store.add_step('run-dead', 'tool.done', {'message': done})\n"
        "    calls = [{'id': 'p3', 'name': 'transfer', 'arguments': {'account': 'C', 'amount': 7}},\n"
        "             {'id': 'p4', 'name': 'transfer', 'arguments': {'account': 'D', 'amount': 8}}]\n"
        "    store.add_step('run-dead', 'model', {'message': {'role': 'assistant', 'tool_calls': calls}, 'usage': {}})\n"
        "    store.add_step('run-dead', 'tool.started', {'id': 'p3', 'name': 'transfer'})\n"
        "with sqlite3.connect(session.store_path) as conn:\n"
        "    conn.execute(\"UPDATE tinyagents_runs SET owner = 'elsewhere:1:x' WHERE run_id = 'run-dead'\")"
    ),
    "%agent resume run-dead",
]


def _run_cell(page: Any, index: int) -> None:
    page.evaluate(
        """(i) => { const panel = window.jupyterapp.shell.currentWidget;
            panel.content.activeCellIndex = i; window.jupyterapp.commands.execute('notebook:run-cell'); }""",
        index,
    )


def test_pause_send_stop_and_approvals_work_while_the_cell_waits(tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with start_lab(tmp_path, CELLS) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        try:
            page.goto(url)
            panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
            expect(panel).to_be_visible(timeout=60_000)
            expect(page.locator("#jp-main-statusbar")).to_contain_text("Idle", timeout=60_000)
            for index in range(2):
                _run_cell(page, index)
                expect(panel.locator(".jp-Cell").nth(index).locator(".jp-InputPrompt")).to_contain_text(
                    f"[{index + 1}]", timeout=60_000
                )

            # a streaming run in a waiting cell: Pause, Send (Enter), Resume, Stop all answer
            _run_cell(page, 2)
            story = panel.locator(".jp-Cell").nth(2)
            out = story.locator(".jp-Cell-outputArea")
            expect(out).to_contain_text("word3", timeout=60_000)
            expect(story.locator(".jp-InputPrompt")).to_contain_text("[*]")  # the cell is still executing
            out.locator("button", has_text="Pause").click()
            expect(out).to_contain_text("pausing", timeout=5_000)
            box = out.locator("input[placeholder^='Steer']")
            box.fill("make it shorter")
            box.press("Enter")
            expect(out).to_contain_text("queued for the next model call", timeout=5_000)
            out.locator("button", has_text="Resume").click()
            out.locator("button", has_text="Stop").click()
            expect(out).to_contain_text("cancelled", timeout=10_000)
            expect(story.locator(".jp-InputPrompt")).to_contain_text("[3]", timeout=10_000)
            page.screenshot(path=str(ARTIFACTS / "lab-controls-stopped.png"), full_page=True)

            # two calls wait for approval in a waiting cell: approve one, deny the other with a reason
            _run_cell(page, 3)
            payer = panel.locator(".jp-Cell").nth(3)
            out = payer.locator(".jp-Cell-outputArea")
            approve = out.locator("button", has_text="Approve")
            expect(approve).to_have_count(2, timeout=60_000)
            expect(payer.locator(".jp-InputPrompt")).to_contain_text("[*]")
            page.screenshot(path=str(ARTIFACTS / "lab-approval-cards.png"), full_page=True)
            approve.first.click()
            expect(out.locator("button", has_text="Approve")).to_have_count(1, timeout=10_000)
            out.locator("input[placeholder^='Reason']").fill("too much")
            out.locator("button", has_text="Deny").click()
            expect(payer.locator(".jp-InputPrompt")).to_contain_text("[4]", timeout=30_000)
            expect(out).to_contain_text("moved 5 to A")
            expect(out).to_contain_text("too much")  # the denial reached the model, and the record
            expect(out).to_contain_text("Paid A; B was refused.")
            page.screenshot(path=str(ARTIFACTS / "lab-approvals-decided.png"), full_page=True)

            # %agent resume: the cut-off call asks Run again / Skip, then the pending call Approve / Deny
            _run_cell(page, 4)
            expect(panel.locator(".jp-Cell").nth(4).locator(".jp-InputPrompt")).to_contain_text("[5]", timeout=30_000)
            _run_cell(page, 5)
            resumed = panel.locator(".jp-Cell").nth(5)
            out = resumed.locator(".jp-Cell-outputArea")
            expect(out.locator("button", has_text="Run again")).to_have_count(1, timeout=60_000)
            expect(out).to_contain_text("may already have taken effect")
            expect(out.locator("button", has_text="Skip")).to_have_count(1)
            expect(resumed.locator(".jp-InputPrompt")).to_contain_text("[*]")
            out.locator("button", has_text="Skip").scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "lab-resume-card.png"), full_page=True)
            out.locator("button", has_text="Run again").click()
            expect(out.locator("button", has_text="Approve")).to_have_count(1, timeout=10_000)
            out.locator("button", has_text="Approve").click()
            expect(resumed.locator(".jp-InputPrompt")).to_contain_text("[6]", timeout=30_000)
            expect(out).to_contain_text("Resumed and done.")
            expect(out).to_contain_text("resumed run run-dead from step 5")
            expect(out).to_contain_text("3 tool calls")  # the call from before the kill, and the two settled
            expect(out).to_contain_text("from before the restart")
            out.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "lab-resume-decided.png"), full_page=True)
        finally:
            browser.close()
