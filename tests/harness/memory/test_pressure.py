from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import time
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from tinyagents_nb.harness import (
    AssistantMessage,
    ConfigurationError,
    ContextLimitError,
    ContextWindow,
    Message,
    ModelRequest,
    ProviderError,
    RunConfig,
    RunContext,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    dump_messages,
)
from tinyagents_nb.harness.events import ContextPressure
from tinyagents_nb.harness.memory import (
    COMPACTED_TAG,
    SUMMARY_HEADER,
    SUMMARY_TAG,
    TOOL_OUTPUT_NAMESPACE,
    CompactToolOutputs,
    ConcatSummarizer,
    ContextPressureChain,
    ContextProvidersMiddleware,
    DropRetrieved,
    PressurePolicy,
    PressureResult,
    SummarizeOldMessages,
    TrimOldMessages,
    compose_transforms,
    default_policies,
    load_tool_output,
)
from tinyagents_nb.harness.models import HeuristicCounter, TokenEstimator
from tinyagents_nb.harness.runtime import RETRIEVED_TAG
from tinyagents_nb.harness.stores import InMemoryStore
from tinyagents_nb.harness.testkit import EventRecorder


def t(n: int) -> str:
    """Text the heuristic counter charges exactly ``n`` tokens for."""
    return "x" * (4 * n)


def est() -> TokenEstimator:
    return TokenEstimator(HeuristicCounter())


def window(usable: int) -> ContextWindow:
    return ContextWindow(model="m", max_tokens=usable + 10, reserved_output_tokens=10)


def calls(*ids: str, n: int = 5) -> list[Message]:
    turn = AssistantMessage(tool_calls=[ToolCall(id=i, name="f") for i in ids])
    return [turn, *(ToolMessage(tool_call_id=i, name="f", text=t(n)) for i in ids)]


def pressure(rec: EventRecorder) -> list[tuple[str, int, int, int, int]]:
    return [
        (e.action, e.tokens_before, e.tokens_after, e.limit_tokens, e.removed_messages)
        for e in rec.events
        if isinstance(e, ContextPressure)
    ]


SYS = SystemMessage(text=t(10))  # 13 tokens


