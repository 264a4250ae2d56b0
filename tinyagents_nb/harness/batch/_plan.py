"""``MapPlan``: one map resolved before anything runs (rows, prompts, harness, checkpoint, budgets).

Everything that can be wrong with the input fails here, with a typed error, before a request is
sent: an unknown column, an empty prompt, a harness and a model both given. The plan then holds
the per-row outcomes every executor fills in, and the few decisions all executors share: which
rows still need running, when the map must stop, and how a finished run becomes a row.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .._budget import BudgetExceeded, TreeBudget
from .._config import RunConfig
from .._context import RunContext
from .._errors import ConfigurationError
from .._harness import AgentHarness
from .._limits import RunLimits
from .._model import ChatModel
from .._run import AgentRun
from .._structured import OutputSpec
from .._tools import Tool
from ..providers.wire import scrub
from ._checkpoint import MapCheckpoint
from ._progress import MapProgress
from ._rows import MapRows, Prompt, RowOutcome, output_columns, prompt_digest, read_rows, render_prompts, row_key

__all__ = ["MapPlan", "describe", "make_plan", "row_harness"]


def row_harness(
    *,
    model: ChatModel | str | None,
    output: object,
    tools: Iterable[Tool | Callable[..., Any]],
    harness: AgentHarness[Any] | None,
    wrap_model: Callable[[ChatModel], ChatModel] | None = None,
) -> AgentHarness[Any]:
    """The harness each row runs: the caller's (with ``output``/``model`` swapped in when given), or a new one."""
    tools = tuple(tools)
    if harness is None:
        if model is None:
            raise ConfigurationError("agent_map needs a model or a harness", hint="model='openai:gpt-4o-mini'")
        chosen: AgentHarness[Any] = AgentHarness(model=model, tools=tools, output_type=_spec(output), name="agent_map")
        if wrap_model is None:
            return chosen
        return _derive(chosen, model=wrap_model(chosen.model))
    if tools:
        raise ConfigurationError("tools= goes with model=; give the harness its tools instead")
    if output is None and model is None and wrap_model is None:
        return harness
    base = harness.model if model is None else AgentHarness(model=model).model
    return _derive(
        harness,
        model=base if wrap_model is None else wrap_model(base),
        output=_spec(output) if output is not None else harness.output,
    )


def _spec(output: object) -> OutputSpec | None:
    if output is None:
        return None
    if isinstance(output, OutputSpec):
        return output
    return OutputSpec.of(output)


def _derive(
    harness: AgentHarness[Any], *, model: ChatModel, output: OutputSpec | object | None = ...
) -> AgentHarness[Any]:
    return AgentHarness(
        model=model,
        tools=harness.tools,
        middleware=harness.middleware.middleware,
        policy=harness.policy,
        system_prompt=harness.system_prompt,
        context_window=harness.context_window,
        name=harness.name,
        output_type=harness.output if output is ... else output,  # type: ignore[arg-type]
        pressure=harness.pressure,
    )


def _map_key(name: str | None, prompt: Prompt, harness: AgentHarness[Any]) -> str:
    if name:
        return name
    source = prompt if isinstance(prompt, str) else getattr(prompt, "__qualname__", repr(prompt))
    schema = harness.output.schema if harness.output is not None else None
    text = json.dumps([source, harness.model.model_name, schema], sort_keys=True, default=str)
    return "map-" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


@dataclass(kw_only=True)
class MapPlan:
    """A resolved map and its row outcomes (filled in by the executor)."""

    map_key: str
    rows: MapRows
    prompts: list[str]
    keys: list[str]
    digests: list[str]
    outcomes: list[RowOutcome]
    todo: list[int]
    columns: tuple[str, ...]
    harness: AgentHarness[Any]
    root: RunContext[Any]
    progress: MapProgress
    checkpoint: MapCheckpoint | None
    concurrency: int
    max_cost_usd: float | None = None
    max_total_tokens: int | None = None
    stop_state: str | None = None
    stop_message: str | None = None
    ran: int = field(default=0)

    # ------------------------------------------------------------------ decisions every executor shares
    def stop(self, state: str, message: str) -> None:
        """Stop taking rows (the first reason wins); rows not started stay pending."""
        if self.stop_state is None:
            self.stop_state, self.stop_message = state, message

    @property
    def stopping(self) -> bool:
        return self.stop_state is not None or self.root.cancellation.is_cancelled

    def admit(self, rows: int = 1) -> bool:
        """Whether one more row may start without the map's budget being passed by what is in flight.

        Each row in flight is assumed to cost what finished rows cost on average; the harness's own
        check before each request is the backstop for a row that costs more than that.
        """
        progress = self.progress
        ran = self.ran
        if ran == 0:
            return True
        in_flight = progress.in_flight + rows
        cap = self.max_cost_usd
        if cap is not None and progress.cost_usd + in_flight * progress.cost_usd / ran > cap:
            self.stop("budget", f"the map's ${cap:,.6f} budget would be passed by the next row")
            return False
        tokens = self.max_total_tokens
        if tokens is not None and progress.tokens + in_flight * progress.tokens / ran > tokens:
            self.stop("budget", f"the map's {tokens:,}-token budget would be passed by the next row")
            return False
        return True

    def settle(self, position: int, outcome: RowOutcome) -> None:
        """Store a finished (done or failed) row: the outcome, the counters, the checkpoint."""
        self.outcomes[position] = outcome
        self.ran += 1
        label = self.rows.labels[position]
        ok = outcome.status == "done"
        text = outcome.output if ok else (outcome.error or "")
        self.progress.row_ended(label, ok=ok, text=text, tokens=outcome.tokens, cost=outcome.cost_usd)
        if self.checkpoint is not None:
            self.checkpoint.record(self.map_key, self.keys[position], self.digests[position], outcome)

    def from_run(self, position: int, run: AgentRun, row_run_id: str) -> None:
        """Turn one row's finished run into its outcome (or a stop, for a budget or a cancel)."""
        tokens = run.usage.total_tokens
        total = run.cost.total_usd if run.cost is not None else None
        cost = float(total) if total is not None else None
        if run.status == "completed":
            value = run.structured.raw if run.structured is not None else run.final_text
            self.settle(position, RowOutcome(status="done", output=value, tokens=tokens, cost_usd=cost))
            return
        error = run.error
        if run.status == "cancelled":
            self.progress.add_spend(tokens, cost)
            return  # stays pending: Stop leaves it for the next run
        if isinstance(error, BudgetExceeded) and error.anchor_run_id != row_run_id:
            self.progress.add_spend(tokens, cost)
            self.stop("budget", str(error))
            self.outcomes[position].error = describe(error)
            return
        self.settle(position, RowOutcome(status="failed", error=describe(error), tokens=tokens, cost_usd=cost))

    def fail(self, position: int, error: BaseException) -> None:
        self.settle(position, RowOutcome(status="failed", error=describe(error)))


