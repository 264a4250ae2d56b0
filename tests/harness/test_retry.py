from __future__ import annotations

import asyncio
import dataclasses
import functools
import math
import random
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import anyio.lowlevel
import httpx
import pytest

from tinyagents_nb.harness import (
    CancellationToken,
    Cancelled,
    ConfigurationError,
    ContextLimitError,
    FallbackPolicy,
    LimitExceeded,
    ModelNotFound,
    ModelRequest,
    ModelResponse,
    ProviderError,
    RateLimiter,
    RetryPolicy,
    RunTimeout,
    StructuredOutputError,
    ToolError,
)
from tinyagents_nb.harness.models import ModelStreamItem
from tinyagents_nb.harness.runtime import call_with_retry, is_retryable

# ------------------------------------------------------------------------------------------ helpers


class RecordingSleep:
    """A fake sleep: records each delay and yields once, never waits."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await anyio.lowlevel.checkpoint()


class FakeClock:
    """A manual clock whose sleep advances it, for token-bucket math."""

    def __init__(self, start: float = 100.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        await anyio.lowlevel.checkpoint()  # let other tasks run "during" the sleep, then time passes
        self.now += delay


class Flaky:
    """Fails with the given errors in order, then returns ``result``."""

    def __init__(self, errors: list[BaseException], result: str = "ok") -> None:
        self.errors = list(errors)
        self.calls = 0
        self.result = result

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.result


class FakeModel:
    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def model_name(self) -> str:
        return self._name

    @property
    def provider(self) -> str:
        return "test"

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        raise NotImplementedError

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        raise NotImplementedError


def transient(n: int = 0) -> ProviderError:
    return ProviderError(f"503 upstream #{n}", status=503, retryable=True)


def _http_status_error(status: int) -> httpx.HTTPStatusError:
    request = httpx.Request("GET", "http://127.0.0.1/v1/chat")
    return httpx.HTTPStatusError("bad status", request=request, response=httpx.Response(status, request=request))


# ------------------------------------------------------------------------------------------ RetryPolicy


def test_backoff_doubles_from_initial_and_is_capped() -> None:
    policy = RetryPolicy()
    assert [policy.backoff_for_attempt(n) for n in range(1, 7)] == pytest.approx([0.2, 0.4, 0.8, 1.6, 3.2, 6.4])
    assert policy.backoff_for_attempt(9) == pytest.approx(30.0)  # 51.2 capped
    assert policy.backoff_for_attempt(5000) == 30.0  # 2**4999 overflows a float: still the cap


def test_constant_backoff_with_multiplier_one() -> None:
    policy = RetryPolicy(initial_backoff_s=1.5, multiplier=1.0)
    assert {policy.backoff_for_attempt(n) for n in (1, 2, 10)} == {1.5}


def test_jitter_stays_within_bounds_and_varies() -> None:
    policy = RetryPolicy(initial_backoff_s=1.0, jitter=0.25)
    rng = random.Random(7)
    samples = [policy.backoff_for_attempt(1, rng=rng) for _ in range(2000)]
    assert all(0.75 <= s <= 1.25 for s in samples)
    assert min(samples) < 0.8  # spread over the whole band, not a constant
    assert max(samples) > 1.2
    assert len(set(samples)) > 1000


def test_jitter_never_exceeds_the_cap() -> None:
    policy = RetryPolicy(initial_backoff_s=1.0, max_backoff_s=2.0, jitter=1.0)
    samples = [policy.backoff_for_attempt(10) for _ in range(500)]
    assert all(0.0 <= s <= 2.0 for s in samples)


def test_seeded_jitter_is_reproducible() -> None:
    policy = RetryPolicy(jitter=0.5)
    first = [policy.backoff_for_attempt(3, rng=random.Random(1)) for _ in range(3)]
    assert first == [policy.backoff_for_attempt(3, rng=random.Random(1)) for _ in range(3)]


def test_retry_after_wins_and_is_capped() -> None:
    policy = RetryPolicy(jitter=0.5)
    assert policy.backoff_for_attempt(1, ProviderError("429", retryable=True, retry_after_s=7.0)) == 7.0
    # Smaller than the computed backoff still wins: the server said when.
    assert policy.backoff_for_attempt(6, ProviderError("429", retry_after_s=0.05)) == 0.05
    assert policy.backoff_for_attempt(1, ProviderError("429", retry_after_s=500.0)) == 120.0
    assert policy.backoff_for_attempt(1, ProviderError("429", retry_after_s=math.inf)) == 120.0
    assert policy.backoff_for_attempt(1, ProviderError("429", retry_after_s=-3.0)) == 0.0
    assert RetryPolicy(max_retry_after_s=10.0).backoff_for_attempt(1, ProviderError("x", retry_after_s=60)) == 10.0


def test_retry_after_ignored_when_not_honoured_or_absent() -> None:
    policy = RetryPolicy(honour_retry_after=False)
    assert policy.backoff_for_attempt(2, ProviderError("429", retry_after_s=50.0)) == pytest.approx(0.4)
    assert RetryPolicy().backoff_for_attempt(2, ProviderError("503", retryable=True)) == pytest.approx(0.4)
    assert RetryPolicy().backoff_for_attempt(2, TimeoutError()) == pytest.approx(0.4)


def test_backoff_rejects_attempt_zero() -> None:
    with pytest.raises(ConfigurationError, match="attempt"):
        RetryPolicy().backoff_for_attempt(0)


def test_none_policy_and_frozen() -> None:
    assert RetryPolicy.none().max_attempts == 1
    policy = RetryPolicy()
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.max_attempts = 9  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"max_attempts": 2.0},
        {"max_attempts": True},
        {"initial_backoff_s": -0.1},
        {"initial_backoff_s": math.nan},
        {"multiplier": 0.5},
        {"max_backoff_s": math.inf},
        {"initial_backoff_s": 5.0, "max_backoff_s": 1.0},
        {"jitter": 1.5},
        {"jitter": -0.1},
        {"honour_retry_after": "yes"},
        {"max_retry_after_s": -1},
        {"retry_on": 42},
    ],
)
def test_retry_policy_validation(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ is_retryable


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ProviderError("503", status=503, retryable=True), True),
        (ProviderError("401", status=401, retryable=False), False),
        (TimeoutError("slow"), True),
        (ConnectionError("reset"), True),
        (ConnectionResetError("reset"), True),
        (httpx.ConnectError("refused"), True),
        (httpx.ReadTimeout("slow"), True),
        (httpx.PoolTimeout("pool"), True),
        (httpx.RemoteProtocolError("server disconnected"), True),
        (httpx.UnsupportedProtocol("ftp://"), False),
        (httpx.LocalProtocolError("bad header"), False),
        (_http_status_error(503), True),
        (_http_status_error(429), True),
        (_http_status_error(404), False),
        (Cancelled("stop"), False),
        (ContextLimitError("too long"), False),
        (ModelNotFound("gpt-9"), False),
        (ConfigurationError("bad"), False),
        (RunTimeout("wall clock", timeout_s=1.0), False),  # a TimeoutError, but the run's own deadline
        (ValueError("bug"), False),
        (RuntimeError("bug"), False),
    ],
)
def test_is_retryable_matrix(error: BaseException, expected: bool) -> None:
    assert is_retryable(error) is expected


def test_retry_module_does_not_import_httpx() -> None:
    code = "import sys; from tinyagents_nb.harness.runtime import call_with_retry; print('httpx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_should_retry_custom_predicate_but_never_cancelled() -> None:
    policy = RetryPolicy(retry_on=lambda e: isinstance(e, ValueError | Cancelled))
    assert policy.should_retry(ValueError())
    assert not policy.should_retry(TimeoutError())  # the predicate replaces the classifier
    assert not policy.should_retry(Cancelled())


# ------------------------------------------------------------------------------------------ call_with_retry


@pytest.mark.anyio
async def test_succeeds_after_two_failures_with_recorded_backoff() -> None:
    errors = [transient(1), transient(2)]
    fn = Flaky(list(errors))
    sleep = RecordingSleep()
    retries: list[tuple[int, float, BaseException]] = []
    result = await call_with_retry(
        fn, policy=RetryPolicy(), sleep=sleep, on_retry=lambda a, d, e: retries.append((a, d, e))
    )
    assert result == "ok"
    assert fn.calls == 3
    assert sleep.delays == pytest.approx([0.2, 0.4])
    assert [(a, e) for a, _, e in retries] == [(1, errors[0]), (2, errors[1])]
    assert [d for _, d, _ in retries] == sleep.delays


@pytest.mark.anyio
async def test_non_retryable_error_propagates_at_once() -> None:
    boom = ProviderError("invalid api key", status=401)
    fn = Flaky([boom])
    sleep = RecordingSleep()
    retries: list[int] = []
    with pytest.raises(ProviderError) as info:
        await call_with_retry(fn, policy=RetryPolicy(), sleep=sleep, on_retry=lambda a, d, e: retries.append(a))
    assert info.value is boom
    assert (fn.calls, sleep.delays, retries) == (1, [], [])


@pytest.mark.anyio
async def test_exhausted_attempts_raise_the_last_error_unwrapped() -> None:
    errors = [transient(n) for n in range(10)]
    fn = Flaky(list(errors))
    sleep = RecordingSleep()
    with pytest.raises(ProviderError) as info:
        await call_with_retry(fn, policy=RetryPolicy(max_attempts=4), sleep=sleep)
    assert info.value is errors[3]
    assert fn.calls == 4
    assert sleep.delays == pytest.approx([0.2, 0.4, 0.8])


@pytest.mark.anyio
@pytest.mark.parametrize(("max_retries", "expected_calls"), [(0, 1), (1, 2), (2, 3), (10, 4), (None, 4)])
async def test_max_retries_caps_attempts(max_retries: int | None, expected_calls: int) -> None:
    fn = Flaky([transient(n) for n in range(10)])
    with pytest.raises(ProviderError):
        await call_with_retry(fn, policy=RetryPolicy(), max_retries=max_retries, sleep=RecordingSleep())
    assert fn.calls == expected_calls


@pytest.mark.anyio
async def test_negative_max_retries_is_rejected() -> None:
    fn = Flaky([])
    with pytest.raises(ConfigurationError):
        await call_with_retry(fn, policy=RetryPolicy(), max_retries=-1)
    assert fn.calls == 0


@pytest.mark.anyio
async def test_retry_after_drives_the_wait() -> None:
    sleep = RecordingSleep()
    fn = Flaky([ProviderError("429", status=429, retryable=True, retry_after_s=3.0)])
    assert await call_with_retry(fn, policy=RetryPolicy(), sleep=sleep) == "ok"
    assert sleep.delays == [3.0]


@pytest.mark.anyio
async def test_cancelled_from_the_call_is_never_retried() -> None:
    fn = Flaky([Cancelled("inner")])
    with pytest.raises(Cancelled):
        await call_with_retry(fn, policy=RetryPolicy(retry_on=lambda e: True), sleep=RecordingSleep())
    assert fn.calls == 1


@pytest.mark.anyio
async def test_task_cancellation_is_not_swallowed() -> None:
    fn = Flaky([asyncio.CancelledError()])
    with pytest.raises(asyncio.CancelledError):
        await call_with_retry(fn, policy=RetryPolicy(retry_on=lambda e: True), sleep=RecordingSleep())
    assert fn.calls == 1


@pytest.mark.anyio
async def test_pre_cancelled_token_makes_zero_calls() -> None:
    token = CancellationToken()
    token.cancel("stop")
    fn = Flaky([])
    with pytest.raises(Cancelled, match="stop"):
        await call_with_retry(fn, policy=RetryPolicy(), cancellation=token)
    assert fn.calls == 0


@pytest.mark.anyio
async def test_cancel_scheduled_during_backoff_prevents_the_next_attempt() -> None:
    token = CancellationToken()
    fn = Flaky([transient(1), transient(2)])
    sleep = RecordingSleep()

    def stop(attempt: int, delay: float, error: BaseException) -> None:
        token.cancel("during backoff")

    with pytest.raises(Cancelled, match="during backoff"):
        await call_with_retry(fn, policy=RetryPolicy(), cancellation=token, sleep=sleep, on_retry=stop)
    assert fn.calls == 1
    assert sleep.delays == []


@pytest.mark.anyio
async def test_cancel_from_another_thread_ends_a_long_backoff_promptly() -> None:
    token = CancellationToken()
    fn = Flaky([transient(n) for n in range(5)])
    timer = threading.Timer(0.1, token.cancel, args=("stop button",))
    start = time.monotonic()
    timer.start()
    try:
        with anyio.fail_after(5):
            with pytest.raises(Cancelled, match="stop button"):
                await call_with_retry(fn, policy=RetryPolicy(initial_backoff_s=30.0), cancellation=token)
    finally:
        timer.cancel()
    assert time.monotonic() - start < 2.0
    assert fn.calls == 1


@pytest.mark.anyio
async def test_real_sleep_path_without_a_token() -> None:
    fn = Flaky([TimeoutError(), ConnectionError()])
    with anyio.fail_after(5):
        assert await call_with_retry(fn, policy=RetryPolicy(initial_backoff_s=0.001)) == "ok"
    assert fn.calls == 3


# ------------------------------------------------------------------------------------------ FallbackPolicy


def test_fallback_chain_order() -> None:
    chain = FallbackPolicy(["a", "b", "c"])
    assert list(chain) == ["a", "b", "c"]
    assert len(chain) == 3
    assert chain.next_after("primary") == "a"  # the primary is not in the chain: start at the top
    assert chain.next_after(None) == "a"
    assert chain.next_after("a") == "b"
    assert chain.next_after("b") == "c"
    assert chain.next_after("c") is None
    assert "'a', 'b', 'c'" in repr(chain)


def test_fallback_matches_models_by_identity_then_name() -> None:
    fast, big = FakeModel("fast"), FakeModel("big")
    chain = FallbackPolicy([fast, "middle", big])
    assert chain.next_after(fast) == "middle"
    assert chain.next_after("middle") is big
    assert chain.next_after(big) is None
    assert chain.next_after("fast") == "middle"  # a name reaches a model entry
    assert chain.next_after(FakeModel("big")) is None  # a different object with the same name
    assert [FallbackPolicy.name_of(m) for m in chain] == ["fast", "middle", "big"]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ProviderError("401", status=401, retryable=False), True),
        (ProviderError("503", status=503, retryable=True), True),
        (ModelNotFound("gpt-9"), True),
        (TimeoutError(), True),
        (httpx.ConnectError("refused"), True),
        (Cancelled(), False),
        (ContextLimitError("too long"), False),
        (StructuredOutputError("bad json"), False),
        (ToolError("tool broke"), False),
        (LimitExceeded("model_calls", "cap"), False),
        (RunTimeout("deadline"), False),
        (ValueError("bug"), False),
    ],
)
def test_fallback_default_on(error: BaseException, expected: bool) -> None:
    assert FallbackPolicy(["x"]).should_fall_back(error) is expected


def test_fallback_on_filter_is_configurable_but_never_for_cancel() -> None:
    chain = FallbackPolicy(["x"], on=lambda e: FallbackPolicy.default_on(e) or isinstance(e, ContextLimitError))
    assert chain.should_fall_back(ContextLimitError("too long"))
    assert chain.should_fall_back(ModelNotFound("y"))
    only_429 = FallbackPolicy(["x"], on=lambda e: isinstance(e, ProviderError) and e.status == 429)
    assert not only_429.should_fall_back(ProviderError("500", status=500))
    assert only_429.should_fall_back(ProviderError("429", status=429))
    assert not FallbackPolicy(["x"], on=lambda e: True).should_fall_back(Cancelled())


@pytest.mark.parametrize(
    "models",
    [[], ["a", "a"], ["a", ""], ["a", 3], "abc", None],
)
def test_fallback_validation(models: object) -> None:
    with pytest.raises(ConfigurationError):
        FallbackPolicy(models)  # type: ignore[arg-type]


def test_fallback_rejects_the_same_model_object_twice() -> None:
    model = FakeModel("m")
    with pytest.raises(ConfigurationError, match="twice"):
        FallbackPolicy([model, model])
    with pytest.raises(ConfigurationError):
        FallbackPolicy(["a"], on=5)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_each_fallback_model_gets_a_fresh_retry_budget() -> None:
    """The composition the loop uses: retry per model, then advance while the error allows it."""
    chain = FallbackPolicy(["backup-1", "backup-2"])
    attempts: dict[str, int] = {}

    def call_for(model: str) -> Callable[[], Awaitable[str]]:
        async def call() -> str:
            attempts[model] = attempts.get(model, 0) + 1
            if model != "backup-2":
                raise ProviderError(f"{model} down", status=503, retryable=True)
            return f"answer from {model}"

        return call

    policy = RetryPolicy(max_attempts=2)
    current = "primary"
    while True:
        try:
            result = await call_with_retry(call_for(current), policy=policy, sleep=RecordingSleep())
            break
        except Exception as exc:
            nxt = chain.next_after(current)
            if nxt is None or not chain.should_fall_back(exc):
                raise
            current = FallbackPolicy.name_of(nxt)
    assert result == "answer from backup-2"
    assert attempts == {"primary": 2, "backup-1": 2, "backup-2": 1}


# ------------------------------------------------------------------------------------------ RateLimiter


def test_bucket_starts_full_and_refills_proportionally() -> None:
    clock = FakeClock()
    limiter = RateLimiter(2.0, burst=3, clock=clock)
    assert [limiter.try_acquire() for _ in range(4)] == [True, True, True, False]
    clock.now += 0.25
    assert limiter.available == pytest.approx(0.5)
    assert not limiter.try_acquire()
    clock.now += 0.25
    assert limiter.try_acquire()
    clock.now += 100
    assert limiter.available == 3.0  # capped at the burst
    assert limiter.try_acquire(3)
    assert not limiter.try_acquire()


@pytest.mark.parametrize(("rate", "burst"), [(0.5, 1), (10.0, 10), (2.5, 3)])
def test_default_burst_is_one_seconds_worth(rate: float, burst: int) -> None:
    assert RateLimiter(rate).burst == burst


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((0,), {}), ((-1.0,), {}), ((math.nan,), {}), ((True,), {}), ((1.0,), {"burst": 0}), ((1.0,), {"burst": 1.5})],
)
def test_rate_limiter_validation(args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        RateLimiter(*args, **kwargs)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_tokens_beyond_burst_or_non_positive_are_rejected() -> None:
    limiter = RateLimiter(1.0, burst=2)
    for bad in (3, 0, -1):
        with pytest.raises(ConfigurationError):
            limiter.try_acquire(bad)
        with pytest.raises(ConfigurationError):
            await limiter.acquire(bad)


@pytest.mark.anyio
async def test_acquire_waits_for_the_deficit() -> None:
    clock = FakeClock()
    limiter = RateLimiter(2.0, burst=2, clock=clock, sleep=clock.sleep)
    assert await limiter.acquire() == 0.0
    assert await limiter.acquire() == 0.0
    assert await limiter.acquire() == pytest.approx(0.5)
    assert await limiter.acquire(2) == pytest.approx(1.0)
    assert clock.sleeps == pytest.approx([0.5, 1.0])


@pytest.mark.anyio
async def test_concurrent_acquirers_are_served_in_order() -> None:
    clock = FakeClock()
    limiter = RateLimiter(10.0, burst=1, clock=clock, sleep=clock.sleep)
    done: list[tuple[int, float]] = []
    blocked: list[bool] = []

    async def worker(i: int) -> None:
        waited = await limiter.acquire()
        done.append((i, waited))

    async def prober() -> None:
        await anyio.lowlevel.checkpoint()
        blocked.append(limiter.try_acquire())

    start = clock.now
    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(worker, i)
        tg.start_soon(prober)
    assert [i for i, _ in done] == [0, 1, 2, 3, 4]
    assert [w for _, w in done] == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4])
    assert clock.now - start == pytest.approx(0.4)
    assert blocked == [False]  # no barging past the queue


@pytest.mark.anyio
async def test_concurrent_acquirers_on_the_real_clock() -> None:
    limiter = RateLimiter(50.0, burst=1)
    start = time.monotonic()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(limiter.acquire)
    elapsed = time.monotonic() - start
    assert 0.07 <= elapsed < 2.0  # four refills of 20 ms each


@pytest.mark.anyio
async def test_pre_cancelled_acquire_takes_nothing() -> None:
    limiter = RateLimiter(1.0, burst=1)
    token = CancellationToken()
    token.cancel()
    with pytest.raises(Cancelled):
        await limiter.acquire(cancellation=token)
    assert limiter.try_acquire()


@pytest.mark.anyio
async def test_acquire_wait_is_cancellable_from_another_thread() -> None:
    limiter = RateLimiter(0.01, burst=1)  # 100 s per token
    assert limiter.try_acquire()
    token = CancellationToken()
    outcomes: list[str] = []

    async def waiter() -> None:
        try:
            await limiter.acquire(cancellation=token)
            outcomes.append("acquired")
        except Cancelled:
            outcomes.append("cancelled")

    timer = threading.Timer(0.1, token.cancel)
    start = time.monotonic()
    timer.start()
    try:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(waiter)  # sleeping at the head of the queue
                tg.start_soon(waiter)  # queued on the lock behind it
    finally:
        timer.cancel()
    assert outcomes == ["cancelled", "cancelled"]
    assert time.monotonic() - start < 2.0
    assert not limiter.try_acquire()  # nothing was granted, and the queue is free again
    assert "rate_per_s=0.01" in repr(limiter)


@pytest.mark.anyio
async def test_try_acquire_does_not_jump_the_queue() -> None:
    clock = FakeClock()
    limiter = RateLimiter(10.0, burst=2, clock=clock, sleep=clock.sleep)
    assert limiter.try_acquire()  # one token left
    seen: list[bool] = []

    async def big() -> None:
        await limiter.acquire(2)  # needs both: queues and sleeps with one token in the bucket

    async def small() -> None:  # runs while big() sleeps at the head of the queue
        seen.append(limiter.try_acquire())

    async with anyio.create_task_group() as tg:
        tg.start_soon(big)
        tg.start_soon(small)
    assert seen == [False]
    assert limiter.available == pytest.approx(0.0)


@pytest.mark.anyio
async def test_a_wait_that_cannot_fit_before_the_deadline_is_not_started() -> None:
    sleep = RecordingSleep()
    first = ProviderError("429", status=429, retryable=True, retry_after_s=30.0)
    fn = Flaky([first])
    with pytest.raises(RunTimeout) as info:
        await call_with_retry(fn, policy=RetryPolicy(), sleep=sleep, remaining_s=lambda: 1.5)
    assert info.value.__cause__ is first
    assert (fn.calls, sleep.delays) == (1, [])
    # a custom error, and a wait that fits is taken
    fn = Flaky([first])
    with pytest.raises(KeyError):
        await call_with_retry(fn, policy=RetryPolicy(), sleep=sleep, remaining_s=lambda: 29.0, on_deadline=KeyError)
    assert await call_with_retry(Flaky([first]), policy=RetryPolicy(), sleep=sleep, remaining_s=lambda: 31.0) == "ok"
    assert await call_with_retry(Flaky([first]), policy=RetryPolicy(), sleep=sleep, remaining_s=lambda: None) == "ok"
    assert sleep.delays == [30.0, 30.0]


@pytest.mark.anyio
async def test_acquire_fails_at_once_when_the_known_wait_exceeds_the_timeout() -> None:
    clock = FakeClock()
    limiter = RateLimiter(0.5, burst=1, clock=clock, sleep=clock.sleep)
    assert await limiter.acquire(timeout_s=0.01) == 0.0  # a token in the bucket: no wait at all
    with pytest.raises(TimeoutError):
        await limiter.acquire(timeout_s=1.5)  # needs 2 s
    assert clock.sleeps == []
    assert await limiter.acquire(timeout_s=2.5) == pytest.approx(2.0)


@pytest.mark.anyio
async def test_a_queued_acquire_gives_up_at_its_timeout() -> None:
    limiter = RateLimiter(1.0, burst=1)
    assert limiter.try_acquire()
    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(limiter.acquire, 1))  # queues first: ~1 s
        await anyio.sleep(0.01)
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await limiter.acquire(timeout_s=0.2, cancellation=CancellationToken())
        assert time.monotonic() - started < 0.9
    assert limiter.available < 1  # the queued waiter got its token; the one that gave up took none


def test_one_rate_limiter_serves_two_event_loops_at_once() -> None:
    """Two run_sync calls on two threads share one limiter: both finish, and the rate holds across them."""
    import threading

    from tinyagents_nb.harness import AgentHarness, AgentRun, RunPolicy
    from tinyagents_nb.harness.testkit import ScriptedModel

    limiter = RateLimiter(rate_per_s=40, burst=1)
    results: dict[int, AgentRun] = {}

    def run(i: int) -> None:
        harness = AgentHarness(
            model=ScriptedModel([ScriptedModel.tool_call("nothing", {})] * 3 + ["done"]),
            policy=RunPolicy(rate_limiter=limiter),
        )
        results[i] = harness.run_sync("go")

    for _trial in range(5):
        results.clear()
        started = time.monotonic()
        threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=20)
        assert not any(thread.is_alive() for thread in threads), "a run hung on the shared limiter"
        assert [results[i].final_text for i in range(2)] == ["done", "done"]
        assert time.monotonic() - started >= 7 / 40 - 0.02  # 8 calls through one bucket of 1 at 40/s


def test_jitter_without_an_rng_leaves_the_global_random_stream_alone() -> None:
    """A notebook's ``random.seed(...)`` sequence (and Hypothesis's check of it) is not disturbed by a backoff."""
    policy = RetryPolicy(max_attempts=3, jitter=0.5)
    random.seed(11)
    expected = random.random()
    random.seed(11)
    assert len({policy.backoff_for_attempt(2) for _ in range(20)}) > 1  # jittered, from its own stream
    assert random.random() == expected


def test_two_event_loops_sharing_a_limiter_never_hang_over_hundreds_of_trials() -> None:
    """The cross-loop race tried 300 times: two threads' loops contend for a bucket of one (the old code hung)."""
    limiter = RateLimiter(rate_per_s=5_000, burst=1)

    def worker(done: list[float]) -> None:
        async def main() -> None:
            waited = 0.0
            for _ in range(4):
                waited += await limiter.acquire()
            done.append(waited)

        asyncio.run(main())

    queued = 0
    for trial in range(300):
        done: list[float] = []
        threads = [threading.Thread(target=worker, args=(done,), daemon=True) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=10)
        assert len(done) == 2, f"trial {trial}: a loop hung on the shared limiter"
        queued += sum(w > 0 for w in done)
    assert queued > 0  # the loops did wait on each other, not just take a full bucket in turn
