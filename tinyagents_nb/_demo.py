"""``python -m tinyagents_nb``: an offline tour of a real agent loop.

A scripted model plays ``gpt-4o-mini`` (its replies and token counts are canned, so nothing leaves the
machine and no key is needed); everything else is the real harness: the loop, a typed tool, a
sub-agent one level down, streaming, one shared event stream, and usage and cost rolled up the tree.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import Sequence

from .harness import (
    AgentHarness,
    RunConfig,
    RunContext,
    SubAgent,
    TextDelta,
    Usage,
    tool,
)
from .harness.testkit import ScriptedModel

MODEL = "gpt-4o-mini"


@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    return {"Oslo": "8°C, light rain (6 mm expected)"}.get(city, "unknown")


class _PlaysGpt4oMini(ScriptedModel):
    """Canned replies that report themselves as gpt-4o-mini on openai, so the cost table is realistic."""

    @property
    def provider(self) -> str:
        return "openai"


def _agents() -> AgentHarness[None]:
    advice = "Bring a compact umbrella and a water-resistant jacket."
    advisor = SubAgent(
        "packing_advisor",
        AgentHarness(
            model=_PlaysGpt4oMini(
                [ScriptedModel.text(advice, usage=Usage(input_tokens=310, output_tokens=14))], model_name=MODEL
            ),
            system_prompt="You give short packing advice.",
        ),
        description="Gives packing advice for given weather.",
    )
    calls = [("weather", {"city": "Oslo"}), ("packing_advisor", {"input": "Light rain, 8°C in Oslo: what to pack?"})]
    answer = "It's 8°C in Oslo with light rain, so yes: bring a compact umbrella and a water-resistant jacket."
    script = [
        ScriptedModel.tool_calls(calls, usage=Usage(input_tokens=420, output_tokens=46)),
        ScriptedModel.text(answer, usage=Usage(input_tokens=610, cached_input_tokens=384, output_tokens=24)),
    ]
    return AgentHarness(
        model=_PlaysGpt4oMini(script, model_name=MODEL, chunk_size=6),
        tools=[weather, advisor.as_tool()],
        system_prompt="You are a concise travel assistant.",
    )


async def _main() -> int:
    harness = _agents()
    ctx = RunContext(config=RunConfig(thread_id="demo-thread", tags=["demo"]))
    prompt = "What's the weather in Oslo, and should I bring an umbrella?"
    print("Offline demo: a scripted model plays gpt-4o-mini; no network, no API key.\n")
    print(f"> {prompt}\n")
    kinds: Counter[str] = Counter()
    runs: dict[str, tuple[str | None, int]] = {}
    stream = harness.invoke_streaming(prompt, context=ctx)
    async for event in stream:
        kinds[event.kind] += 1
        runs.setdefault(event.run_id, (event.parent_run_id, event.depth))
        if event.kind == "model.delta" and event.depth == 0:
            delta = getattr(event, "delta", None)
            if isinstance(delta, TextDelta):
                sys.stdout.write(delta.text)
                sys.stdout.flush()
        elif event.kind == "tool.completed":
            print(f"  [tool] {getattr(event, 'tool_name', '')} -> {getattr(event, 'output', '')}")
    run = await stream.result()
    print("\n\nRun tree (one root, one sub-agent one level down)")
    for run_id, (parent, depth) in runs.items():
        print(f"  {'  ' * depth}{run_id}  parent={parent}  depth={depth}")
    print(f"\nEvents on the shared sink: {sum(kinds.values())}")
    for kind, count in sorted(kinds.items()):
        print(f"  {kind:<18} {count}")
    print("\nUsage and cost per model call (genai-prices, offline)")
    usage = ctx.usage.to_dataframe()[
        ["run_id", "depth", "model", "input_tokens", "cached_input_tokens", "output_tokens"]
    ]
    costs = ctx.costs.to_dataframe()[["total_usd"]]
    print(usage.join(costs).to_string(index=False))
    total = run.cost.total_usd if run.cost is not None else None
    print(f"\nWhole tree: {run.usage.total_tokens} tokens, {total} USD; status={run.status}")
    return 0


def main(argv: Sequence[str] = ()) -> int:
    return asyncio.run(_main())
