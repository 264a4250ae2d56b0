"""The ``dask`` executor: rows partitioned over a Dask ``distributed`` cluster, steered from here.

The map itself (partitions, central budget, Stop) is ``_cluster.drive``; this module is the Dask
backend: a ``LocalCluster`` of ``workers`` processes, or the scheduler at ``address``.

Point it at a real cluster with ``executor_options={"address": "tcp://scheduler:8786", "model_factory": ...}``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from .._model import ChatModel
from ._cluster import RowTuple, drive, open_cluster, output_of, run_partition
from ._plan import MapPlan

__all__ = ["run_dask"]


class _DaskCluster:
    def __init__(self, client: Any, factory: Callable[[], ChatModel], output: Any) -> None:
        self.client = client
        self.factory = factory
        self.output = output

    def submit(self, prompts: list[str], concurrency: int) -> Any:
        return self.client.submit(run_partition, self.factory, self.output, prompts, concurrency, pure=False)

    def first_done(self, handles: list[Any]) -> list[Any]:
        from distributed import wait

        try:
            result = wait(handles, timeout=0.2, return_when="FIRST_COMPLETED")  # type: ignore[no-untyped-call]
        except TimeoutError:
            return []
        return list(result.done)

    def result(self, handle: Any) -> list[RowTuple]:
        rows: list[RowTuple] = handle.result()
        return rows

    def cancel(self, handle: Any) -> None:
        handle.cancel()


async def run_dask(
    plan: MapPlan,
    *,
    model_factory: Callable[[], ChatModel] | None = None,
    address: str | None = None,
    workers: int = 2,
    partition_rows: int = 64,
) -> None:
    """Run the plan's rows as partitions on a Dask cluster (see ``_cluster``)."""
    distributed, factory = open_cluster(plan, "dask", model_factory, "distributed")
    loop = asyncio.get_running_loop()
    cluster = (
        None
        if address
        else await loop.run_in_executor(
            None,
            lambda: (
                distributed.LocalCluster(  # ":0": a dashboard already on 8787 (another cluster) must not fail the map
                    n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
                )
            ),
        )
    )
    client = await loop.run_in_executor(None, lambda: distributed.Client(address or cluster))
    try:
        backend = _DaskCluster(client, factory, output_of(plan))
        await drive(plan, backend, partition_rows=partition_rows, slots=workers * 2)
    finally:
        await loop.run_in_executor(None, client.close)
        if cluster is not None:
            await loop.run_in_executor(None, cluster.close)