def describe(error: BaseException | None) -> str:
    """A row's error for the ``error`` column: type and message, scrubbed of keys and tokens."""
    if error is None:
        return "failed"
    return scrub(f"{type(error).__name__}: {error}")


def make_plan(
    data: object,
    prompt: Prompt,
    *,
    harness: AgentHarness[Any],
    concurrency: int,
    checkpoint: MapCheckpoint | str | None,
    limits: RunLimits | None,
    name: str | None,
    context: RunContext[Any] | None,
    cancellation: Any,
    progress: MapProgress | None,
    retry_failed: bool,
    executor: str,
) -> MapPlan:
    """Validate and resolve everything; restore finished rows from the checkpoint."""
    checked: object = concurrency
    if isinstance(checked, bool) or not isinstance(checked, int) or concurrency < 1:
        raise ConfigurationError(f"concurrency must be an int >= 1, got {concurrency!r}")
    rows = read_rows(data)
    prompts = render_prompts(rows, prompt)
    map_key = _map_key(name, prompt, harness)
    store = MapCheckpoint(checkpoint) if isinstance(checkpoint, str) else checkpoint
    if store is not None and not isinstance(store, MapCheckpoint):
        raise ConfigurationError(f"checkpoint must be a path or a MapCheckpoint, got {type(store).__name__}")
    spec = harness.output
    columns = output_columns(
        None if spec is None else (spec.output_type if spec.output_type is not None else spec.schema)
    )
    keys = [row_key(label) for label in rows.labels]
    digests = [prompt_digest(text) for text in prompts]
    outcomes = [RowOutcome() for _ in keys]
    progress = progress if progress is not None else MapProgress(name or map_key)
    progress.executor = executor
    todo = list(range(len(keys)))
    restored_done = restored_failed = 0
    if store is not None:
        saved = store.load(map_key)
        todo = []
        for position, key in enumerate(keys):
            entry = saved.get(key)
            if entry is not None and entry[0] == digests[position] and (entry[1].status == "done" or not retry_failed):
                outcomes[position] = entry[1]
                if entry[1].status == "done":
                    restored_done += 1
                else:
                    restored_failed += 1
            else:
                todo.append(position)
    root = _root(context, map_key, cancellation)
    max_cost = max_tokens = None
    if limits is not None:
        if not isinstance(limits, RunLimits):
            raise ConfigurationError(f"limits must be a RunLimits, got {type(limits).__name__}")
        if limits.has_budget:
            cost = limits.max_cost_usd
            root.budgets = (
                *root.budgets,
                TreeBudget(
                    anchor_run_id=root.run_id,
                    max_cost_usd=None if cost is None else Decimal(cost),
                    max_total_tokens=limits.max_total_tokens,
                    max_input_tokens_per_request=limits.max_input_tokens_per_request,
                    unknown_price=limits.unknown_price,
                ),
            )
            max_cost = None if cost is None else float(cost)
            max_tokens = limits.max_total_tokens
    progress.max_cost_usd, progress.max_total_tokens = max_cost, max_tokens
    progress.start(total=len(keys), skipped=restored_done + restored_failed)
    for _ in range(restored_done):
        progress.restored(ok=True)
    for _ in range(restored_failed):
        progress.restored(ok=False)
    return MapPlan(
        map_key=map_key,
        rows=rows,
        prompts=prompts,
        keys=keys,
        digests=digests,
        outcomes=outcomes,
        todo=todo,
        columns=columns,
        harness=harness,
        root=root,
        progress=progress,
        checkpoint=store,
        concurrency=concurrency,
        max_cost_usd=max_cost,
        max_total_tokens=max_tokens,
    )


def _root(context: RunContext[Any] | None, map_key: str, cancellation: Any) -> RunContext[Any]:
    meta: Mapping[str, object] = {"agent_map": map_key}
    if context is None:
        root: RunContext[Any] = RunContext(config=RunConfig(tags=("agent_map",), metadata=meta))
    else:
        root = context.new_root(tags=("agent_map",), metadata=meta)
        root.budgets = context.budgets
    if cancellation is not None:
        root = root.with_cancellation(cancellation)
    root.usage.register_run(root.run_id, None)
    root.costs.register_run(root.run_id, None)
    return root
