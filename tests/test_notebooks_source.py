"""The example notebooks' sources: each ``notebooks/NN_name.ipynb`` is built from the jupytext percent file
``NN_name.py`` beside it (``./dev notebooks``), and the two must not drift apart.

The sync check reads both sides with jupytext's own readers, so a hand edit to either file (a cell's
code, a Markdown paragraph, an nbval tag) fails here until the notebook is rebuilt. The build itself
refuses a source whose code does not compile before it starts any kernel.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jupytext
import pytest
from jupytext.config import load_jupytext_config

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
BUILD = NOTEBOOKS / "_build.py"
SOURCES = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))
CONFIG = load_jupytext_config(str(NOTEBOOKS))  # notebooks/jupytext.toml: what %%agent is, as the build reads it


def _cells(nb: Any) -> list[tuple[str, str, dict[str, Any]]]:
    return [(cell.cell_type, cell.source, dict(cell.metadata)) for cell in nb.cells]


def _drift(source: Path, notebook: Path) -> str | None:
    """How ``notebook`` differs from what ``source`` builds (cells, their order, sources, tags), or None."""
    built, stored = _cells(jupytext.read(source, config=CONFIG)), _cells(jupytext.read(notebook))
    if len(built) != len(stored):
        return f"{len(built)} cells in {source.name}, {len(stored)} in {notebook.name}"
    for number, (want, have) in enumerate(zip(built, stored, strict=True), 1):
        if want != have:
            layout = {k: v for k, v in want[2].items() if k != "lines_to_next_cell"}
            field = (
                "type" if want[0] != have[0]
                else "source" if want[1] != have[1]
                else "blank lines after it" if layout == {k: v for k, v in have[2].items() if k != "lines_to_next_cell"}
                else "tags/metadata"
            )  # fmt: skip
            return f"cell {number} differs ({field}): {want[1][:60]!r} in the .py, {have[1][:60]!r} in the .ipynb"
    return None


def test_every_notebook_has_its_source_and_every_source_its_notebook() -> None:
    notebooks = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert SOURCES, "no notebooks/NN_name.py source found"
    assert [p.stem for p in notebooks] == [p.stem for p in SOURCES]


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_the_notebook_matches_its_source(source: Path) -> None:
    drift = _drift(source, source.with_suffix(".ipynb"))
    assert drift is None, (
        f"{source.with_suffix('.ipynb').name} is out of date: {drift}; run ./dev notebooks {source.stem[:2]}"
    )


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_sources_are_plain_python_with_agent_cells_commented_out(source: Path) -> None:
    text = source.read_text(encoding="utf-8")
    assert not re.search(r"^# %%agent", text, flags=re.MULTILINE), (
        f"{source.name}: write an %%agent cell as '# %% language=\"agent\"' with its prompt commented; "
        f"jupytext --to py:percent {source.name} -o {source.name} (in notebooks/) converts it"
    )
    ast.parse(text)  # so ruff lints and formats it like the rest of the code


def test_a_hand_edit_on_either_side_is_caught(tmp_path: Path) -> None:
    source = SOURCES[0]
    notebook = source.with_suffix(".ipynb")
    edited_py = tmp_path / source.name
    edited_py.write_text(source.read_text(encoding="utf-8").replace("# %load_ext tinyagents_nb", "# %load_ext other"))
    assert "cell 3 differs (source)" in (_drift(edited_py, notebook) or "")
    edited_py.write_text(
        source.read_text(encoding="utf-8").replace("\n\n# %% [markdown]\n# ## Load", "\n\n\n# %% [markdown]\n# ## Load")
    )
    assert "cell 1 differs (blank lines after it)" in (_drift(edited_py, notebook) or "")

    nb = json.loads(notebook.read_text(encoding="utf-8"))
    tagged = next(cell for cell in nb["cells"] if cell["metadata"].get("tags"))
    tagged["metadata"]["tags"] = ["nbval-skip"]
    edited_nb = tmp_path / notebook.name
    edited_nb.write_text(json.dumps(nb), encoding="utf-8")
    assert "(tags/metadata)" in (_drift(source, edited_nb) or "")

    nb["cells"].pop()
    edited_nb.write_text(json.dumps(nb), encoding="utf-8")
    assert "cells in" in (_drift(source, edited_nb) or "")


def test_jupyterlab_opens_each_notebook_though_it_is_newer_than_its_source(tmp_path: Path) -> None:
    """JupyterLab with jupytext (the test environment has it) pairs the two files; a build leaves the
    ``.ipynb`` newer than the ``.py``, and jupytext then refuses to open it unless both read the same."""
    from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
    from jupytext.async_contentsmanager import build_async_jupytext_contents_manager_class

    for path in [NOTEBOOKS / "jupytext.toml", *SOURCES, *(p.with_suffix(".ipynb") for p in SOURCES)]:
        (tmp_path / path.name).write_bytes(path.read_bytes())
    for source in SOURCES:
        os.utime(tmp_path / source.name, (1_700_000_000, 1_700_000_000))  # the .ipynb is years newer
    manager = build_async_jupytext_contents_manager_class(AsyncLargeFileManager)(root_dir=str(tmp_path))

    async def open_all() -> list[int]:
        return [len((await manager.get(p.with_suffix(".ipynb").name))["content"]["cells"]) for p in SOURCES]

    opened = asyncio.run(open_all())
    assert opened == [len(jupytext.read(p).cells) for p in SOURCES]


HEADER = """# ---
# jupyter:
#   jupytext:
#     custom_cell_magics: agent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---
"""


def _run_build(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BUILD), *args], capture_output=True, text=True, timeout=90, check=False, env=env
    )


def test_the_build_refuses_a_source_that_does_not_compile(tmp_path: Path) -> None:
    good = tmp_path / "01_good.py"
    good.write_text(HEADER + '\n# %% [markdown]\n# # Fine\n\n# %%\nprint("ok")\n', encoding="utf-8")
    broken = tmp_path / "02_broken.py"
    broken.write_text(
        HEADER + "\n# %% [markdown]\n# # Title\n\n"  # lines 9-12
        '# %% magic_args="--name x" language="agent"\n# prose is fine in an %%agent cell!\n\n'  # 13-15
        "# %%\n# %agent model demo\ntotal = sum(\n    [1, 2\n",  # lines 16-19: "[" never closes
        encoding="utf-8",
    )
    result = _run_build(str(good), str(broken))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "not built: 02_broken.py:19: '[' was never closed" in result.stderr  # file, line, why
    assert "(cell 3: '[1, 2')" in result.stderr
    assert not list(tmp_path.glob("*.ipynb")), "nothing is built when one source is broken"
    assert "Traceback" not in result.stderr


@pytest.mark.kernel
def test_the_build_executes_sources_offline_into_stable_notebooks_and_names_a_failing_one(tmp_path: Path) -> None:
    source = tmp_path / "01_tiny.py"
    source.write_text(
        HEADER + "\n# %% [markdown]\n# # Tiny\n\n\n"  # two blank lines before a def: ruff's layout
        '# %% tags=["nbval-check-output"]\n'
        "def key():\n"
        "    import os\n\n"
        '    return os.environ.get("OPENAI_API_KEY", "no key")\n\n\n'
        '# %% tags=["nbval-ignore-output"]\nkey()\n',
        encoding="utf-8",
    )
    fails = tmp_path / "02_fails.py"
    fails.write_text(HEADER + "\n# %%\n1 / 0\n", encoding="utf-8")
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-not-a-real-key-0000"}
    result = _run_build(str(source), str(fails), env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "02_fails.ipynb not built: a cell raised" in result.stderr
    assert "ZeroDivisionError" in result.stderr
    assert not fails.with_suffix(".ipynb").exists()
    nb = json.loads(source.with_suffix(".ipynb").read_text(encoding="utf-8"))
    assert [cell["id"] for cell in nb["cells"]] == ["cell-01", "cell-02", "cell-03"]
    assert [cell["metadata"] for cell in nb["cells"]] == [
        {"lines_to_next_cell": 2},  # jupytext's record of ruff's two blank lines before a def
        {"tags": ["nbval-check-output"]},
        {"tags": ["nbval-ignore-output"]},
    ]
    assert "".join(nb["cells"][2]["outputs"][0]["data"]["text/plain"]) == "'no key'"  # executed, and offline
    assert "widgets" not in nb["metadata"]
    assert _drift(source, source.with_suffix(".ipynb")) is None


def _build_module() -> Any:
    """``notebooks/_build.py``, a script rather than a package module, loaded from its file."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("notebooks_build", BUILD)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_rebuild_of_the_same_outputs_writes_the_same_file(tmp_path: Path) -> None:
    """Two builds differ only in random ids, the build's clock and where it ran: ``steady`` makes the
    files equal, keeps distinct ids distinct and the same id the same, and nbval's id rule still masks them."""
    import configparser

    import nbformat

    build = _build_module()
    folder = tmp_path / "notebooks"
    folder.mkdir()

    def executed(run: str, thread: str, stores: str, when: str) -> Any:
        digest = hashlib.sha256(os.fspath(folder.resolve()).encode()).hexdigest()[:12]
        lines = [
            f"session reset: new thread {thread}\n",
            f"store_path takes effect at the next %agent reset (now: {stores}/notebooks-{digest}.sqlite)\n",
            f"run {run[-8:]} ({run}) on {thread}; again {run}\n",
            f"MCP server geo (stdio: {build.ROOT}/.venv/bin/python mcp_geo_server.py)\n",
        ]
        frame = {"text/html": f"<td>{run}-evt-3</td><td>{when}</td>", "text/plain": f"0  {when}"}
        return nbformat.v4.new_notebook(
            cells=[
                nbformat.v4.new_code_cell(
                    "x",
                    outputs=[
                        nbformat.v4.new_output("stream", name="stdout", text="".join(lines)),
                        nbformat.v4.new_output("execute_result", data=frame, execution_count=1),
                    ],
                )
            ]
        )

    first = executed(
        "run-01a218e82fb7-000005-6af3e005", "thr-01a218e82ef1-000004-7e166b6f", "/tmp/build-a", "1.795714e+09"
    )
    second = executed(
        "run-01a2193420c0-000005-1d79e790", "thr-01a219342096-000004-31cf150f", "/tmp/build-b", "1.795719e+09"
    )
    build.steady(first, folder=folder, store_dir="/tmp/build-a")
    build.steady(second, folder=folder, store_dir="/tmp/build-b/")
    assert json.dumps(first.cells[0].outputs) == json.dumps(second.cells[0].outputs)

    text = first.cells[0].outputs[0].text
    thread, run = build.RUN_ID.findall(text)[:2]  # in order of appearance
    assert run[0] == "run"
    assert thread[0] == "thr"
    assert run[3] != thread[3]
    assert text.count("-".join(run)) == 2
    assert f"run {run[3]} (" in text
    assert "6af3e005" not in text
    assert "/tmp/build-a" not in text
    assert str(build.ROOT) not in text
    assert "~/.cache/tinyagents-nb/runs/notebooks-" in text
    assert "(stdio: .venv/bin/python mcp_geo_server.py)" in text
    assert "1.795714e+09" not in json.dumps(first.cells[0].outputs)

    rules = configparser.ConfigParser()
    rules.read(NOTEBOOKS / "nbval_sanitize.cfg")
    masked = re.sub(rules["ids"]["regex"], rules["ids"]["replace"], text)
    assert not build.RUN_ID.search(masked)  # every id the build wrote is still one nbval masks
