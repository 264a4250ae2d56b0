from __future__ import annotations

import contextlib
import copy
import itertools
import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
from hypothesis import given, settings, strategies as st

from tests.racers import race
from tinyagents_nb.harness import ConfigurationError, StoreError, ThreadId, TinyAgentsError
from tinyagents_nb.harness.observability import SQLiteEventJournal
from tinyagents_nb.harness.retrieval import SQLiteVectorStore
from tinyagents_nb.harness.stores import CacheRegistry, InMemoryStore, SQLiteStore, Store, StoreRegistry

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s: Store = InMemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "db" / "kv.sqlite")
    yield s
    s.close()


NESTED = {
    "text": "héllo ✓ 日本",
    "n": [1, -2, 3.5, 10**30, True, False, None],
    "deep": {"a": {"b": {"c": [{"d": []}, {}]}}},
    "empty": "",
}


# ------------------------------------------------------------------------------------------ basics
def test_nested_json_round_trip(store: Store) -> None:
    store.put("ns", "k", NESTED)
    assert store.get("ns", "k") == NESTED
    assert store.has("ns", "k")


def test_missing_key_returns_default_and_none_is_a_value(store: Store) -> None:
    assert store.get("ns", "missing") is None
    assert store.get("ns", "missing", default={"d": 1}) == {"d": 1}
    assert not store.has("ns", "missing")
    store.put("ns", "none", None)
    assert store.has("ns", "none")
    assert store.get("ns", "none", default=5) is None


def test_put_overwrites(store: Store) -> None:
    store.put("ns", "k", 1)
    store.put("ns", "k", "two")
    assert store.get("ns", "k") == "two"
    assert store.keys("ns") == ["k"]


def test_tuples_and_mappings_are_stored_as_plain_json(store: Store) -> None:
    store.put("ns", "k", {"t": (1, (2, 3)), "m": MappingProxyType({"x": 1})})
    assert store.get("ns", "k") == {"t": [1, [2, 3]], "m": {"x": 1}}


def test_lone_surrogate_in_value_round_trips(store: Store) -> None:
    store.put("ns", "k", {"s": "a\ud800b"})
    assert store.get("ns", "k") == {"s": "a\ud800b"}


def test_namespace_isolation(store: Store) -> None:
    store.put("a", "k", 1)
    store.put(("a", "b"), "k", 2)
    store.put("b", "k", 3)
    assert [store.get(ns, "k") for ns in ("a", ("a", "b"), "b")] == [1, 2, 3]
    assert store.get(("a",), "k") == 1  # a str and a 1-tuple are the same namespace
    assert store.keys(("a", "b", "c")) == []


def test_typed_ids_normalise_to_plain_str(store: Store) -> None:
    tid = ThreadId("thread-1")
    store.put(("threads", tid), tid, 1)
    assert store.get(("threads", "thread-1"), "thread-1") == 1
    [ns] = store.namespaces()
    assert ns == ("threads", "thread-1")
    assert all(type(seg) is str for seg in ns)
    assert type(store.keys(ns)[0]) is str


def test_prefix_listing_is_sorted_and_exact(store: Store) -> None:
    for key in ["msg:0002", "msg:0001", "meta", "msg:0010", "mug", "é", "z"]:
        store.put("ns", key, key.upper())
    assert store.keys("ns") == ["meta", "msg:0001", "msg:0002", "msg:0010", "mug", "z", "é"]
    assert store.keys("ns", prefix="msg:") == ["msg:0001", "msg:0002", "msg:0010"]
    assert store.keys("ns", prefix="m") == ["meta", "msg:0001", "msg:0002", "msg:0010", "mug"]
    assert store.keys("ns", prefix="msg:0001x") == []
    assert store.keys("ns", prefix="%") == []  # no LIKE wildcards
    assert store.items("ns", prefix="msg:000") == [("msg:0001", "MSG:0001"), ("msg:0002", "MSG:0002")]


def test_delete(store: Store) -> None:
    store.put("ns", "k", 1)
    assert store.delete("ns", "k") is True
    assert store.delete("ns", "k") is False
    assert store.get("ns", "k") is None
    assert store.namespaces() == []


