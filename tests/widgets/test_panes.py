"""Each pane of a dashboard on its own, through the dashboard's attributes and without a run.

Formatting, segment cutting, rows, tree, gauge, costs, header: each test builds a ``RunDashboard``
over a stream that never starts and drives one pane the way the dashboard's listener does.
"""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    ContextWindow,
    CostTracker,
    ModelPricing,
    ProviderError,
    RunId,
    Usage,
)
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.widgets import RunDashboard
from tinyagents_nb.widgets._format import format_duration, format_usd, json_preview, truncate

from .conftest import CommLog, row_text


def no_caption(run_id: str) -> str:
    return ""


def dashboard(*, max_history: int = 100, title: str | None = None) -> RunDashboard:
    """A dashboard whose run is never started: its panes are driven by hand."""
    return RunDashboard(
        AgentHarness(model=ScriptedModel(["unused"])).invoke_streaming("x"), title=title, max_history=max_history
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "unknown"),
        (Decimal(0), "$0.000000"),  # one shape everywhere: the record's, never "$0.00" beside "$0.000000"
        (Decimal("0.00052"), "$0.000520"),
        (Decimal("0.0000004"), "$0.000000"),
        (Decimal("1.5"), "$1.500000"),
        (Decimal("1234.567891"), "$1,234.567891"),
    ],
)
def test_format_usd(value: Decimal | None, shown: str) -> None:
    assert format_usd(value) == shown


def test_durations_truncation_and_json_previews() -> None:
    assert format_duration(0.123) == "0.12 s"
    assert format_duration(12.34) == "12.3 s"
    assert format_duration(12.9, precise=False) == "12 s"
    assert format_duration(125) == "2 min 05 s"
    assert format_duration(-1) == "0.00 s"
    assert truncate("abcdef", 4) == "abcd… (+2 chars)"
    assert truncate("abc", 4) == "abc"
    assert json_preview({"q": "tides", "n": [1, 2]}) == '{"q": "tides", "n": [1, 2]}'
    assert json_preview({"x": "y" * 500}, 20).endswith("… (+489 chars)")
    circular: dict[str, Any] = {}
    circular["self"] = circular
    assert json_preview(circular).startswith("{'self'")


def test_a_long_answer_without_paragraphs_is_cut_at_a_line_break_and_joined_back(comms: CommLog) -> None:
    pane = dashboard(max_history=100).transcript
    lines = [f"line {i} " + "x" * 60 for i in range(200)]  # ~13k chars, single line breaks only
    for line in lines:
        pane.add_delta("r", "c1", "text", line + "\n", no_caption)
    assert len(pane.segments) >= 2
    assert [s.glue for s in pane.segments.values()][1] == "\n"
    assert pane.text() == "\n".join(lines) + "\n"


def test_segments_are_closed_when_their_call_ends_and_reasoning_gives_way_to_text(comms: CommLog) -> None:
    pane = dashboard(max_history=10).transcript
    pane.add_delta("r", "c1", "thinking", "hmm", no_caption)
    pane.add_delta("r", "c1", "text", "answer", lambda run_id: "researcher")
    first, second = pane.segments.values()
    assert not first.active
    assert second.active
    assert second.caption == "researcher"
    pane.end_call("r", "c1")
    assert not second.active
    pane.add_delta("r", "c1", "text", "", no_caption)  # empty fragments are ignored
    assert len(pane.segments) == 2
    pane.render()
    assert "<details class" in pane.widget.children[0].value  # closed reasoning block
    assert "<details open" not in pane.widget.children[0].value
    assert "▸ researcher" in row_text(pane.widget.children[1])


def test_rows_resend_only_what_changed(comms: CommLog) -> None:
    pane = dashboard(max_history=2).tools
    pane.started("r", "c0", "alpha", {}, "")
    pane.started("r", "c1", "beta", {}, "")
    pane.render()
    first, second = pane.widget.children
    first_id = first.comm.comm_id
    comms.clear()
    pane.finished("r", "c1", output="beta done", is_error=False, duration_s=0.5)
    pane.render()
    [update] = comms.updates(second, "value")
    assert "beta done" in update["value"]
    assert comms.updates(first) == []
    assert comms.updates(pane.widget) == []  # no structural change, no children update
    pane.started("r", "c2", "gamma", {}, "")
    pane.render()
    assert "<code>gamma</code>" in pane.widget.children[2].value
    assert pane.widget.children[1] is second
    assert "… 1 earlier tool call not shown" in pane.widget.children[0].value
    assert first.comm is None  # the dropped row was closed
    assert any(kind == "comm_close" and cid == first_id for cid, kind, _ in comms.messages)


def test_the_tree_orders_depth_first_and_bounds_its_nodes() -> None:
    dash = dashboard(max_history=4, title="main")
    tree, root = dash.tree, dash.run_id
    tree.add_child(root, "a", "alpha", 1)
    tree.add_child("a", "a1", "alpha-1", 2)
    tree.add_child(root, "b", "beta", 1)
    assert [n.name for n in tree.ordered()] == ["main", "alpha", "alpha-1", "beta"]
    tree.finish("a1", "completed")
    tree.add_child(root, "c", "gamma", 1)  # over the bound: the oldest finished node goes first
    assert "a1" not in tree.nodes
    assert "a1" in tree
    assert tree.dropped == 1
    assert len(tree) == 5
    assert tree.name_of("a1") == "sub-agent"
    assert tree.caption(root) == ""
    assert tree.caption("b") == "beta"