def digest(m: Message) -> str:
    """The content hash ``CompactToolOutputs`` puts in its store keys (recomputed independently)."""
    blob = json.dumps(dump_messages([m])[0], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def retrieved(n: int) -> UserMessage:
    return UserMessage(text=t(n), tags=(RETRIEVED_TAG,))


# ------------------------------------------------------------------------------------------ fast path
@pytest.mark.anyio
async def test_fast_path_returns_the_same_list_without_events() -> None:
    ctx, e = RunContext(), est()
    rec = EventRecorder(ctx.events)
    messages: list[Message] = [SYS, UserMessage(text=t(10))]
    assert e.estimate(messages) == 29
    chain = ContextPressureChain()
    assert await chain.relieve(ctx, messages, window=window(29), estimator=e) is messages
    assert rec.events == []
    with pytest.raises(ContextLimitError):  # one token less and the same request no longer fits
        await ContextPressureChain([]).relieve(ctx, messages, window=window(28), estimator=e)
    assert await chain.relieve(ctx, tuple(messages), window=window(29), estimator=e) == messages


@pytest.mark.anyio
async def test_fast_path_costs_little_beyond_the_estimate() -> None:
    ctx, e = RunContext(), est()
    messages: list[Message] = [SYS, *(UserMessage(text=t(i)) for i in range(50))]
    chain, w, n = ContextPressureChain(), window(1_000_000), 2_000
    start = time.perf_counter()
    for _ in range(n):
        e.estimate(messages)
    estimate_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(n):
        await chain.relieve(ctx, messages, window=w, estimator=e)
    relieve_s = time.perf_counter() - start
    assert (relieve_s - estimate_s) / n < 20e-6  # typically ~1 µs; generous for loaded CI machines


# ------------------------------------------------------------------------------------------ policies
@pytest.mark.anyio
async def test_drop_retrieved_oldest_first_just_enough() -> None:
    ctx, e = RunContext(), est()
    rec = EventRecorder(ctx.events)
    r1, r2, r3 = retrieved(100), retrieved(100), retrieved(100)
    current = UserMessage(text=t(10))
    messages: list[Message] = [SYS, r1, UserMessage(text=t(10)), AssistantMessage(text=t(10)), r2, r3, current]
    assert e.estimate(messages) == 13 + 3 * 103 + 3 * 13 + 3 == 364
    out = await ContextPressureChain([DropRetrieved()]).relieve(ctx, messages, window=window(200), estimator=e)
    assert [m is r3 for m in out if RETRIEVED_TAG in m.tags] == [True]
    assert out[-1] is current
    assert pressure(rec) == [("drop_retrieved", 364, 158, 200, 2)]
    every = await ContextPressureChain([DropRetrieved(drop_all=True)]).relieve(
        ctx, messages, window=window(200), estimator=e
    )
    assert not any(RETRIEVED_TAG in m.tags for m in every)


@pytest.mark.anyio
async def test_drop_retrieved_never_breaks_a_tool_pair() -> None:
    ctx, e = RunContext(), est()
    turn = AssistantMessage(tool_calls=[ToolCall(id="c", name="f")], tags=(RETRIEVED_TAG,))
    result = ToolMessage(tool_call_id="c", name="f", text=t(100), tags=(RETRIEVED_TAG,))
    messages: list[Message] = [SYS, UserMessage(text="q"), turn, result]
    policy = DropRetrieved(drop_all=True)
    res = await policy.apply(ctx, messages, need_tokens=10, estimator=e)
    assert res.messages is messages
    assert res.removed == 0


@pytest.mark.anyio
async def test_trim_drops_whole_units_and_keeps_the_current_turn() -> None:
    ctx, e = RunContext(), est()
    rec = EventRecorder(ctx.events)
    current = UserMessage(text=t(10))
    pair = calls("a", "b", n=50)  # 3 + 2 * 2 + 2 * 54 ... counted below
    messages: list[Message] = [
        SYS,
        UserMessage(text=t(30)),
        *pair,
        current,
        *calls("c", n=5),
        AssistantMessage(text=t(5)),
    ]
    before = e.estimate(messages)
    pair_tokens = sum(e.count_message(m) for m in pair)
    # need: just more than the first user message -> its removal is not enough, the pair goes too
    out = await ContextPressureChain([TrimOldMessages(keep_last=3)]).relieve(
        ctx, messages, window=window(before - 34), estimator=e
    )
    assert out == [SYS, current, *messages[-3:]]
    assert pressure(rec) == [("trim", before, before - 33 - pair_tokens, before - 34, 4)]
    # keep_last protects the recent tail (moved back to include a whole tool pair)
    res = await TrimOldMessages(keep_last=2).apply(ctx, messages, need_tokens=10**6, estimator=e)
    assert list(res.messages) == [SYS, current, *messages[-3:]]


@pytest.mark.anyio
async def test_summarize_inserts_after_the_prefix_and_records_provenance() -> None:
    ctx, e = RunContext(), est()
    rec = EventRecorder(ctx.events)
    old: list[Message] = [UserMessage(text=t(200)), AssistantMessage(text=t(200))]
    messages: list[Message] = [SYS, SystemMessage(text="rules"), *old, UserMessage(text="now")]
    before = e.estimate(messages)
    chain = ContextPressureChain([SummarizeOldMessages(ConcatSummarizer(max_chars=20), keep_last=0)])
    out = await chain.relieve(ctx, messages, window=window(before - 100), estimator=e)
    assert out[:2] == messages[:2]
    assert out[-1] is messages[-1]
    summary = out[2]
    assert isinstance(summary, SystemMessage)
    assert summary.tags == (SUMMARY_TAG,)
    assert summary.text.startswith(SUMMARY_HEADER)
    assert "[msg-1] assistant:" in summary.text
    after = e.estimate(out)
    assert pressure(rec) == [("summarize", before, after, before - 100, 2)]
    (record,) = chain.provenance
    assert (record.tokens_before, record.tokens_after, record.message_count) == (before, after, 2)
    assert (record.first_index, record.last_index, record.summary) == (2, 3, summary.text)


class _Counting:
    name = "counting"

    def __init__(self) -> None:
        self.seen: list[Sequence[Message]] = []

    async def summarize(self, messages: Sequence[Message], *, ctx: RunContext[Any] | None = None) -> str:
        assert ctx is not None  # a summarizer that accepts ctx= receives the run context
        self.seen.append(messages)
        return f"summary of {len(messages)}"


@pytest.mark.anyio
async def test_summaries_are_reused_and_extended_not_redone() -> None:
    ctx, e = RunContext(), est()
    summarizer = _Counting()
    policy = SummarizeOldMessages(summarizer, keep_last=0)
    old: list[Message] = [UserMessage(text=t(100)), AssistantMessage(text=t(100))]
    first: list[Message] = [SYS, *old, UserMessage(text="q2")]
    out1 = await policy.apply(ctx, first, need_tokens=1, estimator=e)
    out2 = await policy.apply(ctx, first, need_tokens=1, estimator=e)  # loop resent the same history
    assert len(summarizer.seen) == 1
    assert out1.messages[1] is out2.messages[1]
    later: list[Message] = [*first, AssistantMessage(text=t(100)), UserMessage(text="q3")]
    out3 = await policy.apply(ctx, later, need_tokens=1, estimator=e)
    assert len(summarizer.seen) == 2
    assert summarizer.seen[1][0] is out1.messages[1]  # previous summary + only the new messages
    assert [m.text for m in summarizer.seen[1][1:]] == ["q2", t(100)]
    assert [m.text for m in out3.messages] == [SYS.text, f"{SUMMARY_HEADER}\nsummary of 3", "q3"]


@pytest.mark.anyio
async def test_compact_tool_outputs_keeps_raw_text_retrievable() -> None:
    ctx, e = RunContext(config=None), est()
    rec = EventRecorder(ctx.events)
    messages: list[Message] = [SYS, UserMessage(text="q"), *calls("a", n=100), *calls("b", n=100), *calls("c", n=100)]
    before = e.estimate(messages)
    chain = ContextPressureChain([CompactToolOutputs(keep_recent=1)])
    out = await chain.relieve(ctx, messages, window=window(before - 50), estimator=e)
    # only the oldest result was needed; the newest is protected by keep_recent
    compacted = out[3]
    assert isinstance(compacted, ToolMessage)
    assert compacted.tool_call_id == "a"
    key = f"{ctx.root_run_id}/a/{digest(messages[3])}"
    assert compacted.text == f"[tool output compacted: 400 chars; raw kept in store key {key}]"
    assert COMPACTED_TAG in compacted.tags
    assert out[5] is messages[5]
    assert out[7] is messages[7]
    assert load_tool_output(ctx.stores.default, key) == messages[3]
    assert load_tool_output(ctx.stores.default, "missing") is None
    assert pressure(rec) == [("compact_tool_outputs", before, e.estimate(out), before - 50, 0)]
    # idempotent: a compacted result is never compacted again
    again = await CompactToolOutputs().apply(ctx, [compacted], need_tokens=10**6, estimator=e)
    assert list(again.messages) == [compacted]
    assert again.messages is not None


@pytest.mark.anyio
async def test_compact_tool_outputs_options() -> None:
    e = est()
    ctx = RunContext(config=None)
    store = InMemoryStore()
    messages: list[Message] = [UserMessage(text="q"), *calls("a", n=100), *calls("b", n=1)]
    policy = CompactToolOutputs(store=store, placeholder="[{name} {tool_call_id}: {chars}]")
    res = await policy.apply(ctx, messages, need_tokens=10**6, estimator=e)
    assert [m.text for m in res.messages if isinstance(m, ToolMessage)] == ["[f a: 400]", t(1)]  # b would grow
    assert store.keys(TOOL_OUTPUT_NAMESPACE) == [f"{ctx.root_run_id}/a/{digest(messages[2])}"]
    assert ctx.stores.default.keys(TOOL_OUTPUT_NAMESPACE) == []
    puts: list[str] = []

    class Counting(InMemoryStore):
        def put(self, namespace: Any, key: str, value: object) -> None:
            puts.append(key)
            super().put(namespace, key, value)

    counting = CompactToolOutputs(store=Counting())
    for _ in range(3):  # the loop resends the same history: the raw result is written once
        await counting.apply(ctx, messages, need_tokens=1, estimator=e)
    assert puts == [f"{ctx.root_run_id}/a/{digest(messages[2])}"]
    no_raw = await CompactToolOutputs(keep_raw=False).apply(ctx, messages, need_tokens=1, estimator=e)
    assert "(not kept)" in no_raw.messages[2].text
    for bad in ("{nope}", "{0}", "{"):
        with pytest.raises(ConfigurationError, match="placeholder"):
            CompactToolOutputs(placeholder=bad)
    with pytest.raises(ConfigurationError, match="keep_recent"):
        CompactToolOutputs(keep_recent=-1)


# ------------------------------------------------------------------------------------------ chain
class _Spy:
    def __init__(self, name: str, drop: int) -> None:
        self._name, self.drop, self.calls = name, drop, 0

    @property
    def name(self) -> str:
        return self._name

    async def apply(
        self, ctx: RunContext[Any], messages: Sequence[Message], *, need_tokens: int, estimator: TokenEstimator
    ) -> PressureResult:
        self.calls += 1
        return PressureResult(messages=list(messages)[self.drop :], removed=self.drop, detail=f"spy {need_tokens}")


@pytest.mark.anyio
async def test_chain_applies_in_order_and_stops_as_soon_as_it_fits() -> None:
    ctx, e = RunContext(), est()
    rec = EventRecorder(ctx.events)
    messages: list[Message] = [UserMessage(text=t(10)) for _ in range(6)]  # 6 * 13 + 3 = 81
    noop, one, two, never = _Spy("noop", 0), _Spy("one", 1), _Spy("two", 2), _Spy("never", 1)
    chain = ContextPressureChain([noop, one, two, never])
    out = await chain.relieve(ctx, messages, window=window(50), estimator=e)
    assert out == messages[3:]
    assert (noop.calls, one.calls, two.calls, never.calls) == (1, 1, 1, 0)
    assert pressure(rec) == [("one", 81, 68, 50, 1), ("two", 68, 42, 50, 2)]  # no event for a no-op
    assert [ev.detail for ev in rec.events] == ["spy 31", "spy 18"]  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_failure_when_only_the_system_prompt_is_left() -> None:
    ctx, e = RunContext(), est()
    rec = EventRecorder(ctx.events)
    messages: list[Message] = [SystemMessage(text=t(1_000)), UserMessage(text="hi")]
    with pytest.raises(ContextLimitError) as info:
        await ContextPressureChain().relieve(ctx, messages, window=window(500), estimator=e, tools_schema_tokens=7)
    err = info.value
    assert (err.model, err.estimated_tokens, err.limit_tokens) == ("m", 1003 + 4 + 3 + 7, 500)
    assert pressure(rec) == [("fail", 1017, 1017, 500, 0)]
    best = await ContextPressureChain(fail=False).relieve(ctx, messages, window=window(500), estimator=e)
    assert best == messages
    assert rec.events[-1].action == "unresolved"  # type: ignore[attr-defined]


class _Broken:
    name = "broken"

    async def apply(self, ctx: Any, messages: Sequence[Message], *, need_tokens: int, estimator: Any) -> PressureResult:
        raise ProviderError("summarizer model is down")


@pytest.mark.anyio
async def test_a_failing_policy_is_reported_and_skipped() -> None:
    ctx, e = RunContext(), est()
    rec = EventRecorder(ctx.events)
    messages: list[Message] = [UserMessage(text=t(10)) for _ in range(4)]  # 55
    out = await ContextPressureChain([_Broken(), _Spy("one", 1)]).relieve(ctx, messages, window=window(50), estimator=e)
    assert out == messages[1:]
    assert pressure(rec)[0] == ("broken", 55, 55, 50, 0)
    assert "summarizer model is down" in rec.events[0].detail  # type: ignore[attr-defined]
    with pytest.raises(ContextLimitError) as info:
        await ContextPressureChain([_Broken()]).relieve(ctx, messages, window=window(50), estimator=e)
    assert isinstance(info.value.__cause__, ProviderError)


def test_chain_validation_and_defaults() -> None:
    with pytest.raises(ConfigurationError, match="PressurePolicy"):
        ContextPressureChain([object()])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="keep_last"):
        TrimOldMessages(keep_last=-1)
    names = [p.name for p in ContextPressureChain().policies]
    assert names == ["drop_retrieved", "trim", "summarize", "compact_tool_outputs"]
    assert ContextPressureChain().policies[2] is not ContextPressureChain().policies[2]  # no shared state
    assert all(isinstance(p, PressurePolicy) for p in default_policies())


