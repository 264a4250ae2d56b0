"""The ``batch`` executor: every row's model call goes into one provider Batch API job, at half price.

Each row still runs as a full harness run (prompt, structured output, validation, limits), but its
model is a ``BatchedModel``: a call parks the request and waits. When every row in flight is
parked (or a short window passes), the collector submits them together as one job, journals the
job id at once, polls it, and resolves each parked call with its own result as the results file
arrives. A structured answer that fails validation makes the row's repair call park in turn, and
the next round sends those. Rows are one model call each: tools are refused up front.

The request's ``custom_id`` is derived from the row key, the prompt digest and the call's number,
so a re-run of the same map finds the journaled ``submitted`` jobs and collects their results
instead of sending the requests again (that is how a kernel restart re-attaches). Stop cancels the
job at the provider (one request; cancelling is free, and the provider bills only the requests it
finished before), journals it ``cancelling`` and returns at once with the rows pending; the next
run collects what the job did finish and sends only the rest again. ``on_stop="detach"`` leaves
the job running instead, for the next run to collect in full.

Costs: the model is priced as ``<provider>-batch:<model>`` at 50 % of the model's own price
(registered on the map's cost tracker), so the usage and cost tables show what the provider bills.
"""

from __future__ import annotations

import contextvars
import dataclasses
import hashlib
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Literal

import anyio

from .._cost import CostTracker, ModelPricing
from .._errors import Cancelled, ConfigurationError, ProviderError
from .._model import ChatModel, ModelRequest, ModelResponse
from .._usage import Usage
from ..providers import AnthropicModel, OpenAIChatModel
from ._batch_api import AnthropicBatchAPI, BatchAPI, BatchResult, OpenAIBatchAPI
from ._jobs import JobJournal
from ._plan import MapPlan, _derive
from ._rate import PacedModel

__all__ = ["BatchedModel", "batch_adapter", "batch_api_for", "run_batch"]

_ROW: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("tinyagents_batch_row", default=None)
BATCH_DISCOUNT = Decimal("0.5")


def batch_adapter(model: ChatModel) -> OpenAIChatModel | AnthropicModel:
    """``model`` as an adapter the Batch APIs can carry, or a clear error."""
    while isinstance(model, PacedModel):  # rate limits pace live calls; a batch job has none
        model = model.inner
    if isinstance(model, AnthropicModel | OpenAIChatModel):
        return model
    raise ConfigurationError(
        f"the batch executor needs an OpenAI-compatible or Anthropic model, got {type(model).__name__}",
        hint="use executor='local' for other models",
    )


def batch_api_for(model: ChatModel, *, provider: str | None = None) -> BatchAPI:
    """The Batch API client that speaks for ``model``'s host, with its credentials (in memory only)."""
    adapter = batch_adapter(model)
    headers = adapter.request_headers()
    if isinstance(adapter, AnthropicModel):
        return AnthropicBatchAPI(adapter.base_url, headers)
    return OpenAIBatchAPI(adapter.base_url, headers, provider=provider or adapter.provider)


def _half_price(costs: CostTracker, model: ChatModel, batch_provider: str) -> None:
    million = 1_000_000
    rates: list[Decimal | None] = []
    for usage in (
        Usage(input_tokens=million),
        Usage(output_tokens=million),
        Usage(input_tokens=million, cached_input_tokens=million),
    ):
        cost, _ = costs.price(model.model_name, usage, model.provider, warn=False)
        rates.append(None if cost is None else cost.total_usd)
    inp, out, cached = rates
    if inp is None or out is None:
        return  # unknown price stays unknown: never claim a half of nothing
    costs.register_price(
        f"{batch_provider}:{model.model_name}",
        ModelPricing(
            input_per_mtok=inp * BATCH_DISCOUNT,
            output_per_mtok=out * BATCH_DISCOUNT,
            cached_input_per_mtok=None if cached is None else cached * BATCH_DISCOUNT,
        ),
    )


class _Parked:
    __slots__ = ("body", "custom_id", "done", "response")

    def __init__(self, custom_id: str, body: Mapping[str, Any]) -> None:
        self.custom_id = custom_id
        self.body = body
        self.done = anyio.Event()
        self.response: ModelResponse | BaseException | None = None


