"""``%%agent`` in blocking mode: answers, summaries, threads, interpolation, tools, names and bad input."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from tinyagents_nb.harness import AssistantMessage, SystemMessage, ToolMessage, Usage, UserMessage
from tinyagents_nb.harness.testkit import ScriptedModel, SlowModel
from tinyagents_nb.magics import NotebookSession

from .conftest import last_run, run_error, run_ok


def texts(messages: object) -> list[tuple[str, str]]:
    return [(type(m).__name__, m.text) for m in messages]  # type: ignore[attr-defined]


def test_wait_shows_the_dashboard_then_a_deterministic_record(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    session.register_model(
        "fake", ScriptedModel([ScriptedModel.text("Paris.", usage=Usage(input_tokens=12, output_tokens=3))])
    )
    result = run_ok(shell, "%%agent --model fake --wait\nWhat is the capital of France?")
    assert result.result is None  # the dashboard is displayed, not returned
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("<tinyagents run: live dashboard")  # never "running": it may outlive its kernel
    assert lines[1:] == [
        "agent run · fake",
        "Paris.",
        "[completed · 1 model call · 0 tool calls · 15 tokens (12 in, 3 out) · $0.000000]",
    ]
    run = last_run(shell)
    assert run.mode == "waiting"
    assert run.status == "completed"
    assert run.final_text == "Paris."
    record = run._repr_mimebundle_()
    assert record["text/markdown"].startswith("**agent run** · <code>fake</code>\n\nParis.")
    assert "running" not in record["text/plain"]


def test_the_default_mode_waits_with_no_setting(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    session.register_model("fake", ScriptedModel(["ok"]))
    run_ok(shell, "%%agent --model fake\nhi")
    run = last_run(shell)
    assert run.mode == "waiting"
    assert run.status == "completed"  # done when the cell returned
    assert "ok" in capsys.readouterr().out


def test_a_follow_up_cell_continues_the_thread(shell: InteractiveShell, session: NotebookSession) -> None:
    model = ScriptedModel(["Hi Ada.", "Your name is Ada."])
    session.register_model("fake", model)
    run_ok(shell, "%%agent --model fake --system 'You are kind.'\nMy name is Ada.")
    run_ok(shell, "%%agent --model fake --system 'You are kind.'\nWhat is my name?")
    assert texts(model.requests[1].messages) == [
        ("SystemMessage", "You are kind."),
        ("UserMessage", "My name is Ada."),
        ("AssistantMessage", "Hi Ada."),
        ("UserMessage", "What is my name?"),
    ]
    first, second = session.runs
    assert first.thread_id == second.thread_id == session.thread_id


def test_new_thread_starts_a_fresh_conversation(shell: InteractiveShell, session: NotebookSession) -> None:
    model = ScriptedModel(["one", "two", "three"])
    session.register_model("fake", model)
    run_ok(shell, "%%agent --model fake\nfirst")
    before = session.thread_id
    run_ok(shell, "%%agent --model fake --new-thread\nsecond")
    assert texts(model.requests[1].messages) == [("UserMessage", "second")]
    assert session.thread_id != before
    run_ok(shell, f"%%agent --model fake --thread {before}\nthird")  # back to the first conversation
    assert texts(model.requests[2].messages)[:2] == [("UserMessage", "first"), ("AssistantMessage", "one")]


def test_interpolation_of_names_expressions_and_literal_braces(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    model = ScriptedModel(["ok"])
    session.register_model("fake", model)
    run_ok(shell, "import pandas as pd\nx = 42\ndf = pd.DataFrame({'a': [1, 2, 3]})")
    run_ok(
        shell, "%%agent --model fake\nx={x}, rows={len(df)}, cols={list(df.columns)!r}, pi={3.14159:.2f}, {{literal}}"
    )
    prompt = model.requests[0].messages[-1]
    assert isinstance(prompt, UserMessage)
    assert prompt.text == "x=42, rows=3, cols=['a'], pi=3.14, {literal}"


def test_raw_skips_interpolation(shell: InteractiveShell, session: NotebookSession) -> None:
    model = ScriptedModel(["ok"])
    session.register_model("fake", model)
    run_ok(shell, '%%agent --model fake --raw\nreturn {"a": {undefined}}')
    assert model.requests[0].messages[-1].text == 'return {"a": {undefined}}'


@pytest.mark.parametrize(
    ("line", "body", "expected"),
    [
        ("", "Tell me about {undefined_thing}", "name 'undefined_thing' in {undefined_thing} is not defined"),
        ("--model nope", "hi", "unknown model 'nope'"),
        ("--bogus", "hi", "%%agent: unknown option --bogus (%%agent? lists every option)"),
        ("--modle slow", "hi", "unknown option --modle (did you mean --model?"),
        ("", "   \n  ", "the prompt is empty"),
        ("--model openai:gpt-4o-mini", "hi", "%env OPENAI_API_KEY=<your key>"),
        ("--model anthropic:claude-3-5-haiku-latest", "hi", "%env ANTHROPIC_API_KEY=<your key>"),
        ("--model", "hi", "%%agent: --model needs a value, e.g. --model MODEL"),
        ("--thread a --new-thread", "hi", "cannot be combined"),
        ("--name 'not valid'", "hi", "not a valid Python variable name"),
        ("--tools missing", "hi", "unknown tool(s): missing"),
        ("--max-model-calls x", "hi", "--max-model-calls needs a whole number of at least 1, got 'x'"),
        ("--max-model-calls 0", "hi", "--max-model-calls needs a whole number of at least 1, got 0"),
        ("--timeout soon", "hi", "%%agent: --timeout needs a number, got 'soon'"),
        ("--model 'unclosed", "hi", "cannot parse"),
        ("", "unbalanced {1 + ", "unclosed '{'"),
    ],
)
def test_bad_input_is_a_one_line_usage_error(
    shell: InteractiveShell, session: NotebookSession, line: str, body: str, expected: str
) -> None:
    error = run_error(shell, f"%%agent {line}\n{body}")
    assert isinstance(error, UsageError)
    assert expected in str(error)
    assert "\n" not in str(error)
    for argparse_words in ("unrecognized arguments", "expected one argument", "invalid int value", "required"):
        assert argparse_words not in str(error)
    assert session.runs == []  # nothing was started


def test_unknown_model_hint_lists_registered_models_and_providers(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    session.register_model("mine", ScriptedModel(["x"]))
    error = run_error(shell, "%%agent --model nope\nhi")
    assert "registered models: mine" in str(error)
    assert "openai" in str(error)


def test_name_binds_the_handle_and_underscore_agent_always(shell: InteractiveShell, session: NotebookSession) -> None:
    session.register_model("fake", ScriptedModel(["a", "b"]))
    run_ok(shell, "%%agent --model fake --name myrun\nhi")
    first = shell.user_ns["myrun"]
    assert shell.user_ns["_agent"] is first
    assert first.name == "myrun"
    assert first.label == "myrun"
    run_ok(shell, "%%agent --model fake\nagain")
    assert shell.user_ns["myrun"] is first
    assert shell.user_ns["_agent"] is not first
    assert session.runs == [first, shell.user_ns["_agent"]]


def test_env_variable_overrides_the_default_mode(
    shell: InteractiveShell, session: NotebookSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    session.register_model("fake", SlowModel(ScriptedModel(["done", "again"]), delay_s=0.2))
    monkeypatch.setenv("TINYAGENTS_NB_BLOCKING", "0")
    run_ok(shell, "%%agent --model fake\nhi")
    background = last_run(shell)
    assert background.mode == "background"
    assert not background.done  # the cell returned while the run waits on its model
    monkeypatch.setenv("TINYAGENTS_NB_BLOCKING", "1")
    run_ok(shell, "%config AgentMagics.blocking = False")
    run_ok(shell, "%%agent --model fake\nagain")
    waiting = last_run(shell)
    assert waiting.mode == "waiting"
    assert background.done  # the waiting run queued behind it on the same thread
    assert waiting.done


def test_blocking_config_false_makes_background_the_default(shell: InteractiveShell, session: NotebookSession) -> None:
    session.register_model("fake", SlowModel(ScriptedModel(["one", "two"]), delay_s=0.2))
    run_ok(shell, "%config AgentMagics.blocking = False")
    run_ok(shell, "%%agent --model fake\nhi")
    assert last_run(shell).mode == "background"
    run_ok(shell, "%%agent --model fake --wait\nhi again")
    assert last_run(shell).mode == "waiting"
    assert last_run(shell).done


def test_limits_and_timeout_flags_reach_the_run(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    looping = ScriptedModel([ScriptedModel.tool_call("noop"), ScriptedModel.tool_call("noop"), "never"])
    session.register_model("loop", looping)
    session.register_tool(_noop, name="noop")
    run_ok(shell, "%%agent --model loop --max-model-calls 2 --timeout 30\ngo")
    run = last_run(shell)
    assert run.status == "failed"
    assert run.context.config.timeout_s == 30
    out = capsys.readouterr().out
    assert "run failed: LimitExceeded:" in out
    assert "[failed · 2 model calls · 2 tool calls" in out


def _noop() -> str:
    """Does nothing."""
    return "ok"


def test_offline_default_model_explains_how_to_configure(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    run_ok(shell, "%%agent --wait\nSummarize the data")
    out = capsys.readouterr().out
    assert "offline demo model" in out
    assert "'Summarize the data'" in out
    assert "%agent model openai:gpt-4o-mini" in out
    assert "OPENAI_API_KEY" in out
    assert last_run(shell).model == "offline-demo"


def test_system_prompt_and_tool_selection(shell: InteractiveShell, session: NotebookSession) -> None:
    model = ScriptedModel(["a", "b"])
    session.register_model("fake", model)
    session.register_tool(_noop, name="noop")

    @session.tool
    def other(x: int) -> int:
        """Doubles x."""
        return 2 * x

    run_ok(shell, "%%agent --model fake --tools noop --system 'Short answers.'\nhi")
    request = model.requests[0]
    assert [t.name for t in request.tools] == ["noop"]
    assert request.messages[0] == SystemMessage(text="Short answers.")
    run_ok(shell, "%%agent --model fake --tools none\nhi")
    assert model.requests[1].tools == ()


def test_tool_reading_a_notebook_dataframe(shell: InteractiveShell, session: NotebookSession) -> None:
    model = ScriptedModel([ScriptedModel.tool_call("count_rows"), "There are 3 rows."])
    session.register_model("fake", model)
    run_ok(
        shell,
        "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})\n"
        "def count_rows() -> int:\n    '''Rows in the notebook's df.'''\n    return len(df)\n",
    )
    run_ok(shell, "%agent tools add count_rows")
    run_ok(shell, "df = pd.DataFrame({'a': [1, 2, 3, 4]})")  # the tool sees the variable as it is at call time
    run_ok(shell, "%%agent --model fake\nHow many rows?")
    results = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert [(m.name, m.text) for m in results] == [("count_rows", "4")]
    assert last_run(shell).outcome is not None
    assert last_run(shell).outcome.tool_calls == 1


def test_decorators_register_tools_with_runtime_parameters_hidden(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    run_ok(
        shell,
        "from tinyagents_nb.harness import RunContext\n"
        "from tinyagents_nb.magics import agent_tool, get_session\n"
        "@agent_tool\n"
        "def shout(text: str, ctx: RunContext) -> str:\n    '''Upper-cases text.'''\n    return text.upper()\n"
        "@get_session().tool(name='whisper')\n"
        "def quiet(text: str) -> str:\n    '''Lower-cases text.'''\n    return text.lower()\n",
    )
    assert session.tools.names() == ["shout", "whisper"]
    assert list(session.tools["shout"].schema.parameters["properties"]) == ["text"]  # ctx is injected, not shown
    assert shell.user_ns["shout"]("hey", None) == "HEY"  # still callable as the function
    model = ScriptedModel([ScriptedModel.tool_call("shout", {"text": "hi"}), "done"])
    session.register_model("fake", model)
    run_ok(shell, "%%agent --model fake\nshout it")
    assert any(isinstance(m, ToolMessage) and m.text == "HI" for m in model.requests[1].messages)


def test_assistant_messages_are_saved_only_for_completed_runs(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    session.register_model("fake", ScriptedModel(["fine"]))
    run_ok(shell, "%%agent --model fake\nhello")
    assert texts(session.messages()) == [("UserMessage", "hello"), ("AssistantMessage", "fine")]
    assert isinstance(session.messages()[1], AssistantMessage)


def test_background_flag_overrides_a_blocking_default(
    shell: InteractiveShell, session: NotebookSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    session.register_model("fake", ScriptedModel(["done"]))
    monkeypatch.setenv("TINYAGENTS_NB_BLOCKING", "1")

    async def in_a_loop() -> None:
        run_ok(shell, "%%agent --model fake --background\nhi")
        run = last_run(shell)
        assert run.mode == "background"
        assert (await run.wait()).final_text == "done"

    asyncio.run(in_a_loop())
    with pytest.raises(UsageError, match="cannot be combined"):
        shell.run_cell_magic("agent", "--model fake --wait --background", "hi")
