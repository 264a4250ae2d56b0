"""A plain user notebook executed headless (nbconvert, papermill), with no environment variable.

The notebook is what a new user writes: two dependent ``%%agent`` cells (the second needs the
first's answer from the conversation) and ``%agent cost``; no ``await`` cells, no settings. The saved
file must hold both answers as ``text/markdown`` (readable with nbformat alone, no kernel), no output
claiming ``running``, and 2 billed calls; its HTML export must show the answers too.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.kernel.conftest import K6_PYTHON

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(300)]

CELLS = [
    "%load_ext tinyagents_nb",
    (
        "from tinyagents_nb.harness import AssistantMessage, ModelResponse, Usage\n"
        "from tinyagents_nb.harness.testkit import FunctionModel, SlowModel\n"
        "from tinyagents_nb.magics import get_session\n"
        "def answer(request):\n"
        "    said = ' '.join(m.text for m in request.messages if m.role == 'user')\n"
        "    text = 'Your name is Ada.' if 'Ada' in said and 'name?' in said else 'Nice to meet you.'\n"
        "    usage = Usage(input_tokens=20, output_tokens=5)\n"
        "    return ModelResponse(message=AssistantMessage(text=text), usage=usage, finish_reason='stop')\n"
        "get_session().register_model('memo', SlowModel(FunctionModel(answer), delay_s=1.0))"
    ),
    "%%agent --model memo\nMy name is Ada. Remember it.",
    "%%agent --model memo\nWhat is my name?",
    "%agent cost",
]


def _interpreters() -> list[Any]:
    return [pytest.param(sys.executable, id="ipykernel7"), pytest.param(str(K6_PYTHON), id="ipykernel6")]


def _setup(tmp_path: Path, python: str, cells: list[str] = CELLS) -> tuple[Path, dict[str, str]]:
    if not Path(python).exists():
        pytest.skip(f"no interpreter at {python} (./dev test creates .venv-k6)")
    spec = tmp_path / "jupyter" / "kernels" / "agentk"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps({"argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"], "language": "python",
                    "display_name": "agent test kernel"})
    )  # fmt: skip
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    nb.metadata["kernelspec"] = {"name": "agentk", "display_name": "agent test kernel", "language": "python"}
    path = tmp_path / "user.ipynb"
    nbformat.write(nb, path)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "TINYAGENTS_NB_BLOCKING"}
    env["JUPYTER_PATH"] = str(tmp_path / "jupyter")
    env["JUPYTER_RUNTIME_DIR"] = str(tmp_path / "runtime")
    return path, env


def _check_saved(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)  # no kernel involved from here on
    outputs = [out for cell in nb.cells for out in cell.get("outputs", [])]
    markdown = [out["data"]["text/markdown"] for out in outputs if "text/markdown" in out.get("data", {})]
    assert len(markdown) == 2, markdown
    assert "Nice to meet you." in markdown[0]
    assert "Your name is Ada." in markdown[1]  # the follow-up saw the first exchange
    for out in outputs:
        assert "application/vnd.jupyter.widget-view+json" not in out.get("data", {})
        text = out.get("text", "") + out.get("data", {}).get("text/plain", "")
        assert "running" not in text, text
    cost = "".join(out.get("text", "") for out in nb.cells[4].outputs)
    assert "2 billed model calls" in cost, cost
    # no dead widget state: the executor never saw a dashboard nobody could look at (was ~68 KB a run)
    widgets = json.dumps(nb.metadata.get("widgets", {}))
    assert len(widgets) < 1_000, f"{len(widgets):,} bytes of widget state saved"


@pytest.mark.parametrize("python", _interpreters())
def test_nbconvert_execute_saves_both_answers(tmp_path: Path, python: str) -> None:
    path, env = _setup(tmp_path, python)
    run = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace", str(path)]
    subprocess.run(run, env=env, check=True, capture_output=True, timeout=240)
    _check_saved(path)
    html = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--stdout", str(path)],
        env=env, check=True, capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    assert "Your name is Ada." in html
    assert "running" not in html.split("<body", 1)[1].replace("jp-mod-running", "")


@pytest.mark.parametrize("python", _interpreters())
def test_papermill_saves_both_answers(tmp_path: Path, python: str) -> None:
    path, env = _setup(tmp_path, python)
    out = tmp_path / "out.ipynb"
    run = [sys.executable, "-m", "papermill", "-k", "agentk", str(path), str(out)]
    subprocess.run(run, env=env, check=True, capture_output=True, timeout=240)
    _check_saved(out)


GATED_CELLS = [
    "%load_ext tinyagents_nb",
    (
        "from tinyagents_nb.harness import ToolCall, tool\n"
        "from tinyagents_nb.harness.testkit import ScriptedModel\n"
        "from tinyagents_nb.magics import get_session\n"
        "@tool(requires_approval=True)\n"
        "def wipe(table: str) -> str:\n"
        "    'Drop a table.'\n"
        "    return 'dropped'\n"
        "call = ToolCall(id='w0', name='wipe', arguments={'table': 'logs'})\n"
        "get_session().register_tool(wipe)\n"
        "get_session().register_model('wiper', ScriptedModel([ScriptedModel.tool_calls([call]), 'finished']))\n"
        "fence = '`' * 3\n"
        "replies = [f'{fence}python\\nprint(6 * 7)\\n{fence}', f'{fence}python\\nFINAL(42)\\n{fence}']\n"
        "get_session().register_model('coder', ScriptedModel(replies))"
    ),
    "%%agent --model wiper\nclean up",
    "%%agent --rlm local --model coder\nCompute.",
]


@pytest.mark.parametrize("python", _interpreters())
def test_a_headless_record_says_what_was_decided_and_keeps_code_steps(tmp_path: Path, python: str) -> None:
    path, env = _setup(tmp_path, python, GATED_CELLS)
    run = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace", str(path)]
    subprocess.run(run, env=env, check=True, capture_output=True, timeout=240)
    nb = nbformat.read(path, as_version=4)
    gated, rlm = ([out for out in cell.outputs if "text/markdown" in out.get("data", {})] for cell in nb.cells[2:4])
    plain = gated[-1]["data"]["text/plain"]
    assert "✗ denied wipe (unattended: nobody can answer" in plain  # nobody could click: denied, and said so
    # the run's details are in the saved file, collapsed, and survive an HTML export without a kernel
    assert re.search(r"<details><summary>details: 1 tool call\b(?!s)", gated[-1]["data"]["text/markdown"])
    html = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--stdout", str(path)],
        env=env, check=True, capture_output=True, text=True, timeout=120,
    ).stdout.split("<body", 1)[1]  # fmt: skip
    details = html[html.index("<details>") : html.index("</details>")]
    assert re.search(r"<summary>details: 1 tool call\b(?!s)", details)  # (one, not "1 tool calls")
    assert "wipe" in details
    assert "logs" in details  # the call's arguments
    assert "denied" in details
    plain = rlm[-1]["data"]["text/plain"]
    assert "step 1 (ok)\n```python\nprint(6 * 7)\n```\n  → 42" in plain  # the code, its output right after
    assert "answer: 42" in plain
    markdown = rlm[-1]["data"]["text/markdown"]
    assert markdown.count("print(6 * 7)") == 1  # each code block once
    assert markdown.index("print(6 * 7)") < markdown.index("42")


def _background_cells(*middle: str) -> list[str]:
    setup = (
        "from tinyagents_nb.harness.testkit import ScriptedModel, SlowModel\n"
        "from tinyagents_nb.magics import get_session\n"
        "get_session().register_model('slow', SlowModel(ScriptedModel(['The answer is 42.']), delay_s=2.0))"
    )
    return ["%load_ext tinyagents_nb", *middle, setup, "%%agent --background --model slow --name last\nThe answer?"]


def _execute(path: Path, env: dict[str, str]) -> nbformat.NotebookNode:
    run = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace", str(path)]
    subprocess.run(run, env=env, check=True, capture_output=True, timeout=240)
    return nbformat.read(path, as_version=4)


def _record(cell: nbformat.NotebookNode) -> str:
    """The cell's run record (its text/plain); fails if the cell kept the live widget instead."""
    for out in cell.outputs:
        assert "application/vnd.jupyter.widget-view+json" not in out.get("data", {}), cell.outputs
    records = [out["data"]["text/plain"] for out in cell.outputs if "text/markdown" in out.get("data", {})]
    assert len(records) == 1, cell.outputs
    return str(records[0])


