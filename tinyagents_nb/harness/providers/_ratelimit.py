"""The rate-limit state a provider reports on every response, read from its headers.

OpenAI (and compatible hosts) send ``x-ratelimit-limit|remaining|reset-requests|tokens``, the
resets as durations (``"1s"``, ``"6m0s"``, ``"20ms"``); Anthropic sends
``anthropic-ratelimit-requests|tokens|input-tokens|output-tokens-limit|remaining|reset``, the resets
as RFC 3339 times. Both become one ``RateLimitInfo``, so a pacer can slow down *before* the 429
instead of after it. Adapters keep the latest one (``model.rate_limit_info``).
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["RateLimitInfo", "parse_rate_limit_headers"]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True, kw_only=True, slots=True)
class RateLimitInfo:
    """What the provider said about its limits on one response (``None``: not reported).

    Attributes:
        limit_requests: Requests allowed per window (per minute for OpenAI and Anthropic).
        remaining_requests: Requests left before the provider answers 429.
        reset_requests_s: Seconds until the request allowance is back to its limit.
        limit_tokens: Tokens allowed per window.
        remaining_tokens: Tokens left before the provider answers 429.
        reset_tokens_s: Seconds until the token allowance is back to its limit.
        observed_at: ``time.monotonic()`` when the response arrived (the resets count from it).
    """

    limit_requests: int | None = None
    remaining_requests: int | None = None
    reset_requests_s: float | None = None
    limit_tokens: int | None = None
    remaining_tokens: int | None = None
    reset_tokens_s: float | None = None
    observed_at: float = 0.0


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return max(0, int(float(value.strip())))
    except ValueError:
        return None


def _duration(value: str | None) -> float | None:
    """``"6m0s"``/``"20ms"``/``"1.5"`` → seconds."""
    if value is None:
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNITS[u] for n, u in parts)


def _until(value: str | None, now: dt.datetime) -> float | None:
    """An RFC 3339 time → seconds from ``now`` (0 if already past)."""
    if value is None:
        return None
    try:
        when = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return _duration(value)
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, (when - now).total_seconds())


def parse_rate_limit_headers(
    headers: Mapping[str, str], *, now: dt.datetime | None = None, monotonic: float | None = None
) -> RateLimitInfo | None:
    """The rate-limit state in a response's headers (OpenAI or Anthropic style), or ``None`` if none.

    ``headers`` must look names up case-insensitively (httpx's ``Headers`` does) or use lower case.
    """
    observed = time.monotonic() if monotonic is None else monotonic
    if "x-ratelimit-remaining-requests" in headers or "x-ratelimit-remaining-tokens" in headers:
        get = headers.get
        return RateLimitInfo(
            limit_requests=_int(get("x-ratelimit-limit-requests")),
            remaining_requests=_int(get("x-ratelimit-remaining-requests")),
            reset_requests_s=_duration(get("x-ratelimit-reset-requests")),
            limit_tokens=_int(get("x-ratelimit-limit-tokens")),
            remaining_tokens=_int(get("x-ratelimit-remaining-tokens")),
            reset_tokens_s=_duration(get("x-ratelimit-reset-tokens")),
            observed_at=observed,
        )
    prefix = "anthropic-ratelimit-"
    if any(prefix + kind + "-remaining" in headers for kind in ("requests", "tokens", "input-tokens")):
        clock = now or dt.datetime.now(dt.UTC)
        tokens = "tokens" if prefix + "tokens-remaining" in headers else "input-tokens"
        get = headers.get
        return RateLimitInfo(
            limit_requests=_int(get(prefix + "requests-limit")),
            remaining_requests=_int(get(prefix + "requests-remaining")),
            reset_requests_s=_until(get(prefix + "requests-reset"), clock),
            limit_tokens=_int(get(f"{prefix}{tokens}-limit")),
            remaining_tokens=_int(get(f"{prefix}{tokens}-remaining")),
            reset_tokens_s=_until(get(f"{prefix}{tokens}-reset"), clock),
            observed_at=observed,
        )
    return None