# ------------------------------------------------------------------------------------------ providers
class _Docs:
    def __init__(self, *texts: str, essential: bool | None = None) -> None:
        self.texts = texts
        self.seen: list[ModelRequest] = []
        if essential is not None:
            self.essential = essential

    async def provide(self, ctx: RunContext[Any], request: ModelRequest) -> Sequence[Message]:
        self.seen.append(request)
        return [UserMessage(text=x) for x in self.texts]


@pytest.mark.anyio
async def test_providers_inject_request_time_context() -> None:
    ctx = RunContext()
    history: list[Message] = [SYS, UserMessage(text="q1"), AssistantMessage(text="a1"), UserMessage(text="q2")]
    docs, date = _Docs("doc1", "doc2"), _Docs("today", essential=True)

    def upper(ms: Sequence[Message]) -> Sequence[Message]:
        return [UserMessage(text=m.text.upper()) if isinstance(m, UserMessage) else m for m in ms]

    def drop_first_user(ms: Sequence[Message]) -> Sequence[Message]:
        return [m for m in ms if m.text != "Q1"]

    mw = ContextProvidersMiddleware([docs, date], [upper, drop_first_user])
    request = ModelRequest(messages=history)
    out = await mw.before_model(ctx, request)
    assert [m.text for m in out.messages] == [SYS.text, "a1", "doc1", "doc2", "today", "Q2"]
    assert [RETRIEVED_TAG in m.tags for m in out.messages[2:5]] == [True, True, False]
    assert [m.text for m in docs.seen[0].messages] == [SYS.text, "a1", "Q2"]  # providers see the rewritten history
    assert request.messages is history
    assert len(history) == 4

    front = ContextProvidersMiddleware([_Docs("d")], placement="after_system", essential=True)
    summary = SystemMessage(text=SUMMARY_HEADER, tags=(SUMMARY_TAG,))
    out2 = await front.before_model(ctx, ModelRequest(messages=[SYS, summary, *history[1:]]))
    assert [m.text for m in out2.messages][:4] == [SYS.text, SUMMARY_HEADER, "d", "q1"]
    assert out2.messages[2].tags == ()
    quiet = ContextProvidersMiddleware([_Docs()])
    assert await quiet.before_model(ctx, request) is request


