"""Retry with backoff, ordered model fallback, and a token-bucket rate limiter.

The agent loop composes these per model call: ``call_with_retry`` spends one model's retry budget,
``FallbackPolicy`` names the next model once that budget is gone (each model gets a fresh budget),
and ``RateLimiter`` paces calls to a provider. Every wait here is cancellable through the run's
``CancellationToken``: a Stop click during a 30 s backoff ends the run at once instead of after the
sleep, and no further provider call is made.
"""

from __future__ import annotations

import math
import random
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio
import anyio.lowlevel

from ._errors import Cancelled, ConfigurationError, ModelNotFound, ProviderError, RunTimeout, TinyAgentsError
from ._model import ChatModel

if TYPE_CHECKING:
    from ._cancel import CancellationToken

__all__ = ["FallbackPolicy", "RateLimiter", "RetryPolicy", "call_with_retry", "is_retryable"]

T = TypeVar("T")

_HTTP_MODULES: Final = ("httpx", "httpcore")
# Transport failures worth another try; matched by class name along the MRO so httpx is never imported here.
_TRANSIENT_HTTP: Final = frozenset(
    {"TimeoutException", "NetworkError", "RemoteProtocolError", "ProxyError", "TransportError"}
)
# Transport errors that are our own fault (bad URL scheme, malformed request): retrying cannot help.
_PERMANENT_HTTP: Final = frozenset({"UnsupportedProtocol", "LocalProtocolError", "InvalidURL"})
_JITTER: Final = random.Random()  # never the global stream: a notebook's random.seed() sequence stays its own


