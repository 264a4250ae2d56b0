from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from tinyagents_nb.harness import (
    AgentEvent,
    AssistantMessage,
    ChatModel,
    ConfigurationError,
    EventSink,
    InvalidIdError,
    ModelCompleted,
    ModelDelta,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    ModelStarted,
    ProviderError,
    RunCancelledEvent,
    RunCompleted,
    RunConfig,
    RunContext,
    RunFailed,
    RunId,
    RunStarted,
    SubAgentCompleted,
    SubAgentStarted,
    SystemMessage,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCompleted,
    ToolMessage,
    ToolResult,
    ToolStarted,
    Usage,
    UserMessage,
)
from tinyagents_nb.harness.models import ModelStreamItem, StreamFinish, StreamUsage, collect_stream
from tinyagents_nb.harness.runtime import RANDOM_IDS, SYSTEM_CLOCK, CallId, Clock, IdSource
from tinyagents_nb.harness.testkit import (
    DeterministicClock,
    DeterministicIds,
    EchoModel,
    EventRecorder,
    FakeTool,
    FunctionModel,
    ScriptedModel,
    SlowModel,
    StreamingMock,
    Trajectory,
)

pytestmark = pytest.mark.anyio


def req(text: str = "hi") -> ModelRequest:
    return ModelRequest(messages=[UserMessage(text=text)])


async def items_of(stream: AsyncIterator[ModelStreamItem]) -> list[ModelStreamItem]:
    return [item async for item in stream]


# ------------------------------------------------------------------------------------------ clock and ids
def test_system_clock_and_random_ids() -> None:
    assert isinstance(SYSTEM_CLOCK, Clock)
    assert isinstance(RANDOM_IDS, IdSource)
    assert abs(SYSTEM_CLOCK.time() - time.time()) < 5
    first = SYSTEM_CLOCK.monotonic()
    assert SYSTEM_CLOCK.monotonic() >= first
    run_ids = {RANDOM_IDS.run_id() for _ in range(100)}
    assert len(run_ids) == 100
    assert all(type(r) is RunId for r in run_ids)
    assert type(RANDOM_IDS.call_id()) is CallId


def test_deterministic_clock_steps_on_every_read() -> None:
    clock = DeterministicClock()
    assert isinstance(clock, Clock)
    assert clock.time() == 1_700_000_000.0
    assert clock.time() == pytest.approx(1_700_000_000.001)
    assert clock.monotonic() == pytest.approx(0.002)
    assert clock.elapsed == pytest.approx(0.003)
    assert clock.elapsed == pytest.approx(0.003)  # peeking does not advance
    clock.advance(10)
    assert clock.monotonic() == pytest.approx(10.003)


def test_deterministic_clock_is_reproducible_and_can_be_frozen() -> None:
    a, b = DeterministicClock(start=5.0, step=0.5), DeterministicClock(start=5.0, step=0.5)
    assert [a.time(), a.monotonic(), a.time()] == [b.time(), b.monotonic(), b.time()] == [5.0, 0.5, 6.0]
    frozen = DeterministicClock(start=0.0, step=0.0)
    assert {frozen.time() for _ in range(5)} == {0.0}


