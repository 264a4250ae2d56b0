"""Item 7: the RLM over long contexts, and the cost of its sub-query fan-out.

(1) Synthetic long-context tasks (count the error kinds in a log of 1 MB and 10 MB, find one
needle line) solved by a scripted root model through code in the default child kernel: the largest
request the model ever receives (characters and tokens) and the number of model calls, which must
not grow with the context. (2) ``llm_batch`` of 1,000 prompts at concurrency 32 against a fake
sub-model that takes 50 ms per call: wall time against the ideal (1,000 / 32 * 50 ms = 1.6 s) and
the harness's CPU per sub-query (this process only: the REPL runs in the child kernel).

Run alone: ``python -m benchmarks.bench_rlm [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time

from benchmarks._common import header, line
from tinyagents_nb.harness import ModelRequest, ModelResponse, Usage
from tinyagents_nb.harness.models import TokenEstimator
from tinyagents_nb.harness.testkit import FunctionModel, ScriptedModel
from tinyagents_nb.rlm import RLM, KernelEnvironment, RLMLimits

KINDS = ("timeout", "disk_full", "auth_failed", "oom", "conn_reset")


def log_text(size: int, seed: int = 7) -> tuple[str, dict[str, int]]:
    rng = random.Random(seed)
    lines: list[str] = []
    counts: dict[str, int] = {}
    total = 0
    i = 0
    while total < size:
        if rng.random() < 0.05:
            kind = rng.choice(KINDS)
            counts[kind] = counts.get(kind, 0) + 1
            row = f"2026-11-24T00:{i % 60:02d}:00 ERROR {kind} request={i}"
        else:
            row = f"2026-11-24T00:{i % 60:02d}:00 INFO ok request={i} latency_ms={rng.randint(1, 900)}"
        lines.append(row)
        total += len(row) + 1
        i += 1
    return "\n".join(lines), counts


def reply(code: str) -> ModelResponse:
    return ScriptedModel.text(f"```python\n{code}\n```", usage=Usage(input_tokens=1, output_tokens=1))


async def long_context(env: KernelEnvironment, size: int) -> None:
    logs, counts = log_text(size)
    model = ScriptedModel(
        [
            reply("print(len(logs), logs.count(chr(10)) + 1)\nprint(logs[:300])"),
            reply(
                "import re, collections\ncounts = collections.Counter(re.findall(r' ERROR (\\w+)', logs))\nprint(counts)"
            ),
            reply("FINAL_VAR('counts')"),
        ]
    )
    started = time.perf_counter()
    run = await RLM(model=model, environment=env).invoke("Count the error kinds.", context={"logs": logs})
    wall = time.perf_counter() - started
    estimator = TokenEstimator.for_model("gpt-4o")
    sizes = [(sum(len(m.text) for m in r.messages), estimator.estimate(r.messages)) for r in model.requests]
    chars, tokens = max(sizes)
    ok = (
        "correct"
        if run.final_text == repr(__import__("collections").Counter(counts))
        else f"WRONG: {run.final_text[:80]}"
    )
    line(
        f"error kinds in {len(logs) / 1e6:5.1f} MB of logs: {len(model.requests)} model calls, largest request "
        f"{chars:,} chars / {tokens:,} tokens ({chars / len(logs):.4%} of the context); {wall:.2f} s; answer {ok}"
    )


async def needle(env: KernelEnvironment, size: int) -> None:
    logs, _ = log_text(size, seed=3)
    cut = len(logs) * 2 // 3
    logs = logs[:cut] + "\nSECRET-NEEDLE value=81d9\n" + logs[cut:]
    model = ScriptedModel(
        [
            reply("i = logs.find('NEEDLE')\nprint(logs[i - 7 : logs.find(chr(10), i)])"),
            reply("FINAL(logs[logs.find('value=', i) + 6 : logs.find(chr(10), i)])"),
        ]
    )
    run = await RLM(model=model, environment=env).invoke("Find the needle's value.", context={"logs": logs})
    chars = max(sum(len(m.text) for m in r.messages) for r in model.requests)
    line(
        f"needle in {len(logs) / 1e6:5.1f} MB: {len(model.requests)} model calls, largest request {chars:,} chars; "
        f"answer {'correct' if run.final_text == '81d9' else 'WRONG'}"
    )


async def fan_out(env: KernelEnvironment, prompts: int, concurrency: int, latency_s: float) -> None:
    async def slow(request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(latency_s)
        return ScriptedModel.text("ok", usage=Usage(input_tokens=10, output_tokens=1))

    model = ScriptedModel(
        [
            reply(f"answers = llm_batch([f'item {{i}}' for i in range({prompts})])\nprint(len(answers))"),
            reply("FINAL(1)"),
        ]
    )
    limits = RLMLimits(max_concurrency=concurrency, max_sub_queries=prompts)
    rlm = RLM(model=model, sub_model=FunctionModel(slow), environment=env, limits=limits)
    await RLM(model=ScriptedModel([reply("FINAL(0)")]), environment=env).invoke("warm up", context={})
    cpu0, wall0 = time.process_time(), time.perf_counter()
    run = await rlm.invoke("Fan out.", context={})
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    ideal = prompts / concurrency * latency_s
    line(
        f"llm_batch of {prompts:,} prompts at concurrency {concurrency} ({latency_s * 1e3:.0f} ms fake model): "
        f"{wall:.2f} s wall vs {ideal:.2f} s ideal ({wall / ideal:.2f}x); harness CPU {cpu / prompts * 1e3:.2f} ms "
        f"per sub-query; {run.usage.input_tokens - 2:,} sub-query input tokens rolled up"
    )


async def amain(quick: bool) -> None:
    env = KernelEnvironment()
    try:
        started = time.perf_counter()
        await RLM(model=ScriptedModel([reply("FINAL(0)")]), environment=env).invoke("start", context={})
        line(f"child kernel started and first run done in {time.perf_counter() - started:.2f} s")
        for size in (1_000_000,) if quick else (1_000_000, 10_000_000):
            await long_context(env, size)
            await needle(env, size)
        await fan_out(env, 100 if quick else 1_000, 32, 0.05)
    finally:
        env.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    args = parser.parse_args(argv)
    header("8. RLM: long contexts and sub-query fan-out")
    asyncio.run(amain(args.quick))


if __name__ == "__main__":
    main()
