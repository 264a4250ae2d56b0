"""What the dashboard tells a person: where the live text is, what a stop cut off, why a turn failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    ContextLimitError,
    ProviderError,
    RetryPolicy,
    RunPolicy,
    SubAgent,
    Usage,
)
from tinyagents_nb.harness.testkit import ScriptedModel, StreamingMock
from tinyagents_nb.magics import NotebookSession
from tinyagents_nb.widgets import RunDashboard

from .conftest import CommLog, row_text, until

pytestmark = pytest.mark.anyio


async def test_the_transcript_grows_with_the_page_instead_of_scrolling_inside_a_box(comms: CommLog) -> None:
    dash = RunDashboard(AgentHarness(model=ScriptedModel(["hi"])).invoke_streaming("x"))
    layout = dash.transcript.widget.layout
    assert layout.max_height is None  # was 420px with its own scroll bar that stayed at the top
    assert layout.overflow is None
    assert layout.height is None
    assert "ta-transcript" in dash.transcript.widget._dom_classes
    assert "waiting for the model" in row_text(dash.transcript.widget.children[0])  # before the first token
    await dash.wait_flushed()
    assert [row_text(w) for w in dash.transcript.widget.children] == ["hi"]


async def test_a_stopped_run_counts_what_streamed_and_marks_where_it_stopped(comms: CommLog) -> None:
    mock = StreamingMock("word " * 400, chunk_delay_s=0.005)
    stream = AgentHarness(model=mock).invoke_streaming("talk")
    dash = RunDashboard(stream)
    dash.start()
    await until(lambda: dash.transcript.text().count("word") >= 20)
    dash.controls.stop.click()
    await dash.wait_flushed()
    header = dash.header.widget.value
    assert "● cancelled" in header
    assert "0 model calls + 1 interrupted" in header
    assert "streamed (estimate)" in header  # an estimate, labelled as one
    assert "cost unknown" in header  # a provider bills what streamed: never "$0"
    assert "$0" not in header
    last = list(dash.transcript.segments.values())[-1]
    assert last.kind == "note"
    assert last.css == "ta-stopped"
    assert last.text.startswith("■ cancelled here (stop button)")
    summary = dash.summary_text()
    assert "1 interrupted" in summary
    assert "(estimate)" in summary
    assert "cost unknown" in summary


async def test_a_turn_that_did_not_fit_fills_the_gauge_red(comms: CommLog) -> None:
    harness = AgentHarness(model=ScriptedModel(["never"]), context_window=120)
    dash = RunDashboard(harness.invoke_streaming("lorem ipsum dolor " * 200))
    await dash.wait_flushed()
    assert isinstance(dash.state.error, ContextLimitError)
    gauge = dash.gauge
    assert gauge.widget.layout.display is None
    assert gauge.bar.value == 1.0
    assert gauge.bar.bar_style == "danger"
    assert gauge.label.value.startswith("did not fit: the request needs ")
    assert "no window configured" not in gauge.label.value


async def test_a_live_header_has_a_hidden_not_running_twin_for_a_lost_kernel(comms: CommLog) -> None:
    stream = AgentHarness(model=StreamingMock("a " * 50, chunk_delay_s=0.01)).invoke_streaming("x")
    dash = RunDashboard(stream)
    live = dash.header.widget.value
    assert 'class="ta-live"' in live
    assert "not running: the kernel restarted" in live
    await dash.wait_flushed()
    assert "ta-gone" not in dash.header.widget.value  # a finished run's status stays true after a restart


async def test_cost_rows_keep_sub_agents_of_different_depths_apart(comms: CommLog) -> None:
    used = Usage(input_tokens=10, output_tokens=2)
    inner = AgentHarness(model=ScriptedModel([ScriptedModel.text("deep", usage=used)]), name="researcher")
    middle = AgentHarness(
        model=ScriptedModel(
            [ScriptedModel.tool_call("researcher", {"input": "go"}, usage=used), ScriptedModel.text("mid", usage=used)]
        ),
        tools=[SubAgent("researcher", inner).as_tool()],
        name="researcher",
    )
    root = AgentHarness(
        model=ScriptedModel(
            [ScriptedModel.tool_call("researcher", {"input": "go"}, usage=used), ScriptedModel.text("top", usage=used)]
        ),
        tools=[SubAgent("researcher", middle).as_tool()],
    )
    dash = RunDashboard(root.invoke_streaming("q"))
    await dash.wait_flushed()
    agents = list(dash.costs.dataframe()["agent"])
    assert "researcher" in agents
    assert "researcher (depth 2)" in agents
    html = dash.costs.widget.value
    assert '<table class="ta-table">' in html
    assert '<th class="num">input</th>' in html  # numbers right-aligned under right-aligned headings


async def test_a_call_that_fails_after_retries_says_how_many_attempts(comms: CommLog) -> None:
    failures = [ProviderError("cannot connect", retryable=True, hint="no network?") for _ in range(3)]
    policy = RunPolicy(retry=RetryPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.002))
    dash = RunDashboard(AgentHarness(model=ScriptedModel(failures), policy=policy).invoke_streaming("x"))
    await dash.wait_flushed()
    notes = [s.text for s in dash.transcript.segments.values() if s.kind == "note"]
    assert notes[0].startswith("attempt 1 failed, retrying in ")
    assert notes[-1].startswith("model call failed after 3 attempts: ProviderError: cannot connect")
    assert "hint: no network?" in dash.header.widget.value


async def test_the_offline_model_gives_the_gauge_a_window(comms: CommLog, tmp_path: Path) -> None:
    session = NotebookSession(store_path=tmp_path / "session.sqlite")
    try:
        offline = session.resolve_model()  # what a notebook with no model configured runs on
    finally:
        session.close()
    dash = RunDashboard(AgentHarness(model=offline).invoke_streaming("hello"))
    await dash.wait_flushed()
    assert dash.gauge.widget.layout.display is None
    assert dash.gauge.label.value.endswith(f"/ {32_000 - 1_024:,} tokens (0%)")  # it claims a 32,000-token window