@pytest.mark.parametrize("kwargs", [{"step": -1.0}, {"start": float("nan")}, {"start": "now"}, {"step": True}])
def test_deterministic_clock_rejects_bad_input(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        DeterministicClock(**kwargs)


@pytest.mark.parametrize("seconds", [-1.0, float("inf"), True, "1"])
def test_deterministic_clock_never_goes_backwards(seconds: Any) -> None:
    clock = DeterministicClock()
    with pytest.raises(ConfigurationError):
        clock.advance(seconds)
    assert clock.elapsed == 0


def test_deterministic_ids_count_from_one() -> None:
    ids = DeterministicIds()
    assert isinstance(ids, IdSource)
    assert [ids.run_id(), ids.run_id(), ids.call_id(), ids.run_id(), ids.call_id()] == [
        "run-1",
        "run-2",
        "call-1",
        "run-3",
        "call-2",
    ]
    assert type(ids.run_id()) is RunId
    assert type(ids.call_id()) is CallId
    assert DeterministicIds().run_id() == "run-1"  # instances are independent
    prefixed = DeterministicIds("t")
    assert (prefixed.run_id(), prefixed.call_id()) == ("t-run-1", "t-call-1")
    RunConfig(run_id=DeterministicIds().run_id())  # valid where the loop uses them


def test_deterministic_ids_reject_bad_prefix() -> None:
    with pytest.raises(InvalidIdError):
        DeterministicIds("has space")
    with pytest.raises(ConfigurationError):
        DeterministicIds(3)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ ScriptedModel
def _rich_response() -> ModelResponse:
    return ModelResponse(
        message=AssistantMessage(
            text="Let me look that up for you, carefully.",
            reasoning="The user wants facts; call the lookup tool twice.",
            tool_calls=[
                ToolCall(id="c1", name="lookup", arguments={"q": "paris", "n": 3, "nested": {"a": [1, 2]}}),
                ToolCall(id="c2", name="clock", arguments={}),
            ],
        ),
        usage=Usage(input_tokens=120, output_tokens=40, cached_input_tokens=100, reasoning_tokens=12),
        finish_reason="tool_calls",
        model="scripted-x",
    )


EQUIVALENCE_CASES: list[ModelResponse | str] = [
    "hello world, this is longer than eight characters",
    "",
    _rich_response(),
    ScriptedModel.tool_call("lookup", {"q": "x"}, text="calling", usage=Usage(input_tokens=5, output_tokens=2)),
    ScriptedModel.text("final", usage=Usage(input_tokens=9, output_tokens=1), reasoning="think"),
    ModelResponse(message=AssistantMessage(tool_calls=[ToolCall(id="bad", name="t", raw_arguments="{not json")])),
    ModelResponse(  # signed thinking, as Anthropic returns it, survives streaming
        message=AssistantMessage(text="a", reasoning="r", blocks=[ThinkingBlock(text="r", signature="sig")])
    ),
]


@pytest.mark.parametrize("chunk_size", [8, 1, None])
@pytest.mark.parametrize("response", EQUIVALENCE_CASES)
async def test_scripted_stream_folds_to_the_invoke_response(response: ModelResponse | str, chunk_size: int) -> None:
    unary = await ScriptedModel([response], chunk_size=chunk_size).invoke(req())
    streamed = await collect_stream(ScriptedModel([response], chunk_size=chunk_size).stream(req()))
    assert streamed == unary


async def test_scripted_invoke_replays_in_order_and_str_is_shorthand() -> None:
    rich = _rich_response()
    model = ScriptedModel(["first", rich], model_name="m1")
    one = await model.invoke(req())
    assert one.message == AssistantMessage(text="first")
    assert (one.finish_reason, one.model, one.usage) == ("stop", "m1", Usage())
    assert await model.invoke(req()) is rich  # replayed as is
    assert model.remaining == 0
    assert isinstance(model, ChatModel)
    assert (model.model_name, model.provider, model.profile) == ("m1", "test", None)


async def test_scripted_stream_shape() -> None:
    model = ScriptedModel(
        [ScriptedModel.tool_call("lookup", {"q": "x"}, id="c9", text="abcdefghij", usage=Usage(input_tokens=3))],
        chunk_size=4,
    )
    items = await items_of(model.stream(req()))
    assert items[:3] == [TextDelta(text="abcd"), TextDelta(text="efgh"), TextDelta(text="ij")]
    head, *fragments = [i for i in items if isinstance(i, ToolCallDelta)]
    assert (head.index, head.id, head.name, head.arguments) == (0, "c9", "lookup", "")
    assert len(fragments) == 2
    assert all(f.id is None and f.name is None and f.arguments for f in fragments)
    assert "".join(f.arguments for f in fragments) == '{"q": "x"}'
    assert items[-2:] == [StreamUsage(usage=Usage(input_tokens=3)), StreamFinish(finish_reason="tool_calls")]


async def test_scripted_stream_reasoning_first_and_no_usage_item_when_empty() -> None:
    items = await items_of(ScriptedModel([ScriptedModel.text("ok", reasoning="hmm")]).stream(req()))
    assert items == [ThinkingDelta(text="hmm"), TextDelta(text="ok"), StreamFinish(finish_reason="stop", model=None)]


async def test_scripted_records_every_request_object() -> None:
    model = ScriptedModel(["a", "b", "c"])
    r1, r2, r3 = req("one"), req("two"), req("three")
    await model.invoke(r1)
    await items_of(model.stream(r2))
    await model.invoke(r3)
    assert model.calls == 3
    assert model.requests[0] is r1
    assert model.requests[1] is r2
    assert model.requests[2] is r3


async def test_scripted_exception_items_are_raised_on_their_call() -> None:
    boom = ProviderError("rate limited", status=429, retryable=True)
    model = ScriptedModel([boom, "after", TimeoutError("slow")])
    with pytest.raises(ProviderError) as info:
        await model.invoke(req())
    assert info.value is boom
    assert (await model.invoke(req())).message.text == "after"
    with pytest.raises(TimeoutError, match="slow"):
        await items_of(model.stream(req()))
    assert model.calls == 3


async def test_scripted_exhaustion_is_a_non_retryable_provider_error() -> None:
    model = ScriptedModel(["only", "two"])
    await model.invoke(req())
    await model.invoke(req())
    with pytest.raises(ProviderError, match=r"scripted model has no responses left \(2 used\)") as info:
        await model.invoke(req())
    assert (info.value.provider, info.value.retryable) == ("test", False)
    with pytest.raises(ProviderError, match="no responses left"):
        await items_of(model.stream(req()))
    assert model.calls == 4  # failed calls are recorded too
    with pytest.raises(ProviderError, match=r"\(0 used\)"):
        await ScriptedModel([]).invoke(req())


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (("just a string",), {}),
        ((ScriptedModel.text("x"),), {}),
        (([42],), {}),
        (([ValueError],), {}),  # a class, not an instance
        ((["x"],), {"chunk_size": 0}),
        ((["x"],), {"chunk_size": True}),
        ((["x"],), {"model_name": ""}),
        ((["x"],), {"profile": "big"}),
    ],
)
def test_scripted_rejects_bad_input(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        ScriptedModel(*args, **kwargs)


def test_scripted_convenience_constructors() -> None:
    a, b = ScriptedModel.tool_call("lookup", {"q": 1}), ScriptedModel.tool_call("lookup")
    (call_a,), (call_b,) = a.message.tool_calls, b.message.tool_calls
    assert call_a.id.startswith("call_")
    assert call_a.id != call_b.id
    assert (call_a.name, call_a.arguments, call_b.arguments, a.finish_reason) == ("lookup", {"q": 1}, {}, "tool_calls")
    assert ScriptedModel.tool_call("t", {}, id="fixed").message.tool_calls[0].id == "fixed"
    both = ScriptedModel.tool_calls([("a", {"x": 1}), ToolCall(id="k", name="b")], text="two")
    assert [(c.name, c.id) for c in both.message.tool_calls][1] == ("b", "k")
    assert both.message.text == "two"
    profile = ModelProfile(name="m", provider="test", context_window=1000)
    assert ScriptedModel([], profile=profile).profile is profile


# ------------------------------------------------------------------------------------------ StreamingMock
async def test_streaming_mock_chunks_words_and_answers_every_call() -> None:
    usage = Usage(input_tokens=4, output_tokens=3)
    model = StreamingMock("hello big  world", usage=usage)
    assert model.chunks == ("hello ", "big  ", "world")
    items = await items_of(model.stream(req()))
    assert items == [
        TextDelta(text="hello "),
        TextDelta(text="big  "),
        TextDelta(text="world"),
        StreamUsage(usage=usage),
        StreamFinish(finish_reason="stop", model="streaming-mock"),
    ]
    assert await model.invoke(req()) == await collect_stream(model.stream(req()))
    assert (await model.invoke(req())).message.text == "hello big  world"
    assert model.calls == 4


async def test_streaming_mock_explicit_chunks() -> None:
    model = StreamingMock(["a", "", "bc"])
    assert [i.text for i in await items_of(model.stream(req())) if isinstance(i, TextDelta)] == ["a", "bc"]
    with pytest.raises(ConfigurationError):
        StreamingMock(["a", 1])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError):
        StreamingMock("a", chunk_delay_s=-0.1)


