"""Summarization: deciding when a transcript is too long, and folding its old part into one message.

``SummarizationPolicy`` decides *when* (a token trigger, derived from the model's window when known)
and *what* (``plan``: a "summarize these / keep these" split that keeps system messages, the current
user turn and the recent working set, and never separates a tool result from its call). A
``Summarizer`` writes the summary: ``ConcatSummarizer`` deterministically, ``ModelSummarizer`` with a
(cheaper) model. Every compaction leaves a ``SummaryRecord`` in a bounded ``CompressionProvenance`` so
what was compressed stays auditable. ``SummarizationMiddleware`` applies all of it before model calls;
the context-pressure chain (``_pressure``) reuses the same pieces.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import json
import math
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._errors import Cancelled, ConfigurationError, LimitExceeded, ProviderError
from .._messages import (
    RETRIEVED_TAG,
    SUMMARY_TAG,
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
    stable_prefix_len,
)
from .._metering import invoke_metered
from .._model import ChatModel, ModelRequest
from .._profile import ModelProfile
from .._tokens import TokenEstimator
from ._trim import keep_ends, trim_units

if TYPE_CHECKING:
    from .._context import RunContext

__all__ = [
    "SUMMARY_HEADER",
    "SUMMARY_TAG",
    "CompressionProvenance",
    "ConcatSummarizer",
    "ModelSummarizer",
    "SummarizationPolicy",
    "Summarizer",
    "SummaryPlan",
    "SummaryRecord",
]

SUMMARY_HEADER = "=== Conversation Summary ==="
"""First line of every summary message, so a reader (human or model) knows what it is looking at."""

_RECORD_IDS = itertools.count(1)
_UNRECOVERABLE = (Cancelled, LimitExceeded)  # a summarizer failure must never swallow these


def _check_int(name: str, value: object, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


# ------------------------------------------------------------------------------------------ transcript shape
def _current_user_index(messages: Sequence[Message]) -> int | None:
    """The current user turn: the last user message that is not retrieved context."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, UserMessage) and RETRIEVED_TAG not in m.tags:
            return i
    return None


def _is_summary(m: Message) -> bool:
    return isinstance(m, SystemMessage) and SUMMARY_TAG in m.tags


def _old_units(messages: Sequence[Message], keep_last: int) -> list[list[int]]:
    """Indices of the removable old messages, grouped so that no unit splits a tool call from its results.

    Old means before the last ``keep_last`` non-system messages (the cut is moved earlier until it
    does not land on a tool result). System messages and the current user turn are never included.
    A unit is an assistant turn with tool calls plus the tool results after it, or one other message.
    """
    body = [i for i, m in enumerate(messages) if not isinstance(m, SystemMessage)]
    cut = max(0, len(body) - keep_last)
    while 0 < cut < len(body) and isinstance(messages[body[cut]], ToolMessage):
        cut -= 1
    current = _current_user_index(messages)
    units: list[list[int]] = []
    open_call = False
    for i in body[:cut]:
        m = messages[i]
        if isinstance(m, ToolMessage) and open_call:
            units[-1].append(i)
            continue
        open_call = isinstance(m, AssistantMessage) and bool(m.tool_calls)
        if i != current:
            units.append([i])
    return units


def _drop_units(
    messages: Sequence[Message], need_tokens: int, estimator: TokenEstimator, keep_last: int
) -> tuple[list[Message], int]:
    """Trim: drop the oldest whole units (``trim_units``) until ``need_tokens`` are freed or none are left.

    The last ``keep_last`` non-system messages are protected, and so is every unit reaching into
    them: the protected tail grows to a unit boundary rather than splitting a turn or a tool round.
    """
    units, _ = trim_units(messages)
    body = [i for i, m in enumerate(messages) if not isinstance(m, SystemMessage)]
    protected = set(body[len(body) - keep_last :]) if keep_last else set()
    count = estimator.count_message
    dropped: set[int] = set()
    freed = 0
    for unit in units:
        if freed >= need_tokens or not protected.isdisjoint(unit):
            break
        dropped.update(unit)
        freed += sum(count(messages[i]) for i in unit)
    return [m for i, m in enumerate(messages) if i not in dropped], len(dropped)


# ------------------------------------------------------------------------------------------ plan
@dataclass(frozen=True, kw_only=True, slots=True)
class SummaryPlan:
    """A split of a transcript into what to summarize and what to keep.

    Attributes:
        summarize: Messages to fold into the summary, oldest first (a previous summary comes first).
        keep: Messages kept verbatim, in their original order.
        insert_at: Where in ``keep`` the summary goes: right after the stable system prefix.
        indices: Positions of ``summarize`` in the original transcript.
    """

    summarize: tuple[Message, ...] = ()
    keep: tuple[Message, ...] = ()
    insert_at: int = 0
    indices: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.summarize)

    def apply(self, summary: str | Message) -> list[Message]:
        """The compacted transcript: ``keep`` with the summary message inserted at ``insert_at``."""
        message = summary_message(summary) if isinstance(summary, str) else summary
        keep = self.keep
        return [*keep[: self.insert_at], message, *keep[self.insert_at :]]