class BatchedModel:
    """The row model, with each call parked for the collector instead of sent."""

    def __init__(self, inner: OpenAIChatModel | AnthropicModel, collector: _Collector) -> None:
        self.inner = inner
        self._collector = collector

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    @property
    def provider(self) -> str:
        return self._collector.batch_provider

    @property
    def profile(self) -> Any:
        return getattr(self.inner, "profile", None)

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        row = _ROW.get()
        if row is None:
            raise ConfigurationError("a BatchedModel answers only inside a batch map")
        row[1] += 1
        custom_id = f"{row[0]}-{row[1]}"
        parked = _Parked(custom_id, self.inner.request_body(request))  # the adapter's exact wire body
        return await self._collector.park(parked)

    async def stream(self, request: ModelRequest) -> Any:  # pragma: no cover - the loop calls invoke (no streaming)
        response = await self.invoke(request)
        del response
        raise ConfigurationError("batch rows do not stream")
        yield  # type: ignore[unreachable]

    async def aclose(self) -> None:
        closer = getattr(self.inner, "aclose", None)
        if closer is not None:
            await closer()


class _Collector:
    def __init__(
        self,
        plan: MapPlan,
        api: BatchAPI,
        inner: OpenAIChatModel | AnthropicModel,
        *,
        poll_s: float,
        window_s: float,
        on_stop: str,
    ) -> None:
        self.plan = plan
        self.on_stop = on_stop
        self.ended: set[str] = set()  # jobs whose results were read
        self.api = api
        self.inner = inner
        self.poll_s = poll_s
        self.window_s = window_s
        self.batch_provider = f"{inner.provider}-batch"
        self.parked: dict[str, _Parked] = {}
        self.wake = anyio.Event()
        self.active = 0  # rows running (parked or not)
        self.journal = JobJournal(plan.checkpoint) if plan.checkpoint is not None else None
        self.attached: dict[str, str] = {}  # custom id -> journaled job id (a re-run re-attaches)
        self.results: dict[str, BatchResult] = {}
        if self.journal is not None:
            for state in ("submitted", "cancelling"):
                for job in self.journal.jobs(plan.map_key, state=state):
                    for cid in job.custom_ids:
                        self.attached[cid] = job.job_id
        self.jobs: list[str] = []

    async def park(self, parked: _Parked) -> ModelResponse:
        self.parked[parked.custom_id] = parked
        self.wake.set()
        await parked.done.wait()
        answer = parked.response
        if isinstance(answer, BaseException):
            raise answer
        assert answer is not None
        return answer

    def _parse(self, result: BatchResult) -> ModelResponse | BaseException:
        if result.body is None:
            return ProviderError(
                result.error or "the batch request failed", provider=self.batch_provider, retryable=False
            )
        response = self.inner.parse_response(result.body)
        return dataclasses.replace(response, provider=self.batch_provider)  # priced at the batch rate

    def _deliver(self, results: list[BatchResult]) -> None:
        for result in results:
            if result.unsent:
                continue  # never run (a cancelled or expired job): sent again, not failed
            self.results[result.custom_id] = result
            parked = self.parked.pop(result.custom_id, None)
            if parked is not None:
                try:
                    parked.response = self._parse(result)
                except Exception as exc:  # a malformed line fails its row, not the map
                    parked.response = exc
                parked.done.set()

    async def _await_job(self, job_id: str) -> None:
        token = self.plan.root.cancellation
        while True:
            status = await self.api.status(job_id)
            self.plan.progress.message = (
                f"batch job {job_id}: {status.detail} ({status.done + status.failed}/{status.total})"
            )
            if status.state == "ended":
                break
            try:
                with token.scope():
                    await anyio.sleep(self.poll_s)
            except Cancelled:
                if self.on_stop == "cancel":
                    await self._cancel(job_id)
                return  # the rows stay pending; the journal lets the next run collect what was done
        self.ended.add(job_id)
        self._deliver(await self.api.results(job_id))
        if self.journal is not None:
            self.journal.set_state(job_id, "cancelled" if status.detail == "cancelled" else "collected")

    async def _cancel(self, job_id: str) -> None:
        try:
            status = await self.api.cancel(job_id)
        except ProviderError as exc:  # the job stays journaled as submitted: the next run collects it
            self.plan.progress.message = f"batch job {job_id}: cancel failed ({exc})"
            return
        if self.journal is not None:
            self.journal.set_state(job_id, "cancelling")
        self.plan.progress.message = f"batch job {job_id}: {status.detail}"

    async def run(self, rows_done: anyio.Event) -> None:
        token = self.plan.root.cancellation
        while not rows_done.is_set() and not token.is_cancelled:
            with anyio.move_on_after(self.window_s) as window:
                await self.wake.wait()
            self.wake = anyio.Event()
            if not self.parked:
                continue
            if len(self.parked) < self.active and not window.cancelled_caught:
                continue  # rows are still parking: wait for the rest (or a quiet window)
            await self._round()
        for parked in list(self.parked.values()):  # a Stop: the rows still waiting end cancelled
            parked.response = Cancelled(token.reason or "stopped")
            parked.done.set()

    async def _round(self) -> None:
        waiting = dict(self.parked)
        attached_jobs = sorted({self.attached[cid] for cid in waiting if cid in self.attached})
        for job_id in attached_jobs:
            await self._await_job(job_id)
        known = [cid for cid in list(self.parked) if cid in self.results]
        self._deliver([self.results[cid] for cid in known])
        for cid in list(self.parked):  # in a job that ended without running it: send it again
            if self.attached.get(cid) in self.ended:
                del self.attached[cid]
        fresh = [(cid, p.body) for cid, p in self.parked.items() if cid not in self.attached]
        if not fresh or self.plan.root.cancellation.is_cancelled:
            return
        job_id = await self.api.submit(fresh, metadata={"tinyagents_map": self.plan.map_key[:64]})
        self.jobs.append(job_id)
        if self.journal is not None:
            self.journal.add(
                job_id=job_id,
                map_key=self.plan.map_key,
                provider=self.api.provider,
                base_url=self.inner.base_url,
                model=self.inner.model_name,
                custom_ids=[cid for cid, _ in fresh],
            )
        for cid, _ in fresh:
            self.attached[cid] = job_id
        await self._await_job(job_id)