async def test_streaming_mock_delay_really_waits_between_chunks() -> None:
    model = StreamingMock(["a", "b", "c"], chunk_delay_s=0.03)
    stamps: list[float] = []
    with anyio.fail_after(2):
        async for item in model.stream(req()):
            if isinstance(item, TextDelta):
                stamps.append(time.monotonic())
        assert stamps[2] - stamps[0] >= 0.055
        assert all(later - earlier >= 0.025 for earlier, later in itertools.pairwise(stamps))
        start = time.monotonic()
        await model.invoke(req())
        assert time.monotonic() - start >= 0.055  # two gaps, waited before the whole answer


async def test_streaming_mock_delay_is_cancellable() -> None:
    model = StreamingMock(["a", "b"], chunk_delay_s=5)
    start = time.monotonic()
    received: list[ModelStreamItem] = []
    with anyio.move_on_after(0.05) as scope:
        async for item in model.stream(req()):
            received.append(item)
    assert scope.cancelled_caught
    assert received == [TextDelta(text="a")]
    with pytest.raises(TimeoutError):
        with anyio.fail_after(0.05):
            await model.invoke(req())
    assert time.monotonic() - start < 1


# ------------------------------------------------------------------------------------------ SlowModel
async def test_slow_model_adds_latency_and_delegates() -> None:
    inner = ScriptedModel(["one", "two"], model_name="inner", profile=ModelProfile(name="inner", provider="test"))
    slow = SlowModel(inner, delay_s=0.04)
    assert isinstance(slow, ChatModel)
    assert (slow.model_name, slow.provider, slow.profile) == ("inner", "test", inner.profile)
    start = time.monotonic()
    assert (await slow.invoke(req())).message.text == "one"
    assert time.monotonic() - start >= 0.035
    assert (slow.calls, inner.calls) == (1, 1)


