"""``agent_map`` with the local executor against a real 127.0.0.1 server (and in-process fakes)."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pandas as pd
import pydantic
import pytest

from tests.harness.batch.rows_process import RowServerProcess
from tests.harness.batch.rows_server import RowResponder
from tests.harness.replay_server import ReplayServer, chat_completion, usage_body
from tinyagents_nb.harness import AgentHarness, CancellationToken, ConfigurationError, OutputSpec, RunLimits
from tinyagents_nb.harness.batch import MapCheckpoint, MapProgress, agent_map, agent_map_async
from tinyagents_nb.harness.providers import OpenAIChatModel
from tinyagents_nb.harness.testkit import FunctionModel

pytestmark = pytest.mark.anyio

SECRET = "sk-test-0123456789abcdefSECRET"


class Label(pydantic.BaseModel):
    label: str
    score: int


def _model(server: ReplayServer) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-4o-mini-2024-07-18", base_url=server.base_url, api_key=SECRET)


def _frame(n: int) -> pd.DataFrame:
    return pd.DataFrame({"review": [f"review #{i} was fine" for i in range(n)]}, index=[f"r{i}" for i in range(n)])


@pytest.mark.timeout(900)
def test_ten_thousand_rows_structured_with_one_percent_failing() -> None:
    # The server runs in a child process (on the other core, not sharing this process's GIL), and 8
    # rows in flight keep httpcore's pool small: its per-request scan of idle connections grows
    # with the pool. Both cut the test's CPU here by about a third; the rows and requests are the same.
    with RowServerProcess() as server:
        frame = _frame(10_000)
        model = OpenAIChatModel("gpt-4o-mini-2024-07-18", base_url=server.base_url, api_key=SECRET)
        out = agent_map(frame, "Classify: {{review}}", model=model, output=Label, concurrency=8)
        seen = server.seen()
    assert list(out.index) == list(frame.index)
    assert list(out.columns) == ["review", "label", "score", "status", "error", "tokens", "cost_usd"]
    counts = out["status"].value_counts()
    assert counts["failed"] == 100
    assert counts["done"] == 9_900
    assert counts["pending"] == 0
    failed = out[out["status"] == "failed"]
    assert all(int(key[1:]) % 100 == 7 for key in failed.index)
    assert failed["error"].str.contains("not acceptable").all()
    assert out.loc["r8", "label"] == "neg"
    assert out.loc["r9", "score"] == 9
    assert (out.loc[out["status"] == "done", "tokens"] == 1_100).all()
    assert out.loc["r8", "cost_usd"] == pytest.approx(1000 * 0.15e-6 + 100 * 0.6e-6)
    assert set(seen) == set(range(10_000))
    assert sum(seen.values()) == 10_000  # a 400 is not retried: one request per row
    summary = out.attrs["agent_map"]
    assert summary["done"] == 9_900
    assert summary["state"] == "completed"


def test_stop_at_thirty_percent_then_resume_runs_every_row_exactly_once(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    token = CancellationToken()
    responder = RowResponder(on_request=lambda count: token.cancel("Stop") if count == 300 else None)
    replay_server.respond_with(responder)
    frame = _frame(1_000)
    path = str(tmp_path / "map.sqlite")
    first = agent_map(
        frame, "Classify: {{review}}", model=_model(replay_server), output=Label, checkpoint=path, cancellation=token
    )
    assert first.attrs["agent_map"]["state"] == "stopped"
    finished = first[first["status"] != "pending"].index
    assert 250 <= len(finished) <= 330
    first_seen = dict(responder.seen)
    responder.seen.clear()
    responder.on_request = None
    progress = MapProgress("again")
    second = agent_map(
        frame, "Classify: {{review}}", model=_model(replay_server), output=Label, checkpoint=path, progress=progress
    )
    assert second.attrs["agent_map"]["skipped"] == len(finished)
    assert (second["status"] != "pending").all()
    assert (second["status"] == "failed").sum() == 10
    finished_numbers = {int(key[1:]) for key in finished}
    assert finished_numbers.isdisjoint(responder.seen)  # nothing finished was asked for again
    assert set(responder.seen) | finished_numbers == set(range(1_000))
    assert all(count == 1 for count in responder.seen.values())
    assert all(first_seen[n] == 1 for n in finished_numbers)
    assert second.loc[finished, "label"].equals(first.loc[finished, "label"])
    with MapCheckpoint(path) as store:
        (stored,) = store.maps().values()
    assert stored == {"done": 990, "failed": 10}


def test_a_budget_stops_the_map_before_it_is_passed(replay_server: ReplayServer) -> None:
    responder = RowResponder(failing=lambda n: False)
    replay_server.respond_with(responder)
    per_row = 1000 * 0.15e-6 + 100 * 0.6e-6
    out = agent_map(
        _frame(500),
        "Classify: {{review}}",
        model=_model(replay_server),
        output=Label,
        concurrency=8,
        limits=RunLimits(max_cost_usd=per_row * 40.5),
    )
    summary = out.attrs["agent_map"]
    assert summary["state"] == "budget"
    done = int((out["status"] == "done").sum())
    assert 30 <= done <= 40
    assert float(out["cost_usd"].sum()) <= per_row * 40.5
    assert (out["status"] == "pending").sum() == 500 - done
    assert sum(responder.seen.values()) == done  # nothing was sent past the budget


def test_secrets_never_reach_the_checkpoint_or_the_errors(replay_server: ReplayServer, tmp_path: Path) -> None:
    def leaky(body: object) -> tuple[object, ...]:  # a gateway that echoes the key in its error
        return 401, {"error": {"message": f"bad key Bearer {SECRET}", "type": "auth", "code": SECRET}}

    replay_server.respond_with(leaky)
    path = tmp_path / "map.sqlite"
    out = agent_map(_frame(5), "Classify: {{review}}", model=_model(replay_server), checkpoint=str(path))
    assert (out["status"] == "failed").all()
    assert SECRET not in "".join(out["error"])
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert SECRET.encode() not in raw
    assert replay_server.requests[0].headers["authorization"] == f"Bearer {SECRET}"  # it was sent, only not kept
    assert b"Classify" not in raw  # prompts are not stored either, only their digest


def test_list_of_dicts_callable_prompt_and_answer_column() -> None:
    model = FunctionModel(lambda request: request.messages[-1].text.upper())
    out = agent_map([{"a": "x"}, {"a": "y"}], lambda row: f"say {row['a']}", model=model)
    assert list(out["answer"]) == ["SAY X", "SAY Y"]
    assert list(out.index) == [0, 1]
    assert list(out["status"]) == ["done", "done"]


def test_bad_input_fails_before_any_request() -> None:
    model = FunctionModel(lambda request: pytest.fail("no request may be sent"))
    with pytest.raises(ConfigurationError, match="no column 'text'"):
        agent_map([{"a": 1}], "{{text}}", model=model)
    with pytest.raises(ConfigurationError, match="a model or a harness"):
        agent_map([{"a": 1}], "{{a}}")
    with pytest.raises(ConfigurationError, match="executor"):
        agent_map([{"a": 1}], "{{a}}", model=model, executor="spark")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="list of dicts"):
        agent_map("not rows", "{{a}}", model=model)
    with pytest.raises(ConfigurationError, match="names no column"):
        agent_map([{"a": 1}, {"a": 2}], "same for all", model=model)


def test_a_changed_row_runs_again_and_a_harness_gets_the_output(tmp_path: Path) -> None:
    calls: list[str] = []

    def answer(request: object) -> str:
        text = request.messages[-1].text  # type: ignore[attr-defined]
        calls.append(text)
        return json.dumps({"label": text, "score": len(text)})

    harness = AgentHarness(model=FunctionModel(answer))
    spec = OutputSpec.of(Label, strategy="native")
    path = str(tmp_path / "c.sqlite")
    agent_map([{"t": "a"}, {"t": "b"}], "{{t}}", harness=harness, output=spec, checkpoint=path, name="m")
    out = agent_map([{"t": "a"}, {"t": "c"}], "{{t}}", harness=harness, output=spec, checkpoint=path, name="m")
    assert calls == ["a", "b", "c"]
    assert list(out["label"]) == ["a", "c"]
    assert out.attrs["agent_map"]["skipped"] == 1


async def test_stop_leaves_rows_in_flight_pending_and_progress_counts() -> None:
    token = CancellationToken()
    started = threading.Event()

    async def slow(request: object) -> str:
        started.set()
        if len(progress.last_outputs) >= 3:
            token.cancel("Stop")
        return "ok"

    progress = MapProgress("p")
    out = await agent_map_async(
        [{"n": i} for i in range(50)],
        "{{n}}",
        model=FunctionModel(slow),
        concurrency=4,
        cancellation=token,
        progress=progress,
    )
    snap = progress.snapshot()
    assert snap.state == "stopped"
    assert snap.done >= 3
    assert snap.pending == 50 - snap.done
    assert (out["status"] == "pending").sum() == snap.pending
    assert "pending" in snap.line()


def test_the_progress_line_uses_the_one_money_format() -> None:
    progress = MapProgress("p")
    progress.max_cost_usd = 0.05
    assert "$0.000000 of $0.050000" in progress.snapshot().line()


@pytest.mark.filterwarnings("ignore:no price known")
def test_unknown_price_counts_as_unknown_cost(replay_server: ReplayServer) -> None:
    replay_server.respond_with(lambda body: (200, chat_completion("hi", model="mystery-1", usage=usage_body(5, 5))))
    model = OpenAIChatModel("mystery-1", base_url=replay_server.base_url, api_key=SECRET)
    out = agent_map([{"a": "#1"}], "{{a}}", model=model)
    assert out["status"][0] == "done"
    assert pd.isna(out["cost_usd"][0])
    assert out["tokens"][0] == 10


def test_checkpoint_file_is_sqlite_with_one_row_per_row(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    agent_map([{"a": "x"}, {"a": "y"}], "{{a}}", model=FunctionModel(lambda r: "ok"), checkpoint=str(path))
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*), MIN(status) FROM agent_map_rows").fetchone() == (2, "done")


def test_a_key_in_any_row_error_is_scrubbed_before_the_column_and_the_checkpoint(tmp_path: Path) -> None:
    def leaky(request: object) -> str:  # a tool or SDK that puts the key in its message
        raise RuntimeError(f"auth failed for Bearer {SECRET}")

    path = tmp_path / "c.sqlite"
    out = agent_map([{"a": "x"}], "{{a}}", model=FunctionModel(leaky), checkpoint=str(path))
    assert out["status"][0] == "failed"
    assert "auth failed" in out["error"][0]
    assert SECRET not in out["error"][0]
    assert SECRET.encode() not in b"".join(p.read_bytes() for p in tmp_path.iterdir())


def test_the_last_outputs_are_written_out_when_a_snapshot_shows_them() -> None:
    progress = MapProgress("p")
    progress.start(total=3, skipped=0)
    progress.row_ended(0, ok=True, text={"label": "pos", "score": 4}, tokens=1, cost=None)
    progress.row_ended("r1", ok=True, text="x" * 500, tokens=1, cost=None)
    progress.row_ended("r2", ok=False, text="ProviderError: " + "y" * 500, tokens=1, cost=None)
    snap = progress.snapshot()
    assert snap.last_outputs == (("0", '{"label": "pos", "score": 4}'), ("r1", "x" * 200))
    assert snap.errors == (("r2", ("ProviderError: " + "y" * 500)[:300]),)
