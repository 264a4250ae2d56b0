"""An offline tour of the harness context: identities, one shared event stream, usage and cost roll-up."""

from __future__ import annotations

from collections.abc import Sequence

from .harness import (
    AgentEvent,
    ModelCompleted,
    ModelStarted,
    RunConfig,
    RunContext,
    RunStarted,
    Usage,
)


def _call(ctx: RunContext[None], model: str, usage: Usage) -> None:
    call_id = f"{ctx.run_id}-m{ctx.usage.for_run(ctx.run_id).total_tokens}"
    ctx.emit(ModelStarted, call_id=call_id, model=model)
    ctx.emit(ModelCompleted, call_id=call_id, model=model, usage=usage)
    ctx.record_usage(usage, model=model, provider="openai", call_id=call_id)


def main(argv: Sequence[str] = ()) -> int:
    events: list[tuple[int, AgentEvent]] = []
    root = RunContext(config=RunConfig(run_id="orchestrator", thread_id="demo", tags=["demo"]))
    root.events.add_listener(lambda offset, event: events.append((offset, event)))
    root.emit(RunStarted, thread_id=root.thread_id, model="gpt-4o-mini", input="summarise the report")
    _call(root, "gpt-4o-mini", Usage(input_tokens=1_200, output_tokens=80))
    researcher = root.child(run_id="researcher", tags=["research"], metadata={"role": "research"})
    researcher.emit(RunStarted, thread_id=researcher.thread_id, model="gpt-4o")
    _call(researcher, "gpt-4o", Usage(input_tokens=4_000, cached_input_tokens=3_000, output_tokens=400))
    checker = researcher.child(run_id="fact-checker")
    checker.emit(RunStarted, thread_id=checker.thread_id, model="gpt-4o-mini")
    _call(checker, "gpt-4o-mini", Usage(input_tokens=900, output_tokens=60, reasoning_tokens=0))

    print("Run tree")
    for ctx in (root, researcher, checker):
        print(
            f"  {'  ' * ctx.depth}{ctx.run_id}  parent={ctx.parent_run_id}  root={ctx.root_run_id}"
            f"  depth={ctx.depth}  tags={list(ctx.tags)}"
        )
    print("\nEvents (one shared sink)")
    for offset, event in events:
        print(f"  #{offset:<2} {event.kind:<16} run={event.run_id:<13} depth={event.depth}")
    print("\nUsage")
    print(root.usage.to_dataframe()[["run_id", "model", "input_tokens", "cached_input_tokens", "output_tokens"]])
    print(f"\n  subtree(researcher) = {root.usage.for_subtree(researcher.run_id).total_tokens} tokens")
    print(f"  whole tree          = {root.usage.total().total_tokens} tokens")
    cost = root.costs.total()
    print(f"\nCost (genai-prices, offline): {cost.total_usd} USD over {cost.priced_calls} calls")
    return 0
