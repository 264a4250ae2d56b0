"""The record's Markdown never lets JupyterLab typeset package-written ``$`` as math, and reads plainly.

``math_dollars`` applies JupyterLab's own rule (rendermime's ``removeMath``): code blocks and code
spans are set aside, then every ``$`` left opens or closes inline math. A backslash does not help:
JupyterLab's Markdown renderer turns ``\\$`` into a bare ``$`` before MathJax reads the page. So
package-written lines must have no ``$`` outside code. The record's final sanitising pass writes
code spans as ``<code>`` elements with ``\\$`` inside: ``removeMath`` reads ``\\$`` as an escaped
dollar (never a delimiter) and MathJax skips ``<code>`` elements, so those are set aside too. The
browser test renders the same records in JupyterLab itself (tests/browser/test_notebook_polish.py).
"""

from __future__ import annotations

import re

import anyio
import pytest
from IPython.core.interactiveshell import InteractiveShell

from tinyagents_nb.harness import ModelPricing, ToolCall, Usage, tool
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import NotebookRun, NotebookSession

from .conftest import last_run, run_ok

pytestmark = pytest.mark.anyio

_FENCED = re.compile(r"^(`{3,}|~{3,})[^`\n]*\n[\s\S]*?^\1`*$", re.MULTILINE)
_SPAN = re.compile(r"(^|[^\\])(`+)([^\n]*?[^`\n])\2(?!`)", re.MULTILINE)
_CODE_ELEMENT = re.compile(r"<code>(?:[^<$]|\\\$)*</code>")  # only escaped dollars inside
_FULL_RUN_ID = re.compile(r"run-[0-9a-f]{12}-[0-9a-f]{6}-[0-9a-f]{8}")


def math_dollars(markdown: str) -> list[str]:
    """The lines in which JupyterLab would read a ``$`` as a math delimiter."""
    kept = _SPAN.sub(lambda m: m.group(1), _FENCED.sub("", markdown))
    kept = _CODE_ELEMENT.sub("", kept)
    return [line for line in kept.splitlines() if "$" in line]


def test_the_rule_catches_a_backslash_dollar_and_spares_code() -> None:
    assert math_dollars(r"spent \$0.1 of \$0.5") == [r"spent \$0.1 of \$0.5"]
    assert math_dollars(r"spent <code>\$0\.1</code> of <code>\$0\.5</code>") == []
    assert math_dollars(r"spent <code>$0.1</code> of <code>$0.5</code>") != []  # an unescaped one still counts
    assert math_dollars("spent `$0.1` of `$0.5`\n\n```\n$x$\n```") == []


def _record(handle: NotebookRun) -> dict[str, str]:
    bundle = handle._repr_mimebundle_()
    assert "text/markdown" in bundle, "the run has no record yet"
    return bundle


def test_a_budget_refusal_reads_plainly_and_says_how_to_raise_the_cap(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    session.context.costs.register_price("scripted", ModelPricing(input_per_mtok=1000, output_per_mtok=1000))
    session.register_model("priced", ScriptedModel(["never sent"]))
    run_ok(shell, "%config AgentMagics.max_cost_usd = 0.0001")
    run_ok(shell, "%%agent --model priced --name s1\nWhat does it cost?")
    record = _record(last_run(shell))
    markdown = record["text/markdown"]
    assert "BudgetExceeded" in markdown
    assert math_dollars(markdown) == [], markdown
    assert not _FULL_RUN_ID.search(markdown + record["text/plain"])  # the run's name instead
    assert "<code>%config AgentMagics.max_cost_usd = …" in markdown.replace("\\", "")
    assert "raise the cap with %config AgentMagics.max_cost_usd" in record["text/plain"]


def test_the_session_cap_names_its_own_setting(shell: InteractiveShell, session: NotebookSession) -> None:
    session.context.costs.register_price("scripted", ModelPricing(input_per_mtok=1000, output_per_mtok=1000))
    session.register_model("priced", ScriptedModel(["never sent"]))
    run_ok(shell, "%config AgentMagics.session_max_cost_usd = 0.0001")
    run_ok(shell, "%%agent --model priced\nWhat does it cost?")
    plain = _record(last_run(shell))["text/plain"]
    assert "%config AgentMagics.session_max_cost_usd = …" in plain


async def test_every_line_kind_with_a_dollar_stays_out_of_math(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    """Tool call and result, an approval decision with its reason, the summary: each with ``$`` in it."""

    @tool(requires_approval=True)
    def pay(amount: str) -> str:
        """Pay an amount."""
        return f"paid {amount} (fee $0.30)"

    session.register_tool(pay)
    usage = Usage(input_tokens=10, output_tokens=5)
    calls = [ToolCall(id="p1", name="pay", arguments={"amount": "$5"})]
    calls.append(ToolCall(id="p2", name="pay", arguments={"amount": "$500"}))
    script = [ScriptedModel.tool_calls(calls, usage=usage), ScriptedModel.text("Paid $5 + $0.30.")]
    session.register_model("payer", ScriptedModel(script))
    run_ok(shell, '%config AgentMagics.approvals = "ask"')
    run_ok(shell, "%%agent --model payer --name bill --background\nPay $5 to $HOME")
    handle = last_run(shell)
    with anyio.fail_after(10):
        while len(handle.stream.pending_approvals()) < 2:  # noqa: ASYNC110 - plain state
            await anyio.sleep(0.01)
    handle.stream.approve("p1", by="alice ($ ok)")
    handle.stream.deny("p2", "never more than $100, not $500", by="bob")
    await handle.wait()
    markdown = _record(handle)["text/markdown"]
    package_lines = [line for line in markdown.split("\n\n") if "Paid $5" not in line]  # the model's own text
    assert math_dollars("\n\n".join(package_lines)) == [], markdown
    assert "never more than" in markdown
    assert "approved pay" in markdown
