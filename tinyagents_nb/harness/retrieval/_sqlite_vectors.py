"""The SQLite vector store: documents and unit vectors in one WAL-mode file, searched exactly.

Vectors are stored packed as float32 blobs; a search streams them and keeps the best top_k in a
heap, so memory stays bounded by top_k however large the store.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import sqlite3
import sys
import threading
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from .._errors import ConfigurationError, StoreError
from .._json import FrozenJson, freeze_json, thaw_json
from ..stores import open_sqlite
from ._vectors import (
    Document,
    ScoredDocument,
    _check_dims,
    _check_top_k,
    _dot,
    _id_list,
    _matches,
    _pairs,
    _query,
    _where,
)

__all__ = ["SQLiteVectorStore"]


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS tinyagents_vectors (namespace TEXT NOT NULL, id TEXT NOT NULL, "
    "text TEXT NOT NULL, metadata TEXT NOT NULL, dim INTEGER NOT NULL, unit_vector BLOB NOT NULL, "
    "PRIMARY KEY (namespace, id))"
)


def _pack(unit: array[float]) -> bytes:
    """Little-endian float32: the precision providers compute embeddings in, half the bytes of float64."""
    packed = array("f", unit)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


def _unpack(blob: bytes) -> array[float]:
    unit = array("f")
    unit.frombytes(blob)
    if sys.byteorder == "big":
        unit.byteswap()
    return unit


class SQLiteVectorStore:
    """A ``VectorStore`` persisted in a SQLite file; reopening the same path and namespace finds the documents.

    Vectors are stored unit-length as packed float32 next to the text and JSON metadata; a search
    scans the namespace (see the module docstring for the size this suits). WAL mode and a busy
    timeout let several store instances or processes share one file.

    Args:
        path: The database file (parent directories are created) or ``":memory:"``.
        namespace: Separates collections in one file; each has its own vector length.
        busy_timeout_s: How long a write waits for another connection's lock before ``StoreError``.

    Raises:
        ConfigurationError: A bad argument, or the file cannot be opened as a SQLite database.
    """

    __slots__ = ("_conn", "_lock", "_namespace", "_path")

    def __init__(
        self, path: str | os.PathLike[str], *, namespace: str = "default", busy_timeout_s: float = 5.0
    ) -> None:
        ns: object = namespace
        if not isinstance(ns, str) or not ns.strip():
            raise ConfigurationError(f"namespace must be a non-empty string, got {namespace!r}")
        self._namespace = namespace
        self._lock = threading.Lock()
        path_text, conn = open_sqlite(
            path,
            owner="SQLiteVectorStore",
            what="SQLite vector store",
            busy_timeout_s=busy_timeout_s,
            synchronous=None,
            schema=(_SCHEMA,),
        )
        self._path = path_text
        self._conn: sqlite3.Connection | None = conn

    @property
    def path(self) -> str:
        return self._path

    @property
    def namespace(self) -> str:
        return self._namespace

    @contextlib.contextmanager
    def _transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """One transaction under the lock: a write takes SQLite's write lock up front; a read sees one snapshot."""
        with self._lock:
            conn = self._conn
            if conn is None:
                raise StoreError(f"SQLite vector store {self._path!r} is closed")
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"SQLite vector store {self._path!r}: {exc}") from exc
                if isinstance(exc, UnicodeEncodeError):  # lone surrogates cannot be stored as UTF-8
                    raise ConfigurationError(f"cannot store text that is not valid Unicode: {exc}") from None
                raise

    def _stored_dims(self, conn: sqlite3.Connection) -> int | None:
        row = conn.execute(
            "SELECT dim FROM tinyagents_vectors WHERE namespace = ? LIMIT 1", (self._namespace,)
        ).fetchone()
        return None if row is None else int(row[0])

    @property
    def dimensions(self) -> int | None:
        """The vector length of this namespace (``None`` while it is empty)."""
        with self._transaction(write=False) as conn:
            return self._stored_dims(conn)

    def add(self, docs: Iterable[Document], vectors: Iterable[Sequence[float]]) -> None:
        """Store ``docs`` with their ``vectors`` in one transaction; a taken id is replaced and moves to the end.

        Raises:
            ConfigurationError: Counts differ, a vector is invalid or has the wrong length; nothing is stored.
        """
        pairs = _pairs(docs, vectors)
        if not pairs:
            return
        dims = len(pairs[0][1])
        rows = [(self._namespace, doc.id, doc.text, _dump(doc.metadata), dims, _pack(vec)) for doc, vec in pairs]
        with self._transaction(write=True) as conn:
            _check_dims(f"namespace {self._namespace!r}", self._stored_dims(conn), dims)
            conn.executemany("DELETE FROM tinyagents_vectors WHERE namespace = ? AND id = ?", [row[:2] for row in rows])
            conn.executemany("INSERT INTO tinyagents_vectors VALUES (?, ?, ?, ?, ?, ?)", rows)

    def search(
        self, vector: Sequence[float], top_k: int = 4, *, where: Mapping[str, Any] | None = None
    ) -> list[ScoredDocument]:
        """The ``top_k`` documents most similar to ``vector`` whose metadata matches ``where``."""
        top_k = _check_top_k(top_k)
        flt = _where(where)
        with self._transaction(write=False) as conn:
            query = _query(vector, self._stored_dims(conn), f"namespace {self._namespace!r}")
            rows = conn.execute(
                "SELECT id, metadata, unit_vector FROM tinyagents_vectors WHERE namespace = ? ORDER BY rowid",
                (self._namespace,),
            )
            scored = (
                (_dot(query, _unpack(blob)), str(doc_id))
                for doc_id, meta, blob in rows
                if flt is None or _matches(_load(meta), flt)
            )
            best = heapq.nlargest(top_k, scored, key=lambda hit: hit[0])
            docs = self._fetch(conn, [doc_id for _, doc_id in best])
        return [ScoredDocument(document=docs[doc_id], score=min(1.0, max(-1.0, score))) for score, doc_id in best]

    def _fetch(self, conn: sqlite3.Connection, ids: list[str]) -> dict[str, Document]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = conn.execute(
            f"SELECT id, text, metadata FROM tinyagents_vectors WHERE namespace = ? AND id IN ({marks})",
            (self._namespace, *ids),
        )
        return {str(i): Document(id=str(i), text=str(t), metadata=_load(m)) for i, t, m in rows}

    def delete(self, ids: Iterable[str]) -> int:
        """Remove the documents with these ids (a single str is one id); returns how many were present."""
        targets = [(self._namespace, doc_id) for doc_id in dict.fromkeys(_id_list(ids))]
        with self._transaction(write=True) as conn:
            before = conn.total_changes
            conn.executemany("DELETE FROM tinyagents_vectors WHERE namespace = ? AND id = ?", targets)
            return conn.total_changes - before

    def get(self, id: str) -> Document | None:
        with self._transaction(write=False) as conn:
            return self._fetch(conn, [id]).get(id)

    def clear(self) -> None:
        """Remove every document of this namespace (other namespaces in the file are untouched)."""
        with self._transaction(write=True) as conn:
            conn.execute("DELETE FROM tinyagents_vectors WHERE namespace = ?", (self._namespace,))

    def __len__(self) -> int:
        with self._transaction(write=False) as conn:
            row = conn.execute("SELECT count(*) FROM tinyagents_vectors WHERE namespace = ?", (self._namespace,))
            return int(row.fetchone()[0])

    def __contains__(self, id: object) -> bool:
        return isinstance(id, str) and self.get(id) is not None

    def close(self) -> None:
        """Close the connection (idempotent); later calls raise ``StoreError``."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteVectorStore({self._path!r}, namespace={self._namespace!r})"


def _dump(metadata: Mapping[str, FrozenJson]) -> str:
    return json.dumps(thaw_json(metadata), ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _load(text: str) -> Mapping[str, FrozenJson]:
    frozen: Mapping[str, FrozenJson] = freeze_json(json.loads(text), what="stored metadata")
    return frozen
