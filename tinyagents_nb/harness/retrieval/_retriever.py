"""The retriever: embeds a query, searches a vector store, and feeds the hits into a run.

It serves three ways: called directly, as a tool the model calls, and as a context provider that
adds the hits to each request before the model sees it.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Final, TypeVar

from pydantic import Field

from .._errors import ConfigurationError, ProviderError
from .._json import freeze_json_object
from .._messages import RETRIEVED_TAG, UserMessage
from ._embeddings import EmbeddingModel, _positive_int
from ._vectors import Document, InMemoryVectorStore, ScoredDocument, VectorStore

if TYPE_CHECKING:
    from .._context import RunContext
    from .._model import ModelRequest
    from .._tools import FunctionTool

__all__ = ["Retriever"]

T = TypeVar("T")

_MAX_TOOL_TOP_K: Final = 20


def _run_blocking(fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``fn`` to completion from sync code; inside a running loop (Jupyter) on a worker thread."""
    import anyio  # lazy: only the sync twins need it here

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(fn)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tinyagents-retriever") as pool:
        return pool.submit(anyio.run, fn).result()


def _check_filters(min_score: object, where: Mapping[str, Any] | None) -> None:
    if min_score is not None and (
        isinstance(min_score, bool) or not isinstance(min_score, int | float) or math.isnan(min_score)
    ):
        raise ConfigurationError(f"min_score must be a number or None, got {min_score!r}")
    freeze_json_object(where, what="where")


def _format_hit(hit: ScoredDocument) -> str:
    return f"[retrieved: {hit.id}] {hit.text}"