@pytest.mark.parametrize(
    ("prompt_tokens", "style"),
    [(0, "success"), (599, "success"), (600, "warning"), (849, "warning"), (850, "danger"), (1_700, "danger")],
)
def test_gauge_colour_thresholds(comms: CommLog, prompt_tokens: int, style: str) -> None:
    gauge = dashboard().gauge
    gauge.render(ContextWindow(model="m", max_tokens=1_000, estimated_prompt_tokens=prompt_tokens))
    assert gauge.bar.bar_style == style


def test_the_gauge_clamps_an_over_budget_prompt_and_keeps_its_marks_bounded(comms: CommLog) -> None:
    gauge = dashboard(max_history=2).gauge
    gauge.render(
        ContextWindow(model="m", max_tokens=10_000, reserved_output_tokens=2_000, estimated_prompt_tokens=9_000)
    )
    assert gauge.bar.value == 1.0
    assert gauge.bar.bar_style == "danger"
    assert gauge.label.value == "9,000 / 8,000 tokens (112%)"
    for before in (9_000, 8_000, 7_000):
        gauge.add_mark("trim", before, before - 1_000, caption="researcher")
    gauge.render(ContextWindow(model="m", max_tokens=10_000, estimated_prompt_tokens=5_000))
    assert gauge.bar.value == 0.5
    assert gauge.bar.bar_style == "success"
    assert list(gauge.marks) == ["researcher · trim: 8,000 → 7,000", "researcher · trim: 7,000 → 6,000"]
    assert "… 1 earlier" in gauge.marks_view.value
    assert gauge.label.value.endswith("· 3 pressure actions")
    comms.clear()
    gauge.render(ContextWindow(model="m", max_tokens=10_000, estimated_prompt_tokens=5_000))
    assert comms.comm_msgs() == 0  # nothing changed, nothing sent


def test_the_gauge_shows_the_last_calls_prompt_cache_reads_and_writes(comms: CommLog) -> None:
    gauge = dashboard(max_history=2).gauge
    window = ContextWindow(model="m", max_tokens=10_000, estimated_prompt_tokens=4_000)
    gauge.render(window)
    assert "cached" not in gauge.label.value
    gauge.record_cache(3_500, 0)
    gauge.render(window)
    assert gauge.label.value == "4,000 / 10,000 tokens (40%) · last call: 3,500 cached"
    gauge.record_cache(0, 1_200)
    gauge.render(window)
    assert gauge.label.value.endswith("last call: 0 cached, 1,200 written to the cache")
    gauge.record_cache(0, 0)
    gauge.render(None)  # no window: still hidden, whatever the cache did
    assert gauge.widget.layout.display == "none"


def test_the_cost_table_totals_and_propagates_unknown(comms: CommLog) -> None:
    costs = CostTracker(prices={"cheap": ModelPricing(input_per_mtok=1, output_per_mtok=1)}, use_genai_prices=False)
    usage = Usage(
        input_tokens=1_000, output_tokens=500, cached_input_tokens=200, cache_write_tokens=300, reasoning_tokens=100
    )
    costs.record(run_id="r", parent_run_id=None, root_run_id="r", depth=0, usage=usage, model="cheap")
    costs.record(run_id="other", parent_run_id=None, root_run_id="other", depth=0, usage=usage, model="cheap")
    with pytest.warns(UserWarning, match="no price known"):
        costs.record(run_id="c", parent_run_id="r", root_run_id="r", depth=1, usage=usage, model="odd")
    table = dashboard().costs
    table.render(
        costs, lambda rec: rec.root_run_id == "r", lambda run_id: {"r": "main"}.get(run_id, "helper"), now=0, force=True
    )
    frame = table.dataframe()
    assert list(frame["agent"]) == ["main", "helper", "total"]
    assert list(frame["usd"]) == [Decimal("0.0015"), None, None]
    assert frame.loc[2, "input"] == 2_000
    assert frame.loc[2, "cached"] == 400
    assert frame.loc[2, "cache_write"] == 600
    assert frame.loc[2, "reasoning"] == 200
    assert table.widget.value.count("unknown") == 2
    assert "$0.0015" in table.widget.value
    comms.clear()
    table.render(costs, lambda rec: True, str, now=1.0, force=False)  # nothing new: no re-render
    assert comms.comm_msgs() == 0


def test_the_header_shows_an_error_without_a_hint_and_the_event_text_before_the_result(comms: CommLog) -> None:
    dash = dashboard()
    state, header = dash.state, dash.header
    state.terminal, state.error_text = "failed", "ProviderError: boom"
    header.render(state, status="failed", now=0)
    assert "ProviderError: boom" in header.widget.value
    state.error = ProviderError("<b>bad</b>")
    header.render(state, status="failed", now=0)
    html = header.widget.value
    assert "&lt;b&gt;bad&lt;/b&gt;" in html
    assert "hint:" not in html
    assert "<b>bad</b>" not in html


@pytest.mark.anyio
async def test_a_broken_pane_is_logged_and_shown_but_never_stops_the_dashboard(
    comms: CommLog, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    dash = RunDashboard(AgentHarness(model=ScriptedModel(["fine"])).invoke_streaming("x"))
    broken = {"once": True}
    original = dash.gauge.render

    def render(window: Any, failure: Any = None) -> None:
        if broken.pop("once", False):
            raise RuntimeError("gauge exploded")
        original(window, failure)

    monkeypatch.setattr(dash.gauge, "render", render)
    dash.start()
    with caplog.at_level(logging.ERROR, logger="tinyagents_nb"):
        await dash.wait_flushed()
    assert "dashboard flush failed" in caplog.text
    assert "dashboard error: RuntimeError: gauge exploded" in dash.header.widget.value
    assert dash.transcript.text() == "fine"


def test_run_ids_are_plain_strings_in_the_tree() -> None:
    dash = dashboard()
    assert type(dash.run_id) is str
    assert RunId(dash.run_id) in dash.tree
