"""Tool rows that read naturally (issue 25): a tool's summary ``tool.delta`` becomes its row's headline,
and a code-running call shows its code as code."""

from __future__ import annotations

from types import SimpleNamespace

from tinyagents_nb.widgets._tools import ToolCallsPane, _row_html


def test_a_summary_delta_becomes_the_headline_and_code_shows_as_code() -> None:
    pane = ToolCallsPane(max_rows=10)
    pane.started("r", "c1", "inspect_variable", {"name": "df"}, "")
    pane.summarised("r", "c1", "looked at `df` (10,000 \u00d7 8) <b>")
    pane.finished("r", "c1", output="…", is_error=False, duration_s=0.01)
    html = _row_html(pane.rows[0])
    assert "looked at <code>df</code> (10,000 \u00d7 8) &lt;b&gt;" in html  # escaped; `name` became code
    assert "inspect_variable" in html  # still named, beside the sentence
    pane.started("r", "c2", "run_code", {"code": "x = 1\nprint('<x>')"}, "")
    html = _row_html(pane.rows[1])
    assert '<code class="language-python">x = 1\nprint(&#x27;&lt;x&gt;&#x27;)</code>' in html
    assert "arguments" not in html
    pane.started("r", "c3", "other", {"a": 1}, "")
    assert "<code>other</code>" in _row_html(pane.rows[2])  # no summary: the tool's name heads the row


def test_the_router_passes_only_summary_deltas_to_the_pane() -> None:
    from tinyagents_nb.widgets._router import EventRouter

    pane = ToolCallsPane(max_rows=10)
    pane.started("r", "c1", "slow", {}, "")
    router = EventRouter.__new__(EventRouter)
    router._tools = pane  # type: ignore[attr-defined]
    router._on_tool_delta(SimpleNamespace(run_id="r", call_id="c1", message="half way", data=None))
    assert pane.rows[0].summary == ""
    router._on_tool_delta(SimpleNamespace(run_id="r", call_id="c1", message="read 3 cells", data={"summary": True}))
    assert pane.rows[0].summary == "read 3 cells"