def test_namespaces_listing_and_prefix(store: Store) -> None:
    store.put(("threads", "t2"), "k", 1)
    store.put(("threads", "t1"), "k", 1)
    store.put(("threads", "t1", "sub"), "k", 1)
    store.put("threadsx", "k", 1)
    store.put("sessions", "k", 1)
    assert store.namespaces() == [
        ("sessions",),
        ("threads", "t1"),
        ("threads", "t1", "sub"),
        ("threads", "t2"),
        ("threadsx",),
    ]
    assert store.namespaces(prefix="threads") == [("threads", "t1"), ("threads", "t1", "sub"), ("threads", "t2")]
    assert store.namespaces(prefix=("threads", "t1")) == [("threads", "t1"), ("threads", "t1", "sub")]


def test_clear_one_namespace_or_all(store: Store) -> None:
    store.put("a", "1", 1)
    store.put("a", "2", 2)
    store.put(("a", "child"), "1", 1)
    store.put("b", "1", 1)
    assert store.clear("a") == 2
    assert store.keys("a") == []
    assert store.keys(("a", "child")) == ["1"]  # children are not cleared
    assert store.clear("nothing") == 0
    assert store.clear() == 2
    assert store.namespaces() == []


def test_mutation_after_put_and_after_get_is_isolated(store: Store) -> None:
    value: dict[str, Any] = {"list": [1, 2], "inner": {"x": 1}}
    store.put("ns", "k", value)
    value["list"].append(3)
    value["inner"]["x"] = 99
    got = store.get("ns", "k")
    assert got == {"list": [1, 2], "inner": {"x": 1}}
    got["list"].clear()
    assert store.get("ns", "k") == {"list": [1, 2], "inner": {"x": 1}}
    assert store.items("ns")[0][1] == {"list": [1, 2], "inner": {"x": 1}}


# ------------------------------------------------------------------------------------------ bad input
def _circular() -> list[object]:
    a: list[object] = []
    a.append(a)
    return a


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (float("nan"), "nan"),
        (float("inf"), "inf"),
        ({"a": [1, float("-inf")]}, r"\$\['a'\]\[1\]"),
        ({1: "a"}, "non-str key 1"),
        ({None: "a"}, "non-str key None"),
        ({"s": {1, 2}}, "set"),
        (b"bytes", "bytes"),
        (object(), "object"),
        (_circular(), "circular"),
    ],
)
def test_non_json_values_are_rejected(store: Store, value: object, match: str) -> None:
    store.put("ns", "k", "before")
    with pytest.raises(ConfigurationError, match=match):
        store.put("ns", "k", value)
    assert store.get("ns", "k") == "before"


@pytest.mark.parametrize("namespace", ["", (), ("a", ""), ("a", 1), 1, None, ["a"], "a\x1fb", "tab\t", "\ud800"])
def test_bad_namespaces_are_rejected(store: Store, namespace: Any) -> None:
    with pytest.raises(ConfigurationError):
        store.put(namespace, "k", 1)
    with pytest.raises(ConfigurationError):
        store.get(namespace, "k")
    with pytest.raises(ConfigurationError):
        store.keys(namespace)
    if namespace is not None:  # None means "every namespace" here
        with pytest.raises(ConfigurationError):
            store.namespaces(prefix=namespace)


@pytest.mark.parametrize("key", ["", 1, None, ("a",), "a\x00b", "\udc80"])
def test_bad_keys_are_rejected(store: Store, key: Any) -> None:
    with pytest.raises(ConfigurationError):
        store.put("ns", key, 1)
    with pytest.raises(ConfigurationError):
        store.get("ns", key)
    with pytest.raises(ConfigurationError):
        store.delete("ns", key)


def test_keys_may_contain_spaces_and_newlines(store: Store) -> None:
    store.put("ns", "a key\nwith newline", 1)
    assert store.keys("ns") == ["a key\nwith newline"]


def test_bad_prefix_is_rejected(store: Store) -> None:
    with pytest.raises(ConfigurationError):
        store.keys("ns", prefix=3)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ update
