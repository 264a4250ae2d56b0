"""A model without a price, and a server answering under another name, said once in the run's record.

The model is a real OpenAI-compatible client against a 127.0.0.1 replay server (a local server's
model has no price): no Python warning reaches the notebook, the record says in one line how to set
a price, ``%agent price`` sets it, and a served name different from the one asked for is noted once.
"""

from __future__ import annotations

import warnings

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from tests.harness.replay_server import ReplayServer, replay_server, sse_text_chunks, usage_body
from tinyagents_nb.harness.providers import OpenAIChatModel, ProviderSpec
from tinyagents_nb.harness.runtime import CostUnknownWarning
from tinyagents_nb.magics import NotebookSession

from .conftest import last_run, run_error, run_ok

__all__ = ["replay_server"]  # the fixture


def local(server: ReplayServer) -> OpenAIChatModel:
    return OpenAIChatModel("llama3", provider=ProviderSpec.compatible(base_url=server.base_url))


def answer(model: str = "llama3") -> list[object]:
    return sse_text_chunks(["Hi", "."], model=model, usage=usage_body(20, 5))  # a notebook run streams


def test_an_unpriced_model_is_said_once_in_one_line_without_a_warning(
    shell: InteractiveShell, session: NotebookSession, replay_server: ReplayServer
) -> None:
    session.register_model("local", local(replay_server))
    replay_server.enqueue(200, answer())
    replay_server.enqueue(200, answer())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # whichever thread warns, it is caught here
        run_ok(shell, "%%agent --model local\nhello")
        first = last_run(shell)._repr_mimebundle_()["text/plain"]
        run_ok(shell, "%%agent --model local\nagain")
        second = last_run(shell)._repr_mimebundle_()["text/plain"]
    assert [str(w.message) for w in caught if issubclass(w.category, CostUnknownWarning)] == []
    notes = [line for line in first.splitlines() if line.startswith("note:")]
    assert notes == [
        "note: no price known for 'llama3', so its cost shows as unknown; "
        "set one with %agent price llama3 INPUT OUTPUT (USD per million tokens)"
    ]
    assert "cost unknown" in first
    assert "note:" not in second  # once per session


def test_agent_price_prices_the_next_runs(
    shell: InteractiveShell,
    session: NotebookSession,
    replay_server: ReplayServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    session.register_model("local", local(replay_server))
    run_ok(shell, "%agent price llama3 1 2")
    assert "price for llama3" in capsys.readouterr().out
    replay_server.enqueue(200, answer())
    run_ok(shell, "%%agent --model local\nhello")
    record = last_run(shell)._repr_mimebundle_()["text/plain"]
    assert "$0.000030" in record  # 20 in at $1/M + 5 out at $2/M
    assert "note:" not in record
    assert "price" in str(run_error(shell, "%agent price llama3 cheap 2"))
    assert isinstance(run_error(shell, "%agent price llama3"), UsageError)


def test_a_server_answering_as_another_model_is_noted_once(
    shell: InteractiveShell, session: NotebookSession, replay_server: ReplayServer
) -> None:
    session.register_model("local", local(replay_server))
    run_ok(shell, "%agent price llama3:latest 0 0")
    replay_server.enqueue(200, answer("llama3:latest"))
    replay_server.enqueue(200, answer("llama3:latest"))
    run_ok(shell, "%%agent --model local\nhello")
    first = last_run(shell)._repr_mimebundle_()["text/plain"]
    run_ok(shell, "%%agent --model local\nagain")
    second = last_run(shell)._repr_mimebundle_()["text/plain"]
    assert "note: the server answered as model 'llama3:latest' (asked for 'llama3')" in first
    assert "note:" not in second
