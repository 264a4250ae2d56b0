"""Context pressure: making a request fit the model's window before it is sent.

Before every model call the loop asks ``ContextPressureChain.relieve`` for messages that fit
``ContextWindow.usable_tokens``. When the estimate already fits, that costs one estimate and returns
the same list. Otherwise the chain applies its policies in order (the seed's default: drop
nonessential retrieved context, trim old messages, summarize old messages, compact tool outputs),
stops as soon as the request fits, emits one ``context.pressure`` event per action and finally raises
``ContextLimitError``. Every policy keeps the invariants a provider enforces or a user relies on:
the stable system prefix is untouched, (non-retrieved) system messages and the current user turn are
kept, a tool result stays with the assistant turn that called it, and no tool call is left unanswered.

Context providers and transforms (``ContextProvidersMiddleware``) are the other side of the same
budget: request-time messages that are never persisted, tagged ``RETRIEVED_TAG`` when nonessential so
pressure drops them first.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from .._errors import ConfigurationError, ContextLimitError, describe_error
from .._events import ContextPressure
from .._messages import (
    RETRIEVED_TAG,
    AssistantMessage,
    Message,
    ToolMessage,
    dump_messages,
    load_messages,
)
from .._tokens import TokenEstimator
from ._summarization import (
    _UNRECOVERABLE,
    CompressionProvenance,
    ConcatSummarizer,
    RollingSummary,
    Summarizer,
    SummaryRecord,
    _check_int,
    _drop_units,
    plan_summary,
)

if TYPE_CHECKING:
    from .._context import RunContext
    from .._window import ContextWindow
    from ..stores import Store

__all__ = [
    "COMPACTED_TAG",
    "TOOL_OUTPUT_NAMESPACE",
    "CompactToolOutputs",
    "ContextPressureChain",
    "DropRetrieved",
    "PressurePolicy",
    "PressureResult",
    "SummarizeOldMessages",
    "TrimOldMessages",
    "default_policies",
    "load_tool_output",
]

COMPACTED_TAG = "compacted"
"""Tag on a tool result whose body was replaced by a placeholder (makes compaction idempotent)."""
TOOL_OUTPUT_NAMESPACE = "tool_outputs"
"""Store namespace holding the raw tool results that ``CompactToolOutputs`` replaced."""
DEFAULT_PLACEHOLDER = "[tool output compacted: {chars} chars; raw kept in store key {key}]"


@dataclass(frozen=True, kw_only=True, slots=True)
class PressureResult:
    """What a policy did: the new messages (the input object itself when it did nothing).

    Attributes:
        messages: The transcript after the action.
        removed: Messages removed from it.
        detail: A short human-readable account for the event.
        record: The ``SummaryRecord`` of a summarizing action (the chain fills in its token figures).
    """

    messages: Sequence[Message]
    removed: int = 0
    detail: str = ""
    record: SummaryRecord | None = None


@runtime_checkable
class PressurePolicy(Protocol):
    """One step of the chain. ``need_tokens`` is how many tokens must go for the request to fit."""

    @property
    def name(self) -> str: ...

    async def apply(
        self, ctx: RunContext[Any], messages: Sequence[Message], *, need_tokens: int, estimator: TokenEstimator
    ) -> PressureResult: ...


# ------------------------------------------------------------------------------------------ policies
@dataclass(frozen=True, kw_only=True, slots=True)
class DropRetrieved:
    """Drop messages tagged ``RETRIEVED_TAG``, oldest first, just enough to fit (or all with ``drop_all``).

    Tool results and assistant turns with tool calls are never dropped here, even when tagged:
    removing one would orphan the other half of the pair (``CompactToolOutputs`` shrinks them instead).
    """

    name: ClassVar[str] = "drop_retrieved"
    drop_all: bool = False

    async def apply(
        self, ctx: RunContext[Any], messages: Sequence[Message], *, need_tokens: int, estimator: TokenEstimator
    ) -> PressureResult:
        drop: set[int] = set()
        freed = 0
        for i, m in enumerate(messages):
            if freed >= need_tokens and not self.drop_all:
                break
            if RETRIEVED_TAG in m.tags and not isinstance(m, ToolMessage):
                if not (isinstance(m, AssistantMessage) and m.tool_calls):
                    drop.add(i)
                    freed += estimator.count_message(m)
        if not drop:
            return PressureResult(messages=messages)
        kept = [m for i, m in enumerate(messages) if i not in drop]
        return PressureResult(messages=kept, removed=len(drop), detail=f"dropped {len(drop)} retrieved messages")


@dataclass(frozen=True, kw_only=True, slots=True)
class TrimOldMessages:
    """Drop the oldest turns, just enough to fit; lossy, so the seed runs it before summarizing.

    Keeps system messages, the current user turn and at least the last ``keep_last`` other messages;
    an assistant turn and its tool results are dropped together or not at all.
    """

    name: ClassVar[str] = "trim"
    keep_last: int = 6

    def __post_init__(self) -> None:
        _check_int("keep_last", self.keep_last, minimum=0)

    async def apply(
        self, ctx: RunContext[Any], messages: Sequence[Message], *, need_tokens: int, estimator: TokenEstimator
    ) -> PressureResult:
        kept, removed = _drop_units(messages, need_tokens, estimator, self.keep_last)
        if not removed:
            return PressureResult(messages=messages)
        return PressureResult(messages=kept, removed=removed, detail=f"trimmed {removed} old messages")


class SummarizeOldMessages:
    """Replace every old message (and a previous summary) with one summary after the system prefix.

    Summaries are memoized (``RollingSummary``): resending the same or a longer history reuses or
    extends the last summary instead of summarizing everything again.
    """

    __slots__ = ("_rolling", "keep_last", "summarizer")
    name: ClassVar[str] = "summarize"

    def __init__(self, summarizer: Summarizer | None = None, *, keep_last: int = 2) -> None:
        self.summarizer: Summarizer = summarizer if summarizer is not None else ConcatSummarizer()
        self._rolling = RollingSummary(self.summarizer)
        self.keep_last = _check_int("keep_last", keep_last, minimum=0)

    async def apply(
        self, ctx: RunContext[Any], messages: Sequence[Message], *, need_tokens: int, estimator: TokenEstimator
    ) -> PressureResult:
        plan = plan_summary(messages, self.keep_last)
        if not plan:
            return PressureResult(messages=messages)
        message = await self._rolling.summary(ctx, plan.summarize)
        count = estimator.count_message
        if count(message) >= sum(count(m) for m in plan.summarize):
            return PressureResult(messages=messages, detail="the summary would not be smaller than what it replaces")
        name = self._rolling.name
        record = SummaryRecord.create(plan, message.text, summarizer=name, run_id=str(ctx.run_id))
        return PressureResult(
            messages=plan.apply(message),
            removed=len(plan.summarize),
            detail=f"summarized {len(plan.summarize)} messages with {name} ({record.id})",
            record=record,
        )

    def __repr__(self) -> str:
        return f"SummarizeOldMessages({self.summarizer!r}, keep_last={self.keep_last})"


class CompactToolOutputs:
    """Blank the bodies of older tool results (oldest first, just enough), keeping ``tool_call_id``.

    Idempotent (compacted results are tagged ``COMPACTED_TAG``). With ``keep_raw`` the original result
    is saved to ``store`` (default: ``ctx.stores.default``) under ``TOOL_OUTPUT_NAMESPACE`` so it stays
    retrievable (``load_tool_output``); the placeholder names the key,
    ``{thread or root run}/{tool_call_id}/{content hash}``.

    Args:
        keep_recent: The newest results never compacted. The default 0 still compacts the newest
            last, and only when compacting every older one was not enough.
        placeholder: Format string; may use ``{chars}``, ``{key}``, ``{name}`` and ``{tool_call_id}``.
        store: Where raw results go.
        keep_raw: Save raw results at all.
    """

    __slots__ = ("_digests", "_saved", "keep_raw", "keep_recent", "placeholder", "store")
    name: ClassVar[str] = "compact_tool_outputs"

    def __init__(
        self,
        *,
        keep_recent: int = 0,
        placeholder: str = DEFAULT_PLACEHOLDER,
        store: Store | None = None,
        keep_raw: bool = True,
    ) -> None:
        self.keep_recent = _check_int("keep_recent", keep_recent, minimum=0)
        try:
            placeholder.format(chars=0, key="k", name="n", tool_call_id="c")
        except (KeyError, IndexError, ValueError, AttributeError) as exc:
            raise ConfigurationError(f"bad placeholder {placeholder!r}: {exc!r}") from None
        self.placeholder = placeholder
        self.store = store
        self.keep_raw = keep_raw
        self._saved: OrderedDict[tuple[int, str], tuple[Store, Message]] = OrderedDict()  # skip re-writing a result
        self._digests: OrderedDict[int, tuple[ToolMessage, str]] = OrderedDict()  # skip re-hashing a result

    def _digest(self, message: ToolMessage) -> str:
        """A short content hash of ``message``; memoized by identity, since the loop resends the same objects."""
        memo = self._digests.get(id(message))
        if memo is not None and memo[0] is message:
            return memo[1]
        blob = json.dumps(dump_messages([message])[0], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        digest = hashlib.sha256(blob.encode()).hexdigest()[:16]
        self._digests[id(message)] = (message, digest)
        if len(self._digests) > 4096:
            self._digests.popitem(last=False)
        return digest

    def _save(self, store: Store, key: str, message: ToolMessage) -> None:
        memo_key = (id(store), key)
        seen = self._saved.get(memo_key)
        if seen is not None and seen[0] is store and seen[1] is message:
            return
        store.put(TOOL_OUTPUT_NAMESPACE, key, dump_messages([message])[0])
        self._saved[memo_key] = (store, message)
        if len(self._saved) > 4096:
            self._saved.popitem(last=False)

    async def apply(
        self, ctx: RunContext[Any], messages: Sequence[Message], *, need_tokens: int, estimator: TokenEstimator
    ) -> PressureResult:
        tools = [i for i, m in enumerate(messages) if isinstance(m, ToolMessage)]
        candidates = tools[: len(tools) - self.keep_recent] if self.keep_recent else tools
        store = (self.store if self.store is not None else ctx.stores.default) if self.keep_raw else None
        scope = str(ctx.thread_id or ctx.root_run_id)
        out = list(messages)
        freed = compacted = 0
        for i in candidates:
            if freed >= need_tokens:
                break
            m = messages[i]
            if not isinstance(m, ToolMessage) or COMPACTED_TAG in m.tags:
                continue
            # a call id alone is not a safe key (a thread spans runs, and a custom model may reuse its
            # ids), so the key also carries the content: two different results never share a key, and
            # the same result always gets the same one (a stable placeholder)
            key = f"{scope}/{m.tool_call_id}/{self._digest(m)}" if store is not None else "(not kept)"
            text = self.placeholder.format(
                chars=len(m.text), key=key, name=m.name,
                tool_call_id=m.tool_call_id,
            )  # fmt: skip
            small = dataclasses.replace(m, text=text, blocks=(), tags=(*m.tags, COMPACTED_TAG))
            saved = estimator.count_message(m) - estimator.count_message(small)
            if saved <= 0:
                continue
            if store is not None:
                self._save(store, key, m)
            out[i] = small
            freed += saved
            compacted += 1
        if not compacted:
            return PressureResult(messages=messages)
        return PressureResult(messages=out, detail=f"compacted {compacted} tool outputs")

    def __repr__(self) -> str:
        return f"CompactToolOutputs(keep_recent={self.keep_recent}, keep_raw={self.keep_raw})"


def load_tool_output(store: Store, key: str) -> ToolMessage | None:
    """The raw tool result ``CompactToolOutputs`` saved under ``key`` (the key its placeholder shows)."""
    value = store.get(TOOL_OUTPUT_NAMESPACE, key)
    if value is None:
        return None
    message = load_messages([value])[0]
    return message if isinstance(message, ToolMessage) else None


def default_policies() -> tuple[PressurePolicy, ...]:
    """The seed's order: drop retrieved, trim, summarize (``ConcatSummarizer``), compact tool outputs."""
    return (
        DropRetrieved(),
        TrimOldMessages(keep_last=6),
        SummarizeOldMessages(ConcatSummarizer(), keep_last=2),
        CompactToolOutputs(keep_recent=0),
    )


