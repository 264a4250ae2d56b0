from __future__ import annotations

import base64
import math
import os
import socket
import sqlite3
import subprocess
import sys
import traceback
from array import array
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from tests.harness.replay_server import ReplayServer, embeddings_body, error_body
from tinyagents_nb.harness import (
    ConfigurationError,
    ContextLimitError,
    ModelNotFound,
    ProviderError,
    RetryPolicy,
    RunContext,
    StoreError,
    SystemMessage,
    ToolArgumentsError,
    Usage,
    UserMessage,
)
from tinyagents_nb.harness.providers import ProviderSpec
from tinyagents_nb.harness.retrieval import (
    Document,
    EmbeddingModel,
    InMemoryVectorStore,
    MockEmbeddingModel,
    OpenAIEmbeddingModel,
    Retriever,
    ScoredDocument,
    SQLiteVectorStore,
    VectorStore,
    cosine_similarity,
)
from tinyagents_nb.harness.runtime import RETRIEVED_TAG

pytestmark = pytest.mark.anyio

KEY = "sk-test-EMBED-SECRET-9a8b7c6d5e4f"

CORPUS = {
    "cats": "Cats purr when they are content and sleep most of the day.",
    "dogs": "Dogs bark at strangers and love long walks in the park.",
    "stocks": "The stock market fell sharply as bond yields rose.",
    "python": "Python lists are dynamic arrays; append is amortised constant time.",
}


def leak_text(err: BaseException) -> str:
    parts = [str(err), repr(err), repr(err.args), str(getattr(err, "hint", ""))]
    parts += traceback.format_exception(err)
    cause: BaseException | None = err
    while cause is not None:
        parts.append(repr(cause))
        cause = cause.__cause__ or cause.__context__
    return "\n".join(parts)


# ------------------------------------------------------------------------------------------ mock embedder
async def test_mock_is_deterministic_normalised_and_case_insensitive() -> None:
    a, b = MockEmbeddingModel(dimensions=32), MockEmbeddingModel(dimensions=32)
    first = await a.embed(["Hello World", "hello world", "other words"])
    assert first[0] == first[1] == await b.embed_query("HELLO, world!")
    assert first[0] != first[2]
    assert all(len(vector) == 32 for vector in first)
    assert math.isclose(math.hypot(*first[0]), 1.0)
    assert a.calls == [["Hello World", "hello world", "other words"]]
    assert a.last_usage == Usage(input_tokens=6)
    assert isinstance(a, EmbeddingModel)
    assert (a.model_name, a.dimensions) == ("mock-embedding", 32)


async def test_mock_similar_texts_score_higher() -> None:
    model = MockEmbeddingModel()
    query = await model.embed_query("why do cats purr")
    docs = await model.embed(list(CORPUS.values()))
    scores = dict(zip(CORPUS, (cosine_similarity(query, doc) for doc in docs), strict=True))
    assert max(scores, key=scores.__getitem__) == "cats"
    assert scores["cats"] > 0.2 > scores["stocks"]


async def test_mock_edge_texts() -> None:
    model = MockEmbeddingModel(dimensions=8)
    empty, punct, stop = await model.embed(["", "!!! ...", "the and of"])
    assert empty == punct == [0.0] * 8  # no words: similar to nothing
    assert math.isclose(math.hypot(*stop), 1.0)  # only stop words: they count after all
    assert await model.embed([]) == []


@pytest.mark.parametrize("bad", ["one text", [1, 2], [b"bytes"], 5])
async def test_embed_rejects_non_text_input(bad: Any) -> None:
    with pytest.raises(ConfigurationError):
        await MockEmbeddingModel().embed(bad)


@pytest.mark.parametrize("dims", [0, -1, True, 2.5, "8"])
def test_mock_rejects_bad_dimensions(dims: Any) -> None:
    with pytest.raises(ConfigurationError, match="dimensions"):
        MockEmbeddingModel(dimensions=dims)


# ------------------------------------------------------------------------------------------ cosine
@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], 1.0),
        ([1.0, 2.0, 3.0], [2.0, 4.0, 6.0], 1.0),  # scale does not matter
        ([1.0, 0.0], [-3.0, 0.0], -1.0),
        ([1.0, 0.0], [0.0, 5.0], 0.0),
        ([0.0, 0.0], [1.0, 1.0], 0.0),  # a zero vector is similar to nothing
        ([0.0, 0.0], [0.0, 0.0], 0.0),
        ([1e200, 1e200], [2e200, 2e200], 1.0),  # no overflow
        ([1e-200, 0.0], [1e-200, 0.0], 1.0),  # no underflow
        ((1, 1), array("f", [1.0, 0.0]), math.sqrt(0.5)),
    ],
)
def test_cosine_similarity(a: Sequence[float], b: Sequence[float], expected: float) -> None:
    assert math.isclose(cosine_similarity(a, b), expected, abs_tol=1e-12)


