"""Documents, cosine similarity and the vector stores retrieval searches.

Two stores ship: ``InMemoryVectorStore`` (a dict) and ``SQLiteVectorStore`` (stdlib ``sqlite3``, one
table shared by many namespaces). Both search by brute force in pure Python: no index to build or
tune and no NumPy dependency, at the price of a linear scan. That is right for a notebook's corpus
(up to about 10,000 documents of 1,536 dimensions: under a second per search); a bigger
corpus wants a real vector database behind the same ``VectorStore`` protocol.

Vectors are normalised to unit length when added, so a search costs one dot product per document.
Calls are synchronous, like the key-value stores: a local scan needs no thread hop, and a lock
makes each store safe to share with widget callbacks on other threads.
"""

from __future__ import annotations

import hashlib
import heapq
import math
import sys
import threading
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import mul
from typing import Any, Protocol, runtime_checkable

from .._errors import ConfigurationError
from .._json import FrozenJson, freeze_json_object

__all__ = [
    "Document",
    "InMemoryVectorStore",
    "ScoredDocument",
    "VectorStore",
    "cosine_similarity",
]

_Unit = Sequence[float]  # a unit-length (or all-zero) vector


# ------------------------------------------------------------------------------------------ vectors
def _vector(values: object, what: str) -> array[float]:
    """``values`` as a float array; ``ConfigurationError`` unless it is a non-empty run of finite numbers."""
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise ConfigurationError(f"{what} must be a sequence of numbers, got {type(values).__name__}")
    try:
        out = array("d", values)
    except (TypeError, ValueError, OverflowError):
        raise ConfigurationError(f"{what} must contain only numbers") from None
    if not out:
        raise ConfigurationError(f"{what} is empty")
    if not math.isfinite(sum(out)) and not all(map(math.isfinite, out)):
        raise ConfigurationError(f"{what} contains NaN or infinity")
    return out


def _unit(values: array[float]) -> array[float]:
    """``values`` scaled to length 1; an all-zero vector stays zero (it is similar to nothing)."""
    norm = math.hypot(*values)
    if norm == 0.0:
        return values
    return array("d", [x / norm for x in values])


if sys.version_info >= (3, 12):
    _dot = math.sumprod  # about three times faster than the fallback
else:

    def _dot(a: _Unit, b: _Unit) -> float:
        total: float = sum(map(mul, a, b))
        return total


