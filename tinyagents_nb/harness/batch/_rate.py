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

A 429 from the provider pauses *every* row until its ``Retry-After`` (or an exponential guess) and
halves the pace; each success then wins back a little, up to the configured rates. A harness's own
``RunPolicy.rate_limiter`` still applies under this (all rows share the harness, hence the limiter).
"""

from __future__ import annotations

import math
import time
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
        clock: Monotonic seconds (tests inject a fake one).
        sleep: Replaces ``anyio.sleep`` (tests pair it with the fake clock).
    """

    def __init__(
        self,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        *,
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], Any] | None = None,
    ) -> None:
        self.requests_per_minute = _check_rate("requests_per_minute", requests_per_minute)
        self.tokens_per_minute = _check_rate("tokens_per_minute", tokens_per_minute)
        self._clock = clock or time.monotonic
        self._sleep = sleep or anyio.sleep
        now = self._clock()
        self._updated = now
        self._requests = self._burst(self.requests_per_minute)
        self._tokens = self._burst(self.tokens_per_minute)
        self.factor = 1.0
        """The share of the configured rates in force (halved by each 429, won back by successes)."""
        self.paused_until = 0.0
        self.throttled = 0
        """429 responses seen."""
        self._strikes = 0
        self._server_rpm: float | None = None  # the limits the provider states, when it does
        self._server_tpm: float | None = None
        self._in_flight = 0
        self._in_flight_tokens = 0
        self._seen: RateLimitInfo | None = None
        self.observed = 0
        """Provider rate-limit reports taken into account."""

    @property
    def effective_requests_per_minute(self) -> float | None:
        """The request rate in force before the 429 factor: the caller's cap, the provider's, or the lower."""
        return _lower(self.requests_per_minute, self._server_rpm)

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
        self._strikes = 0
        if self.factor < 1.0:
            self.factor = min(1.0, self.factor + _RECOVERY)

    def throttle(self, retry_after_s: float | None) -> None:
        """A 429: everyone pauses (the provider's wait, else 1 s doubling per strike) and the pace halves."""
        self.throttled += 1
        self._strikes += 1
        wait = retry_after_s if retry_after_s is not None else min(2.0 ** (self._strikes - 1), 60.0)
        self.paused_until = max(self.paused_until, self._clock() + wait)
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

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        estimate = estimate_tokens(request)
        await self.limits.acquire(estimate)
        try:
            response = await self.inner.invoke(request)
        except ProviderError as exc:
            self._observe(estimate)
            if exc.status == 429:
                self.limits.throttle(exc.retry_after_s)
            raise
        else:
            self.limits.settle(estimate, response.usage)
            self._observe(estimate)
        finally:
            self.limits.release(estimate)
        return response

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        estimate = estimate_tokens(request)
        await self.limits.acquire(estimate)
        usage = Usage()
        try:
            async for item in self.inner.stream(request):
                if isinstance(item, StreamUsage):
                    usage = item.usage
                yield item
        except ProviderError as exc:
            self._observe(estimate)
            if exc.status == 429:
                self.limits.throttle(exc.retry_after_s)
            raise
        else:
            self.limits.settle(estimate, usage)
            self._observe(estimate)
        finally:
            self.limits.release(estimate)

    def __repr__(self) -> str:
        return f"PacedModel({self.inner!r}, {self.limits!r})"