@pytest.mark.parametrize(
    ("a", "b", "match"),
    [
        ([1.0], [1.0, 2.0], "different lengths"),
        ([], [], "empty"),
        ([math.nan, 1.0], [1.0, 1.0], "NaN"),
    ],
)
def test_cosine_similarity_rejects(a: list[float], b: list[float], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        cosine_similarity(a, b)


finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 8).flatmap(
        lambda n: st.tuples(st.lists(finite, min_size=n, max_size=n), st.lists(finite, min_size=n, max_size=n))
    )
)
def test_cosine_is_bounded_and_symmetric(pair: tuple[list[float], list[float]]) -> None:
    a, b = pair
    value = cosine_similarity(a, b)
    assert -1.0 <= value <= 1.0
    assert value == pytest.approx(cosine_similarity(b, a))


# ------------------------------------------------------------------------------------------ documents
def test_document_is_a_frozen_json_value() -> None:
    meta: dict[str, Any] = {"source": "wiki", "tags": ["a", "b"]}
    doc = Document(id="d1", text="hello", metadata=meta)
    meta["source"] = "changed"
    assert doc.metadata["source"] == "wiki"
    assert doc.metadata["tags"] == ("a", "b")
    with pytest.raises(AttributeError):
        doc.text = "x"  # type: ignore[misc]
    assert doc == Document(id="d1", text="hello", metadata={"source": "wiki", "tags": ["a", "b"]})
    assert hash(doc) == hash(Document(id="d1", text="hello", metadata={}))  # hashable; metadata not in the hash
    same, other = Document.from_text("some text"), Document.from_text("other text")
    assert same.id == Document.from_text("some text").id != other.id
    assert same.id.startswith("doc-")
    hit = ScoredDocument(document=doc, score=0.5)
    assert (hit.id, hit.text, hit.metadata) == ("d1", "hello", doc.metadata)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"id": "", "text": "x"},
        {"id": "  ", "text": "x"},
        {"id": 3, "text": "x"},
        {"id": "a", "text": None},
        {"id": "a", "text": "x", "metadata": {"when": object()}},
        {"id": "a", "text": "x", "metadata": {1: "int key"}},
        {"id": "a", "text": "x", "metadata": {"f": math.inf}},
        {"id": "a", "text": "x", "metadata": ["not", "a", "mapping"]},
    ],
)
def test_document_rejects_bad_fields(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        Document(**kwargs)


# ------------------------------------------------------------------------------------------ vector stores
StoreFactory = Callable[[], VectorStore]


@pytest.fixture(params=["memory", "sqlite"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    opened: list[SQLiteVectorStore] = []

    def factory() -> VectorStore:
        if request.param == "memory":
            return InMemoryVectorStore()
        store = SQLiteVectorStore(tmp_path / "vectors.db", namespace=f"ns{len(opened)}")
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


def doc(doc_id: str, **metadata: Any) -> Document:
    return Document(id=doc_id, text=f"text of {doc_id}", metadata=metadata)


def ids(hits: Sequence[ScoredDocument]) -> list[str]:
    return [hit.id for hit in hits]


def test_store_search_ranks_by_cosine(make_store: StoreFactory) -> None:
    store = make_store()
    assert isinstance(store, VectorStore)
    assert (len(store), store.dimensions, store.search([1.0, 0.0, 0.0])) == (0, None, [])
    store.add([doc("x"), doc("xy"), doc("y"), doc("negx")], [[1, 0, 0], [1, 1, 0], [0, 5, 0], [-2, 0, 0]])
    assert (len(store), store.dimensions) == (4, 3)
    hits = store.search([3.0, 0.0, 0.0], top_k=10)
    assert ids(hits) == ["x", "xy", "y", "negx"]
    assert [round(hit.score, 5) for hit in hits] == [1.0, round(math.sqrt(0.5), 5), 0.0, -1.0]
    assert ids(store.search([0.0, 1.0, 0.0], top_k=2)) == ["y", "xy"]
    assert hits[0].document == doc("x")
    assert store.get("xy") == doc("xy")
    assert store.get("missing") is None


def test_store_ties_keep_insertion_order_and_zero_query_scores_zero(make_store: StoreFactory) -> None:
    store = make_store()
    store.add([doc("a"), doc("b"), doc("c")], [[1, 0], [1, 0], [1, 0]])
    assert ids(store.search([1, 0], top_k=2)) == ["a", "b"]
    zero = store.search([0, 0], top_k=3)
    assert ids(zero) == ["a", "b", "c"]
    assert {hit.score for hit in zero} == {0.0}


def test_store_where_filters_on_metadata_equality(make_store: StoreFactory) -> None:
    store = make_store()
    store.add(
        [
            doc("a", lang="en", page=1, draft=False, tags=["x"]),
            doc("b", lang="de", page=1, draft=True),
            doc("c", lang="en", page=2, draft=0),
        ],
        [[1, 0], [1, 0.1], [1, 0.2]],
    )
    assert ids(store.search([1, 0], top_k=5, where={"lang": "en"})) == ["a", "c"]
    assert ids(store.search([1, 0], top_k=5, where={"lang": "en", "page": 2})) == ["c"]
    assert ids(store.search([1, 0], top_k=5, where={"draft": False})) == ["a"]  # JSON false is not 0
    assert ids(store.search([1, 0], top_k=5, where={"draft": 0})) == ["c"]
    assert ids(store.search([1, 0], top_k=5, where={"tags": ["x"]})) == ["a"]
    assert store.search([1, 0], top_k=5, where={"missing": None}) == []
    assert len(store.search([1, 0], top_k=5, where={})) == 3
    with pytest.raises(ConfigurationError):
        store.search([1, 0], where={"k": object()})


def test_store_upsert_delete_and_clear(make_store: StoreFactory) -> None:
    store = make_store()
    store.add([doc("a"), doc("b")], [[1, 0], [0, 1]])
    store.add([Document(id="a", text="new a", metadata={"v": 2})], [[0, 1]])
    assert len(store) == 2
    assert store.get("a") == Document(id="a", text="new a", metadata={"v": 2})
    assert ids(store.search([0, 1], top_k=2)) == ["b", "a"]  # replaced ids move to the end (tie order)
    assert store.delete(["a", "missing", "a"]) == 1
    assert store.delete("b") == 1  # a single str is one id, not its characters
    assert (len(store), store.dimensions) == (0, None)
    store.add([doc("c")], [[1, 2, 3]])  # an emptied store takes a new vector length
    store.clear()
    assert (len(store), store.dimensions) == (0, None)
    store.add([], [])
    assert len(store) == 0


@pytest.mark.parametrize(
    ("docs", "vectors", "match"),
    [
        ([doc("a")], [], "1 documents but 0 vectors"),
        ([doc("a")], [[]], "empty"),
        ([doc("a")], [[1.0, math.nan]], "NaN"),
        ([doc("a")], [[1.0, math.inf]], "NaN or infinity"),
        ([doc("a")], [["1", "2"]], "only numbers"),
        ([doc("a")], ["12"], "sequence of numbers"),
        ([doc("a"), doc("b")], [[1, 0], [1, 0, 0]], "different lengths"),
        (["plain text"], [[1, 0]], "must be a Document"),
        ([doc("a")], [[1, 0, 0]], "holds 2-dimensional vectors"),
    ],
)
def test_store_add_rejects_bad_input_atomically(
    make_store: StoreFactory, docs: list[Any], vectors: list[Any], match: str
) -> None:
    store = make_store()
    store.add([doc("seed")], [[1.0, 0.0]])
    with pytest.raises(ConfigurationError, match=match):
        store.add(docs, vectors)
    assert len(store) == 1
    assert store.get("a") is None


@pytest.mark.parametrize("top_k", [0, -1, True, 1.5])
def test_store_search_rejects_bad_top_k_and_query(make_store: StoreFactory, top_k: Any) -> None:
    store = make_store()
    store.add([doc("a")], [[1.0, 0.0]])
    with pytest.raises(ConfigurationError, match="top_k"):
        store.search([1.0, 0.0], top_k=top_k)
    with pytest.raises(ConfigurationError, match="2-dimensional"):
        store.search([1.0, 0.0, 0.0])


def test_sqlite_store_persists_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "dir" / "v.db"  # parent directories are created
    vectors = [[0.1, 0.9, 0.0], [0.8, 0.2, 0.1], [0.3, 0.3, 0.3]]
    docs = [doc("a", lang="en", nested={"k": [1, 2]}), doc("b", lang="de"), Document(id="c", text="ünïcødé ✓")]
    with SQLiteVectorStore(path) as store:
        store.add(docs, vectors)
        before = store.search([1.0, 0.0, 0.0], top_k=3)
    memory = InMemoryVectorStore()
    memory.add(docs, vectors)
    with SQLiteVectorStore(path) as reopened:
        assert (len(reopened), reopened.dimensions) == (3, 3)
        after = reopened.search([1.0, 0.0, 0.0], top_k=3)
        assert reopened.get("a") == docs[0]
        assert reopened.get("c") == docs[2]
        assert "b" in reopened
        assert "z" not in reopened
    assert ids(after) == ids(before) == ids(memory.search([1.0, 0.0, 0.0], top_k=3))
    # float32 storage: scores match the in-memory store to float32 precision
    for stored, exact in zip(after, memory.search([1.0, 0.0, 0.0], top_k=3), strict=True):
        assert stored.score == pytest.approx(exact.score, abs=1e-6)
    assert {hit.id: hit for hit in after}["a"].metadata["nested"] == {"k": (1, 2)}


def test_sqlite_namespaces_are_separate_collections(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    with SQLiteVectorStore(path, namespace="small") as small, SQLiteVectorStore(path, namespace="big") as big:
        small.add([doc("a")], [[1.0, 0.0]])
        big.add([doc("a"), doc("b")], [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
        assert (len(small), small.dimensions, len(big), big.dimensions) == (1, 2, 2, 3)
        small.clear()
        assert (len(small), len(big)) == (0, 2)
        assert repr(small) == f"SQLiteVectorStore({str(path)!r}, namespace='small')"


def test_sqlite_store_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot open"):
        SQLiteVectorStore(tmp_path)  # a directory
    not_db = tmp_path / "not.db"
    not_db.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ConfigurationError, match="cannot open"):
        SQLiteVectorStore(not_db)
    for bad in ({"namespace": ""}, {"busy_timeout_s": -1}, {"busy_timeout_s": math.inf}):
        with pytest.raises(ConfigurationError):
            SQLiteVectorStore(tmp_path / "ok.db", **bad)
    with pytest.raises(ConfigurationError):
        SQLiteVectorStore("")
    store = SQLiteVectorStore(":memory:")
    with pytest.raises(ConfigurationError, match="valid Unicode"):
        store.add([Document(id="a", text="lone \ud800 surrogate")], [[1.0]])
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        len(store)


def test_sqlite_store_reads_a_file_another_connection_wrote(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    with SQLiteVectorStore(path) as writer, SQLiteVectorStore(path) as reader:
        writer.add([doc("a")], [[1.0, 0.0]])
        assert ids(reader.search([1.0, 0.0])) == ["a"]
    with sqlite3.connect(path) as raw:
        (count,) = raw.execute("SELECT count(*) FROM tinyagents_vectors").fetchone()
    assert count == 1


# ------------------------------------------------------------------------------------------ retriever
@pytest.fixture
def mock() -> MockEmbeddingModel:
    return MockEmbeddingModel(dimensions=128)


async def test_retriever_indexes_and_retrieves(mock: MockEmbeddingModel) -> None:
    retriever = Retriever(mock)
    docs = [Document(id=key, text=text, metadata={"topic": key}) for key, text in CORPUS.items()]
    assert await retriever.index(docs) == list(CORPUS)
    assert len(retriever) == 4
    assert isinstance(retriever.store, InMemoryVectorStore)
    hits = await retriever.retrieve("Do cats sleep all day?", top_k=2)
    assert hits[0].id == "cats"
    assert len(hits) == 2
    assert hits[0].score >= hits[1].score
    assert [hit.id for hit in await retriever.retrieve("cats", where={"topic": "dogs"})] == ["dogs"]
    strict = await retriever.retrieve("bond yields and the stock market", top_k=4, min_score=0.3)
    assert [hit.id for hit in strict] == ["stocks"]
    assert await retriever.retrieve("zebra quantum", min_score=0.99) == []


async def test_retriever_plain_strings_get_content_ids_and_are_not_re_embedded(mock: MockEmbeddingModel) -> None:
    retriever = Retriever(mock)
    first = await retriever.index(["alpha beta", "gamma delta", "alpha beta"])
    assert first == [Document.from_text("alpha beta").id, Document.from_text("gamma delta").id]
    assert mock.calls == [["alpha beta", "gamma delta"]]  # the duplicate was embedded once
    assert await retriever.index(["gamma delta", "epsilon"]) == [first[1], Document.from_text("epsilon").id]
    assert mock.calls[-1] == ["epsilon"]  # unchanged documents cost nothing on re-index
    await retriever.index([Document(id=first[0], text="alpha beta", metadata={"v": 2})])
    assert mock.calls[-1] == ["alpha beta"]  # changed metadata: stored again
    assert await retriever.index("single string") == [Document.from_text("single string").id]
    assert len(retriever) == 4


@pytest.mark.parametrize(
    ("docs", "match"),
    [
        ([""], "no text"),
        (["   "], "no text"),
        ([42], "Document or a str"),
        ([Document(id="x", text="\n")], "no text"),
    ],
)
async def test_retriever_index_rejects_bad_documents(mock: MockEmbeddingModel, docs: list[Any], match: str) -> None:
    retriever = Retriever(mock)
    with pytest.raises(ConfigurationError, match=match):
        await retriever.index(docs)
    assert mock.calls == []
    assert len(retriever) == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"query": ""},
        {"query": "  "},
        {"query": None},
        {"query": "q", "top_k": 0},
        {"query": "q", "min_score": math.nan},
        {"query": "q", "min_score": "0.5"},
        {"query": "q", "where": {"k": object()}},
    ],
)
async def test_retrieve_rejects_bad_arguments_before_embedding(
    mock: MockEmbeddingModel, kwargs: dict[str, Any]
) -> None:
    retriever = Retriever(mock)
    with pytest.raises(ConfigurationError):
        await retriever.retrieve(**kwargs)
    assert mock.calls == []


def test_retriever_rejects_bad_components(mock: MockEmbeddingModel) -> None:
    with pytest.raises(ConfigurationError, match="EmbeddingModel"):
        Retriever(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="VectorStore"):
        Retriever(mock, store={})  # type: ignore[arg-type]


async def test_retriever_detects_an_embedder_that_returns_too_few_vectors(mock: MockEmbeddingModel) -> None:
    class Short(MockEmbeddingModel):
        async def embed(self, texts: Sequence[str]) -> list[list[float]]:
            return (await super().embed(texts))[:-1]

    with pytest.raises(ProviderError, match="1 vectors for 2 texts"):
        await Retriever(Short()).index(["one", "two"])


async def test_retrieved_messages_are_tagged_user_messages(mock: MockEmbeddingModel) -> None:
    retriever = Retriever(mock)
    await retriever.index([Document(id=key, text=text) for key, text in CORPUS.items()])
    messages = await retriever.retrieve_messages("dogs bark in the park", top_k=2)
    assert len(messages) == 2
    assert [type(m) for m in messages] == [UserMessage, UserMessage]  # not SystemMessage: see the docstring
    assert [m.tags for m in messages] == [(RETRIEVED_TAG,), (RETRIEVED_TAG,)]
    assert messages[0].text == f"[retrieved: dogs] {CORPUS['dogs']}"
    assert await retriever.retrieve_messages("dogs", min_score=1.1) == []


async def test_retriever_over_sqlite_survives_a_new_retriever(mock: MockEmbeddingModel, tmp_path: Path) -> None:
    path = tmp_path / "rag.db"
    with SQLiteVectorStore(path) as store:
        await Retriever(mock, store).index(list(CORPUS.values()))
    with SQLiteVectorStore(path) as store:
        retriever = Retriever(MockEmbeddingModel(dimensions=128), store)
        (hit,) = await retriever.retrieve("python append amortised", top_k=1)
        assert hit.text == CORPUS["python"]
        with pytest.raises(ConfigurationError, match="128-dimensional"):
            await Retriever(MockEmbeddingModel(dimensions=16), store).index(["other embedder"])


async def test_retriever_as_tool(mock: MockEmbeddingModel) -> None:
    retriever = Retriever(mock)
    await retriever.index([Document(id=key, text=text, metadata={"k": key}) for key, text in CORPUS.items()])
    search = retriever.as_tool()
    schema = search.schema
    assert schema.name == "search_documents"
    assert schema.parameters["required"] == ["query"]
    assert schema.parameters["properties"]["query"]["type"] == "string"
    assert schema.parameters["properties"]["top_k"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 20,
        "default": 4,
        "description": "How many passages to return.",
    }
    assert "Search the indexed documents" in schema.description
    assert "Args" not in schema.description
    ctx: RunContext[None] = RunContext()
    result = await search.call(ctx, {"query": "cats purr", "top_k": 1})
    assert result.text.startswith(f"[retrieved: cats] {CORPUS['cats']} (score ")
    assert not result.is_error
    with pytest.raises(ToolArgumentsError):
        await search.call(ctx, {"query": "cats", "top_k": 50})
    with pytest.raises(ToolArgumentsError, match="query"):
        await search.call(ctx, {"query": "  "})  # the model is told, instead of the run failing
    with pytest.raises(ConfigurationError):
        retriever.as_tool(min_score="high")  # type: ignore[arg-type]
    scoped = retriever.as_tool(name="search_dogs", where={"k": "dogs"}, min_score=0.99)
    assert scoped.name == "search_dogs"
    assert (await scoped.call(ctx, {"query": "cats purr"})).text == "No matching documents."


async def test_retriever_as_context_provider(mock: MockEmbeddingModel) -> None:
    from tinyagents_nb.harness import ModelRequest
    from tinyagents_nb.harness.memory import ContextProvider, ContextProvidersMiddleware

    retriever = Retriever(mock)
    await retriever.index([Document(id=key, text=text) for key, text in CORPUS.items()])
    provider = retriever.as_context_provider(top_k=1)
    assert isinstance(provider, ContextProvider)
    assert provider.essential is False
    request = ModelRequest(
        messages=[
            SystemMessage(text="be brief"),
            UserMessage(text="[retrieved: x] an old snippet about stocks", tags=(RETRIEVED_TAG,)),
            UserMessage(text="why do cats purr?"),
        ]
    )
    ctx: RunContext[None] = RunContext()
    calls = len(mock.calls)
    (message,) = await provider.provide(ctx, request)
    assert message == UserMessage(text=f"[retrieved: cats] {CORPUS['cats']}", tags=(RETRIEVED_TAG,))
    assert await provider.provide(ctx, request) == [message]  # a tool turn later: no new embedding
    assert len(mock.calls) == calls + 1
    await retriever.index(["Cats also purr when they are hurt."])  # the store changed: ask again
    (fresh,) = await provider.provide(ctx, request)
    assert (
        fresh.text
        == f"[retrieved: {Document.from_text('Cats also purr when they are hurt.').id}] Cats also purr when they are hurt."
    )
    assert len(mock.calls) == calls + 3
    assert await provider.provide(ctx, ModelRequest(messages=[SystemMessage(text="no user turn")])) == []

    sent = await ContextProvidersMiddleware([provider]).before_model(ctx, request)
    assert [m.text for m in sent.messages][2:] == [fresh.text, "why do cats purr?"]  # before the user turn
    with pytest.raises(ConfigurationError):
        retriever.as_context_provider(top_k=0)


def test_retriever_sync_twins_outside_a_loop(mock: MockEmbeddingModel) -> None:
    retriever = Retriever(mock)
    assert retriever.index_sync(list(CORPUS.values())) == [Document.from_text(t).id for t in CORPUS.values()]
    (hit,) = retriever.retrieve_sync("stock market", top_k=1)
    assert hit.text == CORPUS["stocks"]


async def test_retriever_sync_twins_inside_a_running_loop(mock: MockEmbeddingModel) -> None:
    retriever = Retriever(mock)
    retriever.index_sync(["the kernel's loop is running"])  # would deadlock or raise without a worker thread
    (hit,) = retriever.retrieve_sync("kernel loop", top_k=1)
    assert hit.text == "the kernel's loop is running"


# ------------------------------------------------------------------------------------------ openai client
def make(server: ReplayServer, **kwargs: Any) -> OpenAIEmbeddingModel:
    kwargs.setdefault("api_key", KEY)
    return OpenAIEmbeddingModel(base_url=server.base_url, **kwargs)


async def test_openai_embed_request_and_response(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, embeddings_body([[0.5, 0.25], [1, -2]], prompt_tokens=7))
    async with make(replay_server) as model:
        before = (model.last_usage, model.dimensions)
        result = await model.embed_with_usage(["first", "second ✓"])
        assert before == (None, None)
        assert model.dimensions == 2  # learned from the answer
    assert result.vectors == [[0.5, 0.25], [1.0, -2.0]]
    assert all(type(x) is float for vector in result.vectors for x in vector)
    assert (result.usage, result.model) == (Usage(input_tokens=7), "text-embedding-3-small")
    assert model.last_usage == model.total_usage == Usage(input_tokens=7)
    (sent,) = replay_server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/embeddings")
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"] == "application/json"
    assert sent.body == {"model": "text-embedding-3-small", "input": ["first", "second ✓"]}


async def test_openai_batches_and_restores_order(replay_server: ReplayServer) -> None:
    texts = [f"text {i}" for i in range(5)]
    vectors = [[float(i), 1.0] for i in range(5)]
    replay_server.enqueue(200, embeddings_body(vectors[0:2], order=[1, 0], prompt_tokens=4))
    replay_server.enqueue(200, embeddings_body(vectors[2:4], order=[1, 0], prompt_tokens=4))
    replay_server.enqueue(200, embeddings_body(vectors[4:5], prompt_tokens=2))
    async with make(replay_server, batch_size=2) as model:
        assert await model.embed(texts) == vectors
        assert model.last_usage == Usage(input_tokens=10)
        replay_server.enqueue(200, embeddings_body([[9.0, 9.0]], prompt_tokens=1))
        assert await model.embed_query("again") == [9.0, 9.0]
        assert (model.last_usage, model.total_usage) == (Usage(input_tokens=1), Usage(input_tokens=11))
        assert await model.embed([]) == []  # no request
    assert [r.body["input"] for r in replay_server.requests] == [texts[0:2], texts[2:4], texts[4:5], ["again"]]


async def test_openai_dimensions_and_base64(replay_server: ReplayServer) -> None:
    packed = base64.b64encode(array("f", [0.5, -1.0, 2.0]).tobytes()).decode()
    replay_server.enqueue(200, embeddings_body([packed]))  # no usage at all: counted as zero
    replay_server.enqueue(200, embeddings_body([[1.0, 2.0]]))
    async with make(replay_server, model="text-embedding-3-large", dimensions=3) as model:
        assert model.dimensions == 3
        assert await model.embed(["x"]) == [[0.5, -1.0, 2.0]]
        assert model.last_usage == Usage()
        with pytest.raises(ProviderError) as info:
            await model.embed(["y"])  # the host ignored `dimensions`
    assert replay_server.requests[0].body == {"model": "text-embedding-3-large", "input": ["x"], "dimensions": 3}
    err = info.value
    assert (err.code, err.retryable, err.provider) == ("dimensions_mismatch", False, "openai")
    assert "2 dimensions" in str(err)


async def test_openai_429_is_retryable_and_retry_policy_uses_it(replay_server: ReplayServer) -> None:
    limited = error_body("Rate limit reached for text-embedding-3-small", type="tokens", code="rate_limit_exceeded")
    replay_server.enqueue(429, limited, headers={"retry-after-ms": "5"})
    async with make(replay_server) as model:
        with pytest.raises(ProviderError) as info:
            await model.embed(["x"])
    err = info.value
    assert (err.status, err.retryable, err.retry_after_s, err.code) == (429, True, 0.005, "rate_limit_exceeded")

    replay_server.enqueue(429, limited, headers={"retry-after-ms": "5"})
    replay_server.enqueue(503, error_body("overloaded", type="server_error"))
    replay_server.enqueue(200, embeddings_body([[1.0]], prompt_tokens=1))
    async with make(replay_server, retry=RetryPolicy(max_attempts=3, initial_backoff_s=0.001)) as model:
        assert await model.embed(["x"]) == [[1.0]]
    assert len(replay_server.requests) == 4


@pytest.mark.parametrize(
    ("status", "body", "error_type", "retryable"),
    [
        (
            429,
            error_body("You exceeded your current quota", type="insufficient_quota", code="insufficient_quota"),
            ProviderError,
            False,
        ),
        (500, error_body("The server had an error", type="server_error"), ProviderError, True),
        (400, error_body("'$.input' is invalid.", code=None), ProviderError, False),
        (404, error_body("The model `nope` does not exist", code="model_not_found"), ModelNotFound, None),
        (
            400,
            error_body(
                "This model's maximum context length is 8192 tokens, however you requested 9000 tokens", code=None
            ),
            ContextLimitError,
            None,
        ),
    ],
)
async def test_openai_status_errors_are_mapped(
    replay_server: ReplayServer, status: int, body: dict[str, Any], error_type: type[Exception], retryable: bool | None
) -> None:
    replay_server.enqueue(status, body)
    async with make(replay_server) as model:
        with pytest.raises(error_type) as info:
            await model.embed(["x"])
    if retryable is not None:
        assert isinstance(info.value, ProviderError)
        assert (info.value.status, info.value.retryable) == (status, retryable)


async def test_openai_401_never_shows_the_key(replay_server: ReplayServer) -> None:
    message = f"Incorrect API key provided: {KEY}. Header was Authorization: Bearer {KEY}"
    replay_server.enqueue(401, error_body(message, code="invalid_api_key"))
    async with make(replay_server, extra_headers={"x-gateway-token": "gw-SECRET-123"}) as model:
        with pytest.raises(ProviderError) as info:
            await model.embed(["x"])
        assert KEY not in repr(model)
        assert KEY not in str(model)
        assert "api_key=<set>" in repr(model)
        assert repr(model).startswith("OpenAIEmbeddingModel(")
    err = info.value
    assert (err.status, err.retryable) == (401, False)
    assert err.hint is not None
    assert "OPENAI_API_KEY" in err.hint
    assert KEY not in leak_text(err)
    assert "gw-SECRET-123" not in leak_text(err)


async def test_openai_connection_failure_is_retryable_and_keyless() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with OpenAIEmbeddingModel(api_key=KEY, base_url=f"http://127.0.0.1:{port}/v1") as model:
        with pytest.raises(ProviderError) as info:
            await model.embed(["x"])
    assert (info.value.retryable, info.value.code) == (True, "connect_error")
    assert KEY not in leak_text(info.value)


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("not json", "not JSON"),
        ({"object": "list"}, "no 'data' list"),
        (embeddings_body([[1.0]]), "asked for 2 embeddings, got 1"),
        (embeddings_body([[1.0], [2.0]], order=[0, 0]), "appears twice"),
        ({"data": [{"index": 0, "embedding": [1.0]}, {"index": 5, "embedding": [2.0]}]}, "no valid 'index'"),
        (embeddings_body([[1.0], "@@not base64@@"]), "not valid base64"),
        ({"data": [{"index": 0, "embedding": ["1"]}, {"index": 1, "embedding": [1]}]}, "not a list of numbers"),
        ({"data": [{"index": 0, "embedding": []}, {"index": 1, "embedding": [1]}]}, "empty or not finite"),
        (embeddings_body([[1.0], [1.0, 2.0]]), "different lengths"),
    ],
)
async def test_openai_malformed_responses(replay_server: ReplayServer, body: Any, match: str) -> None:
    replay_server.enqueue(200, body)
    async with make(replay_server) as model:
        with pytest.raises(ProviderError, match=match) as info:
            await model.embed(["a", "b"])
    assert info.value.retryable  # garbled output is usually transient; the retry policy bounds it


async def test_openai_error_object_in_a_200_body(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, error_body(f"bad key {KEY}", type="invalid_request_error"))
    async with make(replay_server) as model:
        with pytest.raises(ProviderError) as info:
            await model.embed(["x"])
    assert not info.value.retryable
    assert KEY not in str(info.value)


async def test_openai_provider_resolution(replay_server: ReplayServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="no API key") as info:
        OpenAIEmbeddingModel()
    assert info.value.hint is not None
    assert "OPENAI_API_KEY" in info.value.hint
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    default = OpenAIEmbeddingModel()
    assert (default.model_name, default.provider, default.spec.base_url) == (
        "text-embedding-3-small",
        "openai",
        "https://api.openai.com/v1",
    )
    ollama = OpenAIEmbeddingModel("nomic-embed-text", provider="ollama")
    assert (ollama.provider, ollama.spec.base_url, "api_key=<none>" in repr(ollama)) == (
        "ollama",
        "http://localhost:11434/v1",
        True,
    )
    with pytest.raises(ConfigurationError, match="unknown provider"):
        OpenAIEmbeddingModel(provider="nope")
    with pytest.raises(ConfigurationError, match="base_url"):
        OpenAIEmbeddingModel(base_url="ftp://x")

    # A compatible host without keys, and the key from the environment for openai itself.
    replay_server.enqueue(200, embeddings_body([[1.0]], model="local-embed"))
    replay_server.enqueue(200, embeddings_body([[2.0]]))
    spec = ProviderSpec.compatible(base_url=replay_server.base_url + "/")  # a trailing slash is fine
    async with OpenAIEmbeddingModel("local-embed", provider=spec) as local:
        assert (await local.embed_with_usage(["x"])).model == "local-embed"
    async with OpenAIEmbeddingModel(base_url=replay_server.base_url) as from_env:
        await from_env.embed(["y"])
    first, second = replay_server.requests
    assert first.path == second.path == "/v1/embeddings"
    assert "authorization" not in first.headers
    assert second.headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"batch_size": 0},
        {"batch_size": 2049},
        {"batch_size": True},
        {"dimensions": 0},
        {"timeout_s": 0},
        {"retry": 3},
        {"model": ""},
        {"api_key": " "},
    ],
)
def test_openai_rejects_bad_arguments(kwargs: dict[str, Any]) -> None:
    kwargs.setdefault("api_key", KEY)
    with pytest.raises(ConfigurationError):
        OpenAIEmbeddingModel(**kwargs)


