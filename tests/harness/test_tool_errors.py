"""Reporting tool failures never fails on the report itself (a hostile ``__str__`` included)."""

from __future__ import annotations

import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    RunContext,
    RunFailed,
    RunPolicy,
    ToolCompleted,
    ToolError,
    ToolFailed,
    ToolMessage,
    tool,
)
from tinyagents_nb.harness.runtime import describe_error
from tinyagents_nb.harness.testkit import EventRecorder, ScriptedModel

pytestmark = pytest.mark.anyio


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ exploded")


class Hopeless(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr either")


@tool(in_thread=False)
def explode() -> str:
    """Fails with an exception that cannot be printed."""
    raise Unprintable


@tool(in_thread=False)
def explode_badly() -> str:
    """Fails with an exception that cannot be printed nor repr'd."""
    raise Hopeless


def test_describe_error_is_total() -> None:
    assert describe_error(ValueError("bad")) == "ValueError: bad"
    assert describe_error(ValueError()) == "ValueError"
    assert describe_error(Unprintable()).startswith("Unprintable: Unprintable(")
    assert describe_error(Hopeless()) == "Hopeless: <unprintable>"


@pytest.mark.parametrize(("fn", "expected"), [(explode, "Unprintable: Unprintable("), (explode_badly, "Hopeless: <un")])
async def test_an_unprintable_tool_error_is_reported_to_the_model(fn: object, expected: str) -> None:
    model = ScriptedModel([ScriptedModel.tool_call(fn.name, {}), "recovered"])  # type: ignore[attr-defined]
    harness = AgentHarness(model=model, tools=[fn])  # type: ignore[list-item]
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    run = await harness.invoke_in_context(ctx, "go")
    assert run.final_text == "recovered"
    result = next(m for m in run.messages if isinstance(m, ToolMessage))
    assert result.is_error
    assert result.text.startswith(f"tool `{fn.name}` failed: {expected}")  # type: ignore[attr-defined]
    done = rec.of_type(ToolCompleted)
    assert [e.is_error for e in done] == [True]


async def test_an_unprintable_tool_error_fails_the_run_cleanly_under_fail() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("explode_badly", {}), "unused"])
    harness = AgentHarness(model=model, tools=[explode_badly], policy=RunPolicy(tool_errors="fail"))
    ctx = RunContext()
    rec = EventRecorder(ctx.events)
    run, status = await harness.invoke_with_status(ctx, "go")
    assert isinstance(run.error, ToolError)
    assert str(run.error) == "tool `explode_badly` failed: Hopeless: <unprintable>"
    assert isinstance(run.error.__cause__, Hopeless)
    assert [e.error for e in rec.of_type(ToolFailed)] == [str(run.error)]
    assert [e.error_type for e in rec.of_type(RunFailed)] == ["ToolError"]
    assert status.error == "ToolError: tool `explode_badly` failed: Hopeless: <unprintable>"
