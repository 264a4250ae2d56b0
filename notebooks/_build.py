"""Build the example notebooks: each ``NN_name.ipynb`` from its jupytext percent source ``NN_name.py``.

Usage (from the repository root; ``./dev notebooks`` runs the first line)::

    .venv/bin/python notebooks/_build.py               # every notebook
    .venv/bin/python notebooks/_build.py 03 05         # only those whose names contain "03" or "05"
    .venv/bin/python notebooks/_build.py path/to/x.py  # a source elsewhere (its .ipynb is written beside it)

jupytext reads the source (``notebooks/jupytext.toml`` pairs the two files and comments ``%%agent``
cells out), nbclient executes it, and the outputs are stored: nbval compares against them. What is ours:

- every code cell must compile (magics included) before anything is formatted or executed;
- the sources are formatted with ``ruff format``, so the built notebooks pass ``ruff format --check``;
- the kernel is one of *this* interpreter, offline (every ``*_API_KEY`` variable removed) and with no
  tinyagents setting, exactly as ``./dev test`` runs nbval;
- what would change on every build without meaning anything is left out: random cell ids become
  ``cell-01``..., no timings, no widget state. jupytext's own cell metadata stays (``lines_to_next_cell``
  records where the ``.py`` has other blank lines than jupytext would write): without it JupyterLab's
  jupytext refuses to open a notebook that is newer than its ``.py``, which a build always leaves;
- rebuilding an unchanged source rewrites the same file (``steady``): the random run, thread and call
  ids in the outputs are numbered in order of appearance (same shape, so nbval's ``[ids]`` rule still
  masks them), build-time epoch timestamps are pinned, and this checkout's folder, the build's
  temporary store folder and its folder digest read as a user's ``~/.cache/tinyagents-nb/runs``;
  a cell's prints are one stream output however they were split in flight. Measured figures
  (rows/s, durations) are left as measured.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ipykernel.kernelspec
import jupytext
from IPython.core.inputtransformer2 import TransformerManager
from jupytext.config import load_jupytext_config
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

HERE = Path(__file__).resolve().parent
SOURCES = "[0-9][0-9]_*.py"
CELL_TIMEOUT_S = 120
KERNEL = "python3"
KERNELSPEC = {"name": KERNEL, "display_name": "Python 3 (ipykernel)", "language": "python"}
CELL_MARKER = re.compile(r"^# %%( |$)")
ROOT = HERE.parent
RUN_ID = re.compile(r"\b(run|thr|call|evt|sess|cell)-([0-9a-f]{12})-([0-9a-f]{6})-([0-9a-f]{8})\b")
"""A harness id: ``prefix-<time>-<counter>-<random>`` (nbval_sanitize.cfg's ``[ids]`` rule masks the same)."""
EPOCH = re.compile(r"(?<![\d.])1\.\d{6}e\+09\b")
"""Seconds since 1970 as pandas shows a float column of them (``1.795719e+09``): the build's clock."""
USER_STORE_DIR = "~/.cache/tinyagents-nb/runs"


class SourceError(Exception):
    """A notebook source that cannot become a notebook: a code cell does not compile."""


def kernel_env(store_dir: str | None = None) -> dict[str, str]:
    """This process's environment for the kernel: no provider keys and no execution-mode override.

    ``store_dir``: where the sessions' default stores go (a build must not write the user's cache).
    """
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.endswith("_API_KEY") and name != "TINYAGENTS_NB_BLOCKING"
    }
    if store_dir is not None:
        env["TINYAGENTS_NB_STORE_DIR"] = store_dir
    return env


