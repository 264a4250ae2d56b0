"""``RateLimits``: requests and tokens per minute shared by every row of a map, adapting to the provider.

All rows of a map call one model object; ``RateLimits.wrap`` puts a pacing layer in front of it,
so every attempt of every row (retries included) draws from the same two buckets. Each bucket
refills continuously and may run into debt: a request waits while its bucket is empty, then takes
its estimate (prompt characters / 4 plus the output cap); when the response reports its real
usage the difference is settled, so a long answer slows the next requests instead of slipping past.

The provider's own view comes back on every response (``x-ratelimit-*`` / ``anthropic-ratelimit-*``,
read by the adapters into ``model.rate_limit_info``): the buckets never hold more than the provider
says remains (minus what is already in flight), and a limit the provider states paces a dimension
the caller left uncapped, so the rows slow down *before* the provider refuses.

A 429 from the provider pauses *every* row until its ``Retry-After`` (or an exponential guess),
empties the request bucket (the rows resume one at a time at the pace, not in a rush) and halves
the pace; each success then wins back a little, up to the configured rates. The requests that were
already on the wire when the pace was cut meet the same refusal: their 429s extend the pause but do
not cut the pace again (one cut per round, as TCP does). With no rate known at all (no caps, no
headers) a 429 sets one: the rate the provider was accepting over the last few seconds, raised by
one request per second every second while no 429 comes (additive increase, multiplicative
decrease). A retryable 429 is retried here, behind the shared pause, for up to ``patience_s``: it is
the map's pace that was wrong, not the row, so it does not spend the row's ``RetryPolicy`` attempts
(a row could otherwise lose all of them in a crowd of rows racing for the same refill).
A harness's own ``RunPolicy.rate_limiter`` still applies under this (all rows share the harness,
hence the limiter).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio

from .._errors import ConfigurationError, ProviderError
from .._model import ChatModel, ModelRequest, ModelResponse, ModelStreamItem, StreamUsage
from .._usage import Usage
from ..providers import RateLimitInfo

__all__ = ["RateLimits"]

_MIN_FACTOR = 1 / 32
_RECOVERY = 0.05
_WINDOW_S = 5.0  # successes this recent measure the rate the provider was accepting


def _check_rate(name: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ConfigurationError(f"{name} must be a number > 0, got {value!r}")
    return float(value)


class RateLimits:
    """Requests and tokens per minute for a whole map (all its rows and their retries).

    Args:
        requests_per_minute: Requests sent per minute at most (``None``: no cap).
        tokens_per_minute: Tokens (prompt estimate + output) per minute at most (``None``: no cap).
        patience_s: How long one request keeps retrying retryable 429s here (behind the shared
            pause, without spending its row's retry attempts) before the 429 reaches the row.
        clock: Monotonic seconds (tests inject a fake one).
        sleep: Replaces ``anyio.sleep`` (tests pair it with the fake clock).
    """

    def __init__(
        self,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        *,
        patience_s: float = 300.0,
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], Any] | None = None,
    ) -> None:
        self.requests_per_minute = _check_rate("requests_per_minute", requests_per_minute)
        self.tokens_per_minute = _check_rate("tokens_per_minute", tokens_per_minute)
        patience = _check_rate("patience_s", patience_s)
        assert patience is not None
        self.patience_s = patience
        self._clock = clock or time.monotonic
        self._sleep = sleep or anyio.sleep
        now = self._clock()
        self._updated = now
        self._requests = self._burst(self.requests_per_minute)
        self._tokens = self._burst(self.tokens_per_minute)
        self.factor = 1.0
        """The share of the rates in force (halved by each round of 429s, won back by successes)."""
        self.paused_until = 0.0
        self.throttled = 0
        """429 responses seen."""
        self._strikes = 0
        self._cut_at = -math.inf  # when the pace was last cut: 429s of requests sent before are that round's
        self._successes: deque[float] = deque(maxlen=512)
        self.learned_requests_per_minute: float | None = None
        """The request rate a 429 taught when nothing else stated one (raised while none comes)."""
        self._server_rpm: float | None = None  # the limits the provider states, when it does
        self._server_tpm: float | None = None
        self._in_flight = 0
        self._in_flight_tokens = 0
        self._seen: RateLimitInfo | None = None
        self.observed = 0
        """Provider rate-limit reports taken into account."""

    @property
    def effective_requests_per_minute(self) -> float | None:
        """The request rate in force before the 429 factor: the lowest of the caller's cap, the provider's and the learned."""
        return _lower(_lower(self.requests_per_minute, self._server_rpm), self.learned_requests_per_minute)

    @property
    def effective_tokens_per_minute(self) -> float | None:
        """The token rate in force before the 429 factor: the caller's cap, the provider's, or the lower."""
        return _lower(self.tokens_per_minute, self._server_tpm)

    @staticmethod
    def _burst(per_minute: float | None) -> float:
        return 0.0 if per_minute is None else max(1.0, per_minute / 60)

    def wrap(self, model: ChatModel) -> ChatModel:
        """``model`` behind these limits (what ``agent_map(rate_limits=...)`` does to the row model)."""
        return PacedModel(model, self)

    # ---------------------------------------------------------------------------------- the buckets
    def _refill(self) -> None:
        now = self._clock()
        elapsed = now - self._updated
        if elapsed <= 0:
            return
        self._updated = now
        rpm, tpm = self.effective_requests_per_minute, self.effective_tokens_per_minute
        if rpm is not None:
            self._requests = min(self._burst(rpm), self._requests + elapsed * rpm / 60 * self.factor)
        if tpm is not None:
            self._tokens = min(self._burst(tpm), self._tokens + elapsed * tpm / 60 * self.factor)

    def _wait_s(self) -> float:
        """Seconds until a request may go (0: now)."""
        now = self._clock()
        if now < self.paused_until:
            return self.paused_until - now
        self._refill()
        wait = 0.0
        rpm, tpm = self.effective_requests_per_minute, self.effective_tokens_per_minute
        if rpm is not None and self._requests < 1:
            wait = (1 - self._requests) / (rpm / 60 * self.factor)
        if tpm is not None and self._tokens <= 0:
            wait = max(wait, (1e-6 - self._tokens) / (tpm / 60 * self.factor))
        return wait

    async def acquire(self, estimate: int) -> float:
        """Wait (cancellably, by the caller's scope) until a request of ``estimate`` tokens may go; take it."""
        waited = 0.0
        while True:
            wait = self._wait_s()
            if wait <= 0:
                break
            waited += wait
            await self._sleep(wait)
        if self.effective_requests_per_minute is not None:
            self._requests -= 1
        if self.effective_tokens_per_minute is not None:
            self._tokens -= estimate
        self._in_flight += 1
        self._in_flight_tokens += estimate
        return waited

    def release(self, estimate: int) -> None:
        """A request taken by ``acquire`` ended (answered, refused or cancelled)."""
        self._in_flight = max(0, self._in_flight - 1)
        self._in_flight_tokens = max(0, self._in_flight_tokens - estimate)

    def observe(self, info: RateLimitInfo, estimate: int = 0) -> None:
        """The provider reported its limits on a response to a request still counted in flight.

        The buckets are brought down to what the provider says remains, less what the other
        requests in flight will take; a stated limit paces a dimension the caller left uncapped;
        nothing left and a reset time pause every row until then.
        """
        if info is self._seen:
            return
        self._seen = info
        self.observed += 1
        self._refill()
        if info.limit_requests:
            self._server_rpm = float(info.limit_requests)
        if info.limit_tokens:
            self._server_tpm = float(info.limit_tokens)
        others = max(0, self._in_flight - 1)
        if info.remaining_requests is not None and self.effective_requests_per_minute is not None:
            self._requests = min(self._requests, float(info.remaining_requests - others))
        if info.remaining_tokens is not None and self.effective_tokens_per_minute is not None:
            self._tokens = min(self._tokens, float(info.remaining_tokens - (self._in_flight_tokens - estimate)))
        for remaining, reset in (
            (info.remaining_requests, info.reset_requests_s),
            (info.remaining_tokens, info.reset_tokens_s),
        ):
            if remaining == 0 and reset is not None:
                self.paused_until = max(self.paused_until, self._clock() + min(reset, 60.0))

    def settle(self, estimate: int, usage: Usage) -> None:
        """A response came back: charge its real tokens instead of the estimate, and recover pace."""
        if self.tokens_per_minute is not None:
            self._tokens -= usage.input_tokens + usage.output_tokens - estimate
        self._successes.append(self._clock())
        self._strikes = 0
        if self.factor < 1.0:
            self.factor = min(1.0, self.factor + _RECOVERY)
        elif self.learned_requests_per_minute is not None:  # probe upwards: +1 request/s per second
            self.learned_requests_per_minute += 3600.0 / self.learned_requests_per_minute

    def throttle(self, retry_after_s: float | None, sent_at: float | None = None) -> None:
        """A 429: everyone pauses (the provider's wait, else 1 s doubling per round) and the pace halves.

        ``sent_at`` is when the refused request took its turn (``acquire``); a request sent before
        the last cut belongs to the round that cut already, so it only extends the pause.
        """
        self.throttled += 1
        now = self._clock()
        new_round = sent_at is None or sent_at >= self._cut_at
        if new_round:
            self._strikes += 1
        wait = retry_after_s if retry_after_s is not None else min(2.0 ** (self._strikes - 1), 60.0)
        self.paused_until = max(self.paused_until, now + max(0.0, wait))
        self._refill()
        self._requests = min(self._requests, 1.0)  # one request at the end of the pause, then the pace: no
        self._updated = max(self._updated, self.paused_until)  # burst (nothing accrues during the pause)
        if not new_round:
            return
        self._cut_at = now
        if _lower(self.requests_per_minute, self._server_rpm) is None and self.learned_requests_per_minute is None:
            recent = [t for t in self._successes if t >= now - _WINDOW_S]
            span = max(1.0, now - recent[0]) if recent else 1.0
            # a rate the provider did accept (over at least a second, so a first burst counts low)
            self.learned_requests_per_minute = 60.0 * max(1.0, len(recent) / span)
            self._requests = 1.0  # untracked until now: one request at the end of the pause
            return
        self.factor = max(_MIN_FACTOR, self.factor / 2)

    def __repr__(self) -> str:
        return (
            f"RateLimits(requests_per_minute={self.requests_per_minute}, "
            f"tokens_per_minute={self.tokens_per_minute}, factor={self.factor:.3g})"
        )


def _lower(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


def estimate_tokens(request: ModelRequest) -> int:
    """A quick upper-ish estimate of a request's tokens: characters / 4 plus the output cap."""
    chars = sum(len(getattr(m, "text", "") or "") for m in request.messages)
    return chars // 4 + 1 + (request.max_output_tokens or 256)


class PacedModel:
    """A ``ChatModel`` that waits for its ``RateLimits`` before each call and reports 429s to them."""

    def __init__(self, model: ChatModel, limits: RateLimits) -> None:
        self.inner = model
        self.limits = limits

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    @property
    def provider(self) -> str:
        return self.inner.provider

    def __getattr__(self, name: str) -> Any:  # profile, base_url, aclose ...: the wrapped model's
        return getattr(self.inner, name)

    def _observe(self, estimate: int) -> None:
        info = getattr(self.inner, "rate_limit_info", None)
        if isinstance(info, RateLimitInfo):
            self.limits.observe(info, estimate)

    def _refused(self, exc: ProviderError, estimate: int, sent_at: float, since: float) -> bool:
        """Report a failure to the limits; True when it is a 429 to retry here (behind the pause)."""
        self._observe(estimate)
        if exc.status != 429:
            return False
        self.limits.throttle(exc.retry_after_s, sent_at)
        return exc.retryable and self.limits._clock() - since < self.limits.patience_s

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        estimate = estimate_tokens(request)
        since = self.limits._clock()
        while True:
            await self.limits.acquire(estimate)
            sent_at = self.limits._clock()
            try:
                response = await self.inner.invoke(request)
            except ProviderError as exc:
                if self._refused(exc, estimate, sent_at, since):
                    continue
                raise
            else:
                self.limits.settle(estimate, response.usage)
                self._observe(estimate)
                return response
            finally:
                self.limits.release(estimate)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        estimate = estimate_tokens(request)
        since = self.limits._clock()
        while True:
            await self.limits.acquire(estimate)
            sent_at = self.limits._clock()
            usage = Usage()
            started = False
            try:
                async for item in self.inner.stream(request):
                    started = True
                    if isinstance(item, StreamUsage):
                        usage = item.usage
                    yield item
            except ProviderError as exc:
                if self._refused(exc, estimate, sent_at, since) and not started:
                    continue  # refused before anything was streamed: safe to send again
                raise
            else:
                self.limits.settle(estimate, usage)
                self._observe(estimate)
                return
            finally:
                self.limits.release(estimate)

    def __repr__(self) -> str:
        return f"PacedModel({self.inner!r}, {self.limits!r})"
