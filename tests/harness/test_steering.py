from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest
from pydantic import ValidationError

from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    ConfigurationError,
    InjectMessage,
    Message,
    ModelRequest,
    ModelResponse,
    Pause,
    Resume,
    RunCancelled,
    RunConfig,
    RunContext,
    SteeringError,
    SteeringHandle,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    tool,
)
from tinyagents_nb.harness.steering import (
    Cancel,
    Redirect,
    SetMetadata,
    SteeringCommand,
    SteeringPolicy,
    steering_from_dict,
    steering_to_dict,
)
from tinyagents_nb.harness.testkit import EventRecorder, FunctionModel, ScriptedModel

pytestmark = pytest.mark.anyio


@tool
def noop() -> str:
    """Do nothing."""
    return "ok"


def steered(policy: SteeringPolicy | None = None) -> tuple[RunContext[None], SteeringHandle]:
    handle = SteeringHandle(policy or SteeringPolicy.allow_all())
    return RunContext(config=RunConfig(metadata={"a": 1})).with_steering(handle), handle


@pytest.mark.parametrize(
    "command",
    [
        Pause(reason="look"),
        Resume(),
        Cancel(reason="stop"),
        InjectMessage(message=UserMessage(text="also check B")),
        Redirect(instruction="focus on costs"),
        SetMetadata(metadata={"priority": "high"}),
    ],
)
async def test_commands_round_trip_through_json(command: SteeringCommand) -> None:
    data = steering_to_dict(command)
    assert data["command"] == command.command
    assert steering_from_dict(data) == command


async def test_bad_commands_are_rejected() -> None:
    with pytest.raises(ValidationError):
        steering_from_dict({"command": "explode"})
    with pytest.raises(ConfigurationError):
        SteeringHandle().send("pause")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="unknown steering kind"):
        SteeringPolicy().allow("teleport")
    with pytest.raises(ConfigurationError, match="not JSON"):
        SetMetadata(metadata={"x": object()})


async def test_a_disallowed_command_is_rejected_and_the_run_goes_on() -> None:
    ctx, handle = steered(SteeringPolicy().allow("redirect"))
    rec = EventRecorder(ctx.events)
    model = ScriptedModel(["done"])
    first = handle.send(Redirect(instruction="first"))
    refused = handle.send(SetMetadata(metadata={"b": 2}))
    assert (first.status, refused.status, refused.accepted) == ("queued", "queued", None)
    run = await AgentHarness(model=model).invoke_in_context(ctx, "go")
    assert run.status == "completed"
    assert run.final_text == "done"
    assert dict(ctx.config.metadata) == {"a": 1}  # the refused command changed nothing
    assert model.requests[0].messages[-1] == SystemMessage(text="[steering:redirect] first")  # the allowed one applied
    assert (first.status, first.accepted, first.error) == ("applied", True, None)
    assert (refused.status, refused.accepted, refused.done) == ("rejected", False, True)
    assert isinstance(refused.error, SteeringError)
    assert "`set_metadata` is not permitted" in refused.error.message
    assert refused.wait(0)
    applied = rec.of_kind("steering.applied")
    assert [(e.command, e.accepted) for e in applied] == [("redirect", True), ("set_metadata", False)]  # type: ignore[attr-defined]
    assert "not permitted" in applied[1].detail  # type: ignore[attr-defined]
    assert SteeringPolicy().permits("pause") is False


async def test_a_stream_reports_rejection_through_the_receipt() -> None:
    ctx, _ = steered(SteeringPolicy())  # accepts nothing
    stream = AgentHarness(model=ScriptedModel(["fine"])).invoke_streaming("go", context=ctx)
    receipt = stream.pause("hold on")
    run = await stream
    assert run.final_text == "fine"
    assert receipt.status == "rejected"
    assert receipt.command == Pause(reason="hold on")


async def test_commands_after_a_cancel_in_the_same_batch_are_rejected() -> None:
    ctx, handle = steered()
    cancel = handle.send(Cancel(reason="stop"))
    late = handle.send(Redirect(instruction="too late"))
    with pytest.raises(RunCancelled):
        await AgentHarness(model=ScriptedModel(["never"])).invoke_in_context(ctx, "go")
    assert cancel.status == "applied"
    assert late.status == "rejected"
    assert late.error is not None


