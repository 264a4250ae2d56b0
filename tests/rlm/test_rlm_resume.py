"""Resuming RLM runs: which REPL variables a transcript's blocks made, the note, and refusing other runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinyagents_nb.harness import (
    AgentHarness,
    AssistantMessage,
    ConfigurationError,
    Message,
    ProviderError,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from tinyagents_nb.harness.durable import DurableJournal, RunStore
from tinyagents_nb.harness.testkit import FunctionModel, ScriptedModel
from tinyagents_nb.rlm import REPL_TOOL, RLM, missing_repl_note, repl_variables, rlm_journal

pytestmark = pytest.mark.anyio


def _block(call_id: str, *blocks: str) -> AssistantMessage:
    return AssistantMessage(
        text="", tool_calls=(ToolCall(id=call_id, name=REPL_TOOL, arguments={"blocks": list(blocks)}),)
    )


def test_repl_variables_are_those_of_finished_blocks_with_the_code_that_made_them() -> None:
    messages: list[Message] = [
        UserMessage(text="task"),
        _block("rlm-1", "import json\nrows = json.loads(text)", "def score(r): return 1"),
        ToolMessage(tool_call_id="rlm-1", name=REPL_TOOL, text="ok"),
        _block("rlm-2", "rows = [r for r in rows if r]\nfor i, r in enumerate(rows): pass"),
        ToolMessage(tool_call_id="rlm-2", name=REPL_TOOL, text="ok"),
        _block("rlm-3", "cut_off = 1"),  # never answered: the process died in it
    ]
    made = repl_variables(messages)
    assert sorted(made) == ["i", "json", "r", "rows", "score"]
    assert made["rows"].startswith("rows = [r for r")  # the block that bound it last
    assert made["score"] == "def score(r): return 1"
    note = missing_repl_note(made, ["logs"])
    assert "namespace is not saved" in note
    assert "i, json, r, rows, score" in note
    assert "import json\nrows = json.loads(text)" in note
    assert "were not given again and are missing: logs" in note


async def test_resume_refuses_a_run_that_is_not_an_rlm_run(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    model = ScriptedModel([ProviderError("gone", retryable=False)])
    harness: AgentHarness[None] = AgentHarness(model=model, middleware=[DurableJournal(store)])
    with pytest.raises(ProviderError):
        await harness.invoke("hi")
    (failed,) = store.runs()
    rlm = RLM(model=FunctionModel(lambda r: "x"), environment="local", middleware=[rlm_journal(store)])
    with pytest.raises(ConfigurationError, match="not an RLM run"):
        await rlm.resume(failed.run_id, store=store)
    kept = store.get(failed.run_id)
    assert kept is not None
    assert kept.status == "failed"
    store.close()