@pytest.mark.parametrize("python", _interpreters())
def test_a_background_last_cell_keeps_its_answer(tmp_path: Path, python: str) -> None:
    path, env = _setup(tmp_path, python, _background_cells())
    last = _execute(path, env).cells[-1]
    record = _record(last)
    assert 'agent run "last"' in record
    assert "The answer is 42." in record
    assert "[completed · 1 model call" in record
    said = "".join(out.get("text", "") for out in last.outputs if out["output_type"] == "stream")
    assert said.count("ran in the foreground: no live frontend to update this cell later") == 1, said


KEEP_CELLS = [
    "%load_ext tinyagents_nb",
    '%config AgentMagics.headless_background = "keep"',
    (
        "from tinyagents_nb.harness.testkit import ScriptedModel, SlowModel\n"
        "from tinyagents_nb.magics import get_session\n"
        "get_session().register_model('slow', SlowModel(ScriptedModel(['Kept: 42.']), delay_s=2.0))"
    ),
    "%%agent --background --model slow --name kept\nThe answer?",
    "print(kept.status)",
    "%agent wait",
]


@pytest.mark.parametrize("python", _interpreters())
def test_a_kept_background_run_lands_in_its_own_cell_when_a_later_cell_waits(tmp_path: Path, python: str) -> None:
    path, env = _setup(tmp_path, python, KEEP_CELLS)
    nb = _execute(path, env)
    started, status, waited = nb.cells[3:6]
    assert "".join(out.get("text", "") for out in status.outputs) == "running\n"  # the cell did return at once
    record = _record(started)  # sent while "%agent wait" executed, applied by display id to its own cell
    assert "Kept: 42." in record
    assert "ran in the foreground" not in json.dumps(started.outputs)
    said = "".join(out.get("text", "") for out in waited.outputs)
    assert said.startswith("kept: [completed · 1 model call"), said