async def test_slow_model_spaces_stream_items() -> None:
    inner = ScriptedModel(["abcdefgh" * 2], chunk_size=8)
    slow = SlowModel(inner, chunk_delay_s=0.02)
    start = time.monotonic()
    items = await items_of(slow.stream(req()))
    assert len(items) == 3  # two text deltas and the finish marker
    assert time.monotonic() - start >= 0.035  # two gaps between three items
    assert await collect_stream(SlowModel(ScriptedModel(["abcdefgh" * 2])).stream(req())) == ModelResponse(
        message=AssistantMessage(text="abcdefgh" * 2), finish_reason="stop", model="scripted"
    )


async def test_slow_model_cancelled_during_delay_never_calls_inner() -> None:
    inner = ScriptedModel(["never"])
    slow = SlowModel(inner, delay_s=5)
    with anyio.move_on_after(0.03) as scope:
        await slow.invoke(req())
    assert scope.cancelled_caught
    with anyio.move_on_after(0.03):
        await items_of(slow.stream(req()))
    assert (slow.calls, inner.calls, inner.remaining) == (2, 0, 1)


async def test_slow_model_closes_the_inner_stream_when_abandoned() -> None:
    closed: list[bool] = []

    class Endless:
        model_name, provider = "endless", "test"

        async def invoke(self, request: ModelRequest) -> ModelResponse:
            raise NotImplementedError

        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
            try:
                while True:
                    yield TextDelta(text="x")
            finally:
                closed.append(True)

    async with aclosing(SlowModel(Endless()).stream(req())) as stream:
        async for _ in stream:
            break
    assert closed == [True]