@pytest.mark.anyio
async def test_provided_context_is_dropped_first_under_pressure() -> None:
    ctx, e = RunContext(), est()
    mw = ContextProvidersMiddleware([_Docs(t(500))])
    history: list[Message] = [SYS, UserMessage(text=t(50)), AssistantMessage(text=t(50)), UserMessage(text="q")]
    request = await mw.before_model(ctx, ModelRequest(messages=history))
    out = await ContextPressureChain().relieve(ctx, request.messages, window=window(200), estimator=e)
    assert out == history


@pytest.mark.anyio
async def test_provider_and_transform_validation() -> None:
    class Bad:
        async def provide(self, ctx: Any, request: Any) -> Sequence[Message]:
            return [AssistantMessage(text="no")]

    with pytest.raises(ConfigurationError, match="system or user"):
        await ContextProvidersMiddleware([Bad()]).before_model(RunContext(), ModelRequest(messages=[]))
    with pytest.raises(ConfigurationError, match="ContextProvider"):
        ContextProvidersMiddleware([object()])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="callable"):
        compose_transforms(lambda ms: ms, 3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="placement"):
        ContextProvidersMiddleware(placement="end")  # type: ignore[arg-type]
    assert compose_transforms()([SYS]) == [SYS]


# ------------------------------------------------------------------------------------------ invariants
@st.composite
def transcripts(draw: st.DrawFn) -> list[Message]:
    size = st.integers(0, 120)
    messages: list[Message] = [SystemMessage(text=t(draw(size))) for _ in range(draw(st.integers(0, 2)))]
    ids = itertools.count()
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.booleans()):
            messages.append(retrieved(draw(size)))
        messages.append(UserMessage(text=t(draw(size))))
        for _ in range(draw(st.integers(0, 3))):
            call_ids = [f"c{next(ids)}" for _ in range(draw(st.integers(1, 3)))]
            messages.append(
                AssistantMessage(text=t(draw(size)), tool_calls=[ToolCall(id=i, name="f") for i in call_ids])
            )
            messages += [ToolMessage(tool_call_id=i, name="f", text=t(draw(st.integers(0, 400)))) for i in call_ids]
        if draw(st.booleans()):
            messages.append(AssistantMessage(text=t(draw(size))))
        if draw(st.integers(0, 4)) == 0:
            messages.append(SystemMessage(text="note", tags=draw(st.sampled_from([(), (RETRIEVED_TAG,)]))))
    return messages


