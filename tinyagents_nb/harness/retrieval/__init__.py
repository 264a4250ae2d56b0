"""Retrieval: embedding models, vector stores and the retriever that feeds documents into a run.

``EmbeddingModel`` turns texts into vectors (``OpenAIEmbeddingModel`` over the wire,
``MockEmbeddingModel`` offline and deterministic); ``VectorStore`` keeps and searches them
(``InMemoryVectorStore``, ``SQLiteVectorStore``); ``Retriever`` joins the two.
"""

from __future__ import annotations

from ._embeddings import (
    EmbeddingModel as EmbeddingModel,
    EmbeddingResult as EmbeddingResult,
    MockEmbeddingModel as MockEmbeddingModel,
    OpenAIEmbeddingModel as OpenAIEmbeddingModel,
)
from ._retriever import Retriever as Retriever
from ._sqlite_vectors import SQLiteVectorStore as SQLiteVectorStore
from ._vectors import (
    Document as Document,
    InMemoryVectorStore as InMemoryVectorStore,
    ScoredDocument as ScoredDocument,
    VectorStore as VectorStore,
    cosine_similarity as cosine_similarity,
)

__all__ = [
    "Document",
    "EmbeddingModel",
    "EmbeddingResult",
    "InMemoryVectorStore",
    "MockEmbeddingModel",
    "OpenAIEmbeddingModel",
    "Retriever",
    "SQLiteVectorStore",
    "ScoredDocument",
    "VectorStore",
    "cosine_similarity",
]
