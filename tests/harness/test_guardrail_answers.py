"""Output guardrails see every final answer, structured ones too, and a blocked answer is retracted."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from tinyagents_nb.harness import AgentHarness, GuardrailTripped, RunPolicy, ToolCall, ToolMessage
from tinyagents_nb.harness.events import ModelRetracted
from tinyagents_nb.harness.middleware import GuardrailsMiddleware, OutputGuardrail
from tinyagents_nb.harness.testkit import EventRecorder, FakeTool, ScriptedModel

pytestmark = pytest.mark.anyio


class Contact(BaseModel):
    name: str
    phone: str


def no_phone_numbers(ctx: object, text: str) -> str | None:
    return "contains a phone number" if "555-0199" in text else None


GUARD = OutputGuardrail("no_phone", no_phone_numbers)


async def test_a_structured_answer_given_through_a_forced_tool_call_is_checked() -> None:
    model = ScriptedModel(
        [ScriptedModel.tool_call("Contact", {"name": "Bob", "phone": "555-0199"}, id="s1")],
        chunk_size=None,
    )
    harness = AgentHarness(
        model=model,
        policy=RunPolicy(output=Contact, structured_strategy="tool"),
        middleware=[GuardrailsMiddleware(output=[GUARD])],
    )
    stream = harness.invoke_streaming("who is bob?")
    rec = EventRecorder(stream.context.events)
    run = await stream.wait()
    assert isinstance(run.error, GuardrailTripped)
    assert run.error.stage == "output"
    assert run.structured is None or "555-0199" not in str(run.messages)
    # the answer and the result answering its schema call are gone from the transcript: nothing keeps it
    assert all("555-0199" not in str(getattr(m, "tool_calls", "")) for m in run.messages)
    assert not [m for m in run.messages if isinstance(m, ToolMessage)]
    (retracted,) = rec.of_type(ModelRetracted)
    assert (retracted.guardrail, retracted.reason) == ("no_phone", "contains a phone number")
    kinds = rec.kinds()
    assert kinds.index("guardrail.tripped") < kinds.index("model.retracted") < kinds.index("run.failed")


async def test_a_clean_structured_answer_passes_and_a_text_answer_is_checked_once() -> None:
    seen: list[str] = []

    def spy(ctx: object, text: str) -> None:
        seen.append(text)

    harness = AgentHarness(
        model=ScriptedModel([ScriptedModel.tool_call("Contact", {"name": "Ann", "phone": "n/a"})]),
        policy=RunPolicy(output=Contact, structured_strategy="tool"),
        middleware=[GuardrailsMiddleware(output=[OutputGuardrail("spy", spy)])],
    )
    run = await harness.invoke("who is ann?")
    assert run.ok
    assert any('"phone": "n/a"' in text for text in seen)  # the structured value was checked
    seen.clear()
    plain = AgentHarness(
        model=ScriptedModel(["plain answer"]), middleware=[GuardrailsMiddleware(output=[OutputGuardrail("spy", spy)])]
    )
    assert (await plain.invoke("x")).ok
    assert seen == ["plain answer"]  # checked as it arrived, not again at the end


async def test_a_streamed_text_answer_that_trips_is_retracted_and_not_kept() -> None:
    model = ScriptedModel(
        [
            ScriptedModel.tool_calls([ToolCall(id="t1", name="lookup", arguments={"q": "bob"})]),
            "Call Bob on 555-0199.",
        ],
        chunk_size=4,
    )
    harness = AgentHarness(
        model=model, tools=[FakeTool("lookup", ["found"])], middleware=[GuardrailsMiddleware(output=[GUARD])]
    )
    stream = harness.invoke_streaming("find bob")
    rec = EventRecorder(stream.context.events)
    run = await stream.wait()
    assert isinstance(run.error, GuardrailTripped)
    deltas = [e for e in rec.events if e.kind == "model.delta"]
    assert deltas  # it did stream before the check
    (retracted,) = rec.of_type(ModelRetracted)
    assert retracted.call_id == deltas[-1].call_id  # type: ignore[attr-defined]
    assert all("555-0199" not in m.text for m in run.messages)
    assert [m.tool_call_id for m in run.messages if isinstance(m, ToolMessage)] == ["t1"]  # earlier turns stay


async def test_the_updates_mode_carries_approvals_and_guardrails() -> None:
    from tinyagents_nb.harness import tool

    @tool(requires_approval=True)
    def wipe(path: str) -> str:
        """Wipe."""
        return "wiped"

    harness = AgentHarness(
        model=ScriptedModel([ScriptedModel.tool_call("wipe", {"path": "/"}), "I wiped 555-0199"]),
        tools=[wipe],
        middleware=[GuardrailsMiddleware(output=[GUARD])],
    )
    stream = harness.invoke_streaming("go")
    kinds: list[str] = []
    async for chunk in stream.chunks("updates"):
        kinds.append(chunk.data.kind)
        if chunk.data.kind == "approval.requested":
            stream.approve()
    assert {"approval.requested", "approval.decided", "guardrail.tripped", "model.retracted"} <= set(kinds)
