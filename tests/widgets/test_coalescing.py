"""Token deltas are coalesced: a bounded number of comm messages, complete final text, bounded memory."""

from __future__ import annotations

import time
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from tinyagents_nb.harness import AgentHarness, ModelDelta, TextDelta, Usage
from tinyagents_nb.harness.testkit import FakeTool, ScriptedModel, StreamingMock
from tinyagents_nb.widgets import RunDashboard

from .conftest import CommLog, row_text

pytestmark = pytest.mark.anyio


def transcript_value_updates(comms: CommLog, dash: RunDashboard) -> int:
    """Messages that carried a segment's text: its ``comm_open`` plus every ``value`` update."""
    return sum(
        len(comms.updates(w, "value")) + len(comms.updates(w, "outputs")) + comms.opens(w)
        for w in dash.transcript.widget.children
    )


async def test_ten_thousand_deltas_cost_a_bounded_number_of_messages(comms: CommLog) -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(10_000))
    stream = AgentHarness(model=StreamingMock(list(text), chunk_delay_s=0)).invoke_streaming("spell")
    dash = RunDashboard(stream)
    comms.clear()
    await dash.wait_flushed()
    assert dash.transcript.text() == text
    assert row_text(dash.transcript.widget.children[0]) == text  # sent as Markdown, rendered by the frontend
    updates = transcript_value_updates(comms, dash)
    assert 1 <= updates <= 50, updates
    assert comms.comm_msgs() <= 60  # every widget of the dashboard together


async def test_a_paced_stream_updates_live_at_the_throttle_rate(comms: CommLog) -> None:
    chunks = [f"w{i} " for i in range(300)]
    stream = AgentHarness(model=StreamingMock(chunks, chunk_delay_s=0.002)).invoke_streaming("go")
    dash = RunDashboard(stream, throttle_hz=20)
    comms.clear()
    started = time.monotonic()
    await dash.wait_flushed()
    elapsed = time.monotonic() - started
    updates = transcript_value_updates(comms, dash)
    assert dash.transcript.text() == "".join(chunks)
    assert updates >= 3  # it streamed live, not only at the end
    assert updates <= elapsed * 20 + 3  # and never faster than the throttle
    assert dash._flusher.flushes <= elapsed * 20 + 3  # the flusher sleeps on a real timer; it never spins


async def test_deltas_emitted_straight_into_the_sink_are_coalesced(comms: CommLog) -> None:
    stream = AgentHarness(model=StreamingMock(["x", "y"], chunk_delay_s=30)).invoke_streaming("go")
    ctx = stream.context  # the run stays alive (one slow chunk) while the test emits deltas for it
    dash = RunDashboard(stream, throttle_hz=50)
    comms.clear()
    started = time.monotonic()
    dash.start()
    await anyio.lowlevel.checkpoint()
    for burst in range(20):
        for i in range(500):
            ctx.emit(ModelDelta, call_id="c-direct", delta=TextDelta(text=str((burst * 500 + i) % 10)))
        await anyio.sleep(0.01)
    stream.cancel("enough")
    await dash.wait_flushed()
    elapsed = time.monotonic() - started
    direct = [s for s in dash.transcript.segments.values() if len(s.text) == 10_000]
    assert len(direct) == 1
    flushes = dash._flusher.flushes
    assert flushes <= elapsed * 50 + 3  # never more flushes than the throttle allows
    # a flush sends a changed segment once (an Output row's Markdown may take two messages)
    assert transcript_value_updates(comms, dash) <= 2 * flushes + 3
    assert transcript_value_updates(comms, dash) < 100  # against 10,000 deltas


async def test_a_long_answer_is_split_into_segments_at_paragraph_breaks(comms: CommLog) -> None:
    paragraphs = [f"Paragraph {i}: " + "lorem ipsum " * 40 for i in range(30)]
    paragraphs[10] = "```python\n" + "x = 1\n\n" * 300 + "```"  # a long code block is never cut
    answer = "\n\n".join(paragraphs)
    stream = AgentHarness(model=ScriptedModel([answer], chunk_size=50)).invoke_streaming("write")
    dash = RunDashboard(stream)
    await dash.wait_flushed()
    segments = [s.text for s in dash.transcript.segments.values()]
    assert len(segments) >= 3
    assert all(s.count("```") % 2 == 0 for s in segments)
    assert dash.transcript.text() == answer
    assert all(len(row_text(w)) < 12_000 for w in dash.transcript.widget.children)


async def test_memory_is_bounded_by_max_history(comms: CommLog) -> None:
    turns: list[Any] = [ScriptedModel.tool_call("t", {"i": i}, text=f"step {i}") for i in range(6)]
    model = ScriptedModel([*turns, ScriptedModel.text("final", usage=Usage(input_tokens=1, output_tokens=1))])
    stream = AgentHarness(model=model, tools=[FakeTool("t", ["ok"])]).invoke_streaming("go")
    dash = RunDashboard(stream, max_history=3)
    await dash.wait_flushed()
    assert [s.text for s in dash.transcript.segments.values()] == ["step 4", "step 5", "final"]
    assert dash.transcript.dropped == 4
    children = dash.transcript.widget.children
    assert len(children) == 4
    assert "… 4 earlier segments not shown" in children[0].value
    assert len(dash.tools.rows) == 3
    assert dash.tools.count == 6
    assert dash.tools.dropped == 3
    assert "… 3 earlier tool calls not shown" in dash.tools.widget.children[0].value
    assert "Tool calls (6)" in dash._tools_title.value