def _row_id(key: str, digest: str) -> str:
    return hashlib.blake2b(f"{key}\x00{digest}".encode(), digest_size=10).hexdigest()


async def run_batch(
    plan: MapPlan, *, poll_s: float = 30.0, window_s: float = 0.5, on_stop: Literal["cancel", "detach"] = "cancel"
) -> None:
    """Run the plan's rows through one (or a few) provider batch jobs (Stop: see the module docstring)."""
    if on_stop not in ("cancel", "detach"):
        raise ConfigurationError(f"on_stop must be 'cancel' or 'detach', got {on_stop!r}")
    harness = plan.harness
    if harness.tools.names():
        raise ConfigurationError(
            "the batch executor runs rows of one model call: drop the tools", hint="executor='local'"
        )
    inner = batch_adapter(harness.model)
    api = batch_api_for(inner)
    collector = _Collector(plan, api, inner, poll_s=poll_s, window_s=window_s, on_stop=on_stop)
    _half_price(plan.root.costs, inner, collector.batch_provider)
    plan.harness = _derive(harness, model=BatchedModel(inner, collector))
    rows_done = anyio.Event()
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(collector.run, rows_done)
            async with anyio.create_task_group() as rows:
                for position in plan.todo:
                    rows.start_soon(_row, plan, collector, position)
            rows_done.set()
            collector.wake.set()
    finally:
        plan.harness = harness
        await api.aclose()


async def _row(plan: MapPlan, collector: _Collector, position: int) -> None:
    _ROW.set([_row_id(plan.keys[position], plan.digests[position]), 0])
    ctx = plan.root.child()
    collector.active += 1
    plan.progress.in_flight += 1
    try:
        run, _ = await plan.harness.invoke_with_status(ctx, plan.prompts[position])
    except Exception as exc:
        plan.fail(position, exc)
        return
    finally:
        collector.active -= 1
        plan.progress.in_flight -= 1
        collector.wake.set()
    plan.from_run(position, run, ctx.run_id)
