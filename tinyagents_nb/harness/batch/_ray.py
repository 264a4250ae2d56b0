"""The ``ray`` executor: rows partitioned over Ray tasks, steered from here.

The map itself (partitions, central budget, Stop) is ``_cluster.drive``; this module is the Ray
backend. It uses the Ray runtime already connected in this process when there is one (a notebook
that called ``ray.init(...)``), else connects to ``address`` (``"ray://head:10001"`` through Ray
Client, ``"auto"`` or ``"10.0.0.5:6379"`` on a cluster node), else starts a local runtime of
``workers`` CPUs; it shuts down only what it started. Tasks are not retried by Ray
(``max_retries=0``): a partition lost with its worker fails its rows rather than sending their
requests twice; a re-run with a checkpoint does them again.

Point it at a real cluster with ``executor_options={"address": "ray://head:10001", "model_factory": ...}``
(the workers need ``tinyagents-nb`` installed, e.g. through ``runtime_env={"pip": [...]}`` in your
own ``ray.init``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from .._model import ChatModel
from ._cluster import RowTuple, drive, open_cluster, output_of, run_partition
from ._plan import MapPlan

__all__ = ["run_ray"]


class _RayCluster:
    def __init__(self, ray: Any, factory: Callable[[], ChatModel], output: Any) -> None:
        self.ray = ray
        self.task = ray.remote(run_partition).options(num_cpus=1, max_retries=0)
        self.factory = ray.put(factory)  # shipped once, not with every partition
        self.output = ray.put(output)

    def submit(self, prompts: list[str], concurrency: int) -> Any:
        return self.task.remote(self.factory, self.output, prompts, concurrency)

    def first_done(self, handles: list[Any]) -> list[Any]:
        ready, _ = self.ray.wait(handles, num_returns=1, timeout=0.2)
        return list(ready)

    def result(self, handle: Any) -> list[RowTuple]:
        rows: list[RowTuple] = self.ray.get(handle)
        return rows

    def cancel(self, handle: Any) -> None:
        self.ray.cancel(handle)


async def run_ray(
    plan: MapPlan,
    *,
    model_factory: Callable[[], ChatModel] | None = None,
    address: str | None = None,
    workers: int = 2,
    partition_rows: int = 64,
) -> None:
    """Run the plan's rows as partitions of Ray tasks (see the module docstring)."""
    ray, factory = open_cluster(plan, "ray", model_factory, "ray")
    loop = asyncio.get_running_loop()
    started = False
    if not ray.is_initialized():
        options: dict[str, Any] = (
            {"address": address}
            if address
            else {"num_cpus": workers, "include_dashboard": False, "configure_logging": False}
        )
        await loop.run_in_executor(None, lambda: ray.init(log_to_driver=False, **options))
        started = True
    try:
        backend = _RayCluster(ray, factory, output_of(plan))
        await drive(plan, backend, partition_rows=partition_rows, slots=workers * 2)
    finally:
        if started:
            await loop.run_in_executor(None, ray.shutdown)
