"""Shared launcher for the browser tests: a real ``jupyter lab`` on 127.0.0.1 and Debian's Chromium.

``start_lab(tmp_path, cells)`` writes a notebook of ``cells``, starts JupyterLab on it with a token
and no network needs, and yields the URL that opens it; ``CHROMIUM_ARGS`` launch the headless
browser without any download or background traffic. A module whose tests can share one server (its
start is 9-15 s on two cores) gives each test a fresh notebook of its own in that server's root with
``fresh_notebook`` (its own file, so its own kernel session and saved copy).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import count
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
TOKEN = "tinyagents-browser-test"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _notebook(path: Path, cells: Sequence[str]) -> None:
    nb = {
        "cells": [
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}
            for source in cells
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb))


_NOTEBOOKS = count(1)


@dataclass(frozen=True)
class Notebook:
    """A notebook of its own on a shared server: open ``f"{base}/lab/tree/{name}"``; the server saves it to ``path``."""

    base: str
    name: str
    path: Path


def fresh_notebook(base: str, root: Path, cells: Sequence[str]) -> Notebook:
    """Write a new notebook of ``cells`` into a running server's ``root`` (a name no earlier test used)."""
    name = f"agent-{next(_NOTEBOOKS)}.ipynb"
    _notebook(root / name, cells)
    return Notebook(base=base, name=name, path=root / name)


@contextmanager
def start_lab(tmp_path: Path, cells: Sequence[str]) -> Iterator[str]:
    """Run JupyterLab on a notebook of ``cells``; yields its URL; skips when Chromium is missing."""
    with serve_notebook(tmp_path, cells) as base:
        yield f"{base}/lab/tree/agent.ipynb?reset&token={TOKEN}"


@contextmanager
def serve_notebook(tmp_path: Path, cells: Sequence[str]) -> Iterator[str]:
    """Run a Jupyter server (JupyterLab, and Notebook 7 under ``/notebooks/``) on ``agent.ipynb`` of
    ``cells`` in ``tmp_path / "root"``; yields its base URL; skips when Chromium is missing."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed; .ci/run installs it with apt-get")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    root = tmp_path / "root"
    root.mkdir()
    _notebook(root / "agent.ipynb", cells)
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
    }
    env.pop("TINYAGENTS_NB_BLOCKING", None)  # the defaults, as a new user gets them: cells wait
    port = _free_port()
    log = (tmp_path / "lab.log").open("w")
    server = subprocess.Popen(
        [
            sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
            f"--port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={TOKEN}",
            f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
            "--JupyterNotebookApp.expose_app_in_browser=True",
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
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=15)
        log.close()