async def test_openai_supplied_client_is_not_closed(replay_server: ReplayServer) -> None:
    import httpx

    replay_server.enqueue(200, embeddings_body([[1.0]]))
    async with httpx.AsyncClient() as client:
        model = make(replay_server, http_client=client)
        await model.embed(["x"])
        await model.aclose()
        assert not client.is_closed


async def test_retriever_end_to_end_over_the_openai_client(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, embeddings_body([[1.0, 0.0], [0.0, 1.0]], prompt_tokens=6))
    replay_server.enqueue(200, embeddings_body([[0.1, 0.9]], prompt_tokens=2))
    async with make(replay_server) as model:
        retriever = Retriever(model)
        await retriever.index([Document(id="east", text="sunrise"), Document(id="north", text="polar star")])
        (message,) = await retriever.retrieve_messages("where is the star", top_k=1)
    assert message.text == "[retrieved: north] polar star"
    assert message.tags == (RETRIEVED_TAG,)
    assert [r.body["input"] for r in replay_server.requests] == [["sunrise", "polar star"], ["where is the star"]]


def test_import_is_light_and_mock_vectors_ignore_the_hash_seed() -> None:
    # One subprocess for both (each costs an interpreter start): the import must not load httpx, and
    # the mock must give the same vector under another PYTHONHASHSEED than this process's.
    code = (
        "import sys; import tinyagents_nb.harness.retrieval as e; "
        "print([m for m in ('httpx', 'httpcore', 'numpy') if m in sys.modules]); "
        "print(e.MockEmbeddingModel(16).vector('alpha beta gamma'))"
    )
    seed = "1" if os.environ.get("PYTHONHASHSEED") != "1" else "2"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**os.environ, "PYTHONHASHSEED": seed},
    )
    modules, vector = out.stdout.strip().splitlines()
    assert modules == "[]"
    assert vector == str(MockEmbeddingModel(16).vector("alpha beta gamma"))


def test_sync_twins_close_the_openai_client_they_opened(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, embeddings_body([[1.0, 0.0]], prompt_tokens=1))
    replay_server.enqueue(200, embeddings_body([[0.9, 0.1]], prompt_tokens=1))
    model = make(replay_server)
    retriever = Retriever(model)
    assert retriever.index_sync([Document(id="only", text="one document")]) == ["only"]
    (hit,) = retriever.retrieve_sync("a query", top_k=1)
    assert hit.id == "only"
    assert model._transport._given_client is None
    assert len(model._transport._clients) == 0  # closed on the loop that opened it, nothing left dangling
