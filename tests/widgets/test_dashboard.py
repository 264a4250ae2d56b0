"""RunDashboard over real harness runs (testkit models): every pane, failures, display, filtering."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from decimal import Decimal
from typing import Any

import pytest

from tests.harness.replay_server import ReplayServer
from tinyagents_nb.harness import (
    AgentHarness,
    ConfigurationError,
    CostTracker,
    ModelPricing,
    OpenAIChatModel,
    ProviderError,
    RetryPolicy,
    RunContext,
    RunPolicy,
    SubAgent,
    ToolResult,
    Usage,
)
from tinyagents_nb.harness.events import ContextPressure
from tinyagents_nb.harness.testkit import FakeTool, ScriptedModel, StreamingMock
from tinyagents_nb.widgets import RunDashboard

from .conftest import CommLog, row_text

pytestmark = pytest.mark.anyio


class AcmeModel(ScriptedModel):
    """A scripted model from a provider no price table knows."""

    @property
    def provider(self) -> str:
        return "acme"


def research_harness(**kwargs: Any) -> AgentHarness[Any]:
    child = AgentHarness(model=ScriptedModel(["child says **hi**"], model_name="child-model"), name="researcher")
    model = ScriptedModel(
        [
            ScriptedModel.tool_call(
                "lookup", {"q": "tides"}, text="Let me look", usage=Usage(input_tokens=100, output_tokens=10)
            ),
            ScriptedModel.tool_call("researcher", {"input": "dig"}, usage=Usage(input_tokens=150, output_tokens=5)),
            ScriptedModel.text("Done: *ok*", usage=Usage(input_tokens=200, output_tokens=20), reasoning="pondering"),
        ]
    )
    tools = [FakeTool("lookup", ["found it"]), SubAgent("researcher", child).as_tool()]
    return AgentHarness(model=model, tools=tools, **kwargs)


async def test_a_completed_run_fills_every_pane(comms: CommLog) -> None:
    prices = CostTracker(prices={"scripted": ModelPricing(input_per_mtok=1, output_per_mtok=2)})
    stream = research_harness(context_window=1_000).invoke_streaming("tides?", context=RunContext(costs=prices))
    dash = RunDashboard(stream, title="demo")
    await dash.wait_flushed()

    # transcript: one segment per model call, Markdown for the frontend, reasoning in a closed <details>
    assert dash.transcript.text() == "Let me look\n\nchild says **hi**\n\nDone: *ok*"
    children = dash.transcript.widget.children
    values = [row_text(w) for w in children]
    assert values[1].endswith("child says **hi**")  # the frontend's Markdown renderer formats it
    assert "▸ researcher" in values[1]
    assert values[2].startswith('<details class="ta-dim"')
    assert "<details open" not in values[2]
    assert "pondering" in values[2]
    assert values[3] == "Done: *ok*"
    # the answer stands apart: framed, while sub-agent text is indented under its name
    assert children[3]._dom_classes == ("ta-text", "ta-answer")
    assert children[1]._dom_classes == ("ta-text", "ta-sub")
    assert children[0]._dom_classes == ("ta-text",)
    # tool calls
    rows = list(dash.tools.rows.values())
    assert [(r.name, r.status) for r in rows] == [("lookup", "ok"), ("researcher", "ok")]
    assert '"q": "tides"' in rows[0].arguments
    assert rows[0].output == "found it"
    assert rows[0].duration_s is not None
    assert "found it" in dash.tools.widget.children[0].value
    # sub-agent tree
    nodes = dash.tree.ordered()
    assert [(n.name, n.depth, n.status) for n in nodes] == [("demo", 0, "completed"), ("researcher", 1, "completed")]
    assert "researcher" in dash.agents.widget.value
    assert "$0.000520" in dash.agents.widget.value
    # context gauge
    window = stream.context.context_window
    assert window is not None
    assert window.max_tokens == 1_000
    assert dash.gauge.bar.value == pytest.approx(window.utilization)
    assert dash.gauge.bar.bar_style == "success"
    assert (
        dash.gauge.label.value
        == f"{window.estimated_prompt_tokens:,} / {window.usable_tokens:,} tokens ({window.utilization:.0%})"
    )
    # cost table: priced model and the free testkit child model
    frame = dash.costs.dataframe()
    scripted = frame[frame["model"] == "scripted"].iloc[0]
    assert (scripted["input"], scripted["output"], scripted["calls"]) == (450, 35, 3)
    assert scripted["usd"] == Decimal("0.00052")
    assert "$0.000520" in dash.costs.widget.value
    assert "scripted" in dash.costs.widget.value
    # header and controls
    header = dash.header.widget.value
    assert "completed" in header
    assert "demo" in header
    assert "scripted" in header
    assert dash.run_id in header
    assert "4 model calls" in header
    assert "2 tool calls" in header
    assert "485 tokens" in header  # tokens and USD in the header, not only in a pane
    assert "$0.000520" in header
    assert all(b.disabled for b in (dash.controls.stop, dash.controls.pause, dash.controls.resume, dash.controls.send))
    assert dash.controls.stop.button_style == ""  # a finished run's Stop is grey, not a live red button
    # every pane is visible at once (no accordion); the cost needs no click
    assert "Tool calls (2)" in dash._tools_title.value
    sections = (dash._tools_section, dash._agents_section, dash._cost_section)
    assert all(section.layout.display is None for section in sections)
    assert all(section in dash.widget.children for section in sections)


@pytest.mark.filterwarnings("ignore::tinyagents_nb.harness.runtime.CostUnknownWarning")
async def test_an_unknown_price_is_shown_as_unknown_never_zero(comms: CommLog) -> None:
    model = AcmeModel([ScriptedModel.text("hi", usage=Usage(input_tokens=10, output_tokens=3))], model_name="mystery")
    stream = AgentHarness(model=model).invoke_streaming("hello")
    dash = RunDashboard(stream)
    await dash.wait_flushed()
    frame = dash.costs.dataframe()
    assert list(frame["model"]) == ["mystery"]
    assert frame["usd"].iloc[0] is None
    assert "unknown" in dash.costs.widget.value
    assert "$0" not in dash.costs.widget.value
    assert "unknown" in dash.agents.widget.value
    assert dash.summary_text() == "<tinyagents run: completed · 1 model call · 0 tool calls · 13 tokens · cost unknown>"


async def test_a_failed_run_shows_its_error_and_hint(comms: CommLog) -> None:
    stream = AgentHarness(model=ScriptedModel([ProviderError("boom", hint="check the key")])).invoke_streaming("hi")
    dash = RunDashboard(stream)
    await dash.wait_flushed()
    header = dash.header.widget.value
    assert "● failed" in header
    assert "<b>ProviderError</b>: boom" in header
    assert "hint: check the key" in header
    assert dash.state.terminal == "failed"
    assert isinstance(dash.state.error, ProviderError)
    assert dash.summary_text().startswith("<tinyagents run: failed · ProviderError: boom · 0 model calls")
    assert dash.controls.stop.disabled
    assert dash.tree.nodes[dash.run_id].status == "failed"


async def test_a_run_awaited_elsewhere_still_reports_its_failure_on_flush(comms: CommLog) -> None:
    stream = AgentHarness(model=ScriptedModel([ProviderError("boom", hint="check the key")])).invoke_streaming("hi")
    dash = RunDashboard(stream)  # never start()ed: the magics' blocking mode may only flush
    await stream.wait()
    dash.flush()
    assert dash.state.finished
    assert "hint: check the key" in dash.header.widget.value


async def test_a_cancelled_task_is_shown_as_cancelled(comms: CommLog) -> None:
    stream = AgentHarness(model=StreamingMock("slow " * 50, chunk_delay_s=0.05)).invoke_streaming("hi")
    dash = RunDashboard(stream)
    dash.start()
    stream.start().cancel()  # asyncio-level cancel (kernel shutdown, cell re-run), not the cooperative one
    await dash.wait_flushed()
    assert dash.state.terminal == "cancelled"
    assert "cancelled" in dash.header.widget.value


async def test_tool_errors_are_styled_as_errors(comms: CommLog) -> None:
    model = ScriptedModel([ScriptedModel.tool_call("flaky", {"n": 1}), "recovered"])
    tool = FakeTool("flaky", [ToolResult.error("disk full")])
    dash = RunDashboard(AgentHarness(model=model, tools=[tool]).invoke_streaming("go"))
    await dash.wait_flushed()
    (row,) = dash.tools.rows.values()
    assert row.status == "error"
    assert row.output == "disk full"
    assert "✗" in dash.tools.widget.children[0].value
    assert "ta-tone-err" in dash.tools.widget.children[0].value


async def test_pressure_marks_and_the_gauge_without_a_window(comms: CommLog) -> None:
    stream = AgentHarness(model=ScriptedModel(["ok"])).invoke_streaming("hi")
    dash = RunDashboard(stream)
    assert dash.gauge.label.value == "no window configured"
    assert dash.gauge.widget.layout.display == "none"  # no dead grey bar
    stream.context.emit(ContextPressure, action="trim", tokens_before=9_800, tokens_after=6_100, limit_tokens=8_000)
    await dash.wait_flushed()
    assert list(dash.gauge.marks) == ["trim: 9,800 → 6,100"]
    assert "trim: 9,800 → 6,100" in dash.gauge.marks_view.value
    assert dash.gauge.label.value == "no window configured · 1 pressure action"
    assert dash.gauge.bar.value == 0.0
    assert dash.gauge.widget.layout.display is None  # the marks are worth showing


async def test_the_listener_ignores_other_runs_on_a_shared_sink(comms: CommLog) -> None:
    session = RunContext()
    mine = AgentHarness(model=ScriptedModel([ScriptedModel.text("mine", usage=Usage(input_tokens=5, output_tokens=1))]))
    other = AgentHarness(
        model=ScriptedModel(
            [
                ScriptedModel.tool_call("t", {}),
                ScriptedModel.text("theirs", usage=Usage(input_tokens=7, output_tokens=2)),
            ],
            model_name="other",
        ),
        tools=[FakeTool("t", ["x"])],
    )
    stream = mine.invoke_streaming("a", context=session.new_root())
    dash = RunDashboard(stream)
    other_stream = other.invoke_streaming("b", context=session.new_root())
    await other_stream.wait()
    await dash.wait_flushed()
    await other.invoke_streaming("c", context=session.new_root()).wait()  # after ours ended: listener removed
    assert dash.transcript.text() == "mine"
    assert dash.tools.count == 0
    assert len(dash.tree) == 1
    assert list(dash.costs.dataframe()["model"]) == ["scripted"]
    # the dashboard detached itself once its run ended: later events of its own run are not applied
    stream.context.emit(ContextPressure, action="trim", tokens_before=2, tokens_after=1)
    dash.flush()
    assert dash.gauge.mark_count == 0


async def test_text_plain_is_deterministic_and_has_no_run_id(comms: CommLog) -> None:
    stream = AgentHarness(
        model=ScriptedModel([ScriptedModel.text("hi", usage=Usage(input_tokens=20, output_tokens=10))])
    ).invoke_streaming("x")
    dash = RunDashboard(stream)
    bundle = dash._repr_mimebundle_()
    assert bundle["text/plain"] == "<tinyagents run: running>"
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == dash.widget.model_id
    assert RunDashboard(
        AgentHarness(model=ScriptedModel(["x"])).invoke_streaming("x"), title="demo"
    ).summary_text() == ('<tinyagents run "demo": running>')
    await dash.wait_flushed()
    assert dash._repr_mimebundle_()["text/plain"] == (
        "<tinyagents run: completed · 1 model call · 0 tool calls · 30 tokens · $0.000000>"
    )
    assert dash.run_id not in dash.summary_text()
    assert dash.run_id in repr(dash)


async def test_bad_options_are_configuration_errors(comms: CommLog) -> None:
    stream = AgentHarness(model=ScriptedModel(["x"])).invoke_streaming("x")
    for bad in (0, -1.0, float("inf"), float("nan"), True, "15"):
        with pytest.raises(ConfigurationError, match="throttle_hz"):
            RunDashboard(stream, throttle_hz=bad)  # type: ignore[arg-type]
    for bad_history in (0, -5, 2.5, True):
        with pytest.raises(ConfigurationError, match="max_history"):
            RunDashboard(stream, max_history=bad_history)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="AgentStream"):
        RunDashboard("not a stream")  # type: ignore[arg-type]


def test_start_needs_a_running_loop(comms: CommLog) -> None:
    dash = RunDashboard(AgentHarness(model=ScriptedModel(["x"])).invoke_streaming("x"))
    with pytest.raises(RuntimeError):
        dash.start()


def test_importing_the_package_loads_neither_ipywidgets_nor_pandas() -> None:
    code = (
        "import sys, tinyagents_nb.widgets\n"
        "print(sorted(m for m in ('ipywidgets', 'pandas', 'traitlets', 'IPython') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


async def test_flushes_with_nothing_new_send_nothing(comms: CommLog) -> None:
    stream = AgentHarness(model=ScriptedModel(["x"])).invoke_streaming("x")
    dash = RunDashboard(stream)
    comms.clear()
    for _ in range(3):
        dash.flush()
    assert comms.messages == []
    await dash.wait_flushed()
    comms.clear()
    dash.flush()
    assert comms.messages == []


def test_blocking_mode_run_on_a_worker_thread_with_flushes_from_the_caller(comms: CommLog) -> None:
    chunks = [f"w{i} " for i in range(200)]
    stream = AgentHarness(model=StreamingMock(chunks, chunk_delay_s=0.002)).invoke_streaming("x")
    dash = RunDashboard(stream)  # never start()ed: the listener runs on the worker, flushes on this thread
    worker = threading.Thread(target=lambda: asyncio.run(stream.wait()))
    worker.start()
    seen: set[int] = set()
    while worker.is_alive():
        dash.flush()
        seen.add(len(dash.transcript.text()))
        time.sleep(0.02)
    worker.join()
    dash.flush()
    assert dash.state.terminal == "completed"
    assert dash.transcript.text() == "".join(chunks)
    assert "● completed" in dash.header.widget.value
    assert dash.controls.stop.disabled
    assert len(seen) >= 3  # it showed progress while the worker streamed


async def test_a_key_echoed_in_a_provider_error_never_reaches_widget_state(comms: CommLog) -> None:
    key = "tk_DashEcho5e4f3a2b1c0d9e8f7a6b"
    body = {
        "error": {
            "message": "Rate limit reached",
            "type": f"limit_{key.upper()}",
            "code": key,
            "metadata": {"raw": f"upstream saw Authorization: Bearer {key.lower()}", "headers": [{"key": key}]},
        }
    }
    server = ReplayServer().start()
    try:
        server.enqueue(429, body, headers={"retry-after-ms": "1"})
        server.enqueue(400, {"error": {"message": "bad", "param": key, "code": f"x{key}"}})
        model = OpenAIChatModel("gpt-4o-mini", base_url=server.base_url, api_key=key)
        policy = RunPolicy(retry=RetryPolicy(max_attempts=2, initial_backoff_s=0.001, max_backoff_s=0.002))
        stream = AgentHarness(model=model, policy=policy).invoke_streaming("hi")
        dash = RunDashboard(stream)
        await dash.wait_flushed()
        await model.aclose()
    finally:
        server.stop()
    assert dash.state.terminal == "failed"
    state = repr(comms.messages) + dash.header.widget.value + dash.summary_text() + repr(dash.state.error)
    assert "rate limit" in state.lower() or "bad" in state
    assert key.lower() not in state.lower()


async def test_a_retried_streams_failed_attempt_is_not_in_the_shown_answer(comms: CommLog) -> None:
    from collections.abc import AsyncGenerator

    from tinyagents_nb.harness import RetryPolicy, RunPolicy, TextDelta
    from tinyagents_nb.harness.models import StreamFinish

    class Flaky(ScriptedModel):
        async def stream(self, request: Any) -> AsyncGenerator[Any, None]:
            self.requests.append(request)
            first = len(self.requests) == 1
            for chunk in ("The answer ", "is 4") if first else ("The answer ", "is 42."):
                yield TextDelta(text=chunk)
            if first:
                raise ProviderError("reset mid-stream", retryable=True)
            yield StreamFinish(finish_reason="stop")

    policy = RunPolicy(retry=RetryPolicy(initial_backoff_s=0.01))
    stream = AgentHarness(model=Flaky(["unused"]), policy=policy).invoke_streaming("x")
    dash = RunDashboard(stream)
    await dash.wait_flushed()
    assert dash.transcript.text() == "The answer is 42."
    rows = [getattr(w, "value", "") for w in dash.transcript.widget.children]
    struck = [html for html in rows if "line-through" in html]
    assert len(struck) == 1  # the failed attempt is still visible, struck out
    assert "is 4" in struck[0]


async def test_the_transcripts_plain_twin_carries_no_terminal_escapes(comms: CommLog) -> None:
    # A text row is an Output with text/markdown and a text/plain twin (what a terminal, nbconvert --to
    # script or a screen reader gets): an OSC 52 clipboard write, a colour and a BEL are stripped from both.
    hostile = "copy \x1b]52;c;cm0gLXJmIH4=\x07this \x1b[31mred\x1b[0m\x07 text"
    stream = AgentHarness(model=ScriptedModel([hostile])).invoke_streaming("hi")
    dash = RunDashboard(stream)
    await dash.wait_flushed()
    (row,) = dash.transcript.widget.children
    data = row.outputs[0]["data"]
    assert data["text/plain"] == "copy this red text"
    assert "\x1b" not in data["text/markdown"]
    assert "\x07" not in data["text/markdown"]
