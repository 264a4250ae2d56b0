"""``RateLimits``: shared requests/tokens per minute, paused and slowed by 429s."""

from __future__ import annotations

import threading
import time

import pytest

from tests.harness.batch.rows_server import RowResponder
from tests.harness.replay_server import ReplayServer, error_body
from tinyagents_nb.harness import AgentHarness, ConfigurationError, RetryPolicy, RunPolicy, Usage
from tinyagents_nb.harness.batch import RateLimits, agent_map
from tinyagents_nb.harness.providers import OpenAIChatModel, RateLimitInfo

pytestmark = pytest.mark.anyio


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


async def test_requests_per_minute_paces_after_the_burst() -> None:
    t = FakeTime()
    limits = RateLimits(requests_per_minute=120, clock=t.clock, sleep=t.sleep)  # 2/s, burst 2
    waits = [await limits.acquire(10) for _ in range(6)]
    assert waits[:2] == [0.0, 0.0]
    assert waits[2:] == pytest.approx([0.5, 0.5, 0.5, 0.5])
    assert t.now == pytest.approx(2.0)


async def test_tokens_per_minute_charges_the_real_usage() -> None:
    t = FakeTime()
    limits = RateLimits(tokens_per_minute=6_000, clock=t.clock, sleep=t.sleep)  # 100 tokens/s, burst 100
    assert await limits.acquire(50) == 0.0
    limits.settle(50, Usage(input_tokens=250, output_tokens=50))  # it used 300: 250 in debt now
    waited = await limits.acquire(10)
    assert waited == pytest.approx(2.0, abs=0.01)  # the debt is paid off before the next request


async def test_a_429_pauses_everyone_and_halves_the_pace_then_recovers() -> None:
    t = FakeTime()
    limits = RateLimits(requests_per_minute=600, clock=t.clock, sleep=t.sleep)
    limits.throttle(3.0)
    assert limits.factor == 0.5
    assert limits.throttled == 1
    assert await limits.acquire(1) == pytest.approx(3.0)
    for _ in range(20):
        limits.settle(1, Usage())
    assert limits.factor == 1.0


def test_bad_rates_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="requests_per_minute"):
        RateLimits(requests_per_minute=0)
    with pytest.raises(ConfigurationError, match="tokens_per_minute"):
        RateLimits(tokens_per_minute=float("nan"))


def test_a_map_survives_429s_and_shares_one_pause(replay_server: ReplayServer) -> None:
    for _ in range(3):
        replay_server.enqueue(429, error_body("slow down", type="rate_limit_error"), headers={"retry-after-ms": "50"})
    replay_server.respond_with(RowResponder(failing=lambda n: False))
    limits = RateLimits(requests_per_minute=60_000)
    model = OpenAIChatModel("gpt-4o-mini-2024-07-18", base_url=replay_server.base_url, api_key="sk-test")
    harness = AgentHarness(model=model, policy=RunPolicy(retry=RetryPolicy(max_attempts=5, initial_backoff_s=0.01)))
    out = agent_map([{"t": f"#{i}"} for i in range(40)], "{{t}}", harness=harness, rate_limits=limits, concurrency=4)
    assert (out["status"] == "done").all(), out[out["status"] != "done"]["error"].head(3).tolist()
    assert limits.throttled == 3
    assert limits.paused_until > 0
    assert len(replay_server.requests) == 43


async def test_paced_model_keeps_the_model_identity() -> None:
    model = OpenAIChatModel("gpt-4o-mini-2024-07-18", base_url="http://127.0.0.1:9/v1", api_key="sk-test")
    paced = RateLimits(requests_per_minute=10).wrap(model)
    assert paced.model_name == model.model_name
    assert paced.provider == model.provider
    assert paced.profile is model.profile


class BucketServer:
    """A provider with a real token bucket of requests that reports it in ``x-ratelimit-*`` headers."""

    def __init__(self, *, capacity: float, per_second: float, send_headers: bool) -> None:
        self.capacity, self.per_second, self.send_headers = capacity, per_second, send_headers
        self.bucket = capacity
        self.updated = time.monotonic()
        self.refused = 0
        self.rows = RowResponder(failing=lambda n: False)
        self._lock = threading.Lock()

    def __call__(self, body: object) -> tuple[object, ...]:
        with self._lock:
            now = time.monotonic()
            self.bucket = min(self.capacity, self.bucket + (now - self.updated) * self.per_second)
            self.updated = now
            if self.bucket < 1:
                self.refused += 1
                wait_ms = int((1 - self.bucket) / self.per_second * 1000) + 1
                return 429, error_body("rate limit", type="rate_limit_error"), {"retry-after-ms": str(wait_ms)}
            self.bucket -= 1
            remaining = int(self.bucket)
            reset_ms = int((self.capacity - self.bucket) / self.per_second * 1000)
        headers = {
            "x-ratelimit-limit-requests": str(int(self.per_second * 60)),
            "x-ratelimit-remaining-requests": str(remaining),
            "x-ratelimit-reset-requests": f"{reset_ms}ms",
        }
        status, answer = self.rows(body)
        return (status, answer, headers) if self.send_headers else (status, answer)


def test_the_rows_slow_down_before_the_429_from_the_rate_limit_headers(replay_server: ReplayServer) -> None:
    # Without the headers the same load meets 429s (how many depends on how fast this machine sends),
    # and an unlucky row can exhaust its retries: a known weakness of 429-only pacing (issue 27's note).
    server = BucketServer(capacity=20, per_second=40, send_headers=True)
    replay_server.respond_with(server)
    limits = RateLimits()  # no caps of our own: only what the provider says
    model = OpenAIChatModel("gpt-4o-mini-2024-07-18", base_url=replay_server.base_url, api_key="sk-test")
    harness = AgentHarness(model=model, policy=RunPolicy(retry=RetryPolicy(max_attempts=20, initial_backoff_s=0.01)))
    out = agent_map([{"t": f"#{i}"} for i in range(70)], "{{t}}", harness=harness, rate_limits=limits, concurrency=8)
    assert (out["status"] == "done").all(), out[out["status"] != "done"]["error"].head(3).tolist()
    assert server.refused == 0  # paced from the headers: the provider never had to refuse
    assert limits.throttled == 0
    assert limits.observed >= 70
    assert limits.effective_requests_per_minute == 2400  # the provider's stated limit


async def test_a_report_of_nothing_left_pauses_every_row_until_the_reset() -> None:
    t = FakeTime()
    limits = RateLimits(clock=t.clock, sleep=t.sleep)
    await limits.acquire(10)
    limits.observe(
        RateLimitInfo(limit_requests=600, remaining_requests=0, reset_requests_s=2.0, remaining_tokens=5_000)
    )
    limits.release(10)
    assert limits.effective_requests_per_minute == 600
    assert await limits.acquire(10) == pytest.approx(2.0)  # waited for the reset, not for a 429


async def test_the_bucket_never_holds_more_than_the_provider_says_remains() -> None:
    t = FakeTime()
    limits = RateLimits(requests_per_minute=600, clock=t.clock, sleep=t.sleep)  # a burst of 10
    await limits.acquire(10)
    await limits.acquire(10)
    limits.observe(RateLimitInfo(remaining_requests=3))  # another client took most of the allowance
    limits.release(10)
    assert await limits.acquire(10) == 0  # 3 left, one of them for the request still in flight
    assert await limits.acquire(10) == 0
    assert await limits.acquire(10) == pytest.approx(0.1)  # then the configured pace: one per 0.1 s
