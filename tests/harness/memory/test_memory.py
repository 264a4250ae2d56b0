"""Chat history, short-term memory (and its middleware) and session state."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    ConfigurationError,
    ImageRef,
    InvalidIdError,
    JsonBlock,
    Message,
    Middleware,
    ProviderError,
    RunConfig,
    RunContext,
    StoreError,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolMessage,
    UserMessage,
    tool,
)
from tinyagents_nb.harness.events import MemoryLoaded, MemorySaved
from tinyagents_nb.harness.memory import (
    ChatHistory,
    InMemoryChatHistory,
    KeepLast,
    MemoryMiddleware,
    SessionState,
    ShortTermMemory,
    StoreChatHistory,
    get_state,
    set_state,
    update_state,
)
from tinyagents_nb.harness.runtime import RETRIEVED_TAG
from tinyagents_nb.harness.stores import InMemoryStore, JsonValue, Namespace, SQLiteStore, Store, StoreRegistry
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel

TRANSCRIPT: list[Message] = [
    UserMessage(text="weather in Paris? ✓ 日本", blocks=[ImageRef(url="https://x/y.png", detail="low")], name="ada"),
    AssistantMessage(
        text="",
        reasoning="need the tool",
        blocks=[ThinkingBlock(text="hmm", signature="sig")],
        tool_calls=[
            ToolCall(id="c1", name="weather", arguments={"city": "Paris", "days": [1, 2]}),
            ToolCall(id="c2", name="broken", raw_arguments="{not json"),
        ],
    ),
    ToolMessage(tool_call_id="c1", name="weather", text="sunny", blocks=[JsonBlock(data={"t": 21.5})]),
    ToolMessage(tool_call_id="c2", name="broken", text="bad args", is_error=True),
    AssistantMessage(text="It is sunny.", blocks=[TextBlock(text="It is sunny.")], tags=["final"]),
]


class Delegating:
    """A Store that is not one of the shipped classes: StoreChatHistory must use its fallback path."""

    def __init__(self) -> None:
        self.inner = InMemoryStore()

    def get(self, namespace: Namespace, key: str, default: JsonValue = None) -> JsonValue:
        return self.inner.get(namespace, key, default)

    def has(self, namespace: Namespace, key: str) -> bool:
        return self.inner.has(namespace, key)

    def put(self, namespace: Namespace, key: str, value: object) -> None:
        self.inner.put(namespace, key, value)

    def update(
        self, namespace: Namespace, key: str, fn: Callable[[JsonValue], object], *, default: JsonValue = None
    ) -> JsonValue:
        return self.inner.update(namespace, key, fn, default=default)

    def delete(self, namespace: Namespace, key: str) -> bool:
        return self.inner.delete(namespace, key)

    def keys(self, namespace: Namespace, *, prefix: str = "") -> list[str]:
        return self.inner.keys(namespace, prefix=prefix)

    def items(self, namespace: Namespace, *, prefix: str = "") -> list[tuple[str, JsonValue]]:
        return self.inner.items(namespace, prefix=prefix)

    def namespaces(self, *, prefix: Namespace | None = None) -> list[tuple[str, ...]]:
        return self.inner.namespaces(prefix=prefix)

    def clear(self, namespace: Namespace | None = None) -> int:
        return self.inner.clear(namespace)

    def close(self) -> None:
        self.inner.close()


@pytest.fixture(params=["in-memory", "store-memory", "store-sqlite", "store-fallback"])
def history(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ChatHistory]:
    if request.param == "in-memory":
        yield InMemoryChatHistory()
        return
    store: Store
    if request.param == "store-memory":
        store = InMemoryStore()
    elif request.param == "store-sqlite":
        store = SQLiteStore(tmp_path / "history.sqlite")
    else:
        store = Delegating()
    yield StoreChatHistory(store)
    store.close()


# ------------------------------------------------------------------------------------------ histories
def test_round_trip_keeps_every_field(history: ChatHistory) -> None:
    assert isinstance(history, ChatHistory)
    assert history.load("t1") == []
    history.append("t1", TRANSCRIPT[:1])
    history.append("t1", TRANSCRIPT[1:])
    loaded = history.load("t1")
    assert loaded == TRANSCRIPT
    assert loaded[1].tool_calls[1].raw_arguments == "{not json"  # type: ignore[union-attr]
    assert history.threads() == ["t1"]


def test_load_returns_a_fresh_list(history: ChatHistory) -> None:
    history.append("t", [UserMessage(text="a")])
    first = history.load("t")
    first.append(UserMessage(text="b"))
    assert history.load("t") == [UserMessage(text="a")]


def test_threads_are_isolated_and_replace_and_clear(history: ChatHistory) -> None:
    history.append("a", [UserMessage(text="1"), AssistantMessage(text="2")])
    history.append("b", [UserMessage(text="x")])
    history.append("a", [UserMessage(text="3")])
    history.append("a", [])  # no-op
    assert [m.text for m in history.load("a")] == ["1", "2", "3"]
    assert [m.text for m in history.load("b")] == ["x"]
    assert history.threads() == ["a", "b"]

    history.replace("a", [SystemMessage(text="summary")])
    assert history.load("a") == [SystemMessage(text="summary")]
    history.append("a", [UserMessage(text="after")])  # the sequence continues after a replace
    assert [m.text for m in history.load("a")] == ["summary", "after"]

    history.replace("a", [])
    assert history.load("a") == []
    assert history.threads() == ["b"]
    history.clear("b")
    history.clear("never-existed")
    assert history.threads() == []
    history.append("b", [UserMessage(text="again")])
    assert [m.text for m in history.load("b")] == ["again"]


@pytest.mark.parametrize("bad", ["", "has space", 7, None])
def test_bad_thread_ids_are_rejected(history: ChatHistory, bad: Any) -> None:
    with pytest.raises(ConfigurationError):
        history.append(bad, [UserMessage(text="x")])
    with pytest.raises(ConfigurationError):
        history.load(bad)


def test_bad_messages_are_rejected(history: ChatHistory) -> None:
    with pytest.raises(ConfigurationError, match="single message"):
        history.append("t", UserMessage(text="x"))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="single message"):
        history.append("t", "hello")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="dict"):
        history.append("t", [UserMessage(text="ok"), {"role": "user", "text": "x"}])  # type: ignore[list-item]
    assert history.load("t") == []  # nothing of the bad batch was written


def test_store_history_is_durable_and_namespaced(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    with SQLiteStore(path) as store:
        store.put(("threads", "t"), "unrelated", 1)  # not a message key: ignored by load
        StoreChatHistory(store).append("t", TRANSCRIPT)
        StoreChatHistory(store, namespace="other").append("t", [UserMessage(text="elsewhere")])
    with SQLiteStore(path) as store:
        assert StoreChatHistory(store).load("t") == TRANSCRIPT
        assert [m.text for m in StoreChatHistory(store, namespace="other").load("t")] == ["elsewhere"]
        StoreChatHistory(store).clear("t")
        assert StoreChatHistory(store).load("t") == []
        assert StoreChatHistory(store, namespace="other").threads() == ["t"]


def test_store_history_constructor_checks() -> None:
    with pytest.raises(ConfigurationError, match="Store protocol"):
        StoreChatHistory(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="namespace"):
        StoreChatHistory(InMemoryStore(), namespace="")


def test_corrupt_record_is_a_store_error() -> None:
    store = InMemoryStore()
    history = StoreChatHistory(store)
    history.append("t", [UserMessage(text="ok")])
    store.put(("threads", "t"), "m000000000001", {"role": "wizard"})
    with pytest.raises(StoreError, match="not a message"):
        history.load("t")
    store.put(("threads", "t"), "seq", "nonsense")
    with pytest.raises(StoreError, match="counter"):
        history.append("t", [UserMessage(text="more")])


# ------------------------------------------------------------------------------------------ concurrency and cost
def _writer_batches(writer: int, batches: int) -> list[list[Message]]:
    return [[UserMessage(text=f"w{writer} b{b} q"), AssistantMessage(text=f"w{writer} b{b} a")] for b in range(batches)]


def _check_interleaving(messages: list[Message], writers: int, batches: int) -> None:
    assert len(messages) == writers * batches * 2
    seen: dict[str, list[int]] = {}
    for i in range(0, len(messages), 2):
        q, a = messages[i], messages[i + 1]
        writer, batch, kind = q.text.split()
        assert kind == "q"
        assert a.text == f"{writer} {batch} a"  # a batch is never split by another writer
        seen.setdefault(writer, []).append(int(batch[1:]))
    assert seen == {f"w{w}": list(range(batches)) for w in range(writers)}  # per-writer order kept


@pytest.mark.parametrize("kind", ["memory", "sqlite", "sqlite-many-connections", "fallback"])
def test_concurrent_appends_from_threads_lose_nothing(kind: str, tmp_path: Path) -> None:
    writers, batches = 8, 40
    path = tmp_path / "c.sqlite"
    stores: list[Store] = []
    if kind == "memory":
        stores = [InMemoryStore()] * writers
    elif kind == "sqlite":
        stores = [SQLiteStore(path)] * writers
    elif kind == "fallback":
        stores = [Delegating()] * writers
    else:
        stores = [SQLiteStore(path, busy_timeout_s=30) for _ in range(writers)]
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def work(w: int) -> None:
        history = StoreChatHistory(stores[w])
        barrier.wait()
        try:
            for batch in _writer_batches(w, batches):
                history.append("shared", batch)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    messages = StoreChatHistory(stores[0]).load("shared")
    if kind == "fallback":  # no atomic batches there: only count and per-writer order are promised
        assert len(messages) == writers * batches * 2
        for w in range(writers):
            mine = [m.text for m in messages if m.text.startswith(f"w{w} ")]
            assert mine == [m.text for b in _writer_batches(w, batches) for m in b]
    else:
        _check_interleaving(messages, writers, batches)
    for s in {id(s): s for s in stores}.values():
        s.close()


@pytest.mark.anyio
async def test_concurrent_appends_from_tasks_lose_nothing(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "tasks.sqlite")
    history = StoreChatHistory(store)
    writers, batches = 6, 25

    async def work(w: int) -> None:
        for batch in _writer_batches(w, batches):
            await anyio.to_thread.run_sync(history.append, "t", batch)  # real parallelism
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        for w in range(writers):
            tg.start_soon(work, w)
    _check_interleaving(history.load("t"), writers, batches)
    store.close()


class CountingMemoryStore(InMemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.bytes = 0

    def _write(self, ns: tuple[str, ...], key: str, text: str) -> None:
        self.writes += 1
        self.bytes += len(text)
        super()._write(ns, key, text)


class CountingSQLiteStore(SQLiteStore):
    writes = 0
    bytes = 0

    def _write(self, ns: tuple[str, ...], key: str, text: str) -> None:
        self.writes += 1
        self.bytes += len(text)
        super()._write(ns, key, text)


@pytest.mark.parametrize(("kind", "n"), [("memory", 5_000), ("sqlite", 1_000)])
def test_append_cost_is_constant_per_message(kind: str, n: int, tmp_path: Path) -> None:
    store = CountingMemoryStore() if kind == "memory" else CountingSQLiteStore(tmp_path / "cost.sqlite")
    history = StoreChatHistory(store)
    window = 100
    history.append("t", [UserMessage(text="warm-up")])
    store.writes = store.bytes = 0
    for i in range(window):
        history.append("t", [UserMessage(text=f"message {i:05d}")])
    early_writes, early_bytes = store.writes, store.bytes
    for i in range(window, n - window):
        history.append("t", [UserMessage(text=f"message {i:05d}")])
    store.writes = store.bytes = 0
    for i in range(n - window, n):
        history.append("t", [UserMessage(text=f"message {i:05d}")])
    # one message record plus the counter per append, however long the thread is
    assert early_writes == store.writes == 2 * window
    assert store.bytes <= early_bytes + 3 * window  # only the counter grows, by a digit or two
    assert len(history.load("t")) == n + 1
    store.close()


# ------------------------------------------------------------------------------------------ short-term memory
@pytest.mark.anyio
async def test_short_term_memory_load_and_save_emit_events() -> None:
    memory = ShortTermMemory(StoreChatHistory(InMemoryStore()))
    ctx = RunContext(config=RunConfig(thread_id="thread-1"))
    rec = EventRecorder(ctx.events)
    assert await memory.load(ctx) == []
    await memory.save(ctx, TRANSCRIPT)
    assert await memory.load(ctx) == TRANSCRIPT
    loaded = rec.of_type(MemoryLoaded)
    saved = rec.of_type(MemorySaved)
    assert [(e.thread_id, e.messages) for e in loaded] == [("thread-1", 0), ("thread-1", 5)]
    assert [(e.thread_id, e.messages) for e in saved] == [("thread-1", 5)]
    assert all(e.run_id == ctx.run_id and e.root_run_id == ctx.run_id for e in [*loaded, *saved])
    assert rec.kinds() == ["memory.loaded", "memory.saved", "memory.loaded"]


@pytest.mark.anyio
async def test_short_term_memory_trims_with_repaired_cut_points() -> None:
    history = InMemoryChatHistory()
    history.append("t", [UserMessage(text="old"), *TRANSCRIPT[1:], UserMessage(text="next")])
    ctx = RunContext(config=RunConfig(thread_id="t"))
    # the last 4 would start at the second tool result: that turn's question is gone, so the turn goes whole
    # (an answer without its question would mislead the model)
    window = await ShortTermMemory(history, max_messages=4).load(ctx)
    assert window == [UserMessage(text="next")]
    window = await ShortTermMemory(history, max_messages=6).load(ctx)
    assert window == [UserMessage(text="old"), *TRANSCRIPT[1:], UserMessage(text="next")]
    window = await ShortTermMemory(history, trim=KeepLast(n=1)).load(ctx)
    assert window == [UserMessage(text="next")]
    both = await ShortTermMemory(history, max_messages=6, trim=KeepLast(n=2)).load(ctx)
    assert both == [UserMessage(text="next")]
    assert len(history.load("t")) == 6  # loading never changes the stored thread


@pytest.mark.anyio
async def test_short_term_memory_needs_a_thread() -> None:
    memory = ShortTermMemory(InMemoryChatHistory())
    ctx = RunContext()
    with pytest.raises(ConfigurationError, match="thread_id") as info:
        await memory.load(ctx)
    assert info.value.hint is not None
    assert "RunConfig(thread_id" in info.value.hint
    with pytest.raises(ConfigurationError, match="thread_id"):
        await memory.save(ctx, [UserMessage(text="x")])


@pytest.mark.parametrize(
    "kwargs",
    [{"max_messages": 0}, {"max_messages": True}, {"max_messages": 2.5}, {"trim": "last"}],
)
def test_short_term_memory_rejects_bad_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        ShortTermMemory(InMemoryChatHistory(), **kwargs)
    with pytest.raises(ConfigurationError, match="ChatHistory"):
        ShortTermMemory(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="ShortTermMemory"):
        MemoryMiddleware(InMemoryChatHistory())  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ middleware end to end
@tool
def lookup(city: str) -> str:
    """Look up a city."""
    return f"{city}: sunny"


def _harness(model: ScriptedModel, history: ChatHistory, **kwargs: Any) -> AgentHarness[Any]:
    return AgentHarness(
        model=model,
        tools=[lookup],
        middleware=[MemoryMiddleware(ShortTermMemory(history))],
        system_prompt="be brief",
        **kwargs,
    )


@pytest.mark.anyio
async def test_middleware_continues_the_thread(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "mem.sqlite")
    history = StoreChatHistory(store)
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("lookup", {"city": "Paris"}, id="c1"),
            "Paris is sunny, Ada.",
            "You are Ada.",
            "I don't know you.",
        ]
    )
    harness = _harness(model, history)
    first = await harness.invoke("I am Ada. Weather in Paris?", config=RunConfig(thread_id="t"))
    assert first.final_text == "Paris is sunny, Ada."

    ctx = RunContext(config=RunConfig(thread_id="t"))
    rec = EventRecorder(ctx.events)
    await harness.invoke_in_context(ctx, "Who am I?")
    request = model.requests[2]
    texts = [(m.role, m.text) for m in request.messages]
    assert texts == [
        ("system", "be brief"),
        ("user", "I am Ada. Weather in Paris?"),
        ("assistant", ""),
        ("tool", "Paris: sunny"),
        ("assistant", "Paris is sunny, Ada."),
        ("user", "Who am I?"),
    ]
    assert request.messages[2].tool_calls[0].id == "c1"  # type: ignore[union-attr]
    assert [(e.kind, e.messages) for e in rec.of_type(MemoryLoaded)] == [("memory.loaded", 4)]
    assert [(e.kind, e.messages) for e in rec.of_type(MemorySaved)] == [("memory.saved", 2)]
    kinds = rec.kinds()
    assert kinds.index("memory.loaded") < kinds.index("model.started")
    assert kinds.index("memory.saved") < kinds.index("run.completed")

    await harness.invoke("Who am I?", config=RunConfig(thread_id="other"))
    assert [(m.role, m.text) for m in model.requests[3].messages] == [("system", "be brief"), ("user", "Who am I?")]

    stored = history.load("t")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert not any(isinstance(m, SystemMessage) for m in stored)
    store.close()
    with SQLiteStore(tmp_path / "mem.sqlite") as reopened:  # the thread survives a restart
        assert StoreChatHistory(reopened).load("t") == stored


@pytest.mark.anyio
async def test_middleware_does_not_double_a_transcript_passed_as_input() -> None:
    history = InMemoryChatHistory()
    model = ScriptedModel(["one", "two"])
    harness = _harness(model, history)
    first = await harness.invoke("hi", config=RunConfig(thread_id="t"))
    again = [*first.messages, UserMessage(text="and now?")]  # the caller continues the transcript itself
    await harness.invoke(again, config=RunConfig(thread_id="t"))
    assert [m.text for m in model.requests[1].messages] == ["be brief", "hi", "one", "and now?"]
    assert [m.text for m in history.load("t")] == ["hi", "one", "and now?", "two"]


@pytest.mark.anyio
async def test_middleware_saves_a_reused_input_object_again() -> None:
    history = InMemoryChatHistory()  # shares message objects, so identity must not be confused with "loaded"
    harness = _harness(ScriptedModel(["a1", "a2"]), history)
    question = UserMessage(text="ping")
    await harness.invoke(question, config=RunConfig(thread_id="t"))
    await harness.invoke(question, config=RunConfig(thread_id="t"))
    assert [m.text for m in history.load("t")] == ["ping", "a1", "ping", "a2"]


@pytest.mark.anyio
async def test_middleware_skips_system_retrieved_and_history_system_messages() -> None:
    history = InMemoryChatHistory()
    history.append("t", [SystemMessage(text="old system"), UserMessage(text="earlier")])

    class Retrieval(Middleware):
        async def before_agent(self, ctx: RunContext[Any], messages: list[Message]) -> None:
            messages.insert(1, UserMessage(text="snippet", tags=[RETRIEVED_TAG]))

    model = ScriptedModel(["ok"])
    harness: AgentHarness[Any] = AgentHarness(
        model=model,
        middleware=[MemoryMiddleware(ShortTermMemory(history)), Retrieval()],
        system_prompt="new system",
    )
    await harness.invoke("q", config=RunConfig(thread_id="t"))
    assert [m.text for m in model.requests[0].messages] == ["new system", "snippet", "earlier", "q"]
    assert [m.text for m in history.load("t")] == ["old system", "earlier", "q", "ok"]


@pytest.mark.anyio
async def test_failed_run_saves_nothing_and_forgets_its_state() -> None:
    history = InMemoryChatHistory()
    middleware = MemoryMiddleware(ShortTermMemory(history))
    harness: AgentHarness[Any] = AgentHarness(
        model=ScriptedModel([ProviderError("down", retryable=False)]), middleware=[middleware]
    )
    with pytest.raises(ProviderError):
        await harness.invoke("hello", config=RunConfig(thread_id="t"))
    assert history.load("t") == []
    assert middleware._loaded == {}


@pytest.mark.anyio
async def test_nested_runs_do_not_touch_the_thread_unless_asked() -> None:
    history = InMemoryChatHistory()
    history.append("t", [UserMessage(text="parent turn")])
    parent = RunContext(config=RunConfig(thread_id="t"))
    model = ScriptedModel(["child answer", "child answer 2"])
    await _harness(model, history).invoke_in_context(parent.child(), "child task")
    assert [m.text for m in model.requests[0].messages] == ["be brief", "child task"]
    assert [m.text for m in history.load("t")] == ["parent turn"]

    harness: AgentHarness[Any] = AgentHarness(
        model=model, middleware=[MemoryMiddleware(ShortTermMemory(history), root_only=False)]
    )
    await harness.invoke_in_context(parent.child(), "child task 2")
    assert [m.text for m in model.requests[1].messages] == ["parent turn", "child task 2"]


@pytest.mark.anyio
async def test_middleware_without_thread_fails_the_run_clearly() -> None:
    harness = _harness(ScriptedModel(["x"]), InMemoryChatHistory())
    with pytest.raises(ConfigurationError, match="thread_id"):
        await harness.invoke("hi")


# ------------------------------------------------------------------------------------------ session state
def test_session_state_round_trip_and_isolation() -> None:
    state = SessionState(InMemoryStore())
    assert state.get_state("t", "k") is None
    assert state.get_state("t", "k", default=3) == 3
    state.set_state("t", "prefs", {"units": "metric", "langs": ("en", "fr")})
    assert state.get_state("t", "prefs") == {"units": "metric", "langs": ["en", "fr"]}
    fresh = state.get_state("t", "prefs")
    fresh["units"] = "imperial"  # a copy: the stored value is untouched
    assert state.get_state("t", "prefs")["units"] == "metric"
    assert state.update_state("t", "count", lambda v: v + 1, default=0) == 1
    assert state.update_state("t", "count", lambda v: v + 1, default=0) == 2
    assert state.state("t") == {"count": 2, "prefs": {"units": "metric", "langs": ["en", "fr"]}}
    assert state.state("other") == {}
    assert state.delete_state("t", "count") is True
    assert state.delete_state("t", "count") is False
    state.clear("t")
    assert state.state("t") == {}


def test_session_state_rejects_non_json_and_bad_input() -> None:
    state = SessionState(InMemoryStore())
    with pytest.raises(ConfigurationError, match="not JSON"):
        state.set_state("t", "k", object())
    with pytest.raises(ConfigurationError):
        state.set_state("t", "k", float("nan"))
    with pytest.raises(InvalidIdError):
        state.set_state("bad thread", "k", 1)
    with pytest.raises(ConfigurationError, match="Store protocol"):
        SessionState({})  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="namespace"):
        SessionState(InMemoryStore(), namespace="")


def test_session_state_persists_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    with SQLiteStore(path) as store:
        SessionState(store).set_state("t", "turns", 3)
        SessionState(store, namespace="elsewhere").set_state("t", "turns", 99)
    with SQLiteStore(path) as store:
        assert SessionState(store).state("t") == {"turns": 3}
        assert SessionState(store).update_state("t", "turns", lambda v: v + 1) == 4
    with SQLiteStore(path) as store:
        assert SessionState(store).get_state("t", "turns") == 4


def test_context_state_helpers_use_the_default_store_and_thread(tmp_path: Path) -> None:
    path = tmp_path / "ctx.sqlite"
    store = SQLiteStore(path)
    ctx = RunContext(config=RunConfig(thread_id="t1"), stores=StoreRegistry(store))
    set_state(ctx, "name", "Ada")
    assert get_state(ctx, "name") == "Ada"
    assert get_state(ctx, "missing", "dflt") == "dflt"
    assert update_state(ctx, "n", lambda v: v + 5, default=0) == 5
    assert get_state(ctx.child(), "name") == "Ada"  # a child keeps the thread and the stores
    assert get_state(ctx.child(thread_id="t2"), "name") is None
    store.close()
    with SQLiteStore(path) as reopened:  # a later turn (new context) sees it
        later = RunContext(config=RunConfig(thread_id="t1"), stores=StoreRegistry(reopened))
        assert get_state(later, "n") == 5
        assert SessionState(reopened).state("t1") == {"n": 5, "name": "Ada"}


def test_context_state_helpers_need_a_thread() -> None:
    ctx = RunContext()
    for call in (lambda: get_state(ctx, "k"), lambda: set_state(ctx, "k", 1), lambda: update_state(ctx, "k", str)):
        with pytest.raises(ConfigurationError, match="thread_id"):
            call()
