"""The ``local`` executor: every row a full harness run on this event loop, ``concurrency`` at a time.

A fixed pool of workers pulls row positions from one shared iterator (no task per row waiting on
a semaphore: 100,000 rows cost 16 tasks, not 100,000). Each row runs in a child of the map's root
context, so the map is one run tree: one event sink, one Stop, one set of tree budgets. Before a
row starts, the plan's admission check keeps the rows in flight inside the map's budget.
"""

from __future__ import annotations

import anyio

from ._plan import MapPlan

__all__ = ["run_local"]


async def run_local(plan: MapPlan) -> None:
    """Run every row of ``plan.todo`` that the map gets to before a Stop or its budget."""
    rows = iter(plan.todo)
    harness, root, prompts, progress = plan.harness, plan.root, plan.prompts, plan.progress
    token = root.cancellation

    async def worker() -> None:
        for position in rows:
            if token.is_cancelled or plan.stop_state is not None or not plan.admit():
                return
            ctx = root.child()
            progress.in_flight += 1
            try:
                run, _ = await harness.invoke_with_status(ctx, prompts[position])
            except Exception as exc:  # a row's own bad luck (a tool provider that failed to list, ...)
                plan.fail(position, exc)
                continue
            finally:
                progress.in_flight -= 1
            plan.from_run(position, run, ctx.run_id)

    workers = min(plan.concurrency, len(plan.todo))
    async with anyio.create_task_group() as group:
        for _ in range(workers):
            group.start_soon(worker)
