"""Guardrails through the public API: input, output and tool guardrails trip with a typed error and an event."""

from __future__ import annotations

from typing import Any

import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    AgentRun,
    ConfigurationError,
    GuardrailTripped,
    RunContext,
    RunError,
    TinyAgentsError,
    ToolCall,
    ToolResult,
    event_to_dict,
    tool,
)
from tinyagents_nb.harness.events import GuardrailTrippedEvent
from tinyagents_nb.harness.middleware import (
    GuardrailResult,
    GuardrailsMiddleware,
    InputGuardrail,
    OutputGuardrail,
    ToolGuardrail,
)
from tinyagents_nb.harness.observability import event_from_dict
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel

pytestmark = pytest.mark.anyio


@tool
def shell(command: str) -> str:
    """Run a shell command (pretend)."""
    return f"ran {command}; password=hunter2"


async def run_of(harness: AgentHarness[Any], text: str, ctx: RunContext[Any] | None = None) -> AgentRun:
    """The run whatever its outcome (``invoke`` would raise the run's error)."""
    run, _ = await harness.invoke_with_status(ctx or RunContext(), text)
    return run


def no_secrets(ctx: RunContext[Any], text: str) -> str | None:
    return "mentions a password" if "password" in text.lower() else None


async def test_input_guardrail_trips_before_any_model_call() -> None:
    model = ScriptedModel(["never sent"])
    harness = AgentHarness(
        model=model, middleware=[GuardrailsMiddleware(input=[InputGuardrail("secrets", no_secrets)])]
    )
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    run = await run_of(harness, ctx=ctx, text="my password is 123")
    assert run.status == "failed"
    error = run.error
    assert isinstance(error, GuardrailTripped)
    assert isinstance(error, RunError)
    assert isinstance(error, TinyAgentsError)
    assert (error.guardrail, error.stage, error.reason) == ("secrets", "input", "mentions a password")
    assert "secrets" in str(error)
    assert "mentions a password" in str(error)
    assert model.requests == []  # the model never saw the input
    (event,) = rec.of_kind("guardrail.tripped")
    assert isinstance(event, GuardrailTrippedEvent)
    assert (event.guardrail, event.stage, event.action) == ("secrets", "input", "raised")
    assert event_from_dict(event_to_dict(event)) == event  # journals can rebuild it


async def test_passing_guardrails_change_nothing_and_async_checks_work() -> None:
    seen: list[str] = []

    async def record(ctx: RunContext[Any], text: str) -> GuardrailResult:
        seen.append(text)
        return GuardrailResult.passed()

    harness = AgentHarness(
        model=ScriptedModel(["fine answer"]),
        middleware=[
            GuardrailsMiddleware(input=[InputGuardrail("rec", record)], output=[OutputGuardrail("rec", record)])
        ],
    )
    run = await harness.invoke("hello")
    assert run.status == "completed"
    assert run.final_text == "fine answer"
    assert seen == ["hello", "fine answer"]


async def test_output_guardrail_keeps_the_blocked_answer_out_of_the_transcript() -> None:
    model = ScriptedModel(["the password is hunter2"])
    harness = AgentHarness(
        model=model, middleware=[GuardrailsMiddleware(output=[OutputGuardrail("secrets", no_secrets)])]
    )
    run = await run_of(harness, "tell me")
    assert isinstance(run.error, GuardrailTripped)
    assert run.error.stage == "output"
    assert all("hunter2" not in m.text for m in run.messages)
    assert run.final_text == ""


async def test_output_guardrail_skips_turns_that_call_tools() -> None:
    checked: list[str] = []

    def check(ctx: RunContext[Any], text: str) -> None:
        checked.append(text)

    model = ScriptedModel([ScriptedModel.tool_call("shell", {"command": "ls"}, text="calling"), "done"])
    harness = AgentHarness(
        model=model, tools=[shell], middleware=[GuardrailsMiddleware(output=[OutputGuardrail("o", check)])]
    )
    run = await harness.invoke("go")
    assert run.status == "completed"
    assert checked == ["done"]


async def test_tool_input_guardrail_refuses_the_call_before_it_runs() -> None:
    ran: list[str] = []

    @tool
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    def only_tmp(ctx: RunContext[Any], call: ToolCall) -> GuardrailResult | None:
        path = str(call.arguments.get("path", ""))
        return None if path.startswith("/tmp/") else GuardrailResult.block("outside /tmp", path=path)

    model = ScriptedModel([ScriptedModel.tool_call("delete", {"path": "/etc/passwd"}), "never"])
    guard = ToolGuardrail("sandbox", check_call=only_tmp, tools=frozenset({"delete"}))
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    harness = AgentHarness(model=model, tools=[delete], middleware=[GuardrailsMiddleware(tools=[guard])])
    run = await run_of(harness, ctx=ctx, text="clean up")
    assert ran == []
    assert isinstance(run.error, GuardrailTripped)
    assert (run.error.stage, run.error.tool_name, run.error.info) == ("tool_input", "delete", {"path": "/etc/passwd"})
    (event,) = rec.of_kind("guardrail.tripped")
    assert event.tool_name == "delete"
    assert event.call_id
    assert rec.of_kind("tool.started") == []


async def test_tool_output_guardrail_rejects_and_the_run_goes_on() -> None:
    def scan(ctx: RunContext[Any], call: ToolCall, result: ToolResult) -> str | None:
        return "leaks a credential" if "password=" in result.text else None

    model = ScriptedModel([ScriptedModel.tool_call("shell", {"command": "env"}), "I could not read it"])
    guard = ToolGuardrail("dlp", check_result=scan, on_trip="reject")
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    harness = AgentHarness(model=model, tools=[shell], middleware=[GuardrailsMiddleware(tools=[guard])])
    run = await run_of(harness, ctx=ctx, text="show env")
    assert run.status == "completed"
    tool_message = model.requests[1].messages[-1]
    assert tool_message.role == "tool"
    assert "hunter2" not in tool_message.text
    assert "withheld by guardrail 'dlp'" in tool_message.text
    (event,) = rec.of_kind("guardrail.tripped")
    assert event.action == "rejected"
    assert event.stage == "tool_output"


async def test_tool_output_guardrail_raises_by_default() -> None:
    guard = ToolGuardrail("dlp", check_result=lambda ctx, call, result: "leak" if "password" in result.text else None)
    model = ScriptedModel([ScriptedModel.tool_call("shell", {"command": "env"}), "never"])
    run = await run_of(AgentHarness(model=model, tools=[shell], middleware=[GuardrailsMiddleware(tools=[guard])]), "x")
    assert isinstance(run.error, GuardrailTripped)
    assert run.error.stage == "tool_output"
    assert all("hunter2" not in m.text for m in run.messages)


async def test_a_failing_check_fails_closed() -> None:
    def broken(ctx: RunContext[Any], text: str) -> None:
        raise RuntimeError("classifier down")

    model = ScriptedModel(["never"])
    harness = AgentHarness(model=model, middleware=[GuardrailsMiddleware(input=[InputGuardrail("b", broken)])])
    run = await run_of(harness, "x")
    assert run.status == "failed"
    assert isinstance(run.error, RuntimeError)
    assert model.requests == []


def test_bad_configuration_is_rejected() -> None:
    with pytest.raises(ConfigurationError):
        ToolGuardrail("empty")
    with pytest.raises(ConfigurationError):
        ToolGuardrail("x", check_call=lambda ctx, call: None, on_trip="ignore")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        GuardrailsMiddleware(input=[OutputGuardrail("wrong", no_secrets)])  # type: ignore[list-item]
