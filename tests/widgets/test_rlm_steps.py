"""RLM runs in the dashboard: each code step with its output, errors and cuts marked; sub-queries in the tree."""

from __future__ import annotations

from typing import Any

import pytest

from tests.rlm._scripts import py, sub_model
from tinyagents_nb.harness import AgentHarness, CostTracker, ModelPricing, RunContext
from tinyagents_nb.harness.testkit import FakeTool, ScriptedModel
from tinyagents_nb.rlm import RLM, RLMLimits
from tinyagents_nb.widgets import CodeStep, RunDashboard

from .conftest import CommLog, row_text, until

pytestmark = pytest.mark.anyio


def step_rows(dash: RunDashboard) -> list[Any]:
    return [row for row in dash.transcript.widget.children if 'class="ta-step"' in row_text(row)]


async def test_each_code_step_shows_its_code_and_output_with_errors_and_cuts_marked(comms: CommLog) -> None:
    model = ScriptedModel(
        [
            py("x = 6 * 7\nprint(x)"),
            py("print(1 / 0)"),
            py("print('y' * 5000)", "print('second block')"),
            py("FINAL(x)"),
        ]
    )
    rlm = RLM(model=model, environment="local", limits=RLMLimits(max_output_chars=200))
    dash = RunDashboard(rlm.invoke_streaming("Compute."), title="rlm")
    await dash.wait_flushed()

    rows = step_rows(dash)
    texts = [row_text(row) for row in rows]
    assert len(texts) == 5
    first = texts[0]
    assert "<b>step 1</b> · ✓" in first
    assert "<details><summary>code · 2 lines</summary>" in first  # code collapsible
    assert "```python\nx = 6 * 7\nprint(x)\n```" in first  # a fence the frontend highlights
    assert first.index("</details>") < first.index("```text\n42\n```")  # the output under it, visible
    assert "✗ ZeroDivisionError" in texts[1]
    assert "ZeroDivisionError" in texts[1].split("```text", 1)[1]  # the traceback is the output
    assert "output cut to fit" in texts[2]
    assert "<b>step 3</b>" in texts[2]
    assert "<b>step 3 · block 2</b>" in texts[3]
    assert "*(no output)*" in texts[4]  # FINAL prints nothing
    assert all(row._dom_classes == ("ta-step-row",) for row in rows)
    # each step follows the reply that carried it
    children = [row_text(row) for row in dash.transcript.widget.children]
    assert children.index(texts[0]) == children.index(next(c for c in children if "x = 6 * 7" in c)) + 1
    steps, _, _ = dash.log_snapshot()
    assert [(s.iteration, s.index, s.status()) for s in steps] == [
        (1, 0, "ok"),
        (2, 0, "ZeroDivisionError"),
        (3, 0, "ok"),
        (3, 1, "ok"),
        (4, 0, "ok"),
    ]
    assert steps[2].truncated


async def test_a_step_row_updates_when_its_output_arrives(comms: CommLog) -> None:
    model = ScriptedModel([py("import time; time.sleep(0.3); print('slept')"), py("FINAL(1)")])
    stream = RLM(model=model, environment="local").invoke_streaming("Wait.")
    dash = RunDashboard(stream)
    dash.start()
    await until(lambda: bool(dash.log.steps))
    dash.flush()
    assert "⋯ running" in row_text(step_rows(dash)[0])
    await dash.wait_flushed()
    assert "```text\nslept\n```" in row_text(step_rows(dash)[0])


def test_untrusted_code_and_output_cannot_close_their_fence_or_inject_html() -> None:
    step = CodeStep(run_id="r", call_id="rlm-1", iteration=1, index=0, code="s = '```'\n```\n<script>x</script>")
    step.output, step.error_type = "````\n<img src=x onerror=alert(1)>", None
    markdown = step.markdown(output_chars=1_000)
    assert "````python\ns = '```'\n```\n<script>x</script>\n````" in markdown  # longer than any run inside
    assert "`````text\n````\n<img src=x onerror=alert(1)>\n`````" in markdown
    assert "````python\ns = '```'\n```\n<script>x</script>\n````" in step.plain(output_chars=1_000, code=True)
    assert "````python" in step.markdown(output_chars=1_000, collapse_code=False)
    assert "<details>" not in step.markdown(output_chars=1_000, collapse_code=False)
    outside = markdown.replace("<script>x</script>", "").replace("<img src=x onerror=alert(1)>", "")
    assert "<script" not in outside
    assert "<img" not in outside
    hostile = CodeStep(run_id="r", call_id="c", iteration=1, index=1, code="1", caption="<b>evil</b>")
    assert "&lt;b&gt;evil&lt;/b&gt;" in hostile.markdown(output_chars=10)


