"""Tool rows that read naturally (issue 25): a tool's summary ``tool.delta`` becomes its row's headline,
a plain progress report does not, and a code-running call shows its code as code."""

from __future__ import annotations

import pytest

from tinyagents_nb.harness import AgentHarness, ToolCall, ToolReporter, tool
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.widgets import RunDashboard

from .conftest import CommLog

pytestmark = pytest.mark.anyio


@tool
def inspect_variable(name: str, report: ToolReporter) -> str:
    """Look at a variable."""
    report("half way")  # progress, not a summary: the row keeps the tool's name as its headline
    report(f"looked at `{name}` (10,000 \u00d7 8) <b>", data={"summary": True})
    return "a frame"


@tool
def run_code(code: str) -> str:
    """Run code."""
    return "42"


@tool
def slow(n: int, report: ToolReporter) -> str:
    """Report progress only."""
    report("half way")
    return "done"


async def test_summary_rows_and_code_rows(comms: CommLog) -> None:
    calls = [
        ToolCall(id="a", name="inspect_variable", arguments={"name": "df"}),
        ToolCall(id="b", name="run_code", arguments={"code": "x = 1\nprint('<x>')"}),
        ToolCall(id="c", name="slow", arguments={"n": 1}),
    ]
    model = ScriptedModel([ScriptedModel.tool_calls(calls), "ok"])
    harness = AgentHarness(model=model, tools=[inspect_variable, run_code, slow])
    dash = RunDashboard(harness.invoke_streaming("go"))
    await dash.wait_flushed()
    first, second, third = (row.value for row in dash.tools.widget.children)
    assert "looked at <code>df</code> (10,000 \u00d7 8) &lt;b&gt;" in first  # escaped; `name` became code
    assert "inspect_variable" in first  # still named, beside the sentence
    assert '<code class="language-python">x = 1\nprint(&#x27;&lt;x&gt;&#x27;)</code>' in second
    assert "arguments" not in second
    assert second.index("language-python") < second.index(">42</pre>")  # its output under its code
    assert "<code>slow</code>" in third  # a progress report alone leaves the name as the headline
    assert "half way" not in third