def _check_number(name: str, value: object, *, minimum: float = 0.0, maximum: float | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise ConfigurationError(f"{name} must be a finite number {bound}, got {value!r}")


def _check_int(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ConfigurationError(f"{name} must be >= {minimum}, got {value}")


def _http_class_names(exc: BaseException) -> Iterator[str]:
    for cls in type(exc).__mro__:
        if cls.__module__.split(".", 1)[0] in _HTTP_MODULES:
            yield cls.__name__


def _is_transient_transport(exc: BaseException) -> bool:
    """Network/timeout failures from the stdlib or httpx/httpcore, without importing httpx."""
    for name in _http_class_names(exc):  # most-derived first, so a permanent subclass wins
        if name in _PERMANENT_HTTP:
            return False
        if name in _TRANSIENT_HTTP:
            return True
        if name == "HTTPStatusError":  # raise_for_status(): only 408/429/5xx are worth repeating
            status = getattr(getattr(exc, "response", None), "status_code", None)
            return isinstance(status, int) and (status in (408, 429) or 500 <= status <= 599)
    return isinstance(exc, TimeoutError | ConnectionError)


def is_retryable(exc: BaseException) -> bool:
    """Whether repeating the same request may succeed.

    ``ProviderError`` decides through its own ``retryable`` flag (set by the provider adapter from
    the status: network, 408, 429 that is not a quota, 5xx). Stdlib ``TimeoutError`` and
    ``ConnectionError`` and httpx/httpcore transport errors are transient. Every other harness
    error (``Cancelled``, ``ContextLimitError``, ``ModelNotFound``, ``ConfigurationError``, the
    run's own ``RunTimeout``) and anything unknown is not: retrying a bug only hides it.
    """
    if isinstance(exc, ProviderError):
        return exc.retryable
    if isinstance(exc, TinyAgentsError):
        return False
    return _is_transient_transport(exc)


@dataclass(frozen=True, kw_only=True, slots=True)
class RetryPolicy:
    """How often and how patiently one model call is repeated.

    Attributes:
        max_attempts: Total attempts including the first; ``1`` disables retrying.
        initial_backoff_s: Wait after the first failed attempt.
        multiplier: Growth factor per failed attempt (``1.0`` gives a constant backoff).
        max_backoff_s: Ceiling on any computed backoff, jitter included.
        jitter: Fraction ``0..1`` of the delay added or removed at random (``0.25`` spreads a 1 s
            delay uniformly over 0.75..1.25 s), so many clients failing together do not retry in
            lockstep.
        honour_retry_after: Use a provider's ``Retry-After`` (``ProviderError.retry_after_s``)
            instead of the computed backoff: the server knows when it will have capacity.
        max_retry_after_s: Ceiling on an honoured ``Retry-After``, so a hostile or buggy header
            cannot park a run for an hour.
        retry_on: Decides which errors are retried; defaults to ``is_retryable``. ``Cancelled`` is
            never retried, whatever it says.
    """

    max_attempts: int = 4
    initial_backoff_s: float = 0.2
    multiplier: float = 2.0
    max_backoff_s: float = 30.0
    jitter: float = 0.0
    honour_retry_after: bool = True
    max_retry_after_s: float = 120.0
    retry_on: Callable[[BaseException], bool] | None = None

    def __post_init__(self) -> None:
        _check_int("max_attempts", self.max_attempts, minimum=1)
        _check_number("initial_backoff_s", self.initial_backoff_s)
        _check_number("multiplier", self.multiplier, minimum=1.0)
        _check_number("max_backoff_s", self.max_backoff_s)
        if self.max_backoff_s < self.initial_backoff_s:
            raise ConfigurationError(
                f"max_backoff_s ({self.max_backoff_s}) is below initial_backoff_s ({self.initial_backoff_s})"
            )
        _check_number("jitter", self.jitter, maximum=1.0)
        if not isinstance(self.honour_retry_after, bool):
            raise ConfigurationError("honour_retry_after must be a bool")
        _check_number("max_retry_after_s", self.max_retry_after_s)
        if self.retry_on is not None and not callable(self.retry_on):
            raise ConfigurationError("retry_on must be a callable taking the error and returning a bool")

    @classmethod
    def none(cls) -> RetryPolicy:
        """A policy that makes exactly one attempt."""
        return cls(max_attempts=1)

    def should_retry(self, error: BaseException) -> bool:
        """Whether ``error`` is worth another attempt (ignores the attempt budget)."""
        if isinstance(error, Cancelled):
            return False
        return bool(self.retry_on(error)) if self.retry_on is not None else is_retryable(error)

    def backoff_for_attempt(
        self, attempt: int, error: BaseException | None = None, *, rng: random.Random | None = None
    ) -> float:
        """Seconds to wait after attempt number ``attempt`` (1-based) failed with ``error``.

        ``initial * multiplier ** (attempt - 1)``, capped at ``max_backoff_s``, then jittered within the
        cap. An honoured ``Retry-After`` wins over the computed value (no jitter: the server named
        a time), capped at ``max_retry_after_s``.
        """
        _check_int("attempt", attempt, minimum=1)
        if self.honour_retry_after and isinstance(error, ProviderError) and error.retry_after_s is not None:
            retry_after = error.retry_after_s
            if math.isfinite(retry_after):
                return min(max(retry_after, 0.0), self.max_retry_after_s)
            if retry_after > 0:  # +inf: the longest wait we are willing to honour
                return self.max_retry_after_s
        try:
            delay = min(self.initial_backoff_s * self.multiplier ** (attempt - 1), self.max_backoff_s)
        except OverflowError:
            delay = self.max_backoff_s
        if self.jitter and delay > 0:
            spread = (rng or _JITTER).uniform(-self.jitter, self.jitter)
            delay = min(max(delay * (1.0 + spread), 0.0), self.max_backoff_s)
        return delay


async def _sleep(
    delay: float, cancellation: CancellationToken | None, sleep: Callable[[float], Awaitable[None]]
) -> None:
    if cancellation is None:
        await sleep(delay)
        return
    with cancellation.scope():  # a cancel from any thread ends the wait now, as Cancelled
        await sleep(delay)


async def call_with_retry(
    fn: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    cancellation: CancellationToken | None = None,
    on_retry: Callable[[int, float, BaseException], object] | None = None,
    max_retries: int | None = None,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    remaining_s: Callable[[], float | None] | None = None,
    on_deadline: Callable[[], BaseException] | None = None,
    rng: random.Random | None = None,
) -> T:
    """Await ``fn()`` until it succeeds, the error is not retryable, or attempts run out.

    The token is checked before every attempt, and each backoff wait is raced against it, so a
    cancel during a backoff raises ``Cancelled`` and prevents the next call. The final error
    propagates unchanged (never wrapped), so the caller can still classify it for fallback.

    Args:
        fn: Makes one attempt; called afresh each time.
        policy: Attempt budget, backoff, and which errors are retryable.
        cancellation: The run's token, or ``None`` for an uncancellable call.
        on_retry: Called as ``on_retry(attempt, delay_s, error)`` before each wait, ``attempt``
            being the 1-based number of the attempt that just failed (the loop emits
            ``retry.scheduled`` from it); its return value is ignored.
        max_retries: ``RunLimits.max_retries_per_call``; attempts are
            ``min(policy.max_attempts, max_retries + 1)``.
        sleep: Replaces ``anyio.sleep`` (tests pass a fake that records delays).
        remaining_s: Seconds left before the caller's deadline (``None``: no deadline). A wait
            that would end past it is not started: the call fails at once with
            ``on_deadline()`` (chained to the last error), since sleeping into a deadline only
            delays the same failure.
        on_deadline: Builds that error; defaults to a ``RunTimeout``.
        rng: The jitter's random source (the loop seeds one per call from the run's ids, so a
            deterministic id source makes the waits reproducible); the module's by default.
    """
    attempts = policy.max_attempts
    if max_retries is not None:
        _check_int("max_retries", max_retries, minimum=0)
        attempts = min(attempts, max_retries + 1)
    wait = anyio.sleep if sleep is None else sleep
    attempt = 0
    while True:
        attempt += 1
        if cancellation is not None:
            cancellation.raise_if_cancelled()
        try:
            return await fn()
        except Exception as exc:  # BaseException (task cancellation, KeyboardInterrupt) always propagates
            if attempt >= attempts or not policy.should_retry(exc):
                raise
            delay = policy.backoff_for_attempt(attempt, exc, rng=rng)
            left = remaining_s() if remaining_s is not None else None
            if left is not None and delay >= left:
                raise (on_deadline() if on_deadline is not None else _deadline_error(delay, left)) from exc
            if on_retry is not None:
                on_retry(attempt, delay, exc)
        await _sleep(delay, cancellation, wait)


def _deadline_error(delay: float, left: float) -> RunTimeout:
    return RunTimeout(f"a {delay:g} s retry wait does not fit in the {left:.3f} s left before the deadline")


FallbackModel = str | ChatModel


class FallbackPolicy:
    """An ordered chain of models to try once the current model's retries are exhausted.

    Each model gets a fresh retry budget (the loop calls ``call_with_retry`` per model). By
    default the chain advances on any ``ProviderError`` (retryable or not: a 401 at one provider
    says nothing about the next), ``ModelNotFound``, and network timeouts/errors. It never advances
    on ``Cancelled`` (the user asked to stop), nor on structured-output, tool or limit errors (the
    next model would be given the same bad input or the same exhausted budget).

    ``ContextLimitError`` does not advance by default: chains are usually ordered by preference
    or price, not window size, so the next model would most likely overflow too and only add cost.
    When the chain holds a bigger-window model, opt in::

        FallbackPolicy(["gpt-4o-mini", "gemini-1.5-pro"],
                       on=lambda e: FallbackPolicy.default_on(e) or isinstance(e, ContextLimitError))

    Args:
        models: Model names or ``ChatModel`` instances, in the order to try them.
        on: Decides whether an error moves to the next model; defaults to ``default_on``.
    """

    __slots__ = ("_models", "_on")

    def __init__(self, models: Sequence[FallbackModel], *, on: Callable[[BaseException], bool] | None = None) -> None:
        if isinstance(models, str) or not isinstance(models, Sequence):
            raise ConfigurationError("models must be a sequence of model names or ChatModel instances")
        entries: list[FallbackModel] = []
        for entry in models:
            if isinstance(entry, str):
                if not entry.strip():
                    raise ConfigurationError("a fallback model name must not be empty")
                if entry in entries:
                    raise ConfigurationError(f"fallback model {entry!r} is listed twice")
            elif isinstance(entry, ChatModel):
                if any(entry is other for other in entries):
                    raise ConfigurationError(f"fallback model {entry.model_name!r} is listed twice")
            else:
                raise ConfigurationError(f"a fallback model must be a name or a ChatModel, got {type(entry).__name__}")
            entries.append(entry)
        if not entries:
            raise ConfigurationError("a fallback chain needs at least one model")
        if on is not None and not callable(on):
            raise ConfigurationError("on must be a callable taking the error and returning a bool")
        self._models: tuple[FallbackModel, ...] = tuple(entries)
        self._on = on

    @staticmethod
    def default_on(error: BaseException) -> bool:
        """The default advance rule: provider errors, unknown models, network timeouts/errors."""
        if isinstance(error, ProviderError | ModelNotFound):
            return True
        if isinstance(error, TinyAgentsError):
            return False
        return _is_transient_transport(error)

    @staticmethod
    def name_of(model: FallbackModel) -> str:
        """The model name of a chain entry (for events such as ``fallback.used``)."""
        return model if isinstance(model, str) else model.model_name

    @property
    def models(self) -> tuple[FallbackModel, ...]:
        return self._models

    def should_fall_back(self, error: BaseException) -> bool:
        """Whether ``error`` moves the call to the next model; never for ``Cancelled``."""
        if isinstance(error, Cancelled):
            return False
        return bool(self._on(error)) if self._on is not None else self.default_on(error)

    def next_after(self, current: FallbackModel | None) -> FallbackModel | None:
        """The model to try after ``current``, or ``None`` when the chain is exhausted.

        A ``current`` that is not in the chain (the primary model, or ``None``) is followed by the
        first entry; an entry is followed by the one after it. Entries match by identity, then by
        name, so a primary given as ``"gpt-4o"`` and a chain entry that is a ``ChatModel`` named
        ``"gpt-4o"`` are the same position.
        """
        if current is None:
            return self._models[0]
        position = self._position(current)
        if position is None:
            return self._models[0]
        return self._models[position + 1] if position + 1 < len(self._models) else None

    def _position(self, current: FallbackModel) -> int | None:
        for index, entry in enumerate(self._models):
            if entry is current or (isinstance(entry, str) and entry == current):
                return index
        name = self.name_of(current)
        for index, entry in enumerate(self._models):
            if self.name_of(entry) == name:
                return index
        return None

    def __iter__(self) -> Iterator[FallbackModel]:
        return iter(self._models)

    def __len__(self) -> int:
        return len(self._models)

    def __repr__(self) -> str:
        return f"FallbackPolicy({[self.name_of(m) for m in self._models]!r})"


class RateLimiter:
    """A token bucket: ``burst`` calls at once, then ``rate_per_s`` on average.

    The bucket starts full and refills continuously with time, never above ``burst``. Waiters are
    served first come, first served within an event loop: ``acquire`` queues on a FIFO
    ``anyio.Lock`` of that loop and the head of the queue sleeps until its tokens have accrued, so a
    large request is not starved by a stream of small ones, and ``try_acquire`` refuses while anyone
    is queued rather than jump the line. One limiter may serve several event loops at once (two
    ``run_sync`` calls on two threads, a notebook and a worker): the bucket is guarded by a thread
    lock, each loop gets its own queue, and the loops' queue heads share the bucket.

    Args:
        rate_per_s: Tokens added per second (> 0).
        burst: Bucket capacity; defaults to one second's worth (at least 1).
        clock: Monotonic seconds; injectable for tests.
        sleep: Replaces ``anyio.sleep``; tests pair it with a fake clock.
    """

    __slots__ = ("_available", "_burst", "_clock", "_queues", "_rate", "_sleep", "_state", "_updated", "_waiting")

    def __init__(
        self,
        rate_per_s: float,
        *,
        burst: int | None = None,
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        _check_number("rate_per_s", rate_per_s)
        if rate_per_s <= 0:
            raise ConfigurationError(f"rate_per_s must be > 0, got {rate_per_s}")
        if burst is None:
            burst = max(1, math.ceil(rate_per_s))
        _check_int("burst", burst, minimum=1)
        self._rate = float(rate_per_s)
        self._burst = burst
        self._clock = time.monotonic if clock is None else clock
        self._sleep = anyio.sleep if sleep is None else sleep
        self._available = float(burst)
        self._updated = self._clock()
        self._state = threading.Lock()  # the bucket and the queue count; never held across an await
        self._queues: weakref.WeakKeyDictionary[Any, anyio.Lock] = weakref.WeakKeyDictionary()  # by event loop
        self._waiting = 0  # acquirers queued in any loop

    @property
    def rate_per_s(self) -> float:
        return self._rate

    @property
    def burst(self) -> int:
        return self._burst

    @property
    def available(self) -> float:
        """Tokens in the bucket right now (fractional while refilling)."""
        with self._state:
            self._refill()
            return self._available

    def try_acquire(self, tokens: int = 1) -> bool:
        """Take ``tokens`` now if they are there and nobody is queued; never waits."""
        self._check_tokens(tokens)
        return self._take(tokens, queued=False)

    async def acquire(
        self, tokens: int = 1, *, cancellation: CancellationToken | None = None, timeout_s: float | None = None
    ) -> float:
        """Wait until ``tokens`` are available and take them; returns the seconds waited.

        With a ``cancellation`` token the whole wait (queueing included) ends with ``Cancelled``
        as soon as the token is cancelled, from any thread; no tokens are taken then.

        Raises:
            TimeoutError: The tokens cannot be had within ``timeout_s`` (a run's remaining budget).
                When nobody is queued the wait is known up front, so a wait that cannot fit fails
                at once instead of sleeping to the deadline; no tokens are taken.
        """
        self._check_tokens(tokens)
        if cancellation is not None:
            cancellation.raise_if_cancelled()
        if self._take(tokens, queued=False):
            return 0.0  # fast path: no queue, no await
        if timeout_s is not None:
            with self._state:
                needed = None if self._waiting else (tokens - self._available) / self._rate
            if needed is not None and needed >= timeout_s:
                raise TimeoutError(f"the rate limiter needs {needed:.3f} s, only {timeout_s:.3f} s are left")
        started = self._clock()
        if cancellation is None:
            with anyio.move_on_after(math.inf if timeout_s is None else timeout_s) as scope:
                await self._queue_and_take(tokens)
        else:
            with cancellation.scope(timeout_s=timeout_s) as scope:
                await self._queue_and_take(tokens)
        if scope.cancelled_caught:
            raise TimeoutError(f"the rate limiter gave no token within {timeout_s or 0.0:.3f} s")
        return max(self._clock() - started, 0.0)

    async def _queue_and_take(self, tokens: int) -> None:
        with self._state:
            self._waiting += 1
            loop = anyio.lowlevel.current_token().native_token  # the event loop object itself
            queue = self._queues.get(loop)
            if queue is None:
                queue = self._queues[loop] = anyio.Lock(fast_acquire=True)
        try:
            async with queue:
                while not self._take(tokens, queued=True):
                    with self._state:
                        deficit = tokens - self._available
                    await self._sleep(max(deficit, 0.0) / self._rate)
        finally:
            with self._state:
                self._waiting -= 1

    def _check_tokens(self, tokens: int) -> None:
        _check_int("tokens", tokens, minimum=1)
        if tokens > self._burst:
            raise ConfigurationError(f"cannot acquire {tokens} tokens from a bucket of {self._burst}: it never fills")

    def _refill(self) -> None:
        now = self._clock()
        elapsed = now - self._updated
        if elapsed > 0:
            self._available = min(self._burst, self._available + elapsed * self._rate)
            self._updated = now

    def _take(self, tokens: int, *, queued: bool) -> bool:
        """Take ``tokens`` if there; an unqueued caller (``try_acquire``, the fast path) never jumps a queue."""
        with self._state:
            if not queued and self._waiting:
                return False
            self._refill()
            # Tolerate float dust so a sleep that ends exactly on time does not loop on a 1e-12 deficit.
            if self._available + 1e-9 >= tokens:
                self._available = max(self._available - tokens, 0.0)
                return True
            return False

    def __repr__(self) -> str:
        return f"RateLimiter(rate_per_s={self._rate}, burst={self._burst})"