def _check_pairs(out: Sequence[Message]) -> None:
    for i, m in enumerate(out):
        if isinstance(m, ToolMessage):  # a result directly follows (a run of results after) its call
            j = i - 1
            while j >= 0 and isinstance(out[j], ToolMessage):
                j -= 1
            owner = out[j] if j >= 0 else None
            assert isinstance(owner, AssistantMessage)
            assert m.tool_call_id in {c.id for c in owner.tool_calls}
        if isinstance(m, AssistantMessage) and m.tool_calls:
            answered = set()
            for r in out[i + 1 :]:
                if not isinstance(r, ToolMessage):
                    break
                answered.add(r.tool_call_id)
            assert {c.id for c in m.tool_calls} <= answered, "unanswered tool call"


@settings(max_examples=150, deadline=None)
@given(
    transcripts(),
    st.integers(5, 3_000),
    st.permutations(range(4)),
    st.integers(0, 6),
    st.booleans(),
)
def test_invariants_hold_for_any_transcript(
    messages: list[Message], usable: int, order: list[int], keep: int, fail: bool
) -> None:
    e, ctx = est(), RunContext()
    rec = EventRecorder(ctx.events)
    pool: list[PressurePolicy] = [
        DropRetrieved(drop_all=keep % 2 == 0),
        TrimOldMessages(keep_last=keep),
        SummarizeOldMessages(ConcatSummarizer(max_chars=keep * 10), keep_last=keep // 2),
        CompactToolOutputs(keep_recent=keep // 3),
    ]
    chain = ContextPressureChain([pool[i] for i in order], fail=fail)
    error: ContextLimitError | None = None
    try:
        out = asyncio.run(chain.relieve(ctx, messages, window=window(usable), estimator=e))
    except ContextLimitError as exc:
        error = exc
    if error is not None:
        last = rec.events[-1]
        assert fail
        assert isinstance(last, ContextPressure)
        assert last.action == "fail"
        assert (error.limit_tokens, error.estimated_tokens) == (usable, last.tokens_after)
        assert last.tokens_after > usable
        return
    if fail:
        assert e.estimate(out) <= usable
    # the stable prefix is untouched; system messages (unless retrieved) and the current turn are kept
    prefix = next((i for i, m in enumerate(messages) if not isinstance(m, SystemMessage) or m.tags), len(messages))
    assert out[:prefix] == messages[:prefix]
    assert all(a is b for a, b in zip(out, messages[:prefix], strict=False))
    kept_ids = {id(m) for m in out}
    for m in messages:
        if isinstance(m, SystemMessage) and RETRIEVED_TAG not in m.tags:
            assert id(m) in kept_ids
    current = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage) and not m.tags)
    assert id(messages[current]) in kept_ids
    _check_pairs(out)
    # every event reports a shrinking estimate against the right limit
    for ev in rec.events:
        assert isinstance(ev, ContextPressure)
        assert ev.limit_tokens == usable
        assert ev.tokens_after < ev.tokens_before or ev.action in ("fail", "unresolved")
    # originals keep their relative order; only summaries and compacted results are new
    originals = [m for m in out if id(m) in {id(x) for x in messages}]
    positions = [next(i for i, x in enumerate(messages) if x is m) for m in originals]
    assert positions == sorted(positions)
    for m in out:
        if id(m) not in {id(x) for x in messages}:
            assert SUMMARY_TAG in m.tags or COMPACTED_TAG in m.tags
    # an answer from an earlier turn is never left without its question, unless a summary holds it
    if not any(SUMMARY_TAG in m.tags for m in out):
        _check_turns(messages, out)