def summary_message(text: str) -> SystemMessage:
    """Wrap summary text as the tagged system message the harness inserts (header added if missing)."""
    body = text if text.startswith(SUMMARY_HEADER) else f"{SUMMARY_HEADER}\n{text.strip()}"
    return SystemMessage(text=body, tags=(SUMMARY_TAG,))


def plan_summary(messages: Sequence[Message], keep_last: int) -> SummaryPlan:
    """Split ``messages``: old units (and any previous summary) to summarize, everything else kept."""
    chosen = sorted(
        [i for unit in _old_units(messages, keep_last) for i in unit]
        + [i for i, m in enumerate(messages) if _is_summary(m)]
    )
    if not any(not _is_summary(messages[i]) for i in chosen):
        return SummaryPlan(keep=tuple(messages), insert_at=stable_prefix_len(messages))
    taken = set(chosen)
    return SummaryPlan(
        summarize=tuple(messages[i] for i in chosen),
        keep=tuple(m for i, m in enumerate(messages) if i not in taken),
        insert_at=stable_prefix_len(messages),
        indices=tuple(chosen),
    )


@functools.cache
def _default_estimator() -> TokenEstimator:
    return TokenEstimator.for_model(None)


@dataclass(frozen=True, kw_only=True, slots=True)
class SummarizationPolicy:
    """When to summarize, and how much recent context survives.

    With ``context_window`` the trigger is ``estimate >= floor(context_window * threshold_fraction)``;
    without it, ``estimate > trigger_tokens`` (the Rust original's rule, kept for parity).

    Attributes:
        trigger_tokens: Absolute trigger, used when no window is known.
        keep_last: Recent non-system messages always kept verbatim (more when a tool pair straddles the cut).
        context_window: The model's window; when set it overrides ``trigger_tokens``.
        threshold_fraction: Share of the window at which to summarize, in ``(0, 1]``.
    """

    trigger_tokens: int | None = None
    keep_last: int = 6
    context_window: int | None = None
    threshold_fraction: float = 0.9

    def __post_init__(self) -> None:
        if self.trigger_tokens is None and self.context_window is None:
            raise ConfigurationError(
                "SummarizationPolicy needs trigger_tokens or context_window",
                hint="use SummarizationPolicy.from_profile(profile) to size it from the model",
            )
        if self.trigger_tokens is not None:
            _check_int("trigger_tokens", self.trigger_tokens, minimum=1)
        if self.context_window is not None:
            _check_int("context_window", self.context_window, minimum=1)
        _check_int("keep_last", self.keep_last, minimum=0)
        fraction: object = self.threshold_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 < fraction <= 1:
            raise ConfigurationError(f"threshold_fraction must be in (0, 1], got {fraction!r}")

    @classmethod
    def from_profile(
        cls, profile: ModelProfile, threshold: float = 0.9, *, keep_last: int = 6, trigger_tokens: int | None = None
    ) -> SummarizationPolicy:
        """A policy whose trigger scales with the model's window (``trigger_tokens`` when the profile has none)."""
        window = profile.context_window
        return cls(
            trigger_tokens=trigger_tokens, keep_last=keep_last, context_window=window, threshold_fraction=threshold
        )

    def with_context_window(self, tokens: int) -> SummarizationPolicy:
        return dataclasses.replace(self, context_window=tokens)

    @property
    def trigger_budget(self) -> int:
        """The token figure the trigger compares against."""
        if self.context_window is not None:
            return math.floor(self.context_window * self.threshold_fraction)
        assert self.trigger_tokens is not None  # guaranteed by __post_init__
        return self.trigger_tokens

    def is_over(self, tokens: int) -> bool:
        """Whether an estimate of ``tokens`` trips the trigger."""
        return tokens >= self.trigger_budget if self.context_window is not None else tokens > self.trigger_budget

    def should_summarize(self, messages: Sequence[Message], estimator: TokenEstimator | None = None) -> bool:
        """True when the estimate trips the trigger *and* ``plan`` finds something to summarize."""
        est = estimator if estimator is not None else _default_estimator()
        return self.is_over(est.estimate(messages)) and bool(self.plan(messages))

    def plan(self, messages: Sequence[Message]) -> SummaryPlan:
        """Keep system messages, the current user turn and at least ``keep_last`` recent messages."""
        return plan_summary(messages, self.keep_last)