def test_update_uses_default_and_returns_new_value(store: Store) -> None:
    assert store.update("ns", "n", lambda v: v + 1, default=0) == 1
    assert store.update("ns", "n", lambda v: v + 1, default=0) == 2
    assert store.update("ns", "l", lambda v: [*(v or []), "x"]) == ["x"]
    assert store.get("ns", "n") == 2


def test_update_that_raises_changes_nothing(store: Store) -> None:
    store.put("ns", "k", 1)

    def boom(v: Any) -> Any:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        store.update("ns", "k", boom)
    with pytest.raises(ConfigurationError):
        store.update("ns", "k", lambda v: {"bad": float("nan")})
    assert store.get("ns", "k") == 1
    store.put("ns", "k", 2)  # the store is still usable (no transaction left open)
    assert store.get("ns", "k") == 2


def test_update_callback_may_read_and_write_the_store(store: Store) -> None:
    store.put("ns", "other", 10)

    def fn(v: Any) -> Any:
        store.put("ns", "side", "written")
        return store.get("ns", "other") + 1

    assert store.update("ns", "k", fn) == 11
    assert store.get("ns", "side") == "written"


def test_update_callback_failure_rolls_back_side_writes_in_sqlite(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "kv.sqlite") as s:

        def fn(v: Any) -> Any:
            s.put("ns", "side", 1)
            raise ValueError("no")

        with pytest.raises(ValueError, match="no"):
            s.update("ns", "k", fn)
        assert s.keys("ns") == []


async def _hammer(store: Store, tasks: int, per_task: int, threads: int, per_thread: int) -> None:
    def inc(v: Any) -> Any:
        return v + 1

    async def task() -> None:
        for _ in range(per_task):
            store.update("c", "n", inc, default=0)
            await anyio.lowlevel.checkpoint()

    def thread() -> None:
        for _ in range(per_thread):
            store.update("c", "n", inc, default=0)

    limiter = anyio.CapacityLimiter(threads)
    async with anyio.create_task_group() as tg:
        for _ in range(threads):
            tg.start_soon(lambda: anyio.to_thread.run_sync(thread, limiter=limiter))
        for _ in range(tasks):
            tg.start_soon(task)


@pytest.mark.anyio
async def test_concurrent_updates_from_tasks_and_threads_lose_nothing(store: Store) -> None:
    await _hammer(store, tasks=50, per_task=10, threads=4, per_thread=150)
    assert store.get("c", "n") == 50 * 10 + 4 * 150


# ------------------------------------------------------------------------------------------ lifecycle
def test_closed_store_raises_store_error(store: Store) -> None:
    store.put("ns", "k", 1)
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        store.get("ns", "k")
    with pytest.raises(StoreError):
        store.put("ns", "k", 2)
    assert issubclass(StoreError, TinyAgentsError)


def test_both_stores_satisfy_the_protocol(tmp_path: Path) -> None:
    with InMemoryStore() as m, SQLiteStore(":memory:") as s:
        assert isinstance(m, Store)
        assert isinstance(s, Store)
    assert not isinstance(object(), Store)


# ------------------------------------------------------------------------------------------ sqlite specifics
def test_sqlite_persists_across_reopen_and_creates_parents(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "kv.sqlite"
    with SQLiteStore(path) as s:
        s.put(("threads", "t"), "k", NESTED)
    with SQLiteStore(str(path)) as s:
        assert s.get(("threads", "t"), "k") == NESTED
        assert s.path == str(path)


def test_sqlite_uses_wal_and_one_table(tmp_path: Path) -> None:
    path = tmp_path / "kv.sqlite"
    with SQLiteStore(path) as s:
        s.put("ns", "k", {"a": 1})
        with contextlib.closing(sqlite3.connect(path)) as raw:
            assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            rows = raw.execute("SELECT namespace, key, value, updated_at FROM tinyagents_kv").fetchall()
    assert len(rows) == 1
    assert rows[0][:3] == ("ns", "k", '{"a":1}')
    assert isinstance(rows[0][3], float)


def test_sqlite_memory_databases_are_private() -> None:
    with SQLiteStore(":memory:") as a, SQLiteStore(":memory:") as b:
        a.put("ns", "k", 1)
        assert b.get("ns", "k") is None
        assert a.get("ns", "k") == 1


def test_sqlite_rejects_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ConfigurationError, match="cannot open SQLite store") as info:
        SQLiteStore(path)
    assert info.value.hint


