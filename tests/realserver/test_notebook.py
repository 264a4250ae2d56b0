"""A notebook a user writes against their local server, executed by nbclient in a real kernel.

``%%agent`` cells talk to a model registered on the llama.cpp server: two turns of one thread, the
context gauge, an RLM run (``--rlm local``) that must reach a terminal state (the 135M model cannot
really do RLM: the test checks the run ends and says how, not what it answers), and the cost line
for a model without a price.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import nbclient
import nbformat
import pytest

from tests.realserver.conftest import ALIAS, LlamaServer

pytestmark = [pytest.mark.realserver, pytest.mark.kernel, pytest.mark.timeout(420)]

CELLS = [
    "%load_ext tinyagents_nb",
    (
        "import os\n"
        "from tinyagents_nb.harness.providers import OpenAIChatModel, ProviderSpec\n"
        "from tinyagents_nb.magics import get_session\n"
        "spec = ProviderSpec.compatible(base_url=os.environ['TINYAGENTS_TEST_LLAMA_URL'])\n"
        f"get_session().register_model('local', lambda: OpenAIChatModel({ALIAS!r}, provider=spec))\n"
        "logs = '\\n'.join(f'line {i}: ok' for i in range(20))"
    ),
    "%%agent --model local\nWhat is the capital of France? Answer in one sentence.",
    "%%agent --model local\nAnd the capital of Italy?",
    "%agent context",
    "%%agent --rlm local --model local --context logs --max-model-calls 3\nHow many lines does `logs` have?",
    "%agent cost",
]


def _text(cell: Any) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append(out.get("text", ""))
        data = out.get("data", {})
        parts.append(data.get("text/plain", ""))
        if out.get("output_type") == "error":
            parts.append(f"{out['ename']}: {out['evalue']}")
    return "\n".join(p for p in parts if p)


def test_a_notebook_against_the_real_server(
    llama: LlamaServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "jupyter" / "kernels" / "agentk"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps({"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    "language": "python", "display_name": "agent test kernel"})
    )  # fmt: skip
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("TINYAGENTS_TEST_LLAMA_URL", llama.base_url)
    for name in [n for n in list(__import__("os").environ) if n.endswith("_API_KEY")]:
        monkeypatch.delenv(name)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    nb.metadata["kernelspec"] = {"name": "agentk", "display_name": "agent test kernel", "language": "python"}
    client = nbclient.NotebookClient(
        nb, kernel_name="agentk", timeout=300, allow_errors=False, resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    france, italy, context, rlm, cost = (_text(nb.cells[i]) for i in (2, 3, 4, 5, 6))
    for answer in (france, italy):
        assert "[completed" in answer, answer
        assert "run failed" not in answer
    assert "2 model call" not in france
    # the second turn saw the first: the thread's history went to the server (2 user turns)
    assert "context" in context.lower(), context
    assert "measured" in context, context  # after a call, the gauge shows the server's own count
    assert "[running" not in rlm
    assert any(word in rlm for word in ("completed", "failed", "LimitExceeded", "limit")), rlm
    assert "model call" in cost
    assert "unknown" in cost.lower(), cost  # a model without a price: never claimed to cost $0
