"""The README's main job: ``python -m tinyagents_nb`` executes the quickstart notebook in a real kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tinyagents_nb._demo import provider_notice, report, run_notebook

ROOT = Path(__file__).resolve().parent.parent


def _offline_env() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if not name.endswith("_API_KEY")}


def _demo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tinyagents_nb", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=env if env is not None else _offline_env(),
        cwd=ROOT,
        check=False,
    )


@pytest.mark.kernel
def test_demo_executes_the_quickstart_and_prints_transcript_cost_and_path(tmp_path: Path) -> None:
    executed = tmp_path / "quickstart.executed.ipynb"
    result = _demo("--output", str(executed))
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    lines = out.splitlines()
    assert lines[0].startswith("Offline: OPENAI_API_KEY is not set")  # the one-line notice, first
    assert '%config AgentMagics.default_model = "openai:gpt-4o-mini"' in lines[0]
    assert "ANTHROPIC_API_KEY" in lines[0]
    assert "MISTRAL_API_KEY" in lines[0]
    # the transcript: both prompts, both streamed answers, their summary lines
    assert "> In two sentences: what is a context window, and why does it matter for an agent?" in lines
    assert "A context window is the most text a model can read at once" in out
    assert "> Give me one practical tip for staying inside it." in lines
    assert "Keep tool outputs small" in out
    assert "[completed · 1 model call · 0 tool calls · 92 tokens (25 in, 67 out) · $0.000044]" in lines
    # the cost table
    assert "notebook total: 2 billed model calls · 234 tokens · $0.000081" in lines
    assert "> Hello! What can you do?" in lines  # the offline model answered first
    assert any(line.split()[:3] == ["0", "first", "main"] for line in lines)
    assert any(line.split()[:3] == ["1", "followup", "main"] for line in lines)
    # where the notebook is, and how to open it
    assert f"Executed notebook: {executed}" in lines
    assert "Open it in JupyterLab: .venv/bin/jupyter lab notebooks/01_quickstart.ipynb" in out
    nb = json.loads(executed.read_text(encoding="utf-8"))
    errors = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"] if o["output_type"] == "error"]
    assert not errors
    assert all(c["execution_count"] for c in nb["cells"] if c["cell_type"] == "code")


@pytest.mark.kernel
def test_a_failing_notebook_is_reported_in_one_line_and_still_written(tmp_path: Path) -> None:
    import nbformat

    bad = tmp_path / "bad.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("1 / 0")])
    nbformat.write(nb, bad)
    executed = tmp_path / "out" / "bad.executed.ipynb"
    result = _demo("--notebook", str(bad), "--output", str(executed))  # a subprocess: the kernel's sockets go with it
    assert result.returncode == 1
    assert "The notebook stopped at an error: ZeroDivisionError: division by zero" in result.stdout
    assert "Traceback" not in result.stdout
    assert executed.is_file()


def test_a_missing_notebook_is_a_clear_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_notebook(tmp_path / "nowhere.ipynb", tmp_path / "out.ipynb") == 2
    out = capsys.readouterr().out
    assert "no notebook at" in out
    assert "--notebook PATH" in out
    assert not (tmp_path / "out.ipynb").exists()


def test_the_notice_names_the_real_model_when_a_key_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-value-not-a-key")
    notice = provider_notice()
    assert notice.startswith("Using openai:gpt-4o-mini (OPENAI_API_KEY is set)")
    assert "test-value-not-a-key" not in notice
    monkeypatch.delenv("OPENAI_API_KEY")
    offline = provider_notice()
    assert offline.startswith("Offline:")
    assert "\n" not in offline


def test_report_picks_the_agent_cells_and_the_cost_table() -> None:
    import nbformat

    cell = nbformat.v4.new_code_cell
    stream = nbformat.v4.new_output
    nb = nbformat.v4.new_notebook(
        cells=[
            cell("x = 1", outputs=[stream("stream", name="stdout", text="noise\n")]),
            cell("%%agent --name a\nHello?", outputs=[stream("stream", name="stdout", text="Hi.\n[completed]\n")]),
            cell("%agent cost", outputs=[stream("execute_result", data={"text/plain": "TABLE"}, execution_count=3)]),
        ]
    )
    assert report(nb) == ["Transcript", "", "> Hello?", "Hi.\n[completed]", "", "Cost", "TABLE"]


def test_harness_tour_runs_a_real_loop_offline() -> None:
    result = _demo("--harness-tour")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "bring a compact umbrella and a water-resistant jacket." in out  # streamed final answer
    assert "[tool] weather -> 8°C, light rain" in out
    assert "[tool] packing_advisor -> Bring a compact umbrella" in out
    assert "subagent.started   1" in out
    assert "Whole tree: 1424 tokens, 0.0002226 USD; status=completed" in out


def test_the_demos_offline_line_names_each_key_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    line = provider_notice()
    keys = line.split("keys are read from ")[1].rstrip(").").split(", ")
    assert len(keys) == len(set(keys))
    assert "ANTHROPIC_API_KEY" in keys
