"""The ``dask`` executor on a real ``distributed.LocalCluster`` against the 127.0.0.1 replay server."""

from __future__ import annotations

import functools

import pydantic
import pytest

from tests.harness.batch.rows_server import RowResponder
from tests.harness.replay_server import ReplayServer
from tinyagents_nb.harness import ConfigurationError, RunLimits
from tinyagents_nb.harness.batch import agent_map
from tinyagents_nb.harness.providers import OpenAIChatModel

distributed = pytest.importorskip("distributed")


class Label(pydantic.BaseModel):
    label: str
    score: int


@pytest.mark.timeout(300)
def test_dask_produces_the_same_frame_as_local(replay_server: ReplayServer) -> None:
    responder = RowResponder()
    replay_server.respond_with(responder)
    factory = functools.partial(
        OpenAIChatModel, "gpt-4o-mini-2024-07-18", base_url=replay_server.base_url, api_key="sk-test-dask"
    )
    rows = [{"text": f"row #{i}"} for i in range(150)]
    local = agent_map(rows, "{{text}}", model=factory(), output=Label)
    responder.seen.clear()
    remote = agent_map(
        rows,
        "{{text}}",
        model=factory(),
        output=Label,
        executor="dask",
        executor_options={"model_factory": factory, "workers": 2, "partition_rows": 40},
    )
    assert sum(responder.seen.values()) == 150  # every row ran once, on the workers
    cols = ["text", "label", "score", "status", "tokens", "cost_usd"]
    assert remote[cols].astype(str).equals(local[cols].astype(str))
    assert list(remote["error"].isna()) == list(local["error"].isna())
    assert remote.attrs["agent_map"]["executor"] == "dask"


def test_dask_needs_a_model_factory() -> None:
    model = OpenAIChatModel("gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key="sk-test")
    with pytest.raises(ConfigurationError, match="model_factory"):
        agent_map([{"a": "x"}], "{{a}}", model=model, executor="dask")


@pytest.mark.timeout(300)
def test_dask_keeps_the_budget_in_the_notebook(replay_server: ReplayServer) -> None:
    responder = RowResponder(failing=lambda n: False)
    replay_server.respond_with(responder)
    factory = functools.partial(
        OpenAIChatModel, "gpt-4o-mini-2024-07-18", base_url=replay_server.base_url, api_key="sk-test-dask"
    )
    per_row = 1000 * 0.15e-6 + 100 * 0.6e-6
    out = agent_map(
        [{"text": f"row #{i}"} for i in range(200)],
        "{{text}}",
        model=factory(),
        executor="dask",
        limits=RunLimits(max_cost_usd=per_row * 70.5),
        executor_options={"model_factory": factory, "workers": 2, "partition_rows": 20},
    )
    done = int((out["status"] == "done").sum())
    assert out.attrs["agent_map"]["state"] == "budget"
    assert 40 <= done <= 70
    assert float(out["cost_usd"].sum()) <= per_row * 70.5
    assert sum(responder.seen.values()) == done  # no partition was sent past the budget
