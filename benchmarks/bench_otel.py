"""OpenTelemetry tracing: per-run overhead of the model -> tool -> model run with tracing on vs off.

Ours: the overhead benchmark's instant model and async tool, without a sink, then with ``OTelSink``
over an SDK ``TracerProvider`` with a ``BatchSpanProcessor`` (the production setup) whose exporter
accepts and drops every batch, and an SDK ``MeterProvider`` with a reader, so the figure is the
whole cost on the run's side (span building, attributes, the batch queue, metric recording) and
none of the network. The same for pydantic-ai with and without its instrumentation
(``Agent(capabilities=[Instrumentation(settings=InstrumentationSettings(...))])``) on the same kind of providers, when the
``bench`` extra is installed. Timed round-robin with a rotating start, medians with the IQR.

Run alone: ``python -m benchmarks.bench_otel [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from benchmarks._common import header, interleaved, line, package_version, spread
from benchmarks.bench_overhead import InstantModel, add_one
from tinyagents_nb.harness import AgentHarness, RunContext
from tinyagents_nb.harness.observability import OTelSink

Runner = Callable[[], Awaitable[None]]


class DroppingExporter(SpanExporter):
    """Accepts every batch and keeps nothing: the export thread's cost without a network."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def providers() -> tuple[TracerProvider, MeterProvider, DroppingExporter]:
    exporter = DroppingExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    return tracer_provider, MeterProvider(metric_readers=[InMemoryMetricReader()]), exporter


def ours() -> tuple[list[tuple[str, Runner]], list[Callable[[], None]], DroppingExporter]:
    harness: AgentHarness[None] = AgentHarness(model=InstantModel(calls_tools=True), tools=[add_one])
    tracer_provider, meter_provider, exporter = providers()
    sink = OTelSink(tracer_provider, meter_provider)

    async def off() -> None:
        assert (await harness.invoke_in_context(RunContext(), "go")).final_text == "done"

    async def on() -> None:
        ctx: RunContext[None] = RunContext()
        ctx.events.add_listener(sink)
        assert (await harness.invoke_in_context(ctx, "go")).final_text == "done"

    runners = [("tinyagents-nb, tracing off", off), ("tinyagents-nb, OTelSink", on)]
    return runners, [tracer_provider.shutdown, meter_provider.shutdown], exporter


def pydantic_ai() -> tuple[list[tuple[str, Runner]], list[Callable[[], None]]] | str:
    try:
        from pydantic_ai import Agent
        from pydantic_ai.capabilities import Instrumentation
        from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel
        from pydantic_ai.models.instrumented import InstrumentationSettings
    except ImportError as exc:
        return f"pydantic-ai: skipped, not installed ({exc.name or exc}); install with pip install -e '.[bench]'"

    async def tool_fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(part, ToolReturnPart) for part in messages[-1].parts):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("add_one", {"x": 1}, tool_call_id="c1")])

    tracer_provider, meter_provider, _ = providers()
    settings = InstrumentationSettings(tracer_provider=tracer_provider, meter_provider=meter_provider)
    agents: dict[str, Any] = {
        "pydantic-ai, no instrumentation": Agent(FunctionModel(tool_fn)),
        "pydantic-ai, Instrumentation capability": Agent(
            FunctionModel(tool_fn), capabilities=[Instrumentation(settings=settings)]
        ),
    }
    runners: list[tuple[str, Runner]] = []
    for name, agent in agents.items():

        @agent.tool_plain
        async def add_one(x: int) -> int:
            return x + 1

        async def run(agent: Any = agent) -> None:
            assert (await agent.run("go")).output == "done"

        runners.append((name, run))
    return runners, [tracer_provider.shutdown, meter_provider.shutdown]


async def main_async(quick: bool) -> None:
    header("10. OpenTelemetry tracing: model -> tool -> model, per run, on vs off")
    rounds, warmup = (20, 3) if quick else (300, 30)
    runners, closers, exporter = ours()
    peer = pydantic_ai()
    if isinstance(peer, str):
        line(peer)
    else:
        runners += peer[0]
        closers += peer[1]
    times = await interleaved(runners, rounds=rounds, warmup=warmup)
    stats = {name: spread([t * 1e6 for t in samples]) for name, samples in times.items()}
    for name, s in stats.items():
        line(f"  {name:<50} median {s.median:9.1f} µs  (p25 {s.p25:.1f}, p75 {s.p75:.1f}, n={s.n})")
    for off, on in (
        ("tinyagents-nb, tracing off", "tinyagents-nb, OTelSink"),
        ("pydantic-ai, no instrumentation", "pydantic-ai, Instrumentation capability"),
    ):
        if off in stats and on in stats:
            added = stats[on].median - stats[off].median
            line(f"  -> {on}: +{added:.1f} µs per run ({stats[on].median / stats[off].median:.2f}x its off figure)")
    for close in closers:
        close()
    line(f"  spans exported by our batch processor: {exporter.spans} (4 per run)")
    line(
        f"  opentelemetry-sdk {package_version('opentelemetry-sdk')}, pydantic-ai {package_version('pydantic-ai-slim')}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    asyncio.run(main_async(parser.parse_args(argv).quick))


if __name__ == "__main__":
    main()
