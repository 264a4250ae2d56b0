"""Persisted compaction of long threads: summaries stored in the thread with provenance, reused by later runs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    ConfigurationError,
    Message,
    RunConfig,
    RunContext,
    SQLiteStore,
    SystemMessage,
    UserMessage,
)
from tinyagents_nb.harness.memory import (
    SUMMARY_TAG,
    ConcatSummarizer,
    InMemoryChatHistory,
    MemoryMiddleware,
    ShortTermMemory,
    StoreChatHistory,
    ThreadCompaction,
    thread_compactions,
)
from tinyagents_nb.harness.stores import StoreRegistry
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel

pytestmark = pytest.mark.anyio


class CountingSummarizer:
    name = "counting"

    def __init__(self) -> None:
        self.calls: list[int] = []

    async def summarize(self, messages: Sequence[Message]) -> str:
        self.calls.append(len(messages))
        return await ConcatSummarizer(max_chars=40).summarize(messages)


def old_turns(n: int) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        out += [UserMessage(text=f"question {i} " * 40), AssistantMessage(text=f"answer {i} " * 40)]
    return out


def harness_for(model: ScriptedModel, history: StoreChatHistory, compaction: ThreadCompaction) -> AgentHarness[None]:
    memory = MemoryMiddleware(ShortTermMemory(history, compaction=compaction))
    return AgentHarness(model=model, middleware=[memory], system_prompt="You are terse.")


async def test_a_long_thread_is_compacted_persisted_and_reused(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "threads.db")
    history = StoreChatHistory(store)
    old = old_turns(15)
    history.append("t", old)
    summarizer = CountingSummarizer()
    compaction = ThreadCompaction(summarizer, trigger_tokens=600, min_messages=10, keep_last=4, store=store)

    model = ScriptedModel(["first"])
    ctx = RunContext(config=RunConfig(thread_id="t"), stores=StoreRegistry(default=store))
    rec = EventRecorder(ctx.events)
    await harness_for(model, history, compaction).invoke_in_context(ctx, "new question")
    sent = model.requests[0].messages
    assert sent[0] == SystemMessage(text="You are terse.")
    assert SUMMARY_TAG in sent[1].tags  # the summary survives the run's own system prompt
    assert sent[2:-1] == tuple(old[-4:])
    assert sent[-1] == UserMessage(text="new question")
    assert summarizer.calls == [26]

    stored = history.load("t")  # the thread itself is shorter now: summary, 4 kept, the new turn
    assert stored[0] == sent[1]
    assert len(stored) == 1 + 4 + 2
    (persisted,) = thread_compactions(store, "t")
    record = persisted.record
    assert f"summary:{record.id}" in stored[0].tags  # the summary names its provenance record
    assert (record.message_count, record.first_index, record.last_index) == (26, 0, 25)
    assert record.summarizer == "counting"
    assert record.run_id == str(ctx.run_id)
    assert record.tokens_after < record.tokens_before
    assert persisted.messages == tuple(old[:26])  # the replaced messages are archived
    (event,) = [e for e in rec.of_kind("context.pressure") if e.action == "compact_thread"]  # type: ignore[attr-defined]
    assert event.removed_messages == 26  # type: ignore[attr-defined]
    store.close()

    # a later run, in a fresh store object on the same file: the summary is reused, not redone
    store2 = SQLiteStore(tmp_path / "threads.db")
    history2 = StoreChatHistory(store2)
    model2 = ScriptedModel(["second"])
    compaction2 = ThreadCompaction(summarizer, trigger_tokens=600, min_messages=10, keep_last=4, store=store2)
    await harness_for(model2, history2, compaction2).invoke("follow-up", config=RunConfig(thread_id="t"))
    assert summarizer.calls == [26]
    assert model2.requests[0].messages[1] == stored[0]
    store2.close()


async def test_the_next_compaction_folds_the_previous_summary() -> None:
    history = InMemoryChatHistory()
    history.append("t", old_turns(15))
    summarizer = CountingSummarizer()
    compaction = ThreadCompaction(summarizer, trigger_tokens=600, min_messages=6, keep_last=4)
    ctx = RunContext(config=RunConfig(thread_id="t"))
    memory = ShortTermMemory(history, compaction=compaction)
    first = await memory.load(ctx)
    history.append("t", old_turns(15))
    second = await memory.load(ctx)
    assert summarizer.calls[1] == 1 + 4 + 26  # the previous summary, the 4 kept after it and 26 of the new
    assert sum(SUMMARY_TAG in m.tags for m in second) == 1
    assert second[0] != first[0]
    assert len(thread_compactions(ctx.stores.default, "t")) == 2


async def test_a_short_thread_is_left_alone() -> None:
    history = InMemoryChatHistory()
    history.append("t", old_turns(3))
    summarizer = CountingSummarizer()
    memory = ShortTermMemory(history, compaction=ThreadCompaction(summarizer, trigger_tokens=50, min_messages=20))
    loaded = await memory.load(RunContext(config=RunConfig(thread_id="t")))
    assert loaded == old_turns(3)
    assert summarizer.calls == []


async def test_a_concurrent_append_is_not_overwritten() -> None:
    class RacingHistory(InMemoryChatHistory):
        async_writes = 0

        def load(self, thread_id: str) -> list[Message]:
            loaded = super().load(thread_id)
            if self.async_writes == 0:
                self.async_writes += 1
                super().append(thread_id, [UserMessage(text="written meanwhile")])
            return loaded

    history = RacingHistory()
    history.append("t", old_turns(15))
    memory = ShortTermMemory(history, compaction=ThreadCompaction(trigger_tokens=600, min_messages=6, keep_last=4))
    ctx = RunContext(config=RunConfig(thread_id="t"))
    loaded = await memory.load(ctx)
    assert SUMMARY_TAG in loaded[0].tags  # this run still gets the compacted view
    assert history.load("t")[-1] == UserMessage(text="written meanwhile")  # but the store is not rewritten
    assert len(history.load("t")) == 31
    assert thread_compactions(ctx.stores.default, "t") == []


def test_bad_configuration_is_rejected() -> None:
    with pytest.raises(ConfigurationError):
        ThreadCompaction(trigger_tokens=0)
    with pytest.raises(ConfigurationError):
        ThreadCompaction(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        ShortTermMemory(InMemoryChatHistory(), compaction="yes")  # type: ignore[arg-type]


async def test_the_default_compaction_shrinks_a_thread_of_many_short_messages(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "chat.db")
    history = StoreChatHistory(store)
    chatter: list[Message] = []
    for i in range(400):
        chatter += [UserMessage(text=f"ok {i}"), AssistantMessage(text=f"sure {i}")]
    history.append("t", chatter)
    compaction = ThreadCompaction(trigger_tokens=3_000, keep_last=4, store=store)  # the default summarizer
    before = compaction.estimator.estimate(chatter)
    assert before > 3_000
    ctx = RunContext(config=RunConfig(thread_id="t"), stores=StoreRegistry(default=store))
    rec = EventRecorder(ctx.events)
    await harness_for(ScriptedModel(["fine"]), history, compaction).invoke_in_context(ctx, "and now?")
    stored = history.load("t")
    assert len(stored) < 20  # summary + the kept turns + the new turn, not 800 messages
    assert compaction.estimator.estimate(stored) < before // 2
    assert "earlier messages omitted" in stored[0].text
    assert "ok 0" in stored[0].text  # how it started
    assert "sure 397" in stored[0].text  # and the latest of what was folded
    (event,) = [e for e in rec.events if e.kind == "context.pressure"]
    assert event.action == "compact_thread"  # type: ignore[attr-defined]
    store.close()


async def test_a_summary_that_would_not_shrink_the_thread_is_reported_not_silently_skipped() -> None:
    class Verbose:
        name = "verbose"

        async def summarize(self, messages: Sequence[Message]) -> str:
            return "a very long summary " * 5_000

    history = InMemoryChatHistory()
    history.append("t", old_turns(12))
    compaction = ThreadCompaction(Verbose(), trigger_tokens=600, min_messages=10, keep_last=2)
    ctx = RunContext(config=RunConfig(thread_id="t"))
    rec = EventRecorder(ctx.events)
    await harness_for(ScriptedModel(["fine"]), history, compaction).invoke_in_context(ctx, "q")  # type: ignore[arg-type]
    (event,) = [e for e in rec.events if e.kind == "context.pressure"]
    assert event.action == "compact_thread_skipped"  # type: ignore[attr-defined]
    assert "would not shrink" in event.detail  # type: ignore[attr-defined]
    assert len(history.load("t")) == 24 + 2  # kept as it was, plus the new turn