def _call_turn(*ids: str) -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCall(id=i, name="noop") for i in ids])


def _result(call_id: str) -> ToolMessage:
    return ToolMessage(tool_call_id=call_id, name="noop", text="ok")


@pytest.mark.parametrize(
    "bad",
    [
        [_result("ghost")],  # an orphan tool result
        [_call_turn("x")],  # an unanswered tool call
        [_call_turn("x", "y"), _result("x")],  # half answered
        [_call_turn("x"), _result("y")],  # answered by the wrong id
        [_call_turn("x"), _result("x"), _result("x")],  # answered twice
    ],
)
async def test_injections_that_would_break_the_transcript_are_rejected(bad: list[Message]) -> None:
    ctx, handle = steered()
    rec = EventRecorder(ctx.events)
    model = ScriptedModel(["done"])
    receipts = [handle.send(InjectMessage(message=m)) for m in bad]
    ok = handle.send(InjectMessage(message=UserMessage(text="still here")))
    run = await AgentHarness(model=model).invoke_in_context(ctx, "go")
    assert run.status == "completed"
    sent = model.requests[0].messages
    assert [m.role for m in sent] == ["user", "user"]  # nothing of the bad batch reached the provider
    assert sent[-1] == UserMessage(text="still here")
    assert ok.status == "applied"
    for receipt in receipts:
        assert receipt.status == "rejected"
        assert isinstance(receipt.error, SteeringError)
    events = rec.of_kind("steering.applied")
    assert [e.accepted for e in events] == [False] * len(bad) + [True]  # type: ignore[attr-defined]


async def test_a_complete_injected_tool_exchange_is_accepted() -> None:
    ctx, handle = steered()
    model = ScriptedModel(["done"])
    exchange = [_call_turn("x", "y"), _result("y"), _result("x")]
    receipts = handle.send_all(InjectMessage(message=m) for m in exchange)
    await AgentHarness(model=model).invoke_in_context(ctx, "go")
    assert list(model.requests[0].messages[1:]) == exchange
    assert [r.status for r in receipts] == ["applied"] * 3


def test_inject_message_needs_a_message() -> None:
    with pytest.raises(ConfigurationError, match="must be a Message"):
        InjectMessage(message="hi")  # type: ignore[arg-type]


async def test_injected_message_is_in_the_very_next_request() -> None:
    ctx, handle = steered()
    requests: list[ModelRequest] = []

    def reply(request: ModelRequest) -> ModelResponse | str:
        requests.append(request)
        if len(requests) == 1:
            handle.send(InjectMessage(message=UserMessage(text="injected!")))
            handle.send(Redirect(instruction="be brief"))
            handle.send(SetMetadata(metadata={"b": 2}))
            return ScriptedModel.tool_call("noop", {})
        return "done"

    rec = EventRecorder(ctx.events)
    await AgentHarness(model=FunctionModel(reply), tools=[noop]).invoke_in_context(ctx, "go")
    second = requests[1].messages
    assert second[-2] == UserMessage(text="injected!")
    assert second[-1] == SystemMessage(text="[steering:redirect] be brief")
    assert dict(ctx.config.metadata) == {"a": 1, "b": 2}
    assert [e.command for e in rec.of_kind("steering.applied")] == [  # type: ignore[attr-defined]
        "inject_message",
        "redirect",
        "set_metadata",
    ]