# ------------------------------------------------------------------------------------------ chain
def _same(a: Sequence[Message], b: Sequence[Message]) -> bool:
    return a is b or (len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True)))


class ContextPressureChain:
    """Applies pressure policies in order until a request fits its window.

    Args:
        policies: In order; ``None`` means ``default_policies()`` (fresh instances per chain).
        fail: Raise ``ContextLimitError`` when nothing fits; otherwise return the best effort and
            let the provider decide.
        max_records: Bound on ``provenance``.
    """

    __slots__ = ("fail", "policies", "provenance")

    def __init__(
        self, policies: Sequence[PressurePolicy] | None = None, *, fail: bool = True, max_records: int = 1024
    ) -> None:
        chosen = default_policies() if policies is None else tuple(policies)
        for policy in chosen:
            if not isinstance(policy, PressurePolicy):
                raise ConfigurationError(f"{policy!r} is not a PressurePolicy (needs name and async apply)")
        self.policies: tuple[PressurePolicy, ...] = chosen
        self.fail = fail
        self.provenance = CompressionProvenance(max_records)
        """Every summary the chain inserted, for audits."""

    async def relieve(
        self,
        ctx: RunContext[Any],
        messages: Sequence[Message],
        *,
        window: ContextWindow,
        estimator: TokenEstimator,
        tools_schema_tokens: int = 0,
    ) -> list[Message]:
        """Return messages that fit ``window.usable_tokens`` (the input list itself when it already fits).

        Applies the policies in order, stopping as soon as the request fits, and emits one
        ``ContextPressure`` event per action.

        Raises:
            ContextLimitError: Nothing more can be done and ``fail`` is true (after a final
                ``context.pressure`` event with ``action="fail"``).
        """
        tokens = estimator.estimate(messages, tools_schema_tokens=tools_schema_tokens)
        limit = window.usable_tokens
        if tokens <= limit:
            return messages if isinstance(messages, list) else list(messages)
        return await self._relieve(ctx, list(messages), tokens, limit, window, estimator, tools_schema_tokens)

    async def _relieve(
        self, ctx: RunContext[Any], current: list[Message], tokens: int, limit: int, window: ContextWindow,
        estimator: TokenEstimator, tools_schema_tokens: int,
    ) -> list[Message]:  # fmt: skip
        first = tokens
        error: Exception | None = None
        for policy in self.policies:
            try:
                result = await policy.apply(ctx, current, need_tokens=tokens - limit, estimator=estimator)
            except _UNRECOVERABLE:
                raise
            except Exception as exc:  # e.g. a summarizer model outage: later policies may still save the run
                error = exc
                ctx.emit(ContextPressure, action=policy.name, tokens_before=tokens, tokens_after=tokens,
                         limit_tokens=limit, detail=f"failed: {describe_error(exc)}")  # fmt: skip
                continue
            if _same(result.messages, current):
                continue
            after = estimator.estimate(result.messages, tools_schema_tokens=tools_schema_tokens)
            if after >= tokens:
                continue  # an action that does not shrink the request is not taken
            if result.record is not None:
                self.provenance.append(dataclasses.replace(result.record, tokens_before=tokens, tokens_after=after))
            ctx.emit(ContextPressure, action=policy.name, tokens_before=tokens, tokens_after=after, limit_tokens=limit,
                     removed_messages=result.removed, detail=result.detail)  # fmt: skip
            current, tokens = list(result.messages), after
            if tokens <= limit:
                return current
        detail = f"{tokens} tokens still exceed the {limit} usable (was {first}) after {len(self.policies)} policies"
        if not self.fail:
            ctx.emit(ContextPressure, action="unresolved", tokens_before=tokens, tokens_after=tokens,
                     limit_tokens=limit, detail=detail)  # fmt: skip
            return current
        ctx.emit(ContextPressure, action="fail", tokens_before=tokens, tokens_after=tokens, limit_tokens=limit,
                 detail=detail)  # fmt: skip
        raise ContextLimitError(
            f"the request for {window.model} needs {tokens} tokens but only {limit} fit "
            f"({window.max_tokens} minus {window.reserved_output_tokens} reserved for output)",
            model=window.model,
            estimated_tokens=tokens,
            limit_tokens=limit,
        ) from error

    def __repr__(self) -> str:
        return f"ContextPressureChain([{', '.join(p.name for p in self.policies)}], fail={self.fail})"