def test_slow_model_rejects_bad_input() -> None:
    with pytest.raises(ConfigurationError):
        SlowModel("gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        SlowModel(EchoModel(), delay_s=-1)
    with pytest.raises(ConfigurationError):
        SlowModel(EchoModel(), chunk_delay_s=float("nan"))


# ------------------------------------------------------------------------------------------ EchoModel, FunctionModel
async def test_echo_model_repeats_the_last_user_message() -> None:
    model = EchoModel(prefix="echo: ")
    request = ModelRequest(
        messages=[
            SystemMessage(text="be brief please"),
            UserMessage(text="first question"),
            AssistantMessage(text="an answer"),
            UserMessage(text="second question here"),
            ToolMessage(tool_call_id="c", name="t", text="tool output"),
        ]
    )
    response = await model.invoke(request)
    assert response.message.text == "echo: second question here"
    assert response.usage == Usage(input_tokens=3 + 2 + 2 + 3 + 2, output_tokens=4)
    assert await collect_stream(model.stream(request)) == response
    assert (await EchoModel().invoke(ModelRequest(messages=[SystemMessage(text="s")]))).message.text == ""
    assert model.requests == [request, request]


async def test_function_model_sync_and_async() -> None:
    def sync_fn(request: ModelRequest) -> str:
        return f"saw {len(request.messages)} message(s)"

    async def async_fn(request: ModelRequest) -> ModelResponse:
        await anyio.lowlevel.checkpoint()
        return ScriptedModel.tool_call("lookup", {"q": request.messages[-1].text}, id="c1")

    sync_model = FunctionModel(sync_fn)
    response = await sync_model.invoke(req())
    assert (response.message.text, response.model, response.finish_reason) == ("saw 1 message(s)", "function", "stop")
    async_model = FunctionModel(async_fn, model_name="logic")
    answer = await async_model.invoke(req("paris"))
    assert answer.message.tool_calls == (ToolCall(id="c1", name="lookup", arguments={"q": "paris"}),)
    assert await collect_stream(async_model.stream(req("paris"))) == answer
    assert (async_model.calls, async_model.model_name) == (2, "logic")


async def test_function_model_errors() -> None:
    def failing(request: ModelRequest) -> str:
        raise ProviderError("down", status=503, retryable=True)

    with pytest.raises(ProviderError, match="down"):
        await FunctionModel(failing).invoke(req())
    with pytest.raises(ConfigurationError, match="must return"):
        await FunctionModel(lambda r: 42).invoke(req())  # type: ignore[arg-type, return-value]
    with pytest.raises(ConfigurationError):
        FunctionModel("not callable")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ FakeTool
async def test_fake_tool_satisfies_the_tool_protocol() -> None:
    tool = FakeTool("lookup", description="Find facts", parameters={"type": "object", "required": ["q"]}, timeout_s=2)
    assert isinstance(tool, Tool)
    assert (tool.name, tool.description, tool.timeout_s) == ("lookup", "Find facts", 2.0)
    assert tool.schema.name == "lookup"
    assert tool.schema.parameters == {"type": "object", "required": ["q"]}
    assert FakeTool("t").schema.parameters == {"type": "object", "properties": {}}


async def test_fake_tool_results_in_order_then_last_repeats() -> None:
    ctx = RunContext()
    failure = ToolResult.error("no such city")
    tool = FakeTool("lookup", ["first", failure, RuntimeError("crashed"), "last"])
    assert await tool.call(ctx, {"q": 1}) == ToolResult.ok("first")
    assert await tool.call(ctx, {"q": 2}) is failure
    with pytest.raises(RuntimeError, match="crashed"):
        await tool.call(ctx, {"q": 3})
    assert [(await tool.call(ctx, {})).text for _ in range(3)] == ["last"] * 3
    assert tool.calls == [{"q": 1}, {"q": 2}, {"q": 3}, {}, {}, {}]
    assert tool.contexts[0] is ctx
    assert (await FakeTool("t").call(ctx, {})).text == "ok"
    always_fails = FakeTool("t", [ValueError("bad")])
    for _ in range(2):
        with pytest.raises(ValueError, match="bad"):
            await always_fails.call(ctx, {})


async def test_fake_tool_callable_results() -> None:
    ctx = RunContext()
    doubled = FakeTool("double", lambda args: {"value": args["x"] * 2})
    result = await doubled.call(ctx, {"x": 21})
    assert (result.text, result.data, result.is_error) == ('{"value": 42}', {"value": 42}, False)

    async def answer(args: Mapping[str, Any]) -> str:
        await anyio.lowlevel.checkpoint()
        return f"hello {args['name']}"

    assert (await FakeTool("greet", answer).call(ctx, {"name": "ada"})).text == "hello ada"
    assert (await FakeTool("noop", lambda args: None).call(ctx, {})).text == ""


async def test_fake_tool_delay_waits_and_is_cancellable() -> None:
    ctx = RunContext()
    start = time.monotonic()
    await FakeTool("slow", ["done"], delay_s=0.03).call(ctx, {})
    assert time.monotonic() - start >= 0.025
    with anyio.move_on_after(0.03) as scope:
        await FakeTool("stuck", ["never"], delay_s=5).call(ctx, {})
    assert scope.cancelled_caught
    assert time.monotonic() - start < 1


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (("",), {}),
        (("t", "ok"), {}),
        (("t", [3]), {}),
        (("t",), {"delay_s": -1}),
        (("t",), {"timeout_s": 0}),
        (("t",), {"timeout_s": "soon"}),
    ],
)
def test_fake_tool_rejects_bad_input(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        FakeTool(*args, **kwargs)


# ------------------------------------------------------------------------------------------ EventRecorder
def _run_started(run: str, parent: str | None = None, root: str = "r", depth: int = 0) -> RunStarted:
    return RunStarted(run_id=run, parent_run_id=parent, root_run_id=root, depth=depth)


def test_recorder_collects_filters_and_detaches() -> None:
    sink = EventSink()
    with EventRecorder().attach(sink) as rec:
        sink.emit(_run_started("r"))
        sink.emit(ModelStarted(run_id="r", root_run_id="r", call_id="c1", model="m"))
        sink.emit(_run_started("c", parent="r", depth=1))
        assert rec.kinds() == ["run.started", "model.started", "run.started"]
        assert [e.run_id for e in rec.of_kind("run.started")] == ["r", "c"]
        assert [e.model for e in rec.of_type(ModelStarted)] == ["m"]
        assert [e.kind for e in rec.for_run("c")] == ["run.started"]
        assert len(rec) == 3
    sink.emit(_run_started("late"))
    assert len(rec) == 3  # detached on exit
    rec.clear()
    assert rec.events == []


def test_recorder_on_several_sinks_and_a_real_context() -> None:
    other = EventSink()
    ctx = RunContext(config=RunConfig(run_id="run-1"))
    rec = EventRecorder(ctx.events).attach(other)
    ctx.emit(RunStarted)
    ctx.child(run_id="run-2").emit(RunCompleted)
    other.emit(_run_started("x"))
    assert [(e.kind, e.run_id, e.parent_run_id) for e in rec.events] == [
        ("run.started", "run-1", None),
        ("run.completed", "run-2", "run-1"),
        ("run.started", "x", None),
    ]
    assert rec.trajectory().runs() == ["run-1", "run-2", "x"]
    rec.detach()
    ctx.emit(RunCompleted)
    assert len(rec) == 3
    with pytest.raises(ConfigurationError):
        EventRecorder().attach([])  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ Trajectory
def _tree(end: AgentEvent | None = None) -> list[AgentEvent]:
    """root r: model → lookup(paris) → sub-agent c (model, completes) → lookup(rome) → model → end."""
    lin: dict[str, Any] = {"run_id": "r", "root_run_id": "r"}
    child: dict[str, Any] = {"run_id": "c", "parent_run_id": "r", "root_run_id": "r", "depth": 1}
    events: list[AgentEvent] = [
        _run_started("r"),
        ModelStarted(**lin, call_id="m1", model="gpt"),
        *[ModelDelta(**lin, call_id="m1", delta=TextDelta(text=t)) for t in "abc"],
        ModelCompleted(**lin, call_id="m1", model="gpt"),
        ToolStarted(**lin, call_id="t1", tool_name="lookup", arguments={"q": "paris", "n": 1}),
        ToolCompleted(**lin, call_id="t1", tool_name="lookup", output="sunny"),
        SubAgentStarted(**lin, name="researcher", child_run_id="c"),
        _run_started("c", parent="r", depth=1),
        ModelStarted(**child, call_id="m2", model="mini"),
        ModelCompleted(**child, call_id="m2", model="mini"),
        RunCompleted(**child),
        SubAgentCompleted(**lin, name="researcher", child_run_id="c"),
        ToolStarted(**lin, call_id="t2", tool_name="lookup", arguments={"q": "rome", "n": 1}),
        ToolCompleted(**lin, call_id="t2", tool_name="lookup", output="rain"),
        ModelStarted(**lin, call_id="m3", model="gpt"),
        ModelCompleted(**lin, call_id="m3", model="gpt"),
    ]
    events.append(end if end is not None else RunCompleted(**lin, final_text="done"))
    return events


def test_trajectory_queries() -> None:
    traj = Trajectory.from_events(_tree())
    assert traj.root_run_id == "r"
    assert traj.runs() == ["r", "c"]
    assert traj.children_of("r") == ["c"]
    assert traj.children_of("c") == []
    assert traj.tool_calls("lookup") == [{"q": "paris", "n": 1}, {"q": "rome", "n": 1}]
    assert (traj.model_call_count(), traj.model_call_count(run_id="c")) == (3, 1)
    assert traj.kinds()[:3] == ["run.started", "model.started", "model.delta"]
    assert "model.delta x3" in traj.describe()
    assert "tool.started:lookup → tool.completed:lookup" in traj.describe()
    assert Trajectory.from_events([]).describe() == "(no events)"


def test_trajectory_positive_asserts_chain() -> None:
    traj = Trajectory.from_events(_tree())
    assert (
        traj.assert_tool_called("lookup")
        .assert_tool_called("lookup", times=2)
        .assert_tool_called("lookup", with_args={"q": "rome"})
        .assert_tool_called("lookup", times=2, with_args={"n": 1})
        .assert_tool_not_called("search")
        .assert_model_called_times(3)
        .assert_model_called_times(1, run_id="c")
        .assert_order(["run.started", "tool.completed:lookup", "subagent.started:researcher", "run.completed"])
        .assert_order(["model.started:gpt", "model.started:mini", "model.started:gpt"])
        .assert_order([])
        .assert_completed()
        .assert_completed(run_id="c")
    ) is traj


@pytest.mark.parametrize(
    ("check", "message"),
    [
        (lambda t: t.assert_tool_called("search"), "expected tool 'search' to be called at least once"),
        (lambda t: t.assert_tool_called("lookup", times=1), "called 2 time(s)"),
        (lambda t: t.assert_tool_called("lookup", with_args={"q": "oslo"}), "{'q': 'paris', 'n': 1}"),
        (lambda t: t.assert_tool_called("lookup", times=2, with_args={"q": "rome"}), "called 1 time(s)"),
        (lambda t: t.assert_tool_not_called("lookup"), "not to be called"),
        (lambda t: t.assert_model_called_times(2), "expected the model to be called 2 time(s)"),
        (lambda t: t.assert_model_called_times(3, run_id="c"), "in run 'c'"),
        (lambda t: t.assert_order(["tool.completed", "model.started:mini", "subagent.started"]), "subagent.started"),
        (lambda t: t.assert_order(["run.completed", "run.started"]), "no 'run.started' after 'run.completed'"),
        (lambda t: t.assert_order(["tool.completed:search"]), "matched 0 of 1"),
        (lambda t: t.assert_cancelled(), "to be cancelled, but it ended with: run.completed"),
        (lambda t: t.assert_failed(), "to fail"),
        (lambda t: t.assert_completed(run_id="ghost"), "no terminal event"),
    ],
)
def test_trajectory_asserts_fail_with_the_actual_sequence(check: Any, message: str) -> None:
    with pytest.raises(AssertionError) as info:
        check(Trajectory.from_events(_tree()))
    text = str(info.value)
    assert message in text
    assert "trajectory (19 events): run.started → model.started → model.delta x3 → model.completed" in text


def test_trajectory_terminal_asserts() -> None:
    failed = Trajectory.from_events(
        _tree(RunFailed(run_id="r", root_run_id="r", error_type="ProviderError", error="HTTP 500"))
    )
    failed.assert_failed().assert_failed("ProviderError").assert_failed(ProviderError).assert_completed(run_id="c")
    with pytest.raises(AssertionError, match=r"to complete, but it ended with: run.failed \(ProviderError: HTTP 500\)"):
        failed.assert_completed()
    with pytest.raises(AssertionError, match="to fail with TimeoutError"):
        failed.assert_failed(TimeoutError)
    cancelled = Trajectory.from_events(_tree(RunCancelledEvent(run_id="r", root_run_id="r", reason="stop clicked")))
    cancelled.assert_cancelled()
    with pytest.raises(AssertionError, match=r"run.cancelled \(stop clicked\)"):
        cancelled.assert_completed()
    both = Trajectory.from_events([*_tree(), RunFailed(run_id="r", root_run_id="r", error_type="X", error="late")])
    with pytest.raises(AssertionError, match=r"run\.completed, run\.failed"):
        both.assert_completed()
    unfinished = Trajectory.from_events(_tree()[:-1])
    with pytest.raises(AssertionError, match="no terminal event"):
        unfinished.assert_completed()
    with pytest.raises(AssertionError, match="no events were recorded"):
        Trajectory.from_events([]).assert_completed()


def test_trajectory_rejects_malformed_matchers() -> None:
    traj = Trajectory.from_events(_tree())
    with pytest.raises(ConfigurationError):
        traj.assert_order("run.started")
    with pytest.raises(ConfigurationError):
        traj.assert_order(["run.started", ""])
    with pytest.raises(ConfigurationError):
        traj.assert_order([":lookup"])