# ------------------------------------------------------------------------------------------ summarizers
@runtime_checkable
class Summarizer(Protocol):
    """Writes a summary of messages. A ``summarize`` that also accepts ``ctx=`` receives the run context."""

    async def summarize(self, messages: Sequence[Message]) -> str: ...


def summarizer_name(summarizer: object) -> str:
    name = getattr(summarizer, "name", None)
    return name if isinstance(name, str) and name else type(summarizer).__name__


def _takes_ctx(summarizer: object) -> bool:
    try:
        return "ctx" in inspect.signature(summarizer.summarize).parameters  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        return False


def _clip(text: str, limit: int | None) -> str:
    flat = " ".join(text.split())
    if limit is None or len(flat) <= limit:
        return flat
    return f"{flat[:limit]}… (+{len(flat) - limit} chars)"


def render_transcript(messages: Sequence[Message], *, max_chars: int | None = 400) -> list[str]:
    """One line per message (role, text, tool calls and results); a previous summary is inlined."""
    lines: list[str] = []
    for m in messages:
        if _is_summary(m):
            lines.extend(line for line in m.text.splitlines()[1:] if line.strip())
            continue
        n = len(lines)
        if isinstance(m, ToolMessage):
            status = " error" if m.is_error else ""
            lines.append(f"[msg-{n}] tool {m.name} ({m.tool_call_id}){status}: {_clip(m.text, max_chars)}")
            continue
        parts = [_clip(m.text, max_chars)] if m.text else []
        if isinstance(m, AssistantMessage):
            if m.reasoning:
                parts.append(f"(reasoning: {_clip(m.reasoning, max_chars)})")
            for call in m.tool_calls:
                args = call.raw_arguments if call.raw_arguments is not None else json.dumps(dict(call.arguments))
                parts.append(f"-> {call.name}[{call.id}]({_clip(args, max_chars)})")
        lines.append(f"[msg-{n}] {m.role}: {' '.join(parts)}".rstrip())
    return lines


@dataclass(frozen=True, kw_only=True, slots=True)
class ConcatSummarizer:
    """Deterministic, free summary: the header plus one clipped line per message.

    Attributes:
        max_chars: Per-message text cap (``None``: unclipped); clipping is what makes it shrink a
            transcript of long messages.
        max_total_chars: Cap on the whole summary (``None``: none). A transcript of many short
            messages does not shrink by clipping (each line is as long as its message); over this
            cap the oldest lines give way to one ``[… N earlier messages omitted …]`` line, the
            first few lines (how the conversation started) kept.
    """

    max_chars: int | None = 400
    max_total_chars: int | None = None
    name: str = "concat"

    def __post_init__(self) -> None:
        if self.max_chars is not None:
            _check_int("max_chars", self.max_chars, minimum=0)
        if self.max_total_chars is not None:
            _check_int("max_total_chars", self.max_total_chars, minimum=1)

    async def summarize(self, messages: Sequence[Message]) -> str:
        if not messages:
            raise ConfigurationError("ConcatSummarizer needs at least one message to summarize")
        lines = render_transcript(messages, max_chars=self.max_chars)
        if self.max_total_chars is not None:
            lines = keep_ends(lines, self.max_total_chars)
        return "\n".join([SUMMARY_HEADER, *lines])


DEFAULT_SUMMARY_INSTRUCTIONS = (
    "Summarize the conversation below so an assistant can continue it without the original messages. "
    "Keep facts, decisions, open tasks, names, numbers, identifiers and tool results that still matter; "
    "drop pleasantries. Write plain concise prose or bullets."
)


