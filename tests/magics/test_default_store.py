"""The store every notebook session has by default: where it goes, how it is turned off, what it keeps."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from IPython.core.interactiveshell import InteractiveShell

from tinyagents_nb.harness.durable import RunStore
from tinyagents_nb.magics import get_session
from tinyagents_nb.magics._store_place import default_store_path, notebook_path, session_store_path

from .conftest import run_ok

ENV = "TINYAGENTS_NB_STORE_DIR"


def _shell(**user_ns: object) -> SimpleNamespace:
    return SimpleNamespace(user_ns=dict(user_ns), kernel=None)


def test_the_notebook_path_comes_from_the_session_name_the_server_gave_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notebook = tmp_path / "work" / "Sales Q3.ipynb"
    notebook.parent.mkdir()
    notebook.write_text("{}")
    monkeypatch.delenv(ENV)
    monkeypatch.setenv("JPY_SESSION_NAME", str(notebook))  # jupyter_server 2: the absolute path
    assert notebook_path(_shell()) == notebook
    assert default_store_path(_shell()) == str(notebook.parent / ".tinyagents" / "Sales_Q3.sqlite")

    monkeypatch.setenv("JPY_SESSION_NAME", "work/Sales Q3.ipynb")  # older servers: the API path
    assert notebook_path(_shell(), cwd=notebook.parent) == notebook
    monkeypatch.setenv("JPY_SESSION_NAME", "console-1-abc")  # a console is not a notebook
    assert notebook_path(_shell(), cwd=notebook.parent) is None


def test_the_namespace_and_the_connection_file_name_the_notebook_when_the_environment_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    assert notebook_path(_shell(__session__="/data/a.ipynb")) == Path("/data/a.ipynb")  # ipykernel
    assert notebook_path(_shell(__vsc_ipynb_file__="/data/b.ipynb")) == Path("/data/b.ipynb")  # VS Code
    connection = tmp_path / "kernel-1.json"
    connection.write_text(json.dumps({"jupyter_session": "/data/c.ipynb"}))
    app = SimpleNamespace(abs_connection_file=str(connection))
    shell = SimpleNamespace(user_ns={}, kernel=SimpleNamespace(parent=app))
    assert notebook_path(shell) == Path("/data/c.ipynb")


def test_without_a_notebook_the_store_is_per_folder_in_the_user_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    here, there = tmp_path / "notebooks", tmp_path / "other"
    path = default_store_path(_shell(), cwd=here)
    assert Path(path).parent == tmp_path / "cache" / "tinyagents-nb" / "runs"
    assert Path(path).name.startswith("notebooks-")
    assert default_store_path(_shell(), cwd=here) == path
    assert default_store_path(_shell(), cwd=there) != path


def test_the_setting_moves_the_store_or_turns_it_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, str(tmp_path))
    assert session_store_path(None, _shell()).startswith(str(tmp_path))
    assert session_store_path("", _shell()) == ":memory:"
    assert session_store_path("/x/y.sqlite", _shell()) == "/x/y.sqlite"
    monkeypatch.setenv(ENV, "")  # the environment turns the default off (a CI without a disk to spare)
    assert session_store_path(None, _shell()) == ":memory:"


def test_a_notebook_session_journals_to_the_default_store_and_a_new_kernel_starts_a_new_thread(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    session = get_session()
    path = session.store_path
    assert path != ":memory:"
    assert path.startswith(os.environ[ENV])
    run_ok(shell, "%%agent\nhello")
    first_thread = session.thread_id
    with RunStore(path) as store:
        (run,) = store.runs()
        assert run.status == "completed"
        assert run.prompt == "hello"
    assert session.messages()  # the thread's history is in the file too

    run_ok(shell, "%unload_ext tinyagents_nb")  # a new kernel on the same notebook
    run_ok(shell, "%load_ext tinyagents_nb")
    again = get_session()
    assert again.store_path == path
    assert again.thread_id != first_thread  # Restart & Run All does not feed the model the old turns
    assert again.messages(first_thread)  # but the old thread is still there


def test_store_path_empty_keeps_the_session_in_memory(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    run_ok(shell, '%config AgentMagics.store_path = ""')
    run_ok(shell, "%agent reset")
    assert get_session().store_path == ":memory:"


def _age(path: str, days: float) -> None:
    """Move everything in the file ``days`` into the past."""
    then = time.time() - days * 86_400
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE tinyagents_runs SET started_at = ?", (then,))
        conn.execute("UPDATE tinyagents_events SET ts = ?", (then,))
        conn.execute("UPDATE tinyagents_kv SET updated_at = ? WHERE namespace LIKE 'threads%'", (then,))


def test_retention_forgets_old_runs_events_and_threads_when_a_session_opens_the_store(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    run_ok(shell, "%%agent\nold question")
    session = get_session()
    path, old_thread = session.store_path, session.thread_id
    run_ok(shell, "%unload_ext tinyagents_nb")
    _age(path, 40)
    run_ok(shell, "%load_ext tinyagents_nb")  # the default keeps 30 days
    with RunStore(path) as store:
        assert store.runs() == []
    assert get_session().messages(old_thread) == []
    assert not get_session().journal.read_from(0)

    run_ok(shell, "%%agent\nnew question")
    run_ok(shell, "%unload_ext tinyagents_nb")
    _age(path, 40)
    run_ok(shell, "%config AgentMagics.store_keep_days = None")
    run_ok(shell, "%load_ext tinyagents_nb")
    with RunStore(path) as store:
        assert [r.prompt for r in store.runs()] == ["new question"]


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("s.sqlite*"))


def test_a_size_bound_drops_the_oldest_first(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.sqlite") as store:
        for index in range(40):
            store.start_run(f"r{index:02d}", agent=None, model="m", prompt="p")
            store.add_step(f"r{index:02d}", "input", {"blob": "x" * 50_000})
            store.end_run(f"r{index:02d}", "completed")
            time.sleep(0.001)
        before = _size(tmp_path)
        pruned = store.prune(max_mb=0.6)
        kept = [r.run_id for r in store.runs()]
        assert pruned.runs
        assert kept
        assert len(kept) < 40
        assert min(kept) > max({f"r{i:02d}" for i in range(40)} - set(kept))  # the oldest went
        assert _size(tmp_path) < min(before / 2, 700_000)  # vacuumed
