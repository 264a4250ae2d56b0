"""What the ``dask`` and ``ray`` executors share: partitions run remotely, the map steered from here.

The notebook keeps the map: it cuts the rows to run into partitions, submits them a few at a time
to the cluster, and settles each partition's rows into the checkpoint, the counters and the result
as it returns. Each task runs the local executor over its partition on a worker, against the
provider, with the model rebuilt there by ``model_factory`` (a picklable zero-argument callable;
the key travels inside it, as it must for a worker to call the provider, and is never journaled).
Budgets are kept centrally: a partition is only submitted when the spend so far plus the
partitions in flight, at the average cost of a finished row, stays inside the map's budget, and
until a first row has come back only one partition runs. Stop cancels the partitions not yet
back; their rows stay pending.

A backend (``Cluster``) is four calls: submit a partition, wait for the first ones done, read a
result, cancel. Dask and Ray each implement them in a few lines.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import anyio

from .._errors import ConfigurationError
from .._model import ChatModel
from ._local import run_local
from ._plan import MapPlan, make_plan, row_harness
from ._rows import RowOutcome

__all__ = ["Cluster", "RowTuple", "check_cluster_plan", "drive", "open_cluster", "output_of", "run_partition"]

RowTuple = tuple[str, Any, "str | None", int, "float | None"]
"""One row's outcome as it travels back from a worker: status, output, error, tokens, cost."""


def run_partition(
    model_factory: Callable[[], ChatModel], output: Any, prompts: list[str], concurrency: int
) -> list[RowTuple]:
    """Runs on a worker: the local executor over one partition; returns plain tuples (cheap to ship)."""
    plan = make_plan(
        [{"prompt": text} for text in prompts],
        _prompt_of,
        harness=row_harness(model=model_factory(), output=output, tools=(), harness=None),
        concurrency=concurrency,
        checkpoint=None,
        limits=None,
        name=None,
        context=None,
        cancellation=None,
        progress=None,
        retry_failed=False,
        executor="local",
    )

    async def run() -> None:
        try:
            await run_local(plan)
        finally:
            for model in plan.harness.model_chain:  # its clients belong to this worker's loop
                closer = getattr(model, "aclose", None)
                if closer is not None:
                    await closer()

    anyio.run(run)
    return [(o.status, o.output, o.error, o.tokens, o.cost_usd) for o in plan.outcomes]


def _prompt_of(row: Mapping[str, Any]) -> str:
    return str(row["prompt"])


class Cluster(Protocol):
    """A cluster the map submits partitions to (the dask and ray backends)."""

    def submit(self, prompts: list[str], concurrency: int) -> Any:
        """Start one partition; return its handle."""
        ...

    def first_done(self, handles: list[Any]) -> list[Any]:
        """Block up to ~0.2 s for the first handles done (may return none)."""
        ...

    def result(self, handle: Any) -> list[RowTuple]:
        """The partition's rows (raises what the task raised)."""
        ...

    def cancel(self, handle: Any) -> None:
        """Give up on a partition not yet back."""
        ...


def check_cluster_plan(plan: MapPlan, executor: str, model_factory: object) -> None:
    """The checks both cluster executors make before starting anything."""
    if model_factory is None or not callable(model_factory):
        raise ConfigurationError(
            f"the {executor} executor needs executor_options={{'model_factory': ...}}",
            hint="a picklable zero-argument function that builds the model on a worker",
        )
    if plan.harness.tools.names():
        raise ConfigurationError(
            f"the {executor} executor runs rows without tools in this version", hint="executor='local'"
        )


def open_cluster(
    plan: MapPlan, executor: str, model_factory: Callable[[], ChatModel] | None, module: str
) -> tuple[Any, Callable[[], ChatModel]]:
    """How both cluster executors begin: check the plan, then import the engine from its extra.

    Returns the engine's module and the checked factory. The import comes second so that a plan
    that cannot run fails the same way whether or not the extra is installed.
    """
    check_cluster_plan(plan, executor, model_factory)
    assert model_factory is not None
    try:
        engine = importlib.import_module(module)
    except ImportError:
        raise ConfigurationError(
            f"the {executor} executor needs the {executor} extra", hint=f"pip install 'tinyagents-nb[{executor}]'"
        ) from None
    return engine, model_factory


def output_of(plan: MapPlan) -> Any:
    """What a worker rebuilds the output spec from: the type, else the JSON schema."""
    spec = plan.harness.output
    return None if spec is None else (spec.output_type if spec.output_type is not None else spec.schema)


async def drive(plan: MapPlan, cluster: Cluster, *, partition_rows: int, slots: int) -> None:
    """Submit the plan's rows as partitions, at most ``slots`` at once, and settle them as they return."""
    loop = asyncio.get_running_loop()
    token = plan.root.cancellation
    pending = [plan.todo[i : i + partition_rows] for i in range(0, len(plan.todo), partition_rows)]
    running: dict[Any, list[int]] = {}
    progress = plan.progress
    while (pending or running) and not token.is_cancelled:
        # before any row has come back, the cost of a row is unknown: one partition probes it
        while (
            pending
            and len(running) < slots
            and (plan.ran > 0 or not running)
            and plan.stop_state is None
            and plan.admit(len(pending[0]))
        ):
            chunk = pending.pop(0)
            handle = cluster.submit([plan.prompts[p] for p in chunk], plan.concurrency)
            running[handle] = chunk
            progress.in_flight += len(chunk)
        if not running:
            break
        handles = list(running)
        done = await loop.run_in_executor(None, cluster.first_done, handles)
        for handle in done:
            chunk = running.pop(handle)
            progress.in_flight -= len(chunk)
            try:
                rows = await loop.run_in_executor(None, cluster.result, handle)
            except Exception as exc:  # the task itself failed: its rows fail with the reason
                for position in chunk:
                    plan.fail(position, exc)
                continue
            _settle(plan, chunk, rows)
    for handle, chunk in running.items():  # Stop: what has not come back stays pending
        cluster.cancel(handle)
        progress.in_flight -= len(chunk)


def _settle(plan: MapPlan, chunk: list[int], rows: list[RowTuple]) -> None:
    for position, (status, value, error, tokens, cost) in zip(chunk, rows, strict=True):
        if status == "pending":
            continue
        outcome = RowOutcome(
            status="done" if status == "done" else "failed", output=value, error=error, tokens=tokens, cost_usd=cost
        )
        plan.settle(position, outcome)
