"""Stop, Pause/Resume and the steer box, clicked the way a frontend (or a subshell thread) would."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tinyagents_nb.harness import AgentHarness, RunContext, SteeringHandle, UserMessage
from tinyagents_nb.harness.steering import SteeringPolicy
from tinyagents_nb.harness.testkit import FakeTool, ScriptedModel, StreamingMock
from tinyagents_nb.widgets import RunDashboard

from .conftest import CommLog, until

pytestmark = pytest.mark.anyio


def click_from_another_thread(button: Any) -> str:
    """Click as a kernel subshell would: on a thread that is not the loop's; returns that thread's name."""
    seen: list[str] = []

    def click() -> None:
        seen.append(threading.current_thread().name)
        button.click()

    thread = threading.Thread(target=click, name="subshell-test")
    thread.start()
    thread.join(5)
    return seen[0]


def steerable() -> RunContext[None]:
    return RunContext().with_steering(SteeringHandle(SteeringPolicy.allow_all()))


def slow_tool_harness(delay_s: float = 0.3) -> tuple[AgentHarness[Any], ScriptedModel]:
    model = ScriptedModel([ScriptedModel.tool_call("slow", {"n": 1}), "all done"])
    return AgentHarness(model=model, tools=[FakeTool("slow", ["ok"], delay_s=delay_s)]), model


async def test_stop_from_another_thread_cancels_the_run(comms: CommLog) -> None:
    mock = StreamingMock("tick " * 400, chunk_delay_s=0.005)
    stream = AgentHarness(model=mock).invoke_streaming("count")
    dash = RunDashboard(stream)
    dash.start()
    await until(lambda: dash.transcript.text().count("tick") >= 5)
    clicked_at = time.monotonic()
    assert click_from_another_thread(dash.controls.stop) == "subshell-test"
    await dash.wait_flushed()
    assert time.monotonic() - clicked_at < 1.0  # cooperative, but prompt
    run = await stream.wait()
    assert run.status == "cancelled"
    assert dash.state.terminal == "cancelled"
    header = dash.header.widget.value
    assert "● cancelled" in header
    assert "cancelled: stop button" in header
    assert dash.controls.stop.disabled
    assert dash.controls.stop.description == "Stop"
    shown = dash.transcript.text()
    assert 5 <= shown.count("tick") < 400  # the partial answer stays visible
    assert dash.summary_text().startswith("<tinyagents run: cancelled · 0 model calls")


async def test_stop_shows_stopping_until_the_run_ends(comms: CommLog) -> None:
    stream = AgentHarness(model=StreamingMock("a " * 100, chunk_delay_s=0.01)).invoke_streaming("x")
    dash = RunDashboard(stream)
    dash.controls.stop.click()  # before the run even started
    dash.flush()
    assert "● stopping" in dash.header.widget.value
    assert dash.controls.stop.disabled
    assert dash.controls.stop.description == "Stopping…"
    assert dash.controls.pause.disabled
    assert dash.controls.send.disabled
    await dash.wait_flushed()
    assert dash.state.terminal == "cancelled"


async def test_pause_and_resume_buttons_hold_and_release_the_run(comms: CommLog) -> None:
    harness, model = slow_tool_harness()
    stream = harness.invoke_streaming("go", context=steerable())
    dash = RunDashboard(stream)
    assert not dash.controls.pause.disabled
    assert dash.controls.resume.disabled
    dash.start()
    await until(lambda: any(row.status == "running" for row in dash.tools.rows.values()))
    click_from_another_thread(dash.controls.pause)
    dash.flush()
    assert "● pausing" in dash.header.widget.value
    assert "pausing — will pause before the next model call" in dash.header.widget.value
    await until(lambda: stream.status.phase == "paused")
    dash.flush()
    assert "● paused" in dash.header.widget.value
    assert "paused — Resume continues" in dash.header.widget.value
    assert dash.controls.pause.disabled
    assert not dash.controls.resume.disabled
    assert model.calls == 1  # held before the second model call
    click_from_another_thread(dash.controls.resume)
    await dash.wait_flushed()
    assert dash.state.terminal == "completed"
    assert model.calls == 2
    notes = [s.text for s in dash.transcript.segments.values() if s.kind == "note"]
    assert notes == ["↪ paused", "↪ resumed"]
    assert dash.transcript.text().endswith("all done")


async def test_steering_without_a_handle_is_reported_not_raised(comms: CommLog) -> None:
    stream = AgentHarness(model=StreamingMock("a " * 20, chunk_delay_s=0.01)).invoke_streaming("x")
    dash = RunDashboard(stream)
    controls = dash.controls
    assert controls.pause.disabled
    assert controls.send.disabled
    assert controls.steer_text.disabled
    dash.start()
    controls.pause.click()  # programmatic clicks reach the handler even on a disabled button
    dash.flush()
    assert "SteeringError: this run accepts no steering" in dash.header.widget.value
    assert "RunContext.with_steering" in dash.header.widget.value  # the hint
    assert not controls.pause_requested
    await dash.wait_flushed()
    assert dash.state.terminal == "completed"


async def test_the_steer_box_sends_a_message_into_the_next_step(comms: CommLog) -> None:
    harness, model = slow_tool_harness(delay_s=0.15)
    stream = harness.invoke_streaming("go", context=steerable())
    dash = RunDashboard(stream)
    dash.start()
    await until(lambda: dash.tools.count == 1)
    dash.controls.steer_text.value = "  use metric units  "
    click_from_another_thread(dash.controls.send)
    dash.flush()
    assert dash.controls.steer_text.value == ""  # cleared by the flush, not by the callback
    assert dash.controls.sent == ["use metric units"]
    assert "queued for the next model call: use metric units" in dash.header.widget.value
    await dash.wait_flushed()
    second = model.requests[1].messages
    assert any(isinstance(m, UserMessage) and m.text == "use metric units" for m in second)
    notes = [s.text for s in dash.transcript.segments.values() if s.kind == "note"]
    assert notes == ["↪ your message was added to the conversation (the next model call reads it): use metric units"]
    assert "not delivered" not in dash.header.widget.value
    # the header says the same as the transcript now, never "queued" beside "added"
    assert "added to the conversation (the next model call reads it): use metric units" in dash.header.widget.value
    assert "queued for the next model call" not in dash.header.widget.value


async def test_enter_in_the_steer_box_sends(comms: CommLog) -> None:
    harness, model = slow_tool_harness(delay_s=0.15)
    stream = harness.invoke_streaming("go", context=steerable())
    dash = RunDashboard(stream)
    dash.start()
    await until(lambda: dash.tools.count == 1)
    dash.controls.steer_text.value = "shorter please"
    dash.controls.steer_text._handle_msg(  # what the frontend sends when Enter is pressed in the box
        {"content": {"data": {"method": "custom", "content": {"event": "submit"}}}, "buffers": []}
    )
    assert dash.controls.sent == ["shorter please"]
    await dash.wait_flushed()
    assert any(isinstance(m, UserMessage) and m.text == "shorter please" for m in model.requests[1].messages)


async def test_a_message_the_run_never_reads_is_reported_as_not_delivered(comms: CommLog) -> None:
    mock = StreamingMock("word " * 60, chunk_delay_s=0.01)  # one model call: there is no next step
    stream = AgentHarness(model=mock).invoke_streaming("go", context=steerable())
    dash = RunDashboard(stream)
    dash.start()
    await until(lambda: "word" in dash.transcript.text())
    dash.controls.steer_text.value = "wrap up"
    dash.controls.send.click()
    dash.flush()
    assert "queued for the next model call" in dash.header.widget.value
    await dash.wait_flushed()
    assert dash.state.terminal == "completed"
    assert "not delivered: the run has no further step" in dash.header.widget.value


async def test_an_empty_steer_box_sends_nothing_and_a_finished_run_takes_no_commands(comms: CommLog) -> None:
    stream = AgentHarness(model=ScriptedModel(["done"])).invoke_streaming("x", context=steerable())
    dash = RunDashboard(stream)
    dash.controls.steer_text.value = "   "
    dash.controls.send.click()
    assert dash.controls.sent == []
    dash.flush()
    assert "nothing to send: type a message in the box first" in dash.header.widget.value
    await dash.wait_flushed()
    dash.controls.steer_text.value = "too late"
    dash.controls.send.click()
    assert dash.controls.sent == []
    assert dash.controls.notice is not None
    assert dash.controls.notice.text == "not delivered: the run has already finished"