def test_sqlite_rejects_unusable_paths(tmp_path: Path) -> None:
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    with pytest.raises(ConfigurationError, match="cannot open"):
        SQLiteStore(blocker / "kv.sqlite")  # parent is a file
    with pytest.raises(ConfigurationError, match="cannot open"):
        SQLiteStore(tmp_path)  # a directory
    with pytest.raises(ConfigurationError):
        SQLiteStore("")
    with pytest.raises(ConfigurationError):
        SQLiteStore(tmp_path / "x.sqlite", busy_timeout_s=-1)
    with pytest.raises(ConfigurationError):
        SQLiteStore(tmp_path / "x.sqlite", synchronous="off")  # type: ignore[arg-type]


def test_sqlite_lock_timeout_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "kv.sqlite"
    with SQLiteStore(path, busy_timeout_s=0.05) as s, contextlib.closing(sqlite3.connect(path)) as raw:
        raw.execute("BEGIN IMMEDIATE")  # another connection holds the write lock
        assert s.get("ns", "k") is None  # WAL: reads still work
        with pytest.raises(StoreError, match="locked") as info:
            s.put("ns", "k", 1)
        assert info.value.hint
        raw.execute("ROLLBACK")
        s.put("ns", "k", 1)
        assert s.get("ns", "k") == 1


def test_two_sqlite_instances_on_one_file_lose_no_writes(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    a, b = SQLiteStore(path), SQLiteStore(path)
    errors: list[BaseException] = []

    def writer(s: SQLiteStore, name: str) -> None:
        try:
            for i in range(100):
                s.put("w", f"{name}-{i:03d}", i)
                s.update("w", "counter", lambda v: v + 1, default=0)
        except BaseException as exc:  # surface thread failures in the test
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(s, f"{n}{s is a}")) for n in range(2) for s in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    a.close()
    b.close()
    assert errors == []
    with SQLiteStore(path) as check:
        assert len(check.keys("w")) == 4 * 100 + 1
        assert check.get("w", "counter") == 400


_CHILD = textwrap.dedent(
    """
    import sys, time
    from tinyagents_nb.harness.stores import SQLiteStore
    with SQLiteStore(sys.argv[1]) as s:
        s.put("proc", "ready", True)
        while not s.get("proc", "go"):  # start writing only once the parent is hammering too
            time.sleep(0.001)
        for i in range(300):
            s.put("proc", f"k{i:04d}", {"i": i})
            s.update("proc", "counter", lambda v: v + 1, default=0)
    """
)


def test_subprocess_writes_while_this_process_reads_and_writes(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    with SQLiteStore(path) as s:
        proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(path)], cwd=REPO, stderr=subprocess.PIPE)
        try:
            while not s.get("proc", "ready") and proc.poll() is None:
                time.sleep(0.001)
            s.put("proc", "go", True)
            seen, mine = [0], 0
            while proc.poll() is None:
                items = s.items("proc", prefix="k")
                assert all(v == {"i": int(k[1:])} for k, v in items)
                assert len(items) >= seen[-1]  # committed writes never disappear
                seen.append(len(items))
                s.update("proc", "counter", lambda v: v + 1, default=0)
                mine += 1
            _, stderr = proc.communicate(timeout=30)
        finally:
            proc.kill()
        assert proc.returncode == 0, stderr.decode()
        assert len(s.keys("proc", prefix="k")) == 300
        assert s.get("proc", "counter") == 300 + mine


# ------------------------------------------------------------------------------------------ property
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=15,
)
_keys = st.text(min_size=1, max_size=6).filter(lambda k: "\x00" not in k)