def cosine_similarity(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of the angle between ``a`` and ``b``, in ``[-1, 1]``; ``0.0`` when either is all zeros.

    Raises:
        ConfigurationError: The lengths differ, a vector is empty, or a value is not a finite number.
    """
    if len(a) != len(b):
        raise ConfigurationError(f"cannot compare vectors of different lengths ({len(a)} and {len(b)})")
    if not a:
        raise ConfigurationError("cannot compare empty vectors")
    norm_a, norm_b = math.hypot(*a), math.hypot(*b)
    if norm_a == 0.0 or norm_b == 0.0:
        return 0.0
    # Scale each side first: the plain dot product over- or underflows for very large or tiny values.
    value = sum((x / norm_a) * (y / norm_b) for x, y in zip(a, b, strict=True))
    if not math.isfinite(value):
        raise ConfigurationError("vectors contain NaN or infinity")
    return min(1.0, max(-1.0, value))


# ------------------------------------------------------------------------------------------ documents
@dataclass(frozen=True, kw_only=True, slots=True)
class Document:
    """A piece of text to retrieve, with an id and JSON metadata (frozen, so stores can share it).

    Attributes:
        id: Unique within a store; adding a document with a taken id replaces the old one.
        text: The text that is embedded and shown to the model.
        metadata: JSON object, frozen on the way in; ``where=`` filters match on its keys.
    """

    id: str
    text: str
    metadata: Mapping[str, FrozenJson] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        doc_id: object = self.id
        if not isinstance(doc_id, str) or not doc_id.strip():
            raise ConfigurationError(f"Document.id must be a non-empty string, got {self.id!r}")
        text: object = self.text
        if not isinstance(text, str):
            raise ConfigurationError(f"Document.text must be a str, got {type(text).__name__}")
        object.__setattr__(self, "metadata", freeze_json_object(self.metadata, what="Document.metadata"))

    @classmethod
    def from_text(cls, text: str, *, metadata: Mapping[str, Any] | None = None) -> Document:
        """A document whose id is a digest of ``text``, so indexing the same text twice stores it once."""
        if not isinstance(text, str):
            raise ConfigurationError(f"document text must be a str, got {type(text).__name__}")
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return cls(id=f"doc-{digest}", text=text, metadata=metadata or {})


@dataclass(frozen=True, kw_only=True, slots=True)
class ScoredDocument:
    """A search hit: the document and its cosine similarity to the query (higher is closer)."""

    document: Document
    score: float

    @property
    def id(self) -> str:
        return self.document.id

    @property
    def text(self) -> str:
        return self.document.text

    @property
    def metadata(self) -> Mapping[str, FrozenJson]:
        return self.document.metadata


# ------------------------------------------------------------------------------------------ filters
def _json_equal(a: FrozenJson, b: FrozenJson) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):  # JSON's true is not 1
        return a is b
    return bool(a == b)


def _where(where: Mapping[str, Any] | None) -> Mapping[str, FrozenJson] | None:
    if where is None:
        return None
    frozen = freeze_json_object(where, what="where")
    return frozen or None


def _matches(metadata: Mapping[str, FrozenJson], where: Mapping[str, FrozenJson]) -> bool:
    missing = object()
    return all(_json_equal(metadata.get(key, missing), value) for key, value in where.items())


def _check_top_k(top_k: object) -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ConfigurationError(f"top_k must be an int >= 1, got {top_k!r}")
    return top_k


def _pairs(docs: Iterable[Document], vectors: Iterable[Sequence[float]]) -> list[tuple[Document, array[float]]]:
    """Validated ``(document, unit vector)`` pairs, checked before a store changes; a repeated id keeps its last."""
    doc_list, vec_list = list(docs), list(vectors)
    if len(doc_list) != len(vec_list):
        raise ConfigurationError(f"got {len(doc_list)} documents but {len(vec_list)} vectors")
    pairs: dict[str, tuple[Document, array[float]]] = {}
    for i, (doc, vec) in enumerate(zip(doc_list, vec_list, strict=True)):
        if not isinstance(doc, Document):
            raise ConfigurationError(f"docs[{i}] must be a Document, got {type(doc).__name__}")
        pairs.pop(doc.id, None)
        pairs[doc.id] = (doc, _unit(_vector(vec, f"vectors[{i}]")))
    dims = {len(vec) for _, vec in pairs.values()}
    if len(dims) > 1:
        raise ConfigurationError(f"vectors have different lengths: {sorted(dims)}")
    return list(pairs.values())


def _check_dims(store: str, have: int | None, got: int) -> None:
    if have is not None and have != got:
        raise ConfigurationError(
            f"{store} holds {have}-dimensional vectors, got {got}",
            hint="use one embedding model per store (or namespace), or clear() it first",
        )


def _id_list(ids: Iterable[str] | str) -> list[str]:
    return [ids] if isinstance(ids, str) else list(ids)


# ------------------------------------------------------------------------------------------ protocol
@runtime_checkable
class VectorStore(Protocol):
    """Where a ``Retriever`` keeps documents and their vectors.

    ``add`` replaces documents whose id is taken; ``search`` returns the ``top_k`` most similar
    documents (cosine similarity, best first, ties in insertion order) among those whose metadata
    equals every key of ``where``; ``delete`` returns how many ids were present.
    """

    @property
    def dimensions(self) -> int | None: ...
    def add(self, docs: Iterable[Document], vectors: Iterable[Sequence[float]]) -> None: ...
    def search(
        self, vector: Sequence[float], top_k: int = 4, *, where: Mapping[str, Any] | None = None
    ) -> list[ScoredDocument]: ...
    def delete(self, ids: Iterable[str]) -> int: ...
    def get(self, id: str) -> Document | None: ...
    def clear(self) -> None: ...
    def __len__(self) -> int: ...


def _query(vector: Sequence[float], dims: int | None, store: str) -> array[float]:
    unit = _unit(_vector(vector, "the query vector"))
    _check_dims(store, dims, len(unit))
    return unit


# ------------------------------------------------------------------------------------------ in memory
class InMemoryVectorStore:
    """A ``VectorStore`` in a dict: fast to build, gone with the process."""

    __slots__ = ("_dims", "_items", "_lock")

    def __init__(self) -> None:
        self._items: dict[str, tuple[Document, _Unit]] = {}
        self._dims: int | None = None
        self._lock = threading.Lock()

    @property
    def dimensions(self) -> int | None:
        """The vector length this store holds, fixed by the first ``add`` (``None`` while empty)."""
        return self._dims

    def add(self, docs: Iterable[Document], vectors: Iterable[Sequence[float]]) -> None:
        """Store ``docs`` with their ``vectors`` (same order); a taken id is replaced and moves to the end.

        Raises:
            ConfigurationError: Counts differ, a vector is invalid or has the wrong length; nothing is stored.
        """
        pairs = _pairs(docs, vectors)
        if not pairs:
            return
        with self._lock:
            _check_dims("this store", self._dims, len(pairs[0][1]))
            for doc, vec in pairs:
                self._items.pop(doc.id, None)
                self._items[doc.id] = (doc, vec)
            self._dims = len(pairs[0][1])

    def search(
        self, vector: Sequence[float], top_k: int = 4, *, where: Mapping[str, Any] | None = None
    ) -> list[ScoredDocument]:
        """The ``top_k`` documents most similar to ``vector`` whose metadata matches ``where``."""
        top_k = _check_top_k(top_k)
        flt = _where(where)
        with self._lock:
            query = _query(vector, self._dims, "this store")
            items = list(self._items.values())
        if flt is not None:
            items = [item for item in items if _matches(item[0].metadata, flt)]
        best = heapq.nlargest(top_k, ((_dot(query, vec), doc) for doc, vec in items), key=lambda hit: hit[0])
        return [ScoredDocument(document=doc, score=min(1.0, max(-1.0, score))) for score, doc in best]

    def delete(self, ids: Iterable[str]) -> int:
        """Remove the documents with these ids (a single str is one id); returns how many were present."""
        with self._lock:
            removed = sum(self._items.pop(doc_id, None) is not None for doc_id in _id_list(ids))
            if not self._items:
                self._dims = None
            return removed

    def get(self, id: str) -> Document | None:
        item = self._items.get(id)
        return None if item is None else item[0]

    def clear(self) -> None:
        """Remove everything; the next ``add`` may use another vector length."""
        with self._lock:
            self._items.clear()
            self._dims = None

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, id: object) -> bool:
        return id in self._items

    def __repr__(self) -> str:
        return f"InMemoryVectorStore(documents={len(self._items)}, dimensions={self._dims})"


# ------------------------------------------------------------------------------------------ sqlite