def _strings(value: Any, change: Any) -> Any:
    """``value`` with ``change`` applied to every string in it (lists and dicts walked, keys kept)."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [_strings(item, change) for item in value]
    if isinstance(value, dict):
        return type(value)((key, _strings(item, change)) for key, item in value.items())
    return value


def steady(nb: Any, *, folder: Path, store_dir: str) -> None:
    """Make ``nb``'s outputs the same on every build of the same source (see the module's docstring).

    Args:
        nb: The executed notebook; its cells' outputs are rewritten in place.
        folder: The folder the kernel ran in (its default store file's name carries a digest of it).
        store_dir: The temporary folder the kernel's default stores went to.
    """
    ids: dict[str, str] = {}
    tails: dict[str, str] = {}

    def number(match: re.Match[str]) -> str:
        prefix, _, counter, tail = match.groups()
        if match.group(0) not in ids:
            n = len(ids) + 1
            fresh = hashlib.sha256(f"{folder.name}/{n}".encode()).hexdigest()[:8]
            ids[match.group(0)] = f"{prefix}-{0x01A2_0000_0000 + n:012x}-{counter}-{fresh}"
            tails[tail] = fresh  # a run is also named by the last 8 characters of its id
        return ids[match.group(0)]

    digest = hashlib.sha256(os.fspath(folder.resolve()).encode()).hexdigest()[:12]
    places = [
        (store_dir.rstrip("/"), USER_STORE_DIR),
        (f"{folder.name}-{digest}", f"{folder.name}-{hashlib.sha256(folder.name.encode()).hexdigest()[:12]}"),
        (f"{ROOT}/", ""),  # this checkout's folder: paths read relative to the repository
    ]

    def change(text: str) -> str:
        text = RUN_ID.sub(number, text)
        for old, new in places:
            text = text.replace(old, new)
        return EPOCH.sub("1.795000e+09", text)

    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = _strings(cell.outputs, change)
    if tails:
        short = re.compile(r"\b(" + "|".join(map(re.escape, tails)) + r")\b")
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = _strings(cell.outputs, lambda text: short.sub(lambda m: tails[m.group(0)], text))


def read(path: Path) -> Any:
    """The notebook in ``path``, every code cell compiled first (a kernel would only fail later, mid-run)."""
    text = path.read_text(encoding="utf-8")
    nb = jupytext.read(path, fmt="py:percent", config=load_jupytext_config(str(HERE)))
    markers = [n for n, line in enumerate(text.splitlines(), 1) if CELL_MARKER.match(line)]
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        try:
            python = TransformerManager().transform_cell(cell.source)  # magics become Python calls
            compile(python, "<cell>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        except SyntaxError as error:
            row = error.lineno or 1
            line = markers[index] + row if len(markers) == len(nb.cells) else None
            where = f"{path.name}:{line}" if line else f"{path.name}, cell {index + 1}, line {row}"
            text = (cell.source.splitlines()[row - 1 : row] or [""])[0].strip()
            raise SourceError(f"{where}: {error.msg} (cell {index + 1}: {text!r})") from None
    nb.metadata.setdefault("kernelspec", dict(KERNELSPEC))  # a source may have no jupytext header
    for number, cell in enumerate(nb.cells, 1):
        cell.id = f"cell-{number:02d}"
    return nb


@contextlib.contextmanager
def this_interpreter_kernel() -> Iterator[None]:
    """Make ``KERNEL`` name a kernel of *this* interpreter, whatever kernelspecs are installed."""
    previous = os.environ.get("JUPYTER_PATH")
    with tempfile.TemporaryDirectory(prefix="tinyagents-build-") as tmp:
        ipykernel.kernelspec.write_kernel_spec(Path(tmp) / "kernels" / KERNEL)
        os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, (tmp, previous)))
        try:
            yield
        finally:
            if previous is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = previous


async def _execute(path: Path, nb: Any, slots: asyncio.Semaphore) -> bool:
    """Execute ``nb`` and write it beside ``path``; a cell that raises (untagged) leaves the old file alone."""
    name = path.with_suffix(".ipynb").name
    async with slots:
        started = time.perf_counter()
        client = NotebookClient(
            nb,
            kernel_name=KERNEL,
            timeout=CELL_TIMEOUT_S,
            resources={"metadata": {"path": str(path.parent)}},
            record_timing=False,
            store_widget_state=False,
            coalesce_streams=True,  # how a cell's prints split into messages depends on timing
        )
        with tempfile.TemporaryDirectory(prefix="tinyagents-build-stores-") as stores:
            try:
                await client.async_execute(env=kernel_env(stores))
            except CellExecutionError as error:
                print(
                    f"{name} not built: a cell raised (tag it raises-exception if it should)\n{error}", file=sys.stderr
                )
                return False
            steady(nb, folder=path.parent, store_dir=stores)
        jupytext.write(nb, path.with_suffix(".ipynb"), fmt="ipynb")
        print(f"{name}: {len(nb.cells)} cells, {time.perf_counter() - started:.1f} s")
        return True


async def _build_all(notebooks: dict[Path, Any], jobs: int) -> int:
    slots = asyncio.Semaphore(jobs)
    return sum(await asyncio.gather(*(_execute(path, nb, slots) for path, nb in notebooks.items())))


def sources(only: list[str]) -> list[Path]:
    """The sources named by ``only``: paths to ``.py`` files, or parts of names in ``notebooks/``."""
    paths = [Path(arg).resolve() for arg in only if arg.endswith(".py")]
    parts = [arg for arg in only if not arg.endswith(".py")]
    if parts or not only:
        paths += [p for p in sorted(HERE.glob(SOURCES)) if not parts or any(part in p.stem for part in parts)]
    return paths


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="source paths, or parts of the notebooks' names")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="notebooks executed at once (default 2)")
    args = parser.parse_args(argv)
    paths = sources(args.only)
    if not paths:
        parser.error(f"no notebook source matches {args.only} in {HERE}")
    try:
        for path in paths:  # all of them compile, or none is formatted or executed
            read(path)
    except (SourceError, OSError) as error:
        print(f"not built: {error}", file=sys.stderr)
        return 2
    subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--quiet", "--config", str(HERE / "ruff.toml"), *map(str, paths)],
        check=True,
    )
    notebooks = {path: read(path) for path in paths}
    started = time.perf_counter()
    with this_interpreter_kernel():
        built = asyncio.run(_build_all(notebooks, max(1, args.jobs)))
    print(f"{built} of {len(notebooks)} notebooks built in {time.perf_counter() - started:.1f} s")
    return 0 if built == len(notebooks) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
