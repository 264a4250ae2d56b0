"""An RLM run as OpenTelemetry spans: code steps are ``execute_tool repl``, ``llm_batch`` sub-queries nest under them."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tinyagents_nb.harness import RunContext
from tinyagents_nb.harness.observability import OTelSink
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.rlm import RLM, LocalEnvironment

from ._scripts import py, sub_model

pytestmark = pytest.mark.anyio


def tree(spans: list[ReadableSpan]) -> list[tuple[int, str]]:
    by_id = {s.context.span_id: s for s in spans if s.context is not None}

    def depth(span: ReadableSpan) -> int:
        return 0 if span.parent is None else 1 + depth(by_id[span.parent.span_id])

    return [(depth(s), s.name) for s in sorted(spans, key=lambda s: s.start_time or 0)]


async def test_llm_batch_sub_queries_nest_under_the_repl_step_that_made_them() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    ctx: RunContext[None] = RunContext()
    ctx.events.add_listener(OTelSink(provider, capture_content=True))
    model = ScriptedModel(
        [py("counts = llm_batch(['count:ERROR ERROR', 'count:ERROR'])\nprint(counts)"), py("FINAL(counts)")],
        model_name="root",
    )
    rlm = RLM(model=model, sub_model=sub_model(), environment=LocalEnvironment())
    run = await rlm.invoke_in_context(ctx, "Count.", context={"logs": "x"})
    assert run.final_text == "['2', '1']"
    spans = list(exporter.get_finished_spans())
    assert tree(spans) == [
        (0, "invoke_agent rlm"),
        (1, "chat root"),
        (1, "execute_tool repl"),
        (2, "invoke_agent llm"),
        (3, "chat sub"),
        (2, "invoke_agent llm"),
        (3, "chat sub"),
        (1, "chat root"),
        (1, "execute_tool repl"),
        (1, "chat root"),  # the FINAL reply, answered by the RLM itself
    ]
    step = next(s for s in spans if s.name == "execute_tool repl")
    assert [e.name for e in step.events] == ["rlm.code", "rlm.output"]
    code = dict(step.events[0].attributes or {})
    assert "llm_batch" in str(code["code"])
    assert str(dict(step.events[1].attributes or {})["output"]).strip() == "['2', '1']"
    subs = [s for s in spans if s.name == "invoke_agent llm"]
    assert {dict(s.attributes or {})["tinyagents.depth"] for s in subs} == {1}
    usage = [dict(s.attributes or {})["gen_ai.usage.input_tokens"] for s in spans if s.name == "chat sub"]
    assert len(usage) == 2
    assert all(isinstance(u, int) and u > 0 for u in usage)