class ModelSummarizer:
    """Asks a (cheaper) model for the summary; its usage is recorded on ``ctx`` when one is given.

    The transcript is sent as rendered text, not as chat turns, so a provider never sees tool
    results without tool definitions.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        instructions: str = DEFAULT_SUMMARY_INSTRUCTIONS,
        max_output_tokens: int | None = 1024,
        max_chars: int | None = 4000,
    ) -> None:
        if not isinstance(model, ChatModel):
            raise ConfigurationError(f"ModelSummarizer needs a ChatModel, got {type(model).__name__}")
        if max_output_tokens is not None:
            _check_int("max_output_tokens", max_output_tokens, minimum=1)
        self.model = model
        self.instructions = instructions
        self.max_output_tokens = max_output_tokens
        self.max_chars = max_chars

    @property
    def name(self) -> str:
        return f"model:{self.model.model_name}"

    async def summarize(self, messages: Sequence[Message], *, ctx: RunContext[Any] | None = None) -> str:
        if not messages:
            raise ConfigurationError("ModelSummarizer needs at least one message to summarize")
        transcript = "\n".join(render_transcript(messages, max_chars=self.max_chars))
        request = ModelRequest(
            messages=(SystemMessage(text=self.instructions), UserMessage(text=transcript)),
            max_output_tokens=self.max_output_tokens,
            thread_id=None if ctx is None else ctx.thread_id,
        )
        # counted toward the run's model calls, checked and reserved on its budgets, usage recorded
        response = await invoke_metered(ctx, self.model, request, messages=messages)
        model, provider = response.model or self.model.model_name, response.provider or self.model.provider
        text = response.message.text.strip()
        if not text:
            raise ProviderError("the summarizer model returned an empty summary", provider=provider, model=model)
        return text

    def __repr__(self) -> str:
        return f"ModelSummarizer({self.model.model_name!r})"


class RollingSummary:
    """Runs a summarizer with memory, because the loop resends a growing history before every call.

    The same span again reuses the last summary; a span that extends it is summarized as *previous
    summary + new messages*, so a model summarizer never redoes its work.
    """

    __slots__ = ("_memo", "_takes_ctx", "summarizer")

    def __init__(self, summarizer: Summarizer) -> None:
        if not callable(getattr(summarizer, "summarize", None)):
            raise ConfigurationError(f"{summarizer!r} has no summarize() method")
        self.summarizer = summarizer
        self._takes_ctx = _takes_ctx(summarizer)
        self._memo: tuple[tuple[Message, ...], SystemMessage] | None = None

    @property
    def name(self) -> str:
        return summarizer_name(self.summarizer)

    async def summary(self, ctx: RunContext[Any] | None, span: tuple[Message, ...]) -> SystemMessage:
        memo, send = self._memo, span
        if memo is not None and len(span) >= len(memo[0]) and all(a is b for a, b in zip(memo[0], span, strict=False)):
            if len(span) == len(memo[0]):
                return memo[1]
            send = (memo[1], *span[len(memo[0]) :])
        if self._takes_ctx:
            text: str = await self.summarizer.summarize(send, ctx=ctx)  # type: ignore[call-arg]
        else:
            text = await self.summarizer.summarize(send)
        message = summary_message(text)
        self._memo = (span, message)
        return message


# ------------------------------------------------------------------------------------------ provenance
@dataclass(frozen=True, kw_only=True, slots=True)
class SummaryRecord:
    """What one compaction replaced, kept for audits.

    ``message_count`` messages at positions ``first_index`` to ``last_index`` of their transcript,
    folded by ``summarizer`` (``"concat"``, ``"model:gpt-4o-mini"``) into ``summary``, taking the
    request estimate from ``tokens_before`` to ``tokens_after``. ``id`` is ``sum-<n>`` (unique per process); ``created_at`` is epoch seconds.
    """

    id: str
    created_at: float
    message_count: int
    summarizer: str
    first_index: int
    last_index: int
    summary: str
    tokens_before: int = 0
    tokens_after: int = 0
    run_id: str | None = None

    @classmethod
    def create(cls, plan: SummaryPlan, summary: str, *, summarizer: str, **figures: Any) -> SummaryRecord:
        """A record of ``plan`` with a fresh id and timestamp; ``figures`` are the token counts and ``run_id``."""
        first, last = (plan.indices[0], plan.indices[-1]) if plan.indices else (-1, -1)
        return cls(id=f"sum-{next(_RECORD_IDS)}", created_at=time.time(), message_count=len(plan.summarize),
                   summarizer=summarizer, first_index=first, last_index=last, summary=summary, **figures)  # fmt: skip


class CompressionProvenance:
    """A bounded, ordered log of ``SummaryRecord``s; the oldest are evicted past ``max_records``."""

    __slots__ = ("_records", "evicted")

    def __init__(self, max_records: int = 1024) -> None:
        self._records: deque[SummaryRecord] = deque(maxlen=_check_int("max_records", max_records, minimum=1))
        self.evicted = 0
        """Records dropped to stay within ``max_records``."""

    @property
    def max_records(self) -> int:
        return self._records.maxlen or 0

    def append(self, record: SummaryRecord) -> None:
        if len(self._records) == self._records.maxlen:
            self.evicted += 1
        self._records.append(record)

    @property
    def records(self) -> tuple[SummaryRecord, ...]:
        return tuple(self._records)

    @property
    def latest(self) -> SummaryRecord | None:
        return self._records[-1] if self._records else None

    @property
    def summarized_messages(self) -> int:
        """Messages folded into summaries across the retained records."""
        return sum(r.message_count for r in self._records)

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[SummaryRecord]:
        return iter(tuple(self._records))