async def test_pause_latches_until_resume_from_another_thread() -> None:
    ctx, handle = steered()
    calls: list[int] = []
    paused_seen = threading.Event()

    def reply(request: ModelRequest) -> ModelResponse | str:
        calls.append(1)
        if len(calls) == 1:
            handle.send(Pause(reason="review"))
            handle.send(Resume())  # a resume in the same batch releases it ...
            handle.send(Pause(reason="really"))  # ... and a later pause latches again
            return ScriptedModel.tool_call("noop", {})
        return "resumed"

    harness = AgentHarness(model=FunctionModel(reply), tools=[noop])
    stream = harness.invoke_streaming("go", context=ctx)

    async def watch() -> None:
        async for event in stream:
            if event.kind == "steering.applied" and getattr(event, "detail", "") == "really":
                paused_seen.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        with anyio.fail_after(5):
            await anyio.to_thread.run_sync(paused_seen.wait)
        await anyio.sleep(0.1)
        assert len(calls) == 1  # held at the checkpoint: no model call while paused
        assert handle.is_paused
        assert stream.status.phase == "paused"
        threading.Thread(target=handle.send, args=(Resume(),)).start()
    run = await stream.result()
    assert run.final_text == "resumed"
    assert len(calls) == 2
    assert not handle.is_paused


async def test_stop_while_paused_cancels_promptly() -> None:
    ctx, handle = steered()
    handle.send(Pause())
    timer = threading.Timer(0.1, ctx.cancellation.cancel, args=("stop button",))
    timer.start()
    with anyio.fail_after(5):
        run, _ = await AgentHarness(model=ScriptedModel(["never"])).invoke_with_status(ctx, "go")
    timer.join()
    assert run.status == "cancelled"


async def test_cancel_command_cancels_the_run_and_token() -> None:
    ctx, handle = steered()
    handle.send(Cancel(reason="enough"))
    with pytest.raises(RunCancelled, match="enough"):
        await AgentHarness(model=ScriptedModel(["never"])).invoke_in_context(ctx, "go")
    assert ctx.cancellation.is_cancelled


async def test_pause_respects_the_wall_clock() -> None:
    from tinyagents_nb.harness import RunTimeout

    handle = SteeringHandle(SteeringPolicy.allow_all())
    ctx = RunContext(config=RunConfig(timeout_s=0.1)).with_steering(handle)
    handle.send(Pause())
    with anyio.fail_after(5), pytest.raises(RunTimeout):
        await AgentHarness(model=ScriptedModel(["never"])).invoke_in_context(ctx, "go")


async def test_clones_share_one_queue() -> None:
    handle = SteeringHandle(SteeringPolicy.allow_all())
    clone = handle.clone()
    clone.send(Pause())
    assert handle.pending == 1
    assert [c.command for c in handle.drain()] == ["pause"]
    assert clone.pending == 0


def _unused(_: Any) -> None:
    return None


async def test_stream_handle_steers_pauses_and_resumes() -> None:
    ctx, _ = steered()
    requests: list[ModelRequest] = []
    stream_box: list[Any] = []

    def reply(request: ModelRequest) -> ModelResponse | str:
        requests.append(request)
        if len(requests) == 1:
            stream_box[0].steer("and B too")
            return ScriptedModel.tool_call("noop", {})
        return "done"

    stream = AgentHarness(model=FunctionModel(reply), tools=[noop]).invoke_streaming("go", context=ctx)
    stream_box.append(stream)
    run = await stream
    assert run.final_text == "done"
    assert requests[1].messages[-1] == UserMessage(text="and B too")
    assert stream.done


async def test_stream_without_steering_refuses_with_a_hint() -> None:
    stream = AgentHarness(model=ScriptedModel(["x"])).invoke_streaming("go")
    with pytest.raises(SteeringError) as info:
        stream.pause()
    assert info.value.hint
    await stream.result()


async def test_new_root_shares_session_handles_but_not_the_token() -> None:
    session = RunContext(config=RunConfig(thread_id="nb", tags=["nb"]))
    a = session.new_root(tags=["a"])
    b = session.new_root(thread_id="other")
    assert a.events is session.events
    assert a.usage is session.usage
    assert a.stores is session.stores
    assert a.cancellation is not session.cancellation
    assert a.root_run_id == a.run_id
    assert a.depth == 0
    assert a.parent_run_id is None
    assert a.thread_id == "nb"
    assert b.thread_id == "other"
    assert a.tags == ("nb", "a")
    a.cancellation.cancel()
    assert not b.cancellation.is_cancelled
