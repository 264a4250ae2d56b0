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


def test_without_headers_the_429s_teach_a_pace_and_no_row_starves(replay_server: ReplayServer) -> None:
    # The same bucket without its headers: the first refusals set a pace from the rate the provider
    # was accepting, and the rows that were refused wait their turn behind it. A row gets a single
    # attempt of its own (max_attempts=1): a retryable 429 is the map's pace, retried by the limits.
    server = BucketServer(capacity=20, per_second=40, send_headers=False)
    replay_server.respond_with(server)
    limits = RateLimits()
    model = OpenAIChatModel("gpt-4o-mini-2024-07-18", base_url=replay_server.base_url, api_key="sk-test")
    harness = AgentHarness(model=model, policy=RunPolicy(retry=RetryPolicy(max_attempts=1)))
    out = agent_map([{"t": f"#{i}"} for i in range(40)], "{{t}}", harness=harness, rate_limits=limits, concurrency=8)
    assert (out["status"] == "done").all(), out[out["status"] != "done"]["error"].head(3).tolist()
    assert limits.throttled == server.refused
    assert limits.learned_requests_per_minute is not None or server.refused == 0  # a slow machine may never meet one
    assert server.refused <= 3 * 8  # a round of refusals (the rows then in flight) or two, not a storm
    assert len(replay_server.requests) == 40 + server.refused


def test_a_row_gives_up_on_429s_after_the_patience(replay_server: ReplayServer) -> None:
    replay_server.respond_with(
        lambda body: (429, error_body("rate limit", type="rate_limit_error"), {"retry-after-ms": "20"})
    )
    limits = RateLimits(patience_s=0.3)
    model = OpenAIChatModel("gpt-4o-mini-2024-07-18", base_url=replay_server.base_url, api_key="sk-test")
    harness = AgentHarness(model=model, policy=RunPolicy(retry=RetryPolicy(max_attempts=1)))
    started = time.monotonic()
    out = agent_map([{"t": "#0"}], "{{t}}", harness=harness, rate_limits=limits)
    assert out["status"].tolist() == ["failed"]
    assert "rate limit" in str(out["error"].iloc[0])
    assert 0.3 <= time.monotonic() - started < 10
    assert limits.throttled == len(replay_server.requests) >= 3  # retried here, behind the pause, until then


async def test_the_429s_of_one_round_cut_the_pace_once() -> None:
    t = FakeTime()
    limits = RateLimits(requests_per_minute=600, clock=t.clock, sleep=t.sleep)
    for _ in range(4):
        await limits.acquire(1)
    sent = t.now
    t.now += 0.05
    for _ in range(4):  # the four requests on the wire are all refused
        limits.throttle(0.2, sent)
    assert (limits.throttled, limits.factor) == (4, 0.5)
    assert await limits.acquire(1) == pytest.approx(0.2)  # the pause ...
    assert await limits.acquire(1) == pytest.approx(0.2)  # ... then no burst: 10/s halved, one at a time
    limits.throttle(None, t.now)  # sent after the cut: a new round
    assert limits.factor == 0.25


async def test_a_429_with_nothing_stated_learns_the_accepted_rate() -> None:
    t = FakeTime()
    limits = RateLimits(clock=t.clock, sleep=t.sleep)
    for _ in range(20):  # 20 answers in 2 s: the provider was accepting 10/s
        await limits.acquire(1)
        limits.settle(1, Usage())
        limits.release(1)
        t.now += 0.1
    assert limits.effective_requests_per_minute is None
    limits.throttle(1.0, t.now)
    assert limits.learned_requests_per_minute == pytest.approx(600, rel=0.06)
    assert await limits.acquire(1) == pytest.approx(1.0)
    assert await limits.acquire(1) == pytest.approx(0.1, rel=0.06)  # then 10/s: a rate it did accept
    limits.settle(1, Usage())  # each success probes above it
    assert limits.learned_requests_per_minute > 600
    limits.throttle(None, t.now)  # a second round: that rate halves
    assert limits.factor == 0.5


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