@settings(max_examples=60, deadline=None, database=None)
@given(values=st.dictionaries(_keys, _json, max_size=6), prefix=st.text(max_size=2).filter(lambda p: "\x00" not in p))
def test_property_both_backends_agree_with_a_dict(values: dict[str, Any], prefix: str) -> None:
    expected = sorted((k, json.loads(json.dumps(v))) for k, v in values.items() if k.startswith(prefix))
    for s in (InMemoryStore(), SQLiteStore(":memory:")):
        with s:
            for k, v in values.items():
                s.put(("p", "q"), k, v)
            assert s.items(("p", "q"), prefix=prefix) == expected
            assert s.keys(("p", "q")) == sorted(values)


# ------------------------------------------------------------------------------------------ StoreRegistry
def test_store_registry_default_and_named(tmp_path: Path) -> None:
    reg = StoreRegistry()
    assert isinstance(reg.default, InMemoryStore)
    assert reg.names() == ["default"]
    sql = SQLiteStore(tmp_path / "kv.sqlite")
    reg.register("sessions", sql)
    assert reg.get("sessions") is sql
    assert reg["sessions"] is sql
    assert "sessions" in reg
    assert "nope" not in reg
    assert reg.names() == ["default", "sessions"]
    assert "sessions" in repr(reg)

    explicit = InMemoryStore()
    assert StoreRegistry(explicit).default is explicit
    reg.close()


def test_store_registry_errors() -> None:
    reg = StoreRegistry()
    reg.register("a", InMemoryStore())
    with pytest.raises(ConfigurationError, match="already registered"):
        reg.register("a", InMemoryStore())
    replacement = InMemoryStore()
    reg.register("a", replacement, replace=True)
    assert reg["a"] is replacement
    with pytest.raises(KeyError, match=r"no store named 'zzz'; registered: 'a', 'default'"):
        reg.get("zzz")
    with pytest.raises(ConfigurationError):
        reg.register("", InMemoryStore())
    with pytest.raises(ConfigurationError, match="Store protocol"):
        reg.register("b", {})  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        StoreRegistry(default="nope")  # type: ignore[arg-type]


def test_store_registry_closes_each_store_once_and_keeps_going() -> None:
    calls: list[str] = []

    class Failing(InMemoryStore):
        def close(self) -> None:
            calls.append("failing")
            raise RuntimeError("close failed")

    shared = InMemoryStore()
    reg = StoreRegistry(shared)
    reg.register("alias", shared)
    reg.register("bad", Failing())
    with pytest.raises(RuntimeError, match="close failed"):
        reg.close()
    assert calls == ["failing"]
    with pytest.raises(StoreError):
        shared.get("ns", "k")


def test_registries_are_shared_by_reference_when_copied() -> None:
    reg, caches = StoreRegistry(), CacheRegistry()
    holder = {"stores": reg, "cache": caches}
    deep = copy.deepcopy(holder)
    assert deep["stores"] is reg
    assert deep["cache"] is caches
    assert copy.copy(reg) is reg


# ------------------------------------------------------------------------------------------ CacheRegistry
class _FakeCache:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_cache_registry_named_caches_and_response_cache() -> None:
    caches = CacheRegistry()
    assert caches.response_cache is None
    assert caches.names() == []
    fake = _FakeCache()
    caches.register("embeddings", fake)
    assert caches.get("embeddings") is fake
    assert caches["embeddings"] is fake
    assert "embeddings" in caches

    response: dict[str, object] = {}
    caches.response_cache = response
    assert caches.response_cache is response
    assert caches.names() == ["embeddings", "response"]
    caches.response_cache = None
    assert caches.response_cache is None
    assert "response" not in caches

    assert CacheRegistry(response_cache=response).response_cache is response


def test_cache_registry_errors_and_close() -> None:
    caches = CacheRegistry()
    fake = _FakeCache()
    caches.register("a", fake)
    caches.register("alias", fake)
    with pytest.raises(ConfigurationError, match="already registered"):
        caches.register("a", object())
    with pytest.raises(ConfigurationError):
        caches.register("b", None)
    with pytest.raises(KeyError, match=r"no cache named 'x'; registered: 'a', 'alias'"):
        caches.get("x")
    with pytest.raises(KeyError, match="registered: none"):
        CacheRegistry()["x"]
    caches.register("plain", object())  # no close(): skipped
    caches.close()
    assert fake.closed == 1


