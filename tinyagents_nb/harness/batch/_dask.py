"""The ``dask`` executor: rows partitioned over a Dask ``distributed`` cluster, steered from here.

The notebook keeps the map: it cuts the rows to run into partitions, submits them one by one to
the cluster (a ``LocalCluster`` of ``workers`` processes, or the scheduler at ``address``), and
settles each partition's rows into the checkpoint, the counters and the result as it returns. Each
task runs the local executor over its partition on the worker, against the provider, with the
model rebuilt there by ``model_factory`` (a picklable zero-argument callable; the key travels
inside it, as it must for a worker to call the provider, and is never journaled). Budgets are
kept centrally: a partition is only submitted when the spend so far plus the partitions in flight,
at the average cost of a finished row, stays inside the map's budget. Stop cancels the partitions
not yet finished; their rows stay pending.

Point it at a real cluster with ``executor_options={"address": "tcp://scheduler:8786", "model_factory": ...}``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import anyio

from .._errors import ConfigurationError
from .._model import ChatModel
from ._local import run_local
from ._plan import MapPlan, make_plan, row_harness
from ._rows import RowOutcome

__all__ = ["run_dask"]


def _partition(
    model_factory: Callable[[], ChatModel], output: Any, prompts: list[str], concurrency: int
) -> list[tuple[str, Any, str | None, int, float | None]]:
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


async def run_dask(
    plan: MapPlan,
    *,
    model_factory: Callable[[], ChatModel] | None = None,
    address: str | None = None,
    workers: int = 2,
    partition_rows: int = 64,
) -> None:
    """Run the plan's rows as partitions on a Dask cluster (see the module docstring)."""
    if model_factory is None or not callable(model_factory):
        raise ConfigurationError(
            "the dask executor needs executor_options={'model_factory': ...}",
            hint="a picklable zero-argument function that builds the model on a worker",
        )
    if plan.harness.tools.names():
        raise ConfigurationError("the dask executor runs rows without tools in this version", hint="executor='local'")
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ConfigurationError(
            "the dask executor needs the dask extra", hint="pip install 'tinyagents-nb[dask]'"
        ) from None
    spec = plan.harness.output
    output = None if spec is None else (spec.output_type if spec.output_type is not None else spec.schema)
    chunks = [plan.todo[i : i + partition_rows] for i in range(0, len(plan.todo), partition_rows)]
    loop = asyncio.get_running_loop()
    cluster = (
        None
        if address
        else await loop.run_in_executor(
            None,
            lambda: LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None),  # type: ignore[no-untyped-call]
        )
    )
    client = await loop.run_in_executor(None, lambda: Client(address or cluster))  # type: ignore[no-untyped-call]
    try:
        await _drive(plan, client, chunks, model_factory, output, workers)
    finally:
        await loop.run_in_executor(None, client.close)
        if cluster is not None:
            await loop.run_in_executor(None, cluster.close)


async def _drive(plan: MapPlan, client: Any, chunks: list[list[int]], factory: Any, output: Any, workers: int) -> None:
    loop = asyncio.get_running_loop()
    token = plan.root.cancellation
    pending = list(chunks)
    running: dict[Any, list[int]] = {}
    progress = plan.progress
    while (pending or running) and not token.is_cancelled:
        # before any row has come back, the cost of a row is unknown: one partition probes it
        while (
            pending
            and len(running) < workers * 2
            and (plan.ran > 0 or not running)
            and plan.stop_state is None
            and plan.admit(len(pending[0]))
        ):
            chunk = pending.pop(0)
            future = client.submit(
                _partition, factory, output, [plan.prompts[p] for p in chunk], plan.concurrency, pure=False
            )
            running[future] = chunk
            progress.in_flight += len(chunk)
        if not running:
            break
        done = await loop.run_in_executor(None, lambda: _first_done(list(running)))
        for future in done:
            chunk = running.pop(future)
            progress.in_flight -= len(chunk)
            try:
                rows = future.result()
            except Exception as exc:  # the task itself failed: its rows fail with the reason
                for position in chunk:
                    plan.fail(position, exc)
                continue
            for position, (status, value, error, tokens, cost) in zip(chunk, rows, strict=True):
                if status == "pending":
                    continue
                outcome = RowOutcome(
                    status="done" if status == "done" else "failed",
                    output=value,
                    error=error,
                    tokens=tokens,
                    cost_usd=cost,
                )
                plan.settle(position, outcome)
    for future, chunk in running.items():  # Stop: what has not come back stays pending
        future.cancel()
        progress.in_flight -= len(chunk)


def _first_done(futures: list[Any]) -> list[Any]:
    from distributed import wait

    try:
        result = wait(futures, timeout=0.2, return_when="FIRST_COMPLETED")  # type: ignore[no-untyped-call]
    except TimeoutError:
        return []
    return list(result.done)
