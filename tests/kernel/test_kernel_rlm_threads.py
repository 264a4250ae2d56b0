"""An RLM thread and chat cells in one notebook, executed headless on both ipykernel majors.

The RLM cell's task and answer enter the thread (the chat cell after it sees them), the chat turn
reaches the next RLM cell, ``%agent trajectory`` shows and saves the RLM run's tree as a static
view the saved file keeps, and ``%agent rlm close`` ends the thread's REPL.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from tests.kernel.test_headless import _execute, _interpreters, _setup

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(300)]

CELLS = [
    "%load_ext tinyagents_nb",
    (
        "from tinyagents_nb.harness import ModelRequest, ModelResponse\n"
        "from tinyagents_nb.harness.testkit import FunctionModel, ScriptedModel\n"
        "from tinyagents_nb.magics import get_session\n"
        "fence = '`' * 3\n"
        "code = lambda c: ScriptedModel.text(f'{fence}python\\n{c}\\n{fence}')\n"
        "coder = ScriptedModel([code(\"errors = [l for l in logs if 'ERROR' in l]\\nFINAL(len(errors))\"),\n"
        "                       code('FINAL(errors[0])')])\n"
        "def chat(request):\n"
        "    said = [m.text for m in request.messages if m.role == 'assistant']\n"
        "    return ScriptedModel.text('You found 2 errors, fix the first.' if '2' in said else 'No idea.')\n"
        "get_session().register_model('coder', coder)\n"
        "get_session().register_model('chat', FunctionModel(chat))\n"
        "logs = ['ERROR disk <b>full</b>', 'INFO ok', 'ERROR auth']"
    ),
    "%%agent --rlm local --thread audit --context logs --model coder\nHow many errors?",
    "%%agent --thread audit --model chat\nWhich one matters?",
    "%%agent --rlm local --thread audit --model coder --name last\nShow it.",
    "print('chat turn seen:', any(m.text == 'You found 2 errors, fix the first.' for m in coder.requests[-1].messages))",
    "%agent trajectory last",
    "%agent trajectory last traj.jsonl\nfrom tinyagents_nb.rlm import Trajectory\nTrajectory.load('traj.jsonl')",
    "%agent rlm close audit",
]


def _text(cell: nbformat.NotebookNode) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append(out.get("text", ""))
        parts.extend(str(v) for v in out.get("data", {}).values())
    return "\n".join(parts)


@pytest.mark.parametrize("python", _interpreters())
def test_an_rlm_thread_joins_the_chat_and_its_trajectory_survives_the_saved_file(tmp_path: Path, python: str) -> None:
    path, env = _setup(tmp_path, python, CELLS)
    nb = _execute(path, env)
    cells = nb.cells
    assert "answer: 2" in _text(cells[2])
    assert "You found 2 errors, fix the first." in _text(cells[3])  # the chat cell saw the RLM's answer
    assert "answer: ERROR disk <b>full</b>" in _text(cells[4])
    assert "chat turn seen: True" in _text(cells[5])  # the next RLM turn saw the chat turn
    for cell in cells[6:8]:
        (shown,) = [out["data"] for out in cell.outputs if "text/markdown" in out.get("data", {})]
        assert "RLM trajectory · completed" in shown["text/markdown"]
        assert "FINAL(errors[0])" in shown["text/markdown"]
        assert "<b>" not in shown["text/markdown"].replace("`", "")  # model/REPL text is inert
        assert "answer: ERROR disk <b>full</b>" in shown["text/plain"]
    assert "saved the trajectory of run last" in _text(cells[7])
    assert (tmp_path / "traj.jsonl").exists()
    assert "closed the RLM session of thread audit" in _text(cells[8])