# ------------------------------------------------------------------------------ concurrent first opens
def _open_all_at_once(opener: Any, paths: list[Path], per_file: int) -> list[BaseException]:
    """Open every path ``per_file`` times from as many threads, all released together."""
    barrier = threading.Barrier(len(paths) * per_file)
    errors: list[BaseException] = []

    def open_one(path: Path) -> None:
        try:
            barrier.wait()
            opener(path).close()
        except BaseException as exc:  # surface thread failures in the test
            errors.append(exc)

    threads = [threading.Thread(target=open_one, args=(p,)) for p in paths for _ in range(per_file)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_many_threads_first_opening_one_fresh_file_all_succeed(tmp_path: Path) -> None:
    # 30 fresh files x 30 threads each, mixing the three users of the shared opener: the WAL switch
    # and three schemas race on every file
    openers = itertools.cycle([SQLiteStore, SQLiteEventJournal, SQLiteVectorStore])
    lock = threading.Lock()

    def opener(path: Path) -> Any:
        with lock:
            kind = next(openers)
        return kind(path)

    paths = [tmp_path / f"f{i}" / "kv.sqlite" for i in range(30)]
    errors = _open_all_at_once(opener, paths, 30)
    assert errors == []
    for path in paths:
        with SQLiteStore(path) as s:
            s.put("ns", "k", 1)
        with contextlib.closing(sqlite3.connect(path)) as raw:
            assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


_OPENER = textwrap.dedent(
    """
    import sys
    from tinyagents_nb.harness.stores import SQLiteStore
    print("ready", flush=True)
    for line in sys.stdin:  # one fresh path per round, handed to every process at the same instant
        for _ in range(3):
            SQLiteStore(line.strip()).close()
        print("done", flush=True)
    """
)


def test_several_processes_first_opening_one_fresh_file_all_succeed(tmp_path: Path) -> None:
    paths = [tmp_path / f"r{round_}" / "kv.sqlite" for round_ in range(3)]
    race(_OPENER, [[] for _ in range(6)], [str(path) for path in paths])
    for path in paths:
        with contextlib.closing(sqlite3.connect(path)) as raw:
            assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize("opener", [SQLiteStore, SQLiteEventJournal, SQLiteVectorStore])
def test_opening_while_another_first_open_holds_the_write_lock_waits(tmp_path: Path, opener: Any) -> None:
    # Another process mid-way through its own first open (still in rollback mode, writing its
    # schema) holds the write lock: SQLite fails the WAL switch at once instead of calling the busy
    # handler, so the opener must retry it until the lock goes.
    path = tmp_path / "fresh.sqlite"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None, check_same_thread=False)) as other:
        other.execute("CREATE TABLE other_schema (a)")
        other.execute("BEGIN IMMEDIATE")
        release = threading.Timer(0.3, other.execute, args=("COMMIT",))
        release.start()
        started = time.monotonic()
        opener(path).close()
        release.join()
    assert time.monotonic() - started >= 0.25  # it waited for the lock rather than failing
    with contextlib.closing(sqlite3.connect(path)) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_file_locked_past_the_busy_timeout_is_not_to_be_deleted(tmp_path: Path) -> None:
    path = tmp_path / "kv.sqlite"
    SQLiteStore(path).close()
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as raw:
        raw.execute("PRAGMA journal_mode = DELETE")  # so the next open must switch to WAL again
        raw.execute("BEGIN EXCLUSIVE")  # another process holds the whole file
        with pytest.raises(ConfigurationError, match="locked") as info:
            SQLiteStore(path, busy_timeout_s=0.2)
        assert info.value.hint is not None
        assert "delete" not in info.value.hint
        assert "busy_timeout_s" in info.value.hint
        raw.execute("ROLLBACK")