async def test_sub_queries_appear_in_the_agents_tree_with_their_usage_and_cost(comms: CommLog) -> None:
    model = ScriptedModel([py("print(llm_batch(['ERROR ERROR', 'ERROR', 'ok']))"), py("FINAL('done')")])
    prices = CostTracker(
        prices={
            "scripted": ModelPricing(input_per_mtok=1, output_per_mtok=2),
            "sub": ModelPricing(input_per_mtok=10, output_per_mtok=20),
        }
    )
    rlm = RLM(model=model, sub_model=sub_model(), environment="local")
    stream = rlm.invoke_streaming("Count.", run_context=RunContext(costs=prices))
    dash = RunDashboard(stream, title="rlm")
    await dash.wait_flushed()

    nodes = dash.tree.ordered()
    assert [(n.name, n.depth, n.status) for n in nodes] == [("rlm", 0, "completed")] + [("llm", 1, "completed")] * 3
    html = dash.agents.widget.value
    usage, costs = stream.context.usage, stream.context.costs
    for node in nodes[1:]:
        tokens = usage.for_subtree(node.run_id).total_tokens
        usd = costs.for_subtree(node.run_id).total_usd
        assert tokens > 0
        assert usd is not None
        assert usd > 0
        assert f'<td class="num">{tokens:,}</td>' in html
    assert "['2', '1', '0']" in row_text(step_rows(dash)[0])
    frame = dash.costs.dataframe()
    assert set(frame["model"]) == {"scripted", "sub", ""}  # "" is the total row


async def test_repl_calls_are_shown_once_as_code_steps_not_again_as_tool_rows(comms: CommLog) -> None:
    model = ScriptedModel([py("x = 6 * 7\nprint(x)"), py("print(x + 1)"), py("FINAL(x)")])
    dash = RunDashboard(RLM(model=model, environment="local").invoke_streaming("Compute."), title="rlm")
    await dash.wait_flushed()

    assert dash.state.terminal == "completed"
    assert dash.tools.rows == {}  # every repl call is a step in the transcript: no second view of it
    assert dash.tools.count == 0
    assert dash.tools.widget.children == ()
    assert dash._tools_section.layout.display == "none"  # no empty "Tool calls" section either
    texts = [row_text(row) for row in step_rows(dash)]
    assert [("<b>step 1</b> · ✓" in t, "<b>step 2</b> · ✓" in t, "<b>step 3</b> · ✓" in t) for t in texts] == [
        (True, False, False),
        (False, True, False),
        (False, False, True),
    ]
    assert "```text\n42\n```" in texts[0]
    assert "```text\n43\n```" in texts[1]
    assert (dash.state.tool_calls, dash.state.code_steps) == (0, 3)  # counted as what the record calls them: steps


async def test_a_tool_named_repl_outside_an_rlm_run_keeps_its_row(comms: CommLog) -> None:
    model = ScriptedModel([ScriptedModel.tool_call("repl", {"blocks": ["1"]}), "done"])
    dash = RunDashboard(AgentHarness(model=model, tools=[FakeTool("repl", ["1"])]).invoke_streaming("go"))
    await dash.wait_flushed()
    (row,) = dash.tools.rows.values()
    assert (row.name, row.status, row.output) == ("repl", "ok", "1")


async def test_a_step_whose_call_was_stopped_mid_block_says_so(comms: CommLog) -> None:
    model = ScriptedModel([py("import time\nwhile True: time.sleep(0.01)"), py("FINAL(1)")])
    stream = RLM(model=model, environment="local").invoke_streaming("Spin.")
    dash = RunDashboard(stream)
    dash.start()
    await until(lambda: bool(dash.log.steps))
    stream.start().cancel()  # asyncio-level: the block's output never comes, the loop closes the call
    await dash.wait_flushed()
    assert dash.tools.rows == {}
    (text,) = [row_text(row) for row in step_rows(dash)]
    assert "⋯ running" not in text
    assert "✗ CancelledError" in text
