"""The committed example notebooks: clean stored outputs, the nbval conventions, listed in the docs, reproducible.

nbval itself (``./dev test``'s second pytest run) re-executes every notebook and compares the cells
tagged ``nbval-check-output``; these tests check what nbval does not: that the stored outputs, which
GitHub readers see, hold no traceback and no secret, and that every dashboard cell is excluded from the
comparison. ``tests/test_notebooks_source.py`` checks that each notebook matches its jupytext source.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))
EXPECTED = [
    "01_quickstart",
    "02_tools_and_structured_output",
    "03_steering_and_cancellation",
    "04_subagents_and_recursion",
    "05_context_pressure",
    "06_observability",
    "07_mcp",
    "08_rlm",
    "09_notebook_access",
    "10_agent_map",
]
WIDGET = "application/vnd.jupyter.widget-view+json"
CHECK, IGNORE = "nbval-check-output", "nbval-ignore-output"
KEY_SHAPES = [
    re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"),  # OpenAI, Anthropic (sk-ant-...), DeepSeek and most others
    re.compile(r"\bBearer\s+[A-Za-z0-9._~+/-]{12,}"),
    re.compile(r"\b(gsk|xai|ghp)_[A-Za-z0-9]{16,}"),  # Groq, xAI, GitHub
]


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _code_cells(nb: dict[str, Any]) -> list[dict[str, Any]]:
    return [cell for cell in nb["cells"] if cell["cell_type"] == "code"]


def _source(cell: dict[str, Any]) -> str:
    source = cell["source"]
    return "".join(source) if isinstance(source, list) else str(source)


def _tags(cell: dict[str, Any]) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _output_text(output: dict[str, Any]) -> str:
    parts = [output.get("text", ""), output.get("ename", ""), output.get("evalue", ""), *output.get("traceback", [])]
    for value in output.get("data", {}).values():
        parts.append(json.dumps(value) if not isinstance(value, str) else value)
    return "\n".join("".join(p) if isinstance(p, list) else str(p) for p in parts)


def test_the_seven_notebooks_are_committed() -> None:
    assert [p.stem for p in PATHS] == EXPECTED


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_every_code_cell_ran_without_an_error(path: Path) -> None:
    nb = _load(path)
    for index, cell in enumerate(_code_cells(nb)):
        assert cell["execution_count"] is not None, f"{path.name}: code cell {index} was not executed"
        if "raises-exception" in _tags(cell):  # a mistake the notebook shows on purpose (09: %agent fix)
            assert any(o["output_type"] == "error" for o in cell["outputs"]), (
                f"{path.name}: cell {index} raised nothing"
            )
            continue
        for output in cell["outputs"]:
            assert output["output_type"] != "error", f"{path.name}: cell {index}: {output.get('ename')}"
            text = _output_text(output)
            assert "Traceback" not in text, f"{path.name}: cell {index}"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_no_api_key_anywhere_in_the_file(path: Path) -> None:
    text = path.read_text(encoding="utf-8")  # outputs, widget state and sources alike
    for shape in KEY_SHAPES:
        match = shape.search(text)
        assert match is None, f"{path.name} holds something shaped like a credential at offset {match.start()}"
    for name, value in os.environ.items():
        if name.endswith("_API_KEY") and len(value.strip()) >= 8:
            assert value.strip() not in text, f"{path.name} holds the value of ${name}"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_outputs_were_produced_offline(path: Path) -> None:
    outputs = "\n".join(_output_text(o) for cell in _code_cells(_load(path)) for o in cell["outputs"])
    # the offline model's answer names the real model it suggests; nothing else may
    outputs = "\n".join(line for line in outputs.splitlines() if "(offline demo model:" not in line)
    assert "default model: openai" not in outputs
    assert "openai:gpt-4o-mini" not in outputs


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_dashboards_are_ignored_and_summaries_are_checked(path: Path) -> None:
    cells = _code_cells(_load(path))
    for index, cell in enumerate(cells):
        tags = _tags(cell)
        assert not (CHECK in tags and IGNORE in tags), f"{path.name}: cell {index} is both checked and ignored"
        shows_widget = any(WIDGET in output.get("data", {}) for output in cell["outputs"])
        if shows_widget or _source(cell).startswith("%%agent"):
            assert IGNORE in tags, f"{path.name}: cell {index} shows a dashboard but nbval would compare it"
    checked = [cell for cell in cells if CHECK in _tags(cell)]
    assert len(checked) >= 2, f"{path.name}: too few cells are compared by nbval"
    assert all(cell["outputs"] for cell in checked), f"{path.name}: a checked cell has no output to compare"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_starts_offline_and_explains_each_step(path: Path) -> None:
    nb = _load(path)
    assert nb["cells"][0]["cell_type"] == "markdown"
    assert _source(nb["cells"][0]).startswith("# ")
    sources = [_source(cell) for cell in _code_cells(nb)]
    assert any("%load_ext tinyagents_nb" in s for s in sources[:2])
    assert any('USE_REAL_PROVIDER = bool(os.environ.get("OPENAI_API_KEY"))' in s for s in sources[:4])
    kinds = [cell["cell_type"] for cell in nb["cells"]]
    runs_of_code = max(len(run) for run in "".join("c" if k == "code" else " " for k in kinds).split())
    assert runs_of_code <= 4, f"{path.name}: {runs_of_code} code cells in a row without a word of explanation"


@pytest.mark.parametrize("page", ["README.md", "docs/jupyter/notebooks.md"])
def test_every_notebook_is_listed(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    missing = [p.name for p in PATHS if p.name not in text]
    assert not missing, f"{page} does not list {', '.join(missing)}"


def test_the_sanitizer_masks_what_varies() -> None:
    config = (NOTEBOOKS / "nbval_sanitize.cfg").read_text(encoding="utf-8")
    pairs = re.findall(r"^regex: (.+)\nreplace: (.*)$", config, flags=re.MULTILINE)
    assert len(pairs) == len(re.findall(r"^\[", config, flags=re.MULTILINE))

    def sanitize(text: str) -> str:
        for pattern, replacement in pairs:
            text = re.sub(pattern, replacement, text)
        return text

    line = "thread thr-01a20083ef8e-000000-5a2f4a47 · run-01a20084994b-000005-1643c47f cost $0.000087 in 0.25 s"
    assert sanitize(line) == "thread <ID> · <ID> cost $COST in <DURATION>"
    assert sanitize("at 2026-11-21T23:49:01.123+00:00") == "at <TIMESTAMP>"
    assert sanitize("completed · 103 tokens") == "completed · 103 tokens"  # counts are compared as they are


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_every_saved_run_is_a_record_not_a_live_widget(path: Path) -> None:
    """A notebook opened without a kernel (GitHub, nbviewer) shows records, never "Error displaying widget"."""
    for index, cell in enumerate(_code_cells(_load(path))):
        for output in cell["outputs"]:
            data = output.get("data", {})
            assert WIDGET not in data, f"{path.name}: cell {index} saved a live dashboard instead of its record"
            assert ": running>" not in "".join(data.get("text/plain", "")), f"{path.name}: cell {index}"
