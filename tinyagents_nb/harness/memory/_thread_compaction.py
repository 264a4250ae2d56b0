"""Persisted compaction of long threads, at the request boundary.

Pressure relief and ``SummarizationMiddleware`` shrink what one request sends; the thread in its
``ChatHistory`` still grows with every turn, and every later run loads (and re-summarizes) all of it.
``ThreadCompaction``, given to ``ShortTermMemory``, compacts the stored thread itself when it is
loaded and has grown past ``trigger_tokens``: the old messages are folded into one summary system
message (tagged ``SUMMARY_TAG``), the thread is rewritten as *summary + recent messages*, and the
replaced messages are archived with their provenance (which messages, which summarizer, when, by
which run) in a store. Later runs load the summary instead of the old turns; the next compaction
folds the previous summary into the new one.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .._errors import ConfigurationError
from .._events import ContextPressure
from .._messages import Message, SystemMessage, dump_messages, load_messages
from .._tokens import TokenEstimator
from ._summarization import (
    SUMMARY_TAG,
    ConcatSummarizer,
    Summarizer,
    SummaryRecord,
    _check_int,
    _takes_ctx,
    plan_summary,
    summarizer_name,
    summary_message,
)

if TYPE_CHECKING:
    from .._context import RunContext
    from ..stores import Store

__all__ = ["THREAD_COMPACTIONS_NAMESPACE", "PersistedSummary", "ThreadCompaction", "thread_compactions"]

THREAD_COMPACTIONS_NAMESPACE = "thread_compactions"
"""Store namespace (``(THREAD_COMPACTIONS_NAMESPACE, thread_id)``) of the archived messages and provenance."""


class _History(Protocol):  # the part of ChatHistory compaction needs
    def load(self, thread_id: str) -> list[Message]: ...
    def replace(self, thread_id: str, messages: Sequence[Message]) -> None: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class PersistedSummary:
    """One compaction of a stored thread.

    Attributes:
        thread_id: The thread compacted.
        record: Its provenance: ``message_count`` messages at ``first_index``..``last_index`` of the
            thread, folded by ``summarizer`` at ``created_at`` during run ``run_id``; ``id`` is the
            tag (``summary:<id>``) on the summary message in the thread.
        messages: The archived messages it replaced, oldest first.
    """

    thread_id: str
    record: SummaryRecord
    messages: tuple[Message, ...]


class ThreadCompaction:
    """Compact a stored thread when it is loaded and has grown past ``trigger_tokens``.

    Args:
        summarizer: Writes the summary (by default a ``ConcatSummarizer`` capped at
            ``trigger_tokens`` characters, about a quarter of the trigger, so a thread of many short
            messages shrinks too; a ``ModelSummarizer`` in production). A ``summarize`` that accepts
            ``ctx=`` gets the run context (usage is billed). A summary that would not shrink the
            thread is not kept, and a ``context.pressure`` event (``compact_thread_skipped``) says so.
        trigger_tokens: Compact when the thread's estimate exceeds this (the seed's 80,000).
        min_messages: ...and it holds at least this many messages.
        keep_last: Recent non-system messages kept verbatim.
        store: Where archives and provenance go (default: the run's ``ctx.stores.default``).
        estimator: Token estimator (an ``o200k_base`` estimate by default).
    """

    def __init__(
        self,
        summarizer: Summarizer | None = None,
        *,
        trigger_tokens: int = 80_000,
        min_messages: int = 20,
        keep_last: int = 6,
        store: Store | None = None,
        estimator: TokenEstimator | None = None,
    ) -> None:
        self.trigger_tokens = _check_int("trigger_tokens", trigger_tokens, minimum=1)
        self.summarizer: Summarizer = (
            summarizer if summarizer is not None else ConcatSummarizer(max_total_chars=max(trigger_tokens, 2_000))
        )
        if not callable(getattr(self.summarizer, "summarize", None)):
            raise ConfigurationError(f"{summarizer!r} has no summarize() method")
        self.min_messages = _check_int("min_messages", min_messages, minimum=1)
        self.keep_last = _check_int("keep_last", keep_last, minimum=0)
        self.store = store
        self.estimator = estimator if estimator is not None else TokenEstimator.for_model(None)

    async def compact_if_needed(
        self, ctx: RunContext[Any], history: _History, thread_id: str, messages: list[Message]
    ) -> list[Message]:
        """The thread as it should be loaded: compacted and persisted when over the trigger, else ``messages``."""
        if len(messages) < self.min_messages:
            return messages
        before = self.estimator.estimate(messages)
        if before <= self.trigger_tokens:
            return messages
        plan = plan_summary(messages, self.keep_last)
        if not plan:
            return messages
        text = await self._summarize(ctx, plan.summarize)
        record = SummaryRecord.create(plan, text, summarizer=summarizer_name(self.summarizer), run_id=str(ctx.run_id))
        record = dataclasses.replace(record, id=f"sum-{uuid.uuid4().hex[:16]}")  # unique across processes
        summary = summary_message(text)
        summary = dataclasses.replace(summary, tags=(*summary.tags, f"summary:{record.id}"))
        compacted = plan.apply(summary)
        after = self.estimator.estimate(compacted)
        if after >= before:  # a summary longer than what it replaces is not worth keeping: say so
            ctx.emit(
                ContextPressure, action="compact_thread_skipped", tokens_before=before, tokens_after=after,
                limit_tokens=self.trigger_tokens, removed_messages=0,
                detail=f"thread {thread_id!r}: the summary by {summarizer_name(self.summarizer)} would not shrink it "
                f"({before} -> {after} tokens); give ThreadCompaction a ModelSummarizer or a "
                "ConcatSummarizer(max_total_chars=...)",
            )  # fmt: skip
            return messages
        record = dataclasses.replace(record, tokens_before=before, tokens_after=after)
        # another writer may have appended while we summarized: then keep the thread as it is
        if history.load(thread_id) != messages:
            return compacted
        store = self.store if self.store is not None else ctx.stores.default
        store.put(
            (THREAD_COMPACTIONS_NAMESPACE, thread_id),
            record.id,
            {"record": dataclasses.asdict(record), "messages": dump_messages(plan.summarize)},
        )
        history.replace(thread_id, compacted)
        ctx.emit(
            ContextPressure, action="compact_thread", tokens_before=before, tokens_after=after,
            limit_tokens=self.trigger_tokens, removed_messages=len(plan.summarize),
            detail=f"thread {thread_id!r}: {len(plan.summarize)} messages folded by {record.summarizer} ({record.id})",
        )  # fmt: skip
        return compacted

    async def _summarize(self, ctx: RunContext[Any], messages: Sequence[Message]) -> str:
        summarize = self.summarizer.summarize
        if _takes_ctx(self.summarizer):
            text: str = await summarize(messages, ctx=ctx)  # type: ignore[call-arg]
            return text
        return await summarize(messages)

    def __repr__(self) -> str:
        return (
            f"ThreadCompaction({summarizer_name(self.summarizer)}, trigger_tokens={self.trigger_tokens}, "
            f"min_messages={self.min_messages}, keep_last={self.keep_last})"
        )


def thread_compactions(store: Store, thread_id: str) -> list[PersistedSummary]:
    """Every persisted compaction of ``thread_id`` in ``store``, oldest first."""
    found = []
    for _, value in store.items((THREAD_COMPACTIONS_NAMESPACE, thread_id)):
        if not isinstance(value, dict):
            continue
        record = SummaryRecord(**value["record"])
        found.append(
            PersistedSummary(thread_id=thread_id, record=record, messages=tuple(load_messages(value["messages"])))
        )
    return sorted(found, key=lambda s: s.record.created_at)


def is_summary(message: Message) -> bool:
    """Whether ``message`` is a summary the harness inserted (kept when history is loaded under a system prompt)."""
    return isinstance(message, SystemMessage) and SUMMARY_TAG in message.tags
