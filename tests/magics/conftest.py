"""An in-process IPython shell per test with the extension loaded, and helpers to run cells in it.

There is no kernel here: a plain ``InteractiveShell`` has no running event loop in a sync cell, so
``%%agent`` falls back to blocking mode there; tests of the background path run the cell from inside
an anyio test, where ``asyncio.get_running_loop()`` works as it does in a kernel.
"""

from __future__ import annotations

import atexit
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.interactiveshell import ExecutionResult, InteractiveShell
from traitlets.config import Config

from tinyagents_nb.harness.providers import known_providers
from tinyagents_nb.magics import NotebookRun, NotebookSession, get_session


@pytest.fixture
def shell(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[InteractiveShell]:
    """A fresh shell (the display singleton) with ``%load_ext tinyagents_nb``; unloaded afterwards."""
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.delenv("TINYAGENTS_NB_BLOCKING", raising=False)
    for spec, _ in known_providers():
        if spec.api_key_env:
            monkeypatch.delenv(spec.api_key_env, raising=False)
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    InteractiveShell.clear_instance()
    ip = InteractiveShell.instance(config=config)
    ip.run_line_magic("load_ext", "tinyagents_nb")  # adopts a session an earlier test's get_session() left
    ip.run_line_magic("unload_ext", "tinyagents_nb")  # which unloading closes and forgets,
    ip.run_line_magic("load_ext", "tinyagents_nb")  # so that each test starts from a fresh session
    try:
        yield ip
    finally:
        ip.run_line_magic("unload_ext", "tinyagents_nb")
        InteractiveShell.clear_instance()
        forget_shell(ip)


def forget_shell(ip: InteractiveShell) -> None:
    """Drop a finished shell's exit hook: IPython registers one per shell with ``atexit``, which keeps every
    test's shell (and its namespace) alive to the end, then runs a namespace reset and a full
    ``gc.collect()`` per shell at interpreter exit: minutes after the last test over a suite's shells."""
    atexit.unregister(ip.atexit_operations)


@pytest.fixture
def session(shell: InteractiveShell) -> NotebookSession:
    return get_session()


def run_ok(ip: InteractiveShell, source: str, **kwargs: Any) -> ExecutionResult:
    """Run a cell and fail the test with its error if it raised."""
    result = ip.run_cell(source, **kwargs)
    if result.error_before_exec is not None:
        raise result.error_before_exec
    if result.error_in_exec is not None:
        raise result.error_in_exec
    return result


def run_error(ip: InteractiveShell, source: str) -> BaseException:
    """Run a cell that must fail; return its error."""
    result = ip.run_cell(source)
    error = result.error_in_exec or result.error_before_exec
    assert error is not None, f"cell did not fail: {source!r}"
    return error


def last_run(ip: InteractiveShell) -> NotebookRun:
    run = ip.user_ns["_agent"]
    assert isinstance(run, NotebookRun)
    return run
