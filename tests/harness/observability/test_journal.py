"""Event journals: in memory, SQLite (incl. a kill -9 durability test) and JSONL."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.harness.obs_samples import sample_events
from tinyagents_nb.harness import AgentEvent, ConfigurationError, ModelDelta, StoreError, TextDelta, ToolStarted
from tinyagents_nb.harness.observability import (
    AgentObservation,
    EventJournal,
    InMemoryEventJournal,
    JsonlEventJournal,
    SQLiteEventJournal,
    UnrecognizedEvent,
)

JournalFactory = Callable[[Path], EventJournal]
FACTORIES: dict[str, JournalFactory] = {
    "memory": lambda tmp: InMemoryEventJournal(),
    "sqlite": lambda tmp: SQLiteEventJournal(tmp / "events.db"),
    "jsonl": lambda tmp: JsonlEventJournal(tmp / "events.jsonl"),
}


@pytest.fixture(params=sorted(FACTORIES))
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventJournal]:
    j = FACTORIES[request.param](tmp_path)
    yield j
    j.close()


def obs(offset: int, *, run: str = "root", root: str = "root", kind: str = "delta", text: str = "") -> AgentObservation:
    event: AgentEvent
    if kind == "delta":
        event = ModelDelta(run_id=run, root_run_id=root, call_id="c", delta=TextDelta(text=text or f"t{offset}"))
    else:
        event = ToolStarted(run_id=run, root_run_id=root, call_id="c", tool_name="x", arguments={"i": offset})
    return AgentObservation.from_event(offset, event)


# ------------------------------------------------------------------------------------------ every journal
def test_journals_satisfy_the_protocol(journal: EventJournal) -> None:
    assert isinstance(journal, EventJournal)


def test_every_event_class_round_trips_through_each_journal(journal: EventJournal) -> None:
    written = [AgentObservation.from_event(i, e) for i, e in enumerate(sample_events())]
    for o in written:
        journal.append(o)
    assert len(journal) == len(written)
    assert journal.read_from(0) == written
    assert [type(o.event) for o in journal.read_from(0)] == [type(o.event) for o in written]


def test_read_and_replay_from_an_offset(journal: EventJournal) -> None:
    for i in range(10):
        journal.append(obs(i))
    assert [o.offset for o in journal.read_from(7)] == [7, 8, 9]
    assert [o.offset for o in journal.replay_from(7)] == [7, 8, 9]
    assert journal.read_from(10) == []
    assert [o.offset for o in journal.read_from(2, limit=3)] == [2, 3, 4]
    assert journal.read_from(0, limit=0) == []


def test_filters_by_run_root_and_kind(journal: EventJournal) -> None:
    journal.append(obs(0, run="root"))
    journal.append(obs(1, run="kid", kind="tool"))
    journal.append(obs(2, run="kid"))
    journal.append(obs(0, run="other", root="other", kind="tool"))
    assert [(o.run_id, o.offset) for o in journal.read_from(0, run_id="kid")] == [("kid", 1), ("kid", 2)]
    assert [o.offset for o in journal.read_from(0, root_run_id="root")] == [0, 1, 2]
    tools = journal.read_from(0, kinds={"tool.started"})
    assert [(o.root_run_id, o.offset) for o in tools] == [("root", 1), ("other", 0)]
    assert [o.offset for o in journal.read_from(0, kinds="tool.started", root_run_id="root")] == [1]
    assert journal.read_from(0, kinds=()) == []
    assert [o.offset for o in journal.replay_from(1, run_id="kid", kinds=["model.delta"])] == [2]


@pytest.mark.parametrize("bad", [{"offset": -1}, {"offset": 1.5}, {"offset": True}, {"limit": -1}, {"limit": 2.0}])
def test_bad_read_arguments_are_configuration_errors(journal: EventJournal, bad: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        journal.read_from(**bad)  # type: ignore[arg-type]


def test_append_rejects_non_observations(journal: EventJournal) -> None:
    with pytest.raises(ConfigurationError):
        journal.append(obs(0).event)  # type: ignore[arg-type]


def test_closed_journal_raises_store_error(journal: EventJournal) -> None:
    journal.append(obs(0))
    journal.flush()
    journal.close()
    journal.close()  # idempotent
    for call in (lambda: journal.append(obs(1)), lambda: journal.read_from(0), journal.flush):
        with pytest.raises(StoreError, match="closed"):
            call()
    with pytest.raises(StoreError):
        journal.replay_from(0)


def test_secrets_and_unicode_survive_exactly(journal: EventJournal) -> None:
    text = "naïve ✓ \U0001f600 \ud800 lone surrogate"
    journal.append(obs(0, text=text))
    event = journal.read_from(0)[0].event
    assert isinstance(event, ModelDelta)
    assert isinstance(event.delta, TextDelta)
    assert event.delta.text == text


# ------------------------------------------------------------------------------------------ in memory
def test_in_memory_eviction_makes_stale_offsets_an_error() -> None:
    journal = InMemoryEventJournal(max_events=3)
    for i in range(5):
        journal.append(obs(i))
    assert len(journal) == 3
    assert journal.evicted == 2
    assert [o.offset for o in journal.read_from(2)] == [2, 3, 4]
    with pytest.raises(StoreError, match="offset 1 was evicted") as info:
        journal.read_from(1)
    assert info.value.hint is not None
    assert "offset 2" in info.value.hint
    with pytest.raises(StoreError):
        journal.read_from(0, root_run_id="root")
    assert journal.read_from(0, root_run_id="fresh") == []  # another root lost nothing


@pytest.mark.parametrize("bad", [0, -2, 1.5])
def test_in_memory_validates_cap(bad: object) -> None:
    with pytest.raises(ConfigurationError):
        InMemoryEventJournal(max_events=bad)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ SQLite
def test_sqlite_is_durable_across_instances_and_shares_a_file_with_the_store(tmp_path: Path) -> None:
    from tinyagents_nb.harness.stores import SQLiteStore

    path = tmp_path / "nested" / "session.db"
    store = SQLiteStore(path)
    store.put("ns", "k", 1)
    first = SQLiteEventJournal(path)
    for i in range(3):
        first.append(obs(i))
    second = SQLiteEventJournal(path)  # a second writer/reader on the same file
    second.append(obs(3))
    assert [o.offset for o in first.read_from(0)] == [0, 1, 2, 3]
    first.close()
    second.close()
    reopened = SQLiteEventJournal(path)
    assert len(reopened) == 4
    assert store.get("ns", "k") == 1
    reopened.close()
    store.close()


def test_sqlite_replay_pages_through_large_journals_lazily() -> None:
    journal = SQLiteEventJournal(":memory:")
    for i in range(1234):
        journal.append(obs(i))
    replay = journal.replay_from(3)
    first = next(replay)
    journal.append(obs(1234))  # appended while iterating: still seen
    rest = list(replay)
    assert first.offset == 3
    assert [o.offset for o in rest] == list(range(4, 1235))


def test_sqlite_reads_drifted_rows_leniently(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    journal = SQLiteEventJournal(path)
    journal.append(obs(0))
    conn = sqlite3.connect(path)
    row = {"kind": "model.delta", "run_id": "root", "root_run_id": "root", "call_id": "c"}  # delta missing
    conn.execute(
        'INSERT INTO tinyagents_events (event_id, root_run_id, "offset", run_id, parent_run_id, depth, kind, ts, event)'
        " VALUES ('root-evt-1', 'root', 1, 'root', NULL, 0, 'model.delta', 1.0, ?)",
        (json.dumps(row),),
    )
    conn.commit()
    conn.close()
    back = journal.read_from(1)
    assert len(back) == 1
    assert isinstance(back[0].event, UnrecognizedEvent)
    assert back[0].kind == "model.delta"
    journal.close()


def test_sqlite_bad_arguments_and_bad_files(tmp_path: Path) -> None:
    not_db = tmp_path / "x.db"
    not_db.write_bytes(b"this is not a database, just text " * 100)
    with pytest.raises(ConfigurationError, match="cannot open"):
        SQLiteEventJournal(not_db)
    with pytest.raises(ConfigurationError):
        SQLiteEventJournal("")
    with pytest.raises(ConfigurationError):
        SQLiteEventJournal(tmp_path / "a.db", synchronous="off")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        SQLiteEventJournal(tmp_path / "a.db", busy_timeout_s=-1)


_WRITER = textwrap.dedent(
    """
    import sys
    from decimal import Decimal
    from tinyagents_nb.harness.events import CostRecorded
    from tinyagents_nb.harness import ModelDelta, ToolStarted
    from tinyagents_nb.harness.observability import SQLiteEventJournal
    from tinyagents_nb.harness import TextDelta
    from tinyagents_nb.harness.observability import AgentObservation

    def make(i):
        lin = dict(run_id="r", root_run_id="r", ts=float(i))
        if i % 3 == 0:
            return ModelDelta(call_id=f"c{i}", delta=TextDelta(text=f"token {i}"), **lin)
        if i % 3 == 1:
            return ToolStarted(call_id=f"c{i}", tool_name="t", arguments={"i": i, "xs": [i, str(i)]}, **lin)
        return CostRecorded(call_id=f"c{i}", model="m", usd=Decimal(i) / 1000, **lin)

    if __name__ == "__main__":
        journal = SQLiteEventJournal(sys.argv[1])
        i = 0
        while True:
            journal.append(AgentObservation.from_event(i, make(i)))
            sys.stdout.write(f"{i}\\n")
            sys.stdout.flush()
            i += 1
    """
)


def test_kill_9_mid_run_leaves_every_committed_event_readable(tmp_path: Path) -> None:
    path = tmp_path / "killed.db"
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    )
    printed: list[int] = []
    deadline = time.monotonic() + 30
    try:
        assert proc.stdout is not None
        while len(printed) < 250 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            printed.append(int(line))
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert proc.stdout is not None
        assert proc.stderr is not None
        proc.stdout.close()
        stderr = proc.stderr.read()
        proc.stderr.close()
    assert len(printed) >= 250, f"writer produced {len(printed)} offsets; stderr: {stderr[-2000:]}"
    assert proc.returncode == -signal.SIGKILL  # it really died mid-loop, it did not exit cleanly
    assert printed == list(range(len(printed)))

    spec = importlib.util.spec_from_file_location("killed_writer", script)
    assert spec is not None
    assert spec.loader is not None
    writer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(writer)  # the same event factory the killed process used (its loop is under __main__)
    journal = SQLiteEventJournal(path)
    stored = journal.read_from(0)
    assert len(stored) >= len(printed)  # the kill may land after a commit but before the print
    by_offset = {o.offset: o for o in stored}
    for i in printed:
        assert by_offset[i].event == writer.make(i), i
        assert by_offset[i].event_id == f"r-evt-{i}"
    journal.close()


# ------------------------------------------------------------------------------------------ JSONL
def test_jsonl_tolerates_a_torn_last_line_and_repairs_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    journal = JsonlEventJournal(path)
    for i in range(3):
        journal.append(obs(i))
    journal.close()
    whole = path.read_bytes()
    path.write_bytes(whole + whole.splitlines(keepends=True)[1][:25])  # a crash mid-write of a 4th line
    reader = JsonlEventJournal(path)
    assert [o.offset for o in reader.read_from(0)] == [0, 1, 2]
    assert reader.skipped_lines == 1
    reader.append(obs(3))  # must not glue itself onto the torn fragment
    assert [o.offset for o in reader.read_from(0)] == [0, 1, 2, 3]
    assert len(reader) == 4
    reader.close()


def test_jsonl_lines_are_self_describing_json(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    journal = JsonlEventJournal(path)
    journal.append(obs(5, run="kid"))
    journal.close()
    (line,) = path.read_text(encoding="utf-8").splitlines()
    data = json.loads(line)
    assert data["event_id"] == "root-evt-5"
    assert data["run_id"] == "kid"
    assert data["event"]["kind"] == "model.delta"


def test_jsonl_unopenable_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError):
        JsonlEventJournal(tmp_path)  # a directory