def _earlier_turns(messages: Sequence[Message]) -> list[list[int]]:
    """Each turn before the current question: its question and what follows, system messages excluded."""
    questions = [i for i, m in enumerate(messages) if isinstance(m, UserMessage) and RETRIEVED_TAG not in m.tags]
    return [
        [j for j in range(a, b) if not isinstance(messages[j], SystemMessage)] for a, b in itertools.pairwise(questions)
    ]


def _check_turns(messages: Sequence[Message], out: Sequence[Message]) -> None:
    """Every earlier turn is kept whole or dropped whole (retrieved context may go on its own)."""
    kept = {id(m) for m in out}
    compacted = {(m.tool_call_id, m.name) for m in out if COMPACTED_TAG in m.tags}  # type: ignore[union-attr]
    for turn in _earlier_turns(messages):
        present = set()
        for i in turn:
            m = messages[i]
            if RETRIEVED_TAG in m.tags:
                continue
            shrunk = isinstance(m, ToolMessage) and (m.tool_call_id, m.name) in compacted
            present.add(id(m) in kept or shrunk)
        assert len(present) <= 1, f"turn {turn} split: {present}"


@settings(max_examples=150, deadline=None)
@given(transcripts(), st.integers(0, 3_000), st.integers(0, 8))
def test_trim_cuts_at_turn_boundaries(messages: list[Message], need: int, keep: int) -> None:
    """TrimOldMessages alone: whole earlier turns, the current question, the system prefix, tool pairs."""
    e, ctx = est(), RunContext()
    res = asyncio.run(TrimOldMessages(keep_last=keep).apply(ctx, messages, need_tokens=need, estimator=e))
    out = list(res.messages)
    _check_pairs(out)
    _check_turns(messages, out)
    assert [m for m in messages if isinstance(m, SystemMessage)] == [m for m in out if isinstance(m, SystemMessage)]
    current = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage) and not m.tags)
    assert any(m is messages[current] for m in out)
    body = [m for m in messages if not isinstance(m, SystemMessage)]
    tail = body[len(body) - keep :] if keep else []
    assert all(any(m is k for k in out) for m in tail)  # keep_last is a floor
    assert res.removed == len([m for m in messages if not any(m is k for k in out)])


