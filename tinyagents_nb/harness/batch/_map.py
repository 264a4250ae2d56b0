"""``agent_map`` and ``agent_map_async``: a prompt over every row of a DataFrame, one agent run per row.

The entry points resolve a ``MapPlan`` (which fails early on bad input), hand it to an executor,
and build the result frame from whatever the rows became: a Stop or a budget ends the map with
its remaining rows ``pending`` rather than raising, so nothing finished is lost and a re-run with
the same checkpoint picks up where it stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from .._cancel import CancellationToken
from .._context import RunContext
from .._errors import ConfigurationError
from .._harness import AgentHarness
from .._limits import RunLimits
from .._model import ChatModel
from .._run_sync import run_blocking
from .._tools import Tool
from ._checkpoint import MapCheckpoint
from ._local import run_local
from ._plan import MapPlan, make_plan, row_harness
from ._progress import MapProgress
from ._rate import RateLimits
from ._rows import Prompt, build_frame

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Executor", "agent_map", "agent_map_async"]

Executor: TypeAlias = Literal["local", "batch", "ray", "dask"]
"""Where the rows run: this event loop, a provider's Batch API, a Ray cluster, a Dask cluster."""

_EXECUTORS = ("local", "batch", "ray", "dask")
_log = logging.getLogger("tinyagents_nb.batch")


async def agent_map_async(
    data: object,
    prompt: Prompt,
    *,
    model: ChatModel | str | None = None,
    output: object = None,
    tools: Iterable[Tool | Callable[..., Any]] = (),
    harness: AgentHarness[Any] | None = None,
    concurrency: int = 16,
    executor: Executor = "local",
    checkpoint: MapCheckpoint | str | None = None,
    limits: RunLimits | None = None,
    name: str | None = None,
    rate_limits: RateLimits | None = None,
    context: RunContext[Any] | None = None,
    cancellation: CancellationToken | None = None,
    progress: MapProgress | None = None,
    retry_failed: bool = False,
    executor_options: dict[str, Any] | None = None,
) -> pd.DataFrame:
    """Run ``prompt`` over every row of ``data`` as one agent run per row; return the rows with their results.

    Args:
        data: A pandas DataFrame (its index is kept) or a list of dicts.
        prompt: A template over the row's columns (``"Classify: {{review}}"``) or a function of the
            row (a dict) returning the prompt.
        model: The model each row runs (a ``ChatModel`` or a string such as ``"openai:gpt-4o-mini"``).
        output: A pydantic model (its fields become columns), any type, or a JSON schema; without
            one the answer text goes to an ``answer`` column.
        tools: Tools each row's agent may call (with ``model``).
        harness: A configured ``AgentHarness`` instead of ``model``/``tools``.
        concurrency: Rows in flight at once (local executor) or per worker (ray, dask).
        executor: ``"local"``, ``"batch"`` (a provider Batch API at half price), ``"ray"``, ``"dask"``.
        checkpoint: A SQLite path or ``MapCheckpoint``: each finished row is committed as it ends,
            and a re-run skips the rows already there.
        limits: Budgets for the whole map (``max_cost_usd``, ``max_total_tokens``): the map is one
            run tree, and it stops with the remaining rows pending before a budget is passed.
        name: The map's key in the checkpoint (default: a digest of prompt, model and output).
        rate_limits: Requests and tokens per minute shared by every row (adapting to 429s).
        context: A parent context (a notebook session's) whose sink, trackers and budgets the map joins.
        cancellation: A token whose ``cancel()`` stops the map (rows not finished stay pending).
        progress: Counters to watch the map with (a dashboard polls them).
        retry_failed: Run rows the checkpoint holds as failed again.
        executor_options: Executor-specific settings (``batch``: ``poll_s``, ``api_key``...; ``ray``/``dask``: ``address``, ``workers``).

    Returns:
        The input's columns and index, the output columns, then ``status``
        (``done``/``failed``/``pending``), ``error``, ``tokens`` and ``cost_usd``. ``attrs["agent_map"]``
        holds the map's summary (counts, skipped rows, speed, spend).

    Raises:
        ConfigurationError: Bad input (unknown column, empty prompt, no model), before any request.
    """
    if executor not in _EXECUTORS:
        raise ConfigurationError(f"executor must be one of {_EXECUTORS}, got {executor!r}")
    wrap = rate_limits.wrap if rate_limits is not None else None
    row = row_harness(model=model, output=output, tools=tools, harness=harness, wrap_model=wrap)
    plan = make_plan(
        data,
        prompt,
        harness=row,
        concurrency=concurrency,
        checkpoint=checkpoint,
        limits=limits,
        name=name,
        context=context,
        cancellation=cancellation,
        progress=progress,
        retry_failed=retry_failed,
        executor=executor,
    )
    if plan.progress.skipped:
        _log.info("%s: skipped %d rows already in the checkpoint", plan.progress.name, plan.progress.skipped)
    owns_checkpoint = isinstance(checkpoint, str)
    try:
        await _execute(plan, executor, dict(executor_options or {}))
    except BaseException as exc:
        plan.progress.finish("failed", f"{type(exc).__name__}: {exc}")
        raise
    finally:
        if owns_checkpoint and plan.checkpoint is not None:
            plan.checkpoint.close()
    _finish(plan)
    frame = build_frame(plan.rows, plan.outcomes, plan.columns)
    frame.attrs["agent_map"] = plan.progress.summary()
    return frame


async def _execute(plan: MapPlan, executor: str, options: dict[str, Any]) -> None:
    if not plan.todo:
        return
    if executor == "local":
        if options:
            raise ConfigurationError(f"the local executor takes no executor_options, got {sorted(options)}")
        await run_local(plan)
    elif executor == "batch":
        from ._batch_exec import run_batch

        await run_batch(plan, **options)
    elif executor == "dask":
        from ._dask import run_dask

        await run_dask(plan, **options)
    else:
        from ._ray import run_ray

        await run_ray(plan, **options)


def _finish(plan: MapPlan) -> None:
    progress = plan.progress
    if plan.root.cancellation.is_cancelled:
        progress.finish("stopped", plan.root.cancellation.reason or "stopped")
    elif plan.stop_state is not None:
        progress.finish("budget" if plan.stop_state == "budget" else "stopped", plan.stop_message)
    else:
        progress.finish("completed")


def agent_map(
    data: object,
    prompt: Prompt,
    *,
    model: ChatModel | str | None = None,
    output: object = None,
    tools: Iterable[Tool | Callable[..., Any]] = (),
    harness: AgentHarness[Any] | None = None,
    concurrency: int = 16,
    executor: Executor = "local",
    checkpoint: MapCheckpoint | str | None = None,
    limits: RunLimits | None = None,
    **options: Any,
) -> pd.DataFrame:
    """Blocking twin of ``agent_map_async`` (same arguments); inside Jupyter's running loop it runs on a worker thread.

    Ctrl-C (a kernel interrupt) stops the map: rows in flight end as ``pending`` and the frame is
    returned as far as it got.
    """
    token = options.pop("cancellation", None) or CancellationToken()
    holder: RunContext[Any] = RunContext(cancellation=token)

    async def run() -> pd.DataFrame:
        return await agent_map_async(
            data,
            prompt,
            model=model,
            output=output,
            tools=tools,
            harness=harness,
            concurrency=concurrency,
            executor=executor,
            checkpoint=checkpoint,
            limits=limits,
            cancellation=token,
            **options,
        )

    return run_blocking(run, holder)
