from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from tinyagents_nb.harness import (
    AssistantMessage,
    ConfigurationError,
    Message,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    ProviderError,
    RunContext,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from tinyagents_nb.harness.events import ContextPressure
from tinyagents_nb.harness.memory import (
    SUMMARY_HEADER,
    SUMMARY_TAG,
    CompressionProvenance,
    ConcatSummarizer,
    ModelSummarizer,
    SummarizationMiddleware,
    SummarizationPolicy,
    Summarizer,
    SummaryPlan,
    SummaryRecord,
)
from tinyagents_nb.harness.models import HeuristicCounter, TokenEstimator
from tinyagents_nb.harness.runtime import RETRIEVED_TAG
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel


def t(n: int) -> str:
    """Text the heuristic counter charges exactly ``n`` tokens for."""
    return "x" * (4 * n)


def est() -> TokenEstimator:
    return TokenEstimator(HeuristicCounter())


def calls(*ids: str, n: int = 5) -> list[Message]:
    """An assistant turn calling ``ids`` plus one result per call."""
    turn = AssistantMessage(tool_calls=[ToolCall(id=i, name="f", arguments={"q": i}) for i in ids])
    return [turn, *(ToolMessage(tool_call_id=i, name="f", text=t(n)) for i in ids)]


SYS = SystemMessage(text=t(10))


def transcript() -> list[Message]:
    return [
        SYS,
        UserMessage(text=t(200)),  # 1
        AssistantMessage(text=t(200)),  # 2
        UserMessage(text=t(200)),  # 3
        *calls("a", "b"),  # 4, 5, 6
        AssistantMessage(text=t(10)),  # 7
        UserMessage(text=t(5)),  # 8: current turn
    ]


# ------------------------------------------------------------------------------------------ policy
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "trigger_tokens or context_window"),
        ({"trigger_tokens": 0}, "trigger_tokens"),
        ({"trigger_tokens": True}, "trigger_tokens"),
        ({"context_window": -1}, "context_window"),
        ({"trigger_tokens": 10, "keep_last": -1}, "keep_last"),
        ({"context_window": 10, "threshold_fraction": 0}, "threshold_fraction"),
        ({"context_window": 10, "threshold_fraction": 1.5}, "threshold_fraction"),
        ({"context_window": 10, "threshold_fraction": True}, "threshold_fraction"),
    ],
)
def test_policy_validation(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        SummarizationPolicy(**kwargs)  # type: ignore[arg-type]


def test_trigger_math() -> None:
    windowed = SummarizationPolicy(context_window=1_001, threshold_fraction=0.9)
    assert windowed.trigger_budget == 900  # floor(900.9)
    assert (windowed.is_over(899), windowed.is_over(900)) == (False, True)  # window: >= budget
    absolute = SummarizationPolicy(trigger_tokens=500)
    assert absolute.trigger_budget == 500
    assert (absolute.is_over(500), absolute.is_over(501)) == (False, True)  # absolute: > trigger
    both = SummarizationPolicy(trigger_tokens=10, context_window=1_000)
    assert both.trigger_budget == 900  # the window wins
    assert absolute.with_context_window(2_000).trigger_budget == 1_800
    assert absolute.trigger_budget == 500  # frozen value, replaced not mutated


def test_from_profile() -> None:
    profile = ModelProfile(name="m", provider="p", context_window=10_000)
    policy = SummarizationPolicy.from_profile(profile, 0.8, keep_last=3)
    assert (policy.trigger_budget, policy.keep_last, policy.context_window) == (8_000, 3, 10_000)
    unknown = ModelProfile(name="m", provider="p")
    with pytest.raises(ConfigurationError, match="trigger_tokens or context_window"):
        SummarizationPolicy.from_profile(unknown)
    assert SummarizationPolicy.from_profile(unknown, trigger_tokens=77).trigger_budget == 77


def test_should_summarize_uses_the_exact_estimate() -> None:
    e, messages = est(), transcript()
    tokens = e.estimate(messages)
    assert tokens == 13 + 3 * 203 + e.count_message(messages[4]) + 2 * 9 + 13 + 8 + 3
    assert SummarizationPolicy(trigger_tokens=tokens - 1, keep_last=2).should_summarize(messages, e)
    assert not SummarizationPolicy(trigger_tokens=tokens, keep_last=2).should_summarize(messages, e)
    # over budget, but nothing old enough to summarize
    assert not SummarizationPolicy(trigger_tokens=1, keep_last=20).should_summarize(messages, e)


def test_plan_keeps_system_current_turn_and_recent() -> None:
    messages = transcript()
    plan = SummarizationPolicy(trigger_tokens=1, keep_last=2).plan(messages)
    assert plan.indices == (1, 2, 3, 4, 5, 6)
    assert plan.keep == (SYS, messages[7], messages[8])
    assert plan.insert_at == 1
    out = plan.apply("short")
    assert out[0] is SYS
    assert isinstance(out[1], SystemMessage)
    assert out[1].tags == (SUMMARY_TAG,)
    assert out[1].text == f"{SUMMARY_HEADER}\nshort"
    assert out[2:] == [messages[7], messages[8]]


def test_plan_moves_the_split_to_keep_tool_pairs_together() -> None:
    messages = transcript()
    # keep_last=3 would cut between the call (4) and its results (5, 6): the split moves to before 4
    plan = SummarizationPolicy(trigger_tokens=1, keep_last=3).plan(messages)
    assert plan.indices == (1, 2, 3)
    assert plan.keep[1:4] == tuple(messages[4:7])
    assert plan.keep[-1] is messages[8]


def test_plan_lifts_out_the_current_user_turn() -> None:
    messages: list[Message] = [
        SYS,
        UserMessage(text="old"),
        AssistantMessage(text="a"),
        UserMessage(text="now"),
        *calls("c"),
    ]
    plan = SummarizationPolicy(trigger_tokens=1, keep_last=0).plan(messages)
    assert [m.text for m in plan.keep] == [SYS.text, "now"]
    assert plan.indices == (1, 2, 4, 5)  # the in-turn tool round is summarized, the question is not


def test_plan_is_empty_when_nothing_is_old() -> None:
    messages: list[Message] = [SYS, UserMessage(text="hi")]
    plan = SummarizationPolicy(trigger_tokens=1).plan(messages)
    assert not plan
    assert plan == SummaryPlan(keep=tuple(messages), insert_at=1)


def test_plan_folds_a_previous_summary_first() -> None:
    old = SystemMessage(text=f"{SUMMARY_HEADER}\n[msg-0] user: earlier", tags=(SUMMARY_TAG,))
    messages: list[Message] = [SYS, old, UserMessage(text="q1"), AssistantMessage(text="a1"), UserMessage(text="q2")]
    plan = SummarizationPolicy(trigger_tokens=1, keep_last=0).plan(messages)
    assert plan.summarize[0] is old
    assert plan.keep == (SYS, messages[4])
    # a previous summary alone is not worth re-summarizing
    assert not SummarizationPolicy(trigger_tokens=1, keep_last=0).plan([SYS, old, UserMessage(text="q")])


# ------------------------------------------------------------------------------------------ summarizers
@pytest.mark.anyio
async def test_concat_summarizer_renders_one_line_per_message() -> None:
    old = SystemMessage(text=f"{SUMMARY_HEADER}\n[msg-0] user: before", tags=(SUMMARY_TAG,))
    messages: list[Message] = [
        old,
        UserMessage(text="find\nthe file"),
        AssistantMessage(text="ok", reasoning="think", tool_calls=[ToolCall(id="c1", name="grep", arguments={"p": 1})]),
        ToolMessage(tool_call_id="c1", name="grep", text="y" * 30, is_error=True),
    ]
    text = await ConcatSummarizer(max_chars=10).summarize(messages)
    assert text.splitlines() == [
        SUMMARY_HEADER,
        "[msg-0] user: before",
        "[msg-1] user: find the f… (+3 chars)",
        '[msg-2] assistant: ok (reasoning: think) -> grep[c1]({"p": 1})',
        "[msg-3] tool grep (c1) error: yyyyyyyyyy… (+20 chars)",
    ]
    assert isinstance(ConcatSummarizer(), Summarizer)
    with pytest.raises(ConfigurationError, match="at least one message"):
        await ConcatSummarizer().summarize([])
    with pytest.raises(ConfigurationError, match="max_chars"):
        ConcatSummarizer(max_chars=-1)


@pytest.mark.anyio
async def test_model_summarizer_asks_the_model_and_records_usage() -> None:
    usage = Usage(input_tokens=40, output_tokens=7)
    model = ScriptedModel([ModelResponse(message=AssistantMessage(text=" the gist "), usage=usage)], model_name="cheap")
    summarizer = ModelSummarizer(model, instructions="Be brief.", max_output_tokens=64)
    ctx = RunContext()
    text = await summarizer.summarize([UserMessage(text="hello"), AssistantMessage(text="hi")], ctx=ctx)
    assert text == "the gist"
    request: ModelRequest = model.requests[0]
    assert request.max_output_tokens == 64
    assert [m.role for m in request.messages] == ["system", "user"]
    assert request.messages[0].text == "Be brief."
    assert request.messages[1].text == "[msg-0] user: hello\n[msg-1] assistant: hi"
    assert ctx.usage.total() == usage
    assert summarizer.name == "model:cheap"


@pytest.mark.anyio
async def test_model_summarizer_errors() -> None:
    with pytest.raises(ConfigurationError, match="ChatModel"):
        ModelSummarizer(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="max_output_tokens"):
        ModelSummarizer(ScriptedModel([]), max_output_tokens=0)
    empty = ModelSummarizer(ScriptedModel(["  "]))
    with pytest.raises(ProviderError, match="empty summary"):
        await empty.summarize([UserMessage(text="x")])  # no ctx: nothing recorded, still an error
    with pytest.raises(ConfigurationError, match="at least one"):
        await empty.summarize([])


# ------------------------------------------------------------------------------------------ provenance
def test_provenance_is_bounded_and_ordered() -> None:
    plan = SummaryPlan(summarize=(UserMessage(text="a"),), indices=(3,))
    records = [
        SummaryRecord.create(plan, f"s{i}", summarizer="concat", tokens_before=100, tokens_after=10 + i)
        for i in range(3)
    ]
    assert len({r.id for r in records}) == 3
    assert (records[0].first_index, records[0].last_index, records[0].message_count) == (3, 3, 1)
    log = CompressionProvenance(max_records=2)
    for r in records:
        log.append(r)
    assert (len(log), log.evicted, log.max_records) == (2, 1, 2)
    assert [r.summary for r in log] == ["s1", "s2"]
    assert log.latest is records[2]
    assert log.summarized_messages == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        records[0].summary = "x"  # type: ignore[misc]
    with pytest.raises(ConfigurationError):
        CompressionProvenance(max_records=0)


# ------------------------------------------------------------------------------------------ middleware
class _Failing:
    name = "failing"

    async def summarize(self, messages: Sequence[Message]) -> str:
        raise ProviderError("summarizer down")


@pytest.mark.anyio
async def test_middleware_compacts_over_trigger_only() -> None:
    e, messages = est(), transcript()
    tokens = e.estimate(messages)
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    calm = SummarizationMiddleware(SummarizationPolicy(trigger_tokens=tokens, keep_last=2), estimator=e)
    request = ModelRequest(messages=messages)
    assert await calm.before_model(ctx, request) is request
    assert rec.events == []

    mw = SummarizationMiddleware(SummarizationPolicy(trigger_tokens=tokens - 1, keep_last=2), estimator=e)
    out = await mw.before_model(ctx, request)
    assert [m.role for m in out.messages] == ["system", "system", "assistant", "user"]
    (event,) = rec.events
    assert isinstance(event, ContextPressure)
    assert (event.action, event.tokens_before, event.removed_messages) == ("summarize", tokens, 6)
    assert event.tokens_after == e.estimate(out.messages) < tokens
    record = mw.provenance.latest
    assert record is not None
    assert record.summarizer == "concat"
    assert record.run_id == ctx.run_id
    assert (record.tokens_before, record.tokens_after, record.first_index, record.last_index) == (
        tokens, event.tokens_after, 1, 6,
    )  # fmt: skip


@pytest.mark.anyio
async def test_middleware_summarizer_failure_policies() -> None:
    e, messages = est(), transcript()
    tokens = e.estimate(messages)
    policy = SummarizationPolicy(trigger_tokens=tokens - 250, keep_last=2)
    request = ModelRequest(messages=messages)
    ctx = RunContext()
    rec = EventRecorder(ctx.events)

    with pytest.raises(ProviderError):
        await SummarizationMiddleware(policy, _Failing(), estimator=e, on_failure="abort").before_model(ctx, request)
    same = await SummarizationMiddleware(policy, _Failing(), estimator=e, on_failure="pass_through").before_model(
        ctx, request
    )
    assert same is request
    trimmed = await SummarizationMiddleware(policy, _Failing(), estimator=e).before_model(ctx, request)
    # fallback trim: drop the oldest turns (user 1, then assistant 2) until under the trigger budget
    assert trimmed.messages == [messages[0], *messages[3:]]
    assert [(ev.action, ev.removed_messages) for ev in rec.events if isinstance(ev, ContextPressure)] == [
        ("summarize", 0),
        ("trim", 2),
    ]
    assert "summarizer down" in rec.events[0].detail  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="on_failure"):
        SummarizationMiddleware(policy, on_failure="retry")  # type: ignore[arg-type]


def test_retrieved_user_messages_are_not_the_current_turn() -> None:
    messages: list[Message] = [SYS, UserMessage(text="q"), UserMessage(text="doc", tags=(RETRIEVED_TAG,))]
    plan = SummarizationPolicy(trigger_tokens=1, keep_last=0).plan(messages)
    assert plan.keep == (SYS, messages[1])
    assert plan.summarize == (messages[2],)
