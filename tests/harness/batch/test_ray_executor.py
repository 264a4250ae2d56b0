"""The ``ray`` executor on a real local Ray runtime (``ray.init(num_cpus=2)``) against the 127.0.0.1 replay server."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest

from tests.harness.batch.rows_server import RowResponder
from tests.harness.replay_server import ReplayServer
from tinyagents_nb.harness import CancellationToken, ConfigurationError, RunLimits
from tinyagents_nb.harness.batch import MapProgress, agent_map
from tinyagents_nb.harness.providers import OpenAIChatModel

ray: Any
try:
    import ray
except ImportError:  # the test extra installs it; a bare `pip install -e .` may not have
    ray = None


class Label(pydantic.BaseModel):
    label: str
    score: int


def _start_ray(shim: Path) -> None:
    """Start a small local runtime: 2 CPUs, no dashboard, no metrics, logs kept out of pytest.

    Every Ray process (dashboard head, dashboard agent, runtime-env agent, each worker) imports
    ``jsonschema``, and where ``rfc3987-syntax`` is installed (``jupyter-events`` pulls it in through
    ``jsonschema[format-nongpl]``) that import compiles an Earley grammar: 2.3 s of CPU per process,
    the larger part of a 15 s start on two cores, and Ray gives its raylet a fixed 30 s to register.
    The Ray processes started here see a module of that name that is absent (``shim``), so
    ``jsonschema`` skips its optional ``iri`` format check there, as it does wherever that package
    is not installed; this process is untouched.
    """
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(shim), previous) if p)
    try:
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            _system_config={"enable_metrics_collection": False},
        )
    finally:
        if previous is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = previous


@pytest.fixture(scope="module")
def ray_runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One local Ray runtime for the module (its start is most of these tests' time), shut down after.

    Ray missing skips the tests on a developer's machine and fails them in CI (``./dev test``
    installs it with the test extra); a runtime that does not start fails them everywhere,
    after one more try (a start that timed out under a burst of load).
    """
    if ray is None:
        if os.environ.get("CI"):
            pytest.fail("ray is not installed; the test extra installs it (./dev test)")
        pytest.skip("ray is not installed (pip install -e '.[test]')")
    shim = tmp_path_factory.mktemp("ray-shim")
    (shim / "rfc3987_syntax").mkdir()
    (shim / "rfc3987_syntax" / "__init__.py").write_text('raise ImportError("not for Ray processes")\n')
    try:
        _start_ray(shim)
    except Exception:  # ray raises a bare Exception for a node that timed out starting
        ray.shutdown()
        _start_ray(shim)
    try:
        yield ray
    finally:
        ray.shutdown()


def _factory(server: ReplayServer) -> functools.partial[OpenAIChatModel]:
    return functools.partial(
        OpenAIChatModel, "gpt-4o-mini-2024-07-18", base_url=server.base_url, api_key="sk-test-ray-SECRET"
    )


@pytest.mark.timeout(300)
def test_ray_produces_the_same_frame_as_local(replay_server: ReplayServer, ray_runtime: Any) -> None:
    responder = RowResponder()
    replay_server.respond_with(responder)
    factory = _factory(replay_server)
    rows = [{"text": f"row #{i}"} for i in range(150)]
    local = agent_map(rows, "{{text}}", model=factory(), output=Label)
    responder.seen.clear()
    progress = MapProgress("ray")
    remote = agent_map(
        rows,
        "{{text}}",
        model=factory(),
        output=Label,
        executor="ray",
        progress=progress,
        executor_options={"model_factory": factory, "workers": 2, "partition_rows": 40},
    )
    assert sum(responder.seen.values()) == 150  # every row ran once, on the workers
    assert set(responder.seen) == set(range(150))
    cols = ["text", "label", "score", "status", "tokens", "cost_usd"]
    assert remote[cols].astype(str).equals(local[cols].astype(str))
    assert list(remote["error"].isna()) == list(local["error"].isna())
    assert remote.attrs["agent_map"]["executor"] == "ray"
    snap = progress.snapshot()  # the dashboard's counters moved here, in the notebook
    assert (snap.done, snap.failed, snap.pending) == (148, 2, 0)
    assert snap.cost_usd == pytest.approx(float(remote["cost_usd"].sum()))


@pytest.mark.timeout(300)
def test_ray_keeps_the_budget_in_the_notebook(replay_server: ReplayServer, ray_runtime: Any) -> None:
    responder = RowResponder(failing=lambda n: False)
    replay_server.respond_with(responder)
    factory = _factory(replay_server)
    per_row = 1000 * 0.15e-6 + 100 * 0.6e-6
    out = agent_map(
        [{"text": f"row #{i}"} for i in range(200)],
        "{{text}}",
        model=factory(),
        executor="ray",
        limits=RunLimits(max_cost_usd=per_row * 70.5),
        executor_options={"model_factory": factory, "workers": 2, "partition_rows": 20},
    )
    done = int((out["status"] == "done").sum())
    assert out.attrs["agent_map"]["state"] == "budget"
    assert 40 <= done <= 70
    assert float(out["cost_usd"].sum()) <= per_row * 70.5
    assert sum(responder.seen.values()) == done  # no partition was sent past the budget


@pytest.mark.timeout(300)
def test_ray_stop_leaves_the_partitions_not_back_pending(replay_server: ReplayServer, ray_runtime: Any) -> None:
    token = CancellationToken()
    progress = MapProgress("stop")

    def stop_after_first(count: int) -> None:
        if count == 25:
            token.cancel("Stop")

    responder = RowResponder(failing=lambda n: False, on_request=stop_after_first)
    replay_server.respond_with(responder)
    factory = _factory(replay_server)
    out = agent_map(
        [{"text": f"row #{i}"} for i in range(400)],
        "{{text}}",
        model=factory(),
        executor="ray",
        cancellation=token,
        progress=progress,
        executor_options={"model_factory": factory, "workers": 2, "partition_rows": 20},
    )
    assert out.attrs["agent_map"]["state"] == "stopped"
    pending = int((out["status"] == "pending").sum())
    assert pending >= 400 - 4 * 20 - 20  # at most the partitions already out ran
    assert progress.snapshot().in_flight == 0


def test_ray_needs_a_model_factory() -> None:
    model = OpenAIChatModel("gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key="sk-test")
    with pytest.raises(ConfigurationError, match="model_factory"):
        agent_map([{"a": "x"}], "{{a}}", model=model, executor="ray")