@pytest.mark.anyio
async def test_compacted_outputs_with_colliding_call_ids_keep_both_raw_results() -> None:
    """Adapters fall back to `call_0` when a provider omits ids: two such results must not share a key."""
    e, store = est(), InMemoryStore()
    ctx = RunContext(config=RunConfig(thread_id="t1"))
    first = [AssistantMessage(tool_calls=[ToolCall(id="call_0", name="f")]), ToolMessage(tool_call_id="call_0", name="f", text="A" * 400)]  # fmt: skip
    second = [AssistantMessage(tool_calls=[ToolCall(id="call_0", name="f")]), ToolMessage(tool_call_id="call_0", name="f", text="B" * 400)]  # fmt: skip
    messages: list[Message] = [UserMessage(text="q"), *first, *second, UserMessage(text="again")]
    res = await CompactToolOutputs(store=store).apply(ctx, messages, need_tokens=10**6, estimator=e)
    keys = store.keys(TOOL_OUTPUT_NAMESPACE)
    assert len(keys) == 2
    assert all(k.startswith("t1/call_0/") for k in keys)
    assert sorted(m.text[0] for k in keys if (m := load_tool_output(store, k)) is not None) == ["A", "B"]
    shown = [m.text for m in res.messages if isinstance(m, ToolMessage)]
    assert [k in text for k in keys for text in shown].count(True) == 2  # each placeholder names its own result
    # the same result seen by a later run of the thread gets the same key: a stable placeholder, no new entry
    later = RunContext(config=RunConfig(thread_id="t1"))
    again = await CompactToolOutputs(store=store).apply(later, [UserMessage(text="q"), *first], need_tokens=10**6, estimator=e)  # fmt: skip
    assert store.keys(TOOL_OUTPUT_NAMESPACE) == keys
    assert again.messages[2].text == res.messages[2].text
