"""Item 4: context estimation cost.

(1) Re-estimating a 10,000-message transcript after one new message: the loop does this before
every model call, so it must cost O(new messages), not O(transcript). Timed as the loop calls it
(a fresh tuple of the whole transcript each time) and with the same growing list; the estimator's
own counters show how many messages were actually tokenized. (2) Throughput of the estimator on a
cold cache against raw ``tiktoken`` ``encode_ordinary`` on the same message texts.

Run alone: ``python -m benchmarks.bench_context [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import random
import time

from benchmarks._common import header, line, spread
from tinyagents_nb.harness import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage
from tinyagents_nb.harness.models import TokenEstimator

MODEL = "gpt-4o"
TARGET_MS = 1.0
_WORDS = (
    "agent harness token context window model stream cancel notebook widget tool call result message "
    "budget summary trim pressure estimate cost usage thread session kernel cell output the a of to and in"
).split()


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words)) + "."


def transcript(n: int, seed: int = 1) -> list[Message]:
    """A realistic mix: user turns, assistant turns (some calling a tool) and tool results."""
    rng = random.Random(seed)
    messages: list[Message] = []
    while len(messages) < n:
        messages.append(UserMessage(text=_text(rng, rng.randint(5, 40))))
        if rng.random() < 0.3:
            call = ToolCall(id=f"call_{len(messages)}", name="search", arguments={"query": _text(rng, 4)})
            messages.append(AssistantMessage(text="", tool_calls=[call]))
            messages.append(ToolMessage(tool_call_id=call.id, name="search", text=_text(rng, rng.randint(20, 120))))
        messages.append(AssistantMessage(text=_text(rng, rng.randint(10, 80))))
    return messages[:n]


def _reestimate(n: int, reps: int) -> None:
    messages = transcript(n)
    estimator = TokenEstimator.for_model(MODEL)
    started = time.perf_counter()
    total = estimator.estimate(tuple(messages))
    cold_ms = (time.perf_counter() - started) * 1e3
    line(
        f"counter: {estimator.counter.name} via {getattr(estimator.counter, 'backend', '?')}; "
        f"{n:,} messages = {total:,} tokens; first (cold) estimate {cold_ms:.1f} ms"
    )
    rng = random.Random(2)
    for label, as_tuple in (("as the loop calls it (a new tuple each time)", True), ("the same growing list", False)):
        before = estimator.stats
        samples = []
        for _ in range(reps):
            messages.append(UserMessage(text=_text(rng, 20)))
            request = tuple(messages) if as_tuple else messages
            t0 = time.perf_counter()
            estimator.estimate(request)
            samples.append((time.perf_counter() - t0) * 1e3)
        after = estimator.stats
        s = spread(samples)
        tokenized = (after.tokenized - before.tokenized) / reps
        verdict = "met" if s.median < TARGET_MS else "MISSED"
        line(
            f"re-estimate after 1 new message, {label}: median {s.median:.3f} ms "
            f"(p25 {s.p25:.3f}, p75 {s.p75:.3f}, n={s.n}); {tokenized:.1f} messages tokenized per call "
            f"[target < {TARGET_MS:g} ms: {verdict}]"
        )


def _throughput(n: int, reps: int) -> None:
    import tiktoken

    messages = transcript(n, seed=3)
    estimator = TokenEstimator.for_model(MODEL)  # also seeds tiktoken's offline cache
    encoding = tiktoken.get_encoding(estimator.counter.name)
    parts = [p for m in messages for p in _parts(m) if p]  # exactly the strings the estimator encodes

    def raw() -> int:
        return sum(len(encoding.encode_ordinary(p)) for p in parts)

    def ours() -> int:
        estimator.clear()
        return estimator.estimate(messages)

    raw()
    ours()
    content_tokens = raw()
    framed_tokens = ours()
    medians = {}
    for name, fn in (("raw tiktoken encode_ordinary", raw), ("TokenEstimator (cold cache)", ours)):
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        medians[name] = spread(times).median
        rate = content_tokens / medians[name] / 1e6
        line(f"{name:<32} {rate:6.2f} M content tokens/s  ({len(parts):,} strings in {medians[name] * 1e3:.1f} ms)")
    ratio = medians["raw tiktoken encode_ordinary"] / medians["TokenEstimator (cold cache)"]
    line(
        f"estimator speed / raw tiktoken: {ratio:.2f} on the same {content_tokens:,} content tokens "
        f"(the estimate adds {framed_tokens - content_tokens:,} framing tokens by arithmetic)"
    )


def _parts(message: Message) -> list[str]:
    if isinstance(message, AssistantMessage):
        out = [message.text, message.reasoning or ""]
        for call in message.tool_calls:
            out += [call.id, call.name, json.dumps(dict(call.arguments), separators=(",", ":"), ensure_ascii=False)]
        return out
    if isinstance(message, ToolMessage):
        return [message.tool_call_id, message.text]
    return [message.text]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    args = parser.parse_args(argv)
    header("4. Context estimation")
    _reestimate(10_000, 10 if args.quick else 50)
    _throughput(2_000 if args.quick else 10_000, 2 if args.quick else 5)


if __name__ == "__main__":
    main()