class Retriever:
    """Indexes documents with an embedding model and finds the ones closest to a query.

    Args:
        embedder: The ``EmbeddingModel`` for documents and queries (use the same one for both).
        store: Where vectors live; a fresh ``InMemoryVectorStore`` by default.
    """

    __slots__ = ("_embedder", "_store")

    def __init__(self, embedder: EmbeddingModel, store: VectorStore | None = None) -> None:
        if not isinstance(embedder, EmbeddingModel):
            raise ConfigurationError(f"embedder must be an EmbeddingModel, got {type(embedder).__name__}")
        if store is not None and not isinstance(store, VectorStore):
            raise ConfigurationError(f"store must be a VectorStore, got {type(store).__name__}")
        self._embedder = embedder
        self._store: VectorStore = InMemoryVectorStore() if store is None else store

    @property
    def embedder(self) -> EmbeddingModel:
        return self._embedder

    @property
    def store(self) -> VectorStore:
        return self._store

    def __len__(self) -> int:
        return len(self._store)

    async def index(self, docs: Iterable[Document | str]) -> list[str]:
        """Embed and store ``docs``; returns their ids in first-seen order (a repeated id: the last document wins).

        A ``str`` becomes ``Document.from_text`` (its id is a digest of the text). Documents already
        stored unchanged are not embedded again, so re-running an indexing cell costs nothing.

        Raises:
            ConfigurationError: An item is neither a ``Document`` nor a ``str``, or has no text.
        """
        if isinstance(docs, str | Document):
            docs = [docs]
        documents: dict[str, Document] = {}
        for i, item in enumerate(docs):
            doc = Document.from_text(item) if isinstance(item, str) else item
            if not isinstance(doc, Document):
                raise ConfigurationError(f"docs[{i}] must be a Document or a str, got {type(item).__name__}")
            if not doc.text.strip():
                raise ConfigurationError(f"docs[{i}] ({doc.id!r}) has no text to embed")
            documents[doc.id] = doc
        fresh = [doc for doc in documents.values() if self._store.get(doc.id) != doc]
        if fresh:
            vectors = await self._embedder.embed([doc.text for doc in fresh])
            if len(vectors) != len(fresh):
                raise ProviderError(
                    f"embedding model {self._embedder.model_name!r} returned {len(vectors)} vectors "
                    f"for {len(fresh)} texts"
                )
            self._store.add(fresh, vectors)
        return list(documents)

    async def retrieve(
        self,
        query: str,
        top_k: int = 4,
        *,
        min_score: float | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> list[ScoredDocument]:
        """The ``top_k`` stored documents closest to ``query``, best first.

        Args:
            query: The text to search for.
            top_k: At most this many hits.
            min_score: Drop hits whose cosine similarity is below this.
            where: Keep only documents whose metadata equals each of these key/value pairs.

        Raises:
            ConfigurationError: A blank query or a bad ``top_k``, ``min_score`` or ``where``.
        """
        text: object = query
        if not isinstance(text, str) or not text.strip():
            raise ConfigurationError(f"query must be a non-empty string, got {query!r}")
        _positive_int("top_k", top_k)
        _check_filters(min_score, where)  # fail before paying for the query embedding
        vector = await self._embedder.embed_query(query)
        hits = self._store.search(vector, top_k, where=where)
        return hits if min_score is None else [hit for hit in hits if hit.score >= min_score]

    async def retrieve_messages(
        self,
        query: str,
        top_k: int = 4,
        *,
        min_score: float | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> list[UserMessage]:
        """The hits of ``retrieve`` as context messages, one per document, best first.

        Each is a ``UserMessage`` reading ``"[retrieved: <id>] <text>"`` and tagged
        ``RETRIEVED_TAG``, so the context-pressure chain drops them before anything else. A user
        message (not a system message) because every provider accepts several of them anywhere in
        a transcript, while some accept only one, leading system message; it also keeps document
        text out of the instruction channel.
        """
        hits = await self.retrieve(query, top_k, min_score=min_score, where=where)
        return [UserMessage(text=_format_hit(hit), tags=(RETRIEVED_TAG,)) for hit in hits]

    # ----------------------------------------------------------------------------------- sync twins
    def index_sync(self, docs: Iterable[Document | str]) -> list[str]:
        """Blocking twin of ``index``; inside a running loop (Jupyter) it runs on a worker thread."""
        return _run_blocking(functools.partial(self._closing, functools.partial(self.index, docs)))

    def retrieve_sync(
        self,
        query: str,
        top_k: int = 4,
        *,
        min_score: float | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> list[ScoredDocument]:
        """Blocking twin of ``retrieve``."""
        call = functools.partial(self.retrieve, query, top_k, min_score=min_score, where=where)
        return _run_blocking(functools.partial(self._closing, call))

    async def _closing(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Await ``fn()``, then close the embedder's HTTP client: it belongs to a loop about to end."""
        try:
            return await fn()
        finally:
            aclose = getattr(self._embedder, "aclose", None)
            if aclose is not None:
                await aclose()

    def as_context_provider(
        self, top_k: int = 4, *, min_score: float | None = None, where: Mapping[str, Any] | None = None
    ) -> _RetrievalProvider:
        """A context provider (for ``ContextProvidersMiddleware``) that retrieves for the current user turn.

        Before each model call it searches with the text of the last user message that is not itself
        retrieved context, and supplies ``retrieve_messages``; a repeated query on an unchanged store
        (tool turns within one user turn) reuses the last answer instead of embedding again.
        """
        _positive_int("top_k", top_k)
        _check_filters(min_score, where)
        return _RetrievalProvider(retriever=self, top_k=top_k, min_score=min_score, where=where)

    # ----------------------------------------------------------------------------------- tool
    def as_tool(
        self,
        *,
        name: str = "search_documents",
        description: str | None = None,
        min_score: float | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> FunctionTool[..., Any]:
        """A tool the model can call to search these documents (``query``, ``top_k`` up to 20).

        ``min_score`` and ``where`` are fixed here, out of the model's reach.
        """
        from .._tools import tool  # lazy: the tool machinery loads pydantic adapters and the run context

        _check_filters(min_score, where)

        async def search_documents(
            query: Annotated[str, Field(pattern=r"\S")], top_k: Annotated[int, Field(ge=1, le=_MAX_TOOL_TOP_K)] = 4
        ) -> str:
            """Search the indexed documents and return the passages most similar to the query.

            Args:
                query: What to look for, in natural language.
                top_k: How many passages to return.
            """
            hits = await self.retrieve(query, top_k, min_score=min_score, where=where)
            if not hits:
                return "No matching documents."
            return "\n\n".join(f"{_format_hit(hit)} (score {hit.score:.2f})" for hit in hits)

        return tool(search_documents, name=name, description=description)

    def __repr__(self) -> str:
        return f"Retriever(embedder={self._embedder!r}, store={self._store!r})"


@dataclass(kw_only=True, slots=True)
class _RetrievalProvider:
    """``Retriever.as_context_provider``: nonessential, so its messages are dropped first under pressure."""

    retriever: Retriever
    top_k: int
    min_score: float | None
    where: Mapping[str, Any] | None
    essential: bool = False
    _last: tuple[str, int, list[UserMessage]] | None = None

    async def provide(self, ctx: RunContext[Any], request: ModelRequest) -> list[UserMessage]:
        query = next(
            (
                m.text
                for m in reversed(request.messages)
                if isinstance(m, UserMessage) and RETRIEVED_TAG not in m.tags and m.text.strip()
            ),
            None,
        )
        if query is None:
            return []
        size = len(self.retriever.store)
        if self._last is None or self._last[:2] != (query, size):
            found = await self.retriever.retrieve_messages(
                query, self.top_k, min_score=self.min_score, where=self.where
            )
            self._last = (query, size, found)
        return list(self._last[2])
