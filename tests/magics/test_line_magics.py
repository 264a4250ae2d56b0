"""``%agent <command>``: tables and status lines over a session with a few finished runs."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from tinyagents_nb.harness import AgentHarness, ContextWindow, ModelPricing, ModelProfile, SubAgent, Usage
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import NotebookSession

from .conftest import last_run, run_error, run_ok

SECRET = "sk-test-DO-NOT-SHOW-1234567890"


def frame(shell: InteractiveShell, source: str) -> pd.DataFrame:
    result = run_ok(shell, source).result
    assert isinstance(result, pd.DataFrame)
    return result


@pytest.fixture
def two_runs(shell: InteractiveShell, session: NotebookSession) -> NotebookSession:
    """Two finished runs on one thread; the second calls a sub-agent, so costs have two agents."""
    child = AgentHarness(model=ScriptedModel([ScriptedModel.text("42", usage=Usage(input_tokens=5, output_tokens=1))]))
    session.register_tool(SubAgent("calculator", child, description="Does sums.").as_tool())
    session.context.costs.register_price("scripted", ModelPricing(input_per_mtok=1, output_per_mtok=2))
    script = [
        ScriptedModel.text("Hello!", usage=Usage(input_tokens=10, output_tokens=2)),
        ScriptedModel.tool_call("calculator", {"input": "6*7"}, usage=Usage(input_tokens=20, output_tokens=4)),
        ScriptedModel.text("It is 42.", usage=Usage(input_tokens=30, output_tokens=3)),
    ]
    session.register_model("fake", ScriptedModel(script))
    run_ok(shell, "%%agent --model fake --name greet\nhello")
    run_ok(shell, "%%agent --model fake\nwhat is 6*7?")
    return session


def test_runs_table(shell: InteractiveShell, two_runs: NotebookSession) -> None:
    runs = frame(shell, "%agent runs")
    assert next(iter(runs["run"])) == "greet"
    assert list(runs["status"]) == ["completed", "completed"]
    assert list(runs["model_calls"]) == [1, 2]
    assert list(runs["tool_calls"]) == [0, 1]
    assert list(runs["total_tokens"]) == [12, 63]  # the second includes its sub-agent's 6 tokens
    assert list(runs["prompt"]) == ["hello", "what is 6*7?"]


def test_cost_table_by_run_agent_and_model(
    shell: InteractiveShell, two_runs: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    costs = frame(shell, "%agent cost")
    rows = {(r.run, r.agent, r.model): r for r in costs.itertuples()}
    second = last_run(shell).label
    assert set(rows) == {
        ("greet", "main", "scripted"),
        (second, "main", "scripted"),
        (second, "calculator", "scripted"),
    }
    assert rows[("greet", "main", "scripted")].total_tokens == 12
    assert rows[(second, "main", "scripted")].calls == 2
    assert rows[("greet", "main", "scripted")].cost_usd == pytest.approx((10 * 1 + 2 * 2) / 1e6)
    assert "notebook total: 4 billed model calls · 75 tokens · $0.000085" in capsys.readouterr().out


def test_unknown_prices_stay_unknown(shell: InteractiveShell, session: NotebookSession) -> None:
    class Acme(ScriptedModel):
        @property
        def provider(self) -> str:
            return "acme"

    session.register_model("acme", Acme([ScriptedModel.text("x", usage=Usage(input_tokens=1, output_tokens=1))]))
    run_ok(shell, "%%agent --model acme\nhi")  # no Python warning: the record says it in one line
    assert "note: no price known for 'scripted'" in session.runs[-1]._repr_mimebundle_()["text/plain"]
    costs = frame(shell, "%agent cost")
    assert math.isnan(costs["cost_usd"].iloc[0])


def test_cost_table_shows_prompt_cache_reads_and_writes(shell: InteractiveShell, session: NotebookSession) -> None:
    cached = Usage(input_tokens=1_000, cached_input_tokens=600, cache_write_tokens=300, output_tokens=5)
    session.register_model("cachey", ScriptedModel([ScriptedModel.text("x", usage=cached)]))
    run_ok(shell, "%%agent --model cachey\nhi")
    row = frame(shell, "%agent cost").iloc[-1]
    assert (row["input_tokens"], row["cached_input_tokens"], row["cache_write_tokens"]) == (1_000, 600, 300)


def test_history_of_the_current_thread(shell: InteractiveShell, two_runs: NotebookSession) -> None:
    history = frame(shell, "%agent history")
    assert list(history["role"]) == ["user", "assistant", "user", "assistant", "tool", "assistant"]
    assert list(history["text"])[:2] == ["hello", "Hello!"]
    assert list(history["tools"])[3:5] == ["calculator", "calculator"]
    run_ok(shell, "%agent thread some-other-thread")
    other = frame(shell, "%agent history some-other-thread")  # the current thread, still empty
    assert other.empty


def test_status_lines(shell: InteractiveShell, two_runs: NotebookSession, capsys: pytest.CaptureFixture[str]) -> None:
    run_ok(shell, "%agent status")
    run_ok(shell, "%agent")  # status is the default command
    out = capsys.readouterr().out
    assert out.count(f"thread: {two_runs.thread_id}") == 2
    assert "runs: 2 (0 active)" in out
    assert "usage: 75 tokens" in out
    assert "tools: calculator · models: fake" in out


def test_models_table_never_shows_key_values(
    shell: InteractiveShell,
    session: NotebookSession,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    session.register_model("mine", ScriptedModel(["x"]))
    models = frame(shell, "%agent models")
    ready = dict(zip(models["model"], models["ready"], strict=True))
    assert ready["openai:<model>"]
    assert not ready["groq:<model>"]
    assert ready["mine"]
    assert "OPENAI_API_KEY" in set(models["api_key_env"])
    assert not models["api_key_env"].isna().any()  # registered models and keyless hosts show "", not NaN
    run_ok(shell, "%agent model")
    run_ok(shell, "%agent status")
    run_ok(shell, "%agent model openai:gpt-4o-mini")  # builds the client (no request) to check the key
    assert session.default_model == "openai:gpt-4o-mini"
    out = capsys.readouterr().out
    everything = out + models.to_string() + repr(session.resolve_model())
    assert SECRET not in everything
    assert SECRET[:12] not in everything
    assert "keys found: OPENAI_API_KEY" in out


def test_model_command_validates_before_setting(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    error = run_error(shell, "%agent model groq:llama-3.3-70b-versatile")
    assert isinstance(error, UsageError)
    assert "GROQ_API_KEY" in str(error)
    assert session.default_model is None
    session.register_model("fake", ScriptedModel(["x"]))
    run_ok(shell, "%agent model fake")
    magics = shell.magics_manager.registry["AgentMagics"]
    assert magics.default_model == "fake" == session.default_model
    run_ok(shell, "%agent model offline-demo")
    assert session.default_model is None
    assert "no model configured" in capsys.readouterr().out


def test_tools_list_add_and_remove(shell: InteractiveShell, session: NotebookSession) -> None:
    run_ok(shell, "def area(w: float, h: float) -> float:\n    '''Area of a rectangle.'''\n    return w * h")
    run_ok(shell, "%agent tools add area")
    tools = frame(shell, "%agent tools")
    assert tools.to_dict("records") == [{"tool": "area", "parameters": "w, h", "description": "Area of a rectangle."}]
    run_ok(shell, "%agent tools remove area")
    assert frame(shell, "%agent tools").empty


def test_removing_tools_is_all_or_nothing(shell: InteractiveShell, session: NotebookSession) -> None:
    run_ok(shell, "def shout(s: str) -> str:\n    return s.upper()")
    run_ok(shell, "%agent tools add shout")
    error = run_error(shell, "%agent tools remove shout nodoc")
    assert isinstance(error, UsageError)
    assert "no tool named 'nodoc'; nothing removed" in str(error)
    assert session.tools.names() == ["shout"]


def test_context_reports_the_threads_last_model(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    session.register_model("toolbot", ScriptedModel(["ok"]))  # no profile: no window is ever measured
    run_ok(shell, "%%agent --model toolbot\nhi")
    run_ok(shell, "%agent context")
    out = capsys.readouterr().out.strip().splitlines()[-1]
    assert "model toolbot · context window unknown" in out  # not the default (offline-demo)
    run_ok(shell, "%agent thread new")
    run_ok(shell, "%agent context")
    assert "model offline-demo" in capsys.readouterr().out  # a fresh thread has no last model


@pytest.mark.parametrize(
    ("setup", "command", "expected"),
    [
        ("x = 3", "%agent tools add x", "'x' is a int, not a function"),
        ("class K: pass", "%agent tools add K", "not a function"),
        ("", "%agent tools add nothing_here", "name 'nothing_here' is not defined"),
        ("", "%agent tools frobnicate", "%agent tools add <function>"),
        ("", "%agent tools remove ghost", "no tool named 'ghost'"),
        ("lam = lambda x: x", "%agent tools add lam", "'lam' is a lambda, which has no name the model can call"),
        ("", "%agent bogus", "unknown command %agent bogus (commands: access, approve, batch, budget, context, cost"),
        ("", "%agent hitsory", "unknown command %agent hitsory (did you mean history?"),
        ("", "%agent history nosuchthread", "no thread 'nosuchthread' in this session"),
        ("", "%agent runs extra", "takes no arguments"),
        ("", "%agent steer", "needs text"),
        ("", "%agent pause", "no agent runs yet"),
        ("", "%agent journal nope", "no agent runs yet"),
        ("", "%agent thread 'has space'", "whitespace"),
    ],
)
def test_bad_line_input_is_a_one_line_usage_error(
    shell: InteractiveShell, session: NotebookSession, setup: str, command: str, expected: str
) -> None:
    if setup:
        run_ok(shell, setup)
    error = run_error(shell, command)
    assert isinstance(error, UsageError), error
    assert expected in str(error)
    assert "\n" not in str(error)
    assert not (str(error)[0] == str(error)[-1] == "'")  # not a KeyError's quoted repr


def test_journal_holds_every_event_of_a_run(shell: InteractiveShell, two_runs: NotebookSession) -> None:
    greet = frame(shell, "%agent journal greet")
    assert greet["kind"].iloc[0] == "run.started"
    assert greet["kind"].iloc[-1] == "run.completed"
    assert set(greet["root_run_id"]) == {two_runs.runs[0].run_id}
    everything = frame(shell, "%agent journal")
    assert len(everything) > len(greet)
    assert "subagent.started" in set(everything["kind"])
    latest = frame(shell, "%agent journal -1")
    assert set(latest["root_run_id"]) == {two_runs.runs[1].run_id}


def test_context_gauge(shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]) -> None:
    profile = ModelProfile(name="sized", provider="test", context_window=1_000)
    session.register_model("sized", ScriptedModel(["ok"], profile=profile))
    run_ok(shell, "%agent context")
    assert "context window unknown" in capsys.readouterr().out
    run_ok(shell, "%%agent --model sized\nhello there")
    run_ok(shell, "%agent context")
    out = capsys.readouterr().out.strip().splitlines()[-1]
    window = last_run(shell).context.context_window
    assert isinstance(window, ContextWindow)
    assert window.estimated_prompt_tokens > 0
    assert out.startswith(f"thread {session.thread_id} · model sized · [")
    assert f"{window.estimated_prompt_tokens:,} of {window.usable_tokens:,} prompt tokens" in out


def test_context_estimate_from_history_for_a_known_model(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    session.default_model = "gpt-4o-mini"  # known size; nothing is built or called for the estimate
    run_ok(shell, "%agent context")
    out = capsys.readouterr().out
    assert "model gpt-4o-mini · [" in out
    assert "estimated from the saved history" in out


def test_thread_command(shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]) -> None:
    run_ok(shell, "%agent thread my-analysis")
    assert session.thread_id == "my-analysis"
    run_ok(shell, "%agent thread new")
    assert session.thread_id not in ("my-analysis", "new")
    run_ok(shell, "%agent thread")
    assert f"thread: {session.thread_id} (0 saved messages)" in capsys.readouterr().out


def test_reset_starts_over_but_keeps_models_and_tools(shell: InteractiveShell, two_runs: NotebookSession) -> None:
    thread = two_runs.thread_id
    run_ok(shell, "%agent reset")
    assert two_runs.runs == []
    assert two_runs.thread_id != thread
    assert two_runs.context.usage.total().total_tokens == 0
    assert two_runs.models.names() == ["fake"]
    assert two_runs.tools.names() == ["calculator"]
    assert frame(shell, "%agent runs").empty
    assert frame(shell, "%agent journal").empty
