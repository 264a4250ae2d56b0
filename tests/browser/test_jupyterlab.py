"""JupyterLab in headless Debian Chromium: a `%%agent` cell streams, Stop cancels it, a screenshot is saved.

Runs a real ``jupyter lab`` on 127.0.0.1 with a token and no network needs, and drives Debian's
``/usr/bin/chromium`` through Playwright's Python driver (no browser download). The screenshot lands
in ``artifacts/`` (ignored by git) for a person to look at.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
TOKEN = "tinyagents-browser-test"

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _notebook(path: Path) -> None:
    cells = [
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}
        for source in CELLS
    ]
    nb = {
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb))


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[str]:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed; .ci/run installs it with apt-get")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    root = tmp_path / "root"
    root.mkdir()
    _notebook(root / "agent.ipynb")
    settings = tmp_path / "settings"
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
        "TINYAGENTS_NB_BLOCKING": "0",
    }
    port = _free_port()
    log = (tmp_path / "lab.log").open("w")
    server = subprocess.Popen(
        [
            sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
            f"--port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={TOKEN}",
            f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
        ],
        env=env, stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                time.sleep(0.2)
        else:
            raise AssertionError("jupyter lab did not start: " + (tmp_path / "lab.log").read_text()[-2000:])
        yield f"http://127.0.0.1:{port}/lab/tree/agent.ipynb?reset&token={TOKEN}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=15)
        log.close()


def test_agent_cell_streams_and_stop_cancels(lab: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    args = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ]  # fmt: skip
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args)
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
            output = panel.locator(".jp-Cell").nth(len(CELLS) - 1).locator(".jp-OutputArea")
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
