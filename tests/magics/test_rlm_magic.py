"""``%%agent --rlm``: notebook values in a REPL, the same handle and dashboard as any run, one-line errors."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from tests.widgets.markdown_check import live_html
from tinyagents_nb.harness import ModelRequest, ModelResponse
from tinyagents_nb.harness.testkit import FunctionModel, ScriptedModel
from tinyagents_nb.magics import NotebookSession
from tinyagents_nb.magics._rlm import rlm_threads, session_kernel
from tinyagents_nb.rlm import RLMCode, Trajectory

from .conftest import last_run, run_error, run_ok


def py(code: str) -> ModelResponse:
    return ScriptedModel.text(f"```python\n{code}\n```")


def test_rlm_local_runs_over_a_notebook_value(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    model = ScriptedModel([py("print(len(logs))"), py("FINAL(sum('ERROR' in l for l in logs))")])
    session.register_model("fake", model)
    shell.user_ns["logs"] = ["ERROR a", "INFO b", "ERROR c"] * 1_000
    run_ok(shell, "%%agent --rlm local --context logs --model fake --wait\nHow many error lines?")
    run = last_run(shell)
    assert run.status == "completed"
    assert run.final_text == "2000"
    assert "2000" in capsys.readouterr().out
    assert run in session.runs
    assert "`logs`: list, 3,000 items" in model.requests[0].messages[1].text
    assert model.requests[1].messages[-1].text == "3000"
    kinds = session.journal_frame(run)["kind"].tolist()
    assert "rlm.code" in kinds
    assert "rlm.output" in kinds


@pytest.mark.kernel
def test_rlm_in_the_sessions_child_kernel(shell: InteractiveShell, session: NotebookSession) -> None:
    model = ScriptedModel([py("import os\nFINAL((os.getpid() != PARENT, sum(data)))")])
    session.register_model("fake", model)
    shell.user_ns.update(data=list(range(10)), PARENT=__import__("os").getpid())
    try:
        run_ok(shell, "%%agent --rlm --context data,PARENT --model fake --wait\nSum it.")
        assert last_run(shell).final_text == "(True, 45)"
    finally:
        session_kernel(session).close()


def test_rlm_flags_errors_are_one_line_usage_errors(shell: InteractiveShell, session: NotebookSession) -> None:
    session.register_model("fake", ScriptedModel([py("FINAL(1)")]))
    error = run_error(shell, "%%agent --rlm local --context missing --model fake\nGo.")
    assert isinstance(error, UsageError)
    assert "no notebook variable named 'missing'" in str(error)
    assert isinstance(run_error(shell, "%%agent --context x --model fake\nGo."), UsageError)
    shell.user_ns["lock"] = threading.Lock()
    error = run_error(shell, "%%agent --rlm --context lock --model fake\nGo.")
    assert isinstance(error, UsageError)
    assert "'lock'" in str(error)
    assert "\n" not in str(error)
    assert not session_kernel(session).started  # refused before any kernel was started


def test_rlm_runs_show_their_code_steps_as_events(shell: InteractiveShell, session: NotebookSession) -> None:
    session.register_model("fake", ScriptedModel([py("x = 6 * 7\nprint(x)"), py("FINAL(x)")]))
    seen: list[RLMCode] = []
    session.context.events.add_listener(lambda offset, e: seen.append(e) if isinstance(e, RLMCode) else None)
    run_ok(shell, "%%agent --rlm local --model fake --wait\nCompute.")
    assert [e.code for e in seen] == ["x = 6 * 7\nprint(x)", "FINAL(x)"]
    assert last_run(shell).final_text == "42"


def test_the_record_of_an_rlm_run_has_its_code_steps_and_answer(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    model = ScriptedModel([py("x = 6 * 7\nprint(x)"), py("print(undefined)"), py("FINAL(x)")])
    session.register_model("fake", model)
    run_ok(shell, "%%agent --rlm local --model fake --name r\nCompute.")
    record = last_run(shell)._repr_mimebundle_()
    plain = record["text/plain"].splitlines()
    assert plain[:6] == ['agent run "r" · fake', "step 1 (ok)", "```python", "x = 6 * 7", "print(x)", "```"]
    assert plain[6] == "  → 42"
    assert "step 2 (error: NameError)" in plain
    assert "answer: 42" in plain
    assert not any("repl" in line for line in plain)  # the protocol's tool calls are shown as steps
    markdown = record["text/markdown"]
    assert "<b>step 1</b> · ✓</div>\n\n```python\nx = 6 * 7\nprint(x)\n```\n\n```text\n42\n```" in markdown
    assert "<details>" not in markdown  # the code is shown once, not collapsed under a copy of itself
    assert "<b>step 2</b> · ✗ NameError" in markdown
    assert "**answer:**\n\n42" in markdown
    assert " s</div>" not in markdown  # no timings: nbval compares the record


_PROSE_AND_CODE = [
    ScriptedModel.text("First I look at the data.\n```python\nx = 6 * 7\nprint(x)\n```\nThen I check it."),
    ScriptedModel.text(
        "Two blocks now.\n```python\nprint(x + 1)\n```\nand\n```python\nprint(undefined)\n```\n"
        "```python\nprint('never runs')\n```\nBye."
    ),
    ScriptedModel.text("```python\nFINAL(x)\n```"),
]


@pytest.mark.parametrize("environment", ["local", pytest.param("kernel", marks=pytest.mark.kernel)])
def test_the_record_shows_each_code_block_once_with_its_output_right_after_it(
    shell: InteractiveShell, session: NotebookSession, environment: str
) -> None:
    session.register_model("fake", ScriptedModel(list(_PROSE_AND_CODE)))
    flag = "" if environment == "kernel" else " local"
    try:
        run_ok(shell, f"%%agent --rlm{flag} --model fake --name r\nCompute.")
    finally:
        session_kernel(session).close()
    run = last_run(shell)
    assert run.final_text == "42"
    record = run._repr_mimebundle_()  # an ended run displays as its record (record_bundle)
    codes = ["x = 6 * 7\nprint(x)", "print(x + 1)", "print(undefined)", "print('never runs')", "FINAL(x)"]
    for mime in ("text/markdown", "text/plain"):
        text = record[mime]
        assert text.count("```python") == len(codes), mime  # every block fenced once, no copy of it anywhere
        for code in codes:  # (a kernel's traceback may quote a line of it: its output, not a copy)
            assert text.count(f"```python\n{code}\n```") == 1, (mime, code)
        at = [text.index(f"```python\n{code}\n```") for code in codes]
        assert at == sorted(at), mime  # in the replies' order
        assert text.index("First I look") < at[0] < text.index("Then I check it") < text.index("Two blocks now")
        assert text.index("Two blocks now") < at[1] < text.index("and") < at[2] < text.index("Bye.") < at[4]
        outputs = ["42", "43", "NameError: name 'undefined' is not defined"]
        for code, output, after in zip(codes, outputs, at[1:], strict=False):
            found = text.index(output, text.index(code) + len(code))
            assert found < after, (mime, code)  # each output comes after its code, before the next block
        assert text.index("did not run", at[3]) < at[4]  # the block after the failing one is marked
    assert "```text\n42\n```" in record["text/markdown"]
    assert "  → 43" in record["text/plain"]


def test_rlm_thread_keeps_the_repl_and_the_transcript_across_three_cells(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    model = ScriptedModel(
        [
            py(
                "errors = [l for l in logs if l.startswith('ERROR')]\nanswer.update(content=str(len(errors)), ready=True)"
            ),
            py("answer.update(content=str(len(set(errors))), ready=True)"),
            py("answer['content'] = errors[-1]\nanswer['ready'] = True"),
        ]
    )
    session.register_model("fake", model)
    shell.user_ns["logs"] = ["ERROR a", "INFO b", "ERROR c"]
    run_ok(shell, "%%agent --rlm local --thread audit --context logs --model fake --wait\nHow many errors?")
    run_ok(shell, "%%agent --rlm local --thread audit --model fake --wait\nHow many distinct?")
    run_ok(shell, "%%agent --rlm local --thread audit --model fake --wait\nThe last one?")
    assert last_run(shell).final_text == "ERROR c"  # cell 3 used `errors`, made by cell 1's code
    texts = [m.text for m in model.requests[-1].messages if m.role == "user"]
    assert texts[0].startswith("Task:\nHow many errors?")
    assert texts[-1].startswith("Next task:\nThe last one?")
    error = run_error(shell, "%%agent --rlm --thread audit --model fake\nAgain.")
    assert isinstance(error, UsageError)
    assert "its REPL is 'local'" in str(error)
    # without --thread, a cell starts from a fresh REPL
    fresh = ScriptedModel([py("print('errors' in dir())"), py("FINAL(1)")])
    session.register_model("fresh", fresh)
    run_ok(shell, "%%agent --rlm local --model fresh --wait\nFresh?")
    assert fresh.requests[1].messages[-1].text == "False"


def test_the_record_of_a_run_a_limit_ended_shows_its_partial_answer(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    model = ScriptedModel([py("answer['content'] = 'about <b>40</b>'"), py("print(1)")])
    session.register_model("fake", model)
    run_ok(shell, "%%agent --rlm local --model fake --max-model-calls 1 --name p\nCount.")
    run = last_run(shell)
    assert run.status == "failed"
    record = run._repr_mimebundle_()
    plain = record["text/plain"].splitlines()
    assert "run failed: LimitExceeded: limit exceeded: 1 replies with code and no ready answer" in plain
    assert "partial answer: about <b>40</b>" in plain
    markdown = record["text/markdown"]
    assert "**partial answer:**" in markdown
    shown = markdown.split("**partial answer:**")[1]
    assert "about" in shown
    assert "<b>" not in shown  # model text is untrusted: no raw HTML in the record


def test_rlm_output_validates_the_answer_against_a_notebook_class(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    shell.run_cell("import pydantic\nclass Tally(pydantic.BaseModel):\n    errors: int")
    model = ScriptedModel([py("answer.update(content={'errors': 'x'}, ready=True)"), py("FINAL({'errors': 2})")])
    session.register_model("fake", model)
    run_ok(shell, "%%agent --rlm local --output Tally --model fake --wait\nTally.")
    outcome = last_run(shell).outcome
    assert outcome is not None
    assert outcome.structured is not None
    assert outcome.structured.value.errors == 2
    assert "does not match Tally" in model.requests[1].messages[-1].text
    error = run_error(shell, "%%agent --rlm local --output Missing --model fake\nTally.")
    assert isinstance(error, UsageError)
    assert "no class of that name" in str(error)


def test_an_rlm_thread_and_chat_cells_share_the_conversation_both_ways(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    coder = ScriptedModel(
        [py("errors = [l for l in logs if 'ERROR' in l]\nFINAL(len(errors))"), py("FINAL(errors[0])")]
    )
    seen: list[list[tuple[str, str]]] = []

    def chat(request: ModelRequest) -> ModelResponse:
        seen.append([(m.role, m.text) for m in request.messages if m.role in ("user", "assistant")])
        return ScriptedModel.text("The first error is the one to fix.")

    session.register_model("coder", coder)
    session.register_model("chat", FunctionModel(chat))
    shell.user_ns["logs"] = ["ERROR a", "INFO b", "ERROR c"]
    run_ok(shell, "%%agent --rlm local --thread audit --context logs --model coder --wait\nHow many errors?")
    assert session.thread_id == "audit"  # like a chat cell's --thread, it became the current thread
    run_ok(shell, "%%agent --thread audit --model chat --wait\nWhich one matters?")
    # the chat run saw the RLM's task and answer as an ordinary turn
    assert seen[0] == [("user", "How many errors?"), ("assistant", "2"), ("user", "Which one matters?")]
    run_ok(shell, "%%agent --rlm local --thread audit --model coder --wait\nShow it.")
    assert last_run(shell).final_text == "ERROR a"
    sent = [(m.role, m.text) for m in coder.requests[-1].messages if m.role in ("user", "assistant")]
    # ... and the next RLM turn saw the chat turn, between its last answer and its next task
    at = sent.index(("user", "Which one matters?"))
    assert sent[at + 1] == ("assistant", "The first error is the one to fix.")
    assert sent[at + 2][1].startswith("Next task:\nShow it.")
    history = [(m.role, m.text) for m in session.messages("audit")]
    assert history[-2:] == [("user", "Show it."), ("assistant", "ERROR a")]
    assert len(history) == 6  # two RLM turns and one chat turn, each once
    # the record of the last RLM run shows its own steps, not the chat turn it was given
    record = last_run(shell)._repr_mimebundle_()["text/plain"]
    assert "The first error is the one to fix." not in record


def test_agent_trajectory_shows_and_saves_an_rlm_runs_tree(
    shell: InteractiveShell, session: NotebookSession, tmp_path: Path
) -> None:
    session.register_model("coder", ScriptedModel([py("r = llm_batch(['a', 'b'])\nprint(r)"), py("FINAL(r)")]))
    session.register_model("sub", FunctionModel(lambda r: ScriptedModel.text(r.messages[-1].text * 2)))
    run_ok(shell, "%%agent --rlm local --sub-model sub --model coder --name t --wait\n<b>Double</b> them.")
    shown = shell.run_line_magic("agent", "trajectory t")
    assert isinstance(shown, Trajectory)
    assert shown.root.answer == "['aa', 'bb']"
    assert [c.answer for c in shown.children(shown.root)] == ["aa", "bb"]
    assert live_html(shell.display_formatter.format(shown)[0]["text/markdown"]) == []
    path = tmp_path / "t.jsonl"
    assert shell.run_line_magic("agent", f"trajectory t {path}") is None
    assert Trajectory.load(path).runs == shown.runs
    session.register_model("chat", ScriptedModel(["hi"]))
    run_ok(shell, "%%agent --model chat --name c --wait\nHello.")
    error = run_error(shell, "%agent trajectory c")
    assert isinstance(error, UsageError)
    assert "not an RLM run" in str(error)


def test_agent_rlm_close_and_thread_drop_end_an_rlm_threads_repl(
    shell: InteractiveShell, session: NotebookSession, capsys: pytest.CaptureFixture[str]
) -> None:
    session.register_model("coder", ScriptedModel([py("x = 41\nFINAL(x)"), py("FINAL('x' in dir())")] * 3))
    run_ok(shell, "%%agent --rlm local --thread a --model coder --wait\nSet x.")
    first = rlm_threads(session)["a"]
    assert shell.run_line_magic("agent", "rlm")["thread"].tolist() == ["a"]
    run_ok(shell, "%agent rlm close a")
    assert "closed the RLM session of thread a" in capsys.readouterr().out
    assert first.closed
    assert rlm_threads(session) == {}
    run_ok(shell, "%%agent --rlm local --thread a --model coder --wait\nIs x there?")
    assert last_run(shell).final_text == "False"  # a fresh REPL
    assert isinstance(run_error(shell, "%agent rlm close nope"), UsageError)
    # dropping the thread forgets its messages and stops its REPL
    kept = rlm_threads(session)["a"]
    run_ok(shell, "%agent thread drop a")
    assert kept.closed
    assert session.messages("a") == []
    run_ok(shell, "%%agent --rlm local --thread b --model coder --wait\nSet x.")
    kept = rlm_threads(session)["b"]
    session.reset()  # a reset drops every thread: their REPLs stop
    assert kept.closed


def test_rlm_output_takes_a_dataframe_schema_from_the_notebook(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    shell.run_cell("from tinyagents_nb.rlm import DataFrameSchema\nschema = DataFrameSchema({'n': 'int'})")
    session.register_model(
        "fake",
        ScriptedModel([py("import pandas as pd\nanswer.update(content=pd.DataFrame({'n': [1, 2]}), ready=True)")]),
    )
    run_ok(shell, "%%agent --rlm local --output schema --model fake --wait\nTable.")
    outcome = last_run(shell).outcome
    assert outcome is not None
    assert outcome.structured is not None
    assert outcome.structured.value["n"].tolist() == [1, 2]
