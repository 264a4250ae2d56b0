"""Regenerate the example notebooks: write them from ``_cells.py``, then execute them to store outputs.

Usage (from the repository root)::

    .venv/bin/python notebooks/_build.py            # write and execute all of them
    .venv/bin/python notebooks/_build.py 03 05      # only notebooks whose names contain "03" or "05"
    .venv/bin/python notebooks/_build.py --check    # exit 1 if a committed notebook's cells differ from _cells.py

Outputs are produced the way ``./dev test`` checks them with nbval: in a real kernel of this
interpreter, in the default (waiting) mode with no tinyagents setting, offline (every ``*_API_KEY`` variable
removed from the kernel's environment). Cell sources are formatted with ``ruff format`` before
execution, so the committed notebooks pass ``ruff format --check``. Widget state is not stored:
JupyterLab does not load it by default (it shows each dashboard's plain-text line until the cell
is re-run), nbval ignores it, and it would add about 45 KB per dashboard to every diff.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ipykernel.kernelspec
import nbformat as _nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _cells import NOTEBOOKS, Cell  # a sibling module, not a package

nbformat: Any = _nbformat  # untyped
CHECK_TAG = "nbval-check-output"
IGNORE_TAG = "nbval-ignore-output"
CELL_TIMEOUT_S = 120
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def kernel_env() -> dict[str, str]:
    """This process's environment for the kernel: no provider keys and no execution-mode override."""
    return {
        name: value
        for name, value in os.environ.items()
        if not name.endswith("_API_KEY") and name != "TINYAGENTS_NB_BLOCKING"
    }


def _cell(index: int, cell: Cell) -> Any:
    cell_id = f"cell-{index:02d}"
    if cell.kind == "markdown":
        return nbformat.v4.new_markdown_cell(cell.source, id=cell_id)
    tags = [CHECK_TAG] * cell.check + [IGNORE_TAG] * cell.ignore + ["raises-exception"] * cell.raises
    return nbformat.v4.new_code_cell(cell.source, id=cell_id, metadata={"tags": tags} if tags else {})


def compose(stem: str) -> Any:
    """The unexecuted notebook for ``stem``, its code formatted by ruff."""
    nb = nbformat.v4.new_notebook(cells=[_cell(i, c) for i, c in enumerate(NOTEBOOKS[stem], 1)])
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{stem}.ipynb"
        nbformat.write(nb, path)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "ruff",
                "format",
                "--quiet",
                "--config",
                str(HERE.parent / "pyproject.toml"),
                str(path),
            ],
            check=True,
        )
        formatted = nbformat.read(path, as_version=4)
    for cell, source in zip(nb.cells, formatted.cells, strict=True):
        cell.source = source.source
    return nb


@contextlib.contextmanager
def this_interpreter_kernelspec() -> Iterator[None]:
    """Make ``KERNELSPEC["name"]`` name a kernel of *this* interpreter, whatever kernelspecs are installed.

    A temporary directory put first on ``JUPYTER_PATH`` holds the spec ipykernel writes for
    ``sys.executable``; kernel managers created meanwhile find it before any installed one.
    """
    previous = os.environ.get("JUPYTER_PATH")
    with tempfile.TemporaryDirectory(prefix="tinyagents-build-") as tmp:
        ipykernel.kernelspec.write_kernel_spec(Path(tmp) / "kernels" / KERNELSPEC["name"])
        os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, (tmp, previous)))
        try:
            yield
        finally:
            if previous is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = previous


def execute(nb: Any) -> Any:
    """Run every cell in a fresh kernel of this interpreter (cwd: ``notebooks/``) and keep the outputs."""
    with this_interpreter_kernelspec():
        client = NotebookClient(
            nb,
            kernel_name=KERNELSPEC["name"],
            timeout=CELL_TIMEOUT_S,
            resources={"metadata": {"path": str(HERE)}},
            record_timing=False,
            store_widget_state=False,
        )
        client.execute(env=kernel_env())
    return nb


def _shape(nb: Any) -> list[tuple[str, str, list[str]]]:
    return [(c.cell_type, c.source, list(c.get("metadata", {}).get("tags", []))) for c in nb.cells]


def check(stems: list[str]) -> int:
    """Compare committed notebooks with ``_cells.py`` (sources and tags, not outputs); 1 if any differ."""
    stale = []
    for stem in stems:
        path = HERE / f"{stem}.ipynb"
        if not path.exists() or _shape(nbformat.read(path, as_version=4)) != _shape(compose(stem)):
            stale.append(path.name)
    for name in stale:
        print(f"{name} is out of date with notebooks/_cells.py: run .venv/bin/python notebooks/_build.py")
    return 1 if stale else 0


def build(stems: list[str]) -> None:
    for stem in stems:
        started = time.perf_counter()
        nb = execute(compose(stem))
        nbformat.write(nb, HERE / f"{stem}.ipynb")
        print(f"{stem}.ipynb: {len(nb.cells)} cells, executed in {time.perf_counter() - started:.1f} s")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="build only notebooks whose file names contain one of these")
    parser.add_argument("--check", action="store_true", help="verify the committed notebooks match _cells.py")
    args = parser.parse_args(argv)
    stems = [s for s in NOTEBOOKS if not args.only or any(part in s for part in args.only)]
    if not stems:
        parser.error(f"no notebook matches {args.only}; known: {', '.join(NOTEBOOKS)}")
    if args.check:
        return check(stems)
    build(stems)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
