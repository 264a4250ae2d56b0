"""Errors from OpenAI-compatible hosts: the HTTP status, error body and retry headers, typed.

Maps what a host answers to the harness's error tree: ``ProviderError`` with ``retryable`` and
``retry_after_s`` for the retry policy, ``ModelNotFound`` for an unknown model, ``ContextLimitError``
for a request that is too long. Every text that came from the provider passes through ``scrub``
first, so a host that echoes the key or the Authorization header cannot leak it.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from ._errors import ContextLimitError, ModelNotFound, ProviderError, TinyAgentsError
from ._providers import ProviderSpec

__all__ = ["error_from_payload", "error_from_status", "malformed", "parse_retry_after", "scrub"]

_BEARER: Final = re.compile(r"(?i)\b(bearer\s+)[^\s\"',;]+")
_SK_KEY: Final = re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}")
_MAX_MESSAGE: Final = 600
_CONTEXT_PHRASES: Final = (
    "maximum context length",
    "context_length_exceeded",
    "context length",
    "context window",
    "prompt is too long",
    "exceed context limit",
    "too many tokens",
)
_CONTEXT_NUMBERS: Final = (
    # OpenAI: "maximum context length is 128000 tokens. However, your messages resulted in 130120 tokens"
    re.compile(r"maximum context length is (?P<limit>\d+).*?(?:resulted in|requested) (?P<used>\d+)", re.S),
    # Anthropic: "prompt is too long: 213462 tokens > 200000 maximum"
    re.compile(r"(?P<used>\d+) tokens > (?P<limit>\d+)"),
)
_NOT_RETRYABLE_429: Final = ("insufficient_quota", "exceeded your current quota", "request too large")
_CLIENT_SIDE_TYPES: Final = (
    "invalid_request",
    "authentication",
    "permission",
    "not_found",
    "insufficient_quota",
    "invalid_api_key",
)


# ------------------------------------------------------------------------------------------ secrets
def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every secret, bearer token and ``sk-`` key replaced by ``***``, cut to a sane length."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = _BEARER.sub(r"\1***", text)
    text = _SK_KEY.sub("sk-***", text)
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."


def malformed(spec: ProviderSpec, model: str, detail: str, *, code: str = "malformed_response") -> ProviderError:
    """A response we cannot read; retryable, because garbled output is usually a transient fault."""
    return ProviderError(
        f"{spec.name} model {model!r}: {detail}",
        retryable=True,
        provider=spec.name,
        model=model,
        code=code,
    )


# ------------------------------------------------------------------------------------------ errors
def parse_retry_after(headers: Mapping[str, str], *, now: dt.datetime | None = None) -> float | None:
    """The wait a response asks for, in seconds: ``retry-after-ms``, else ``retry-after`` (seconds or HTTP date)."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            millis = float(raw_ms)
        except ValueError:
            millis = -1.0
        if millis >= 0:
            return millis / 1000.0
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        seconds = (when - (now or dt.datetime.now(dt.UTC))).total_seconds()
        return max(seconds, 0.0)
    return seconds if seconds >= 0 else None


def _error_fields(payload: object) -> tuple[str, str | None, str | None]:
    """``(message, code, type)`` from the many error-body shapes hosts use."""
    err = payload.get("error", payload) if isinstance(payload, Mapping) else payload
    if isinstance(err, str):
        return err, None, None
    if not isinstance(err, Mapping):
        return "", None, None
    message = err.get("message") or err.get("detail") or ""
    code = err.get("code")
    kind = err.get("type")
    return (
        message if isinstance(message, str) else json.dumps(message, ensure_ascii=False),
        str(code) if isinstance(code, str | int) and not isinstance(code, bool) and code != "" else None,
        kind if isinstance(kind, str) and kind else None,
    )


def _context_error(message: str, *, spec: ProviderSpec, model: str, status: int | None) -> ContextLimitError:
    limit = used = None
    for pattern in _CONTEXT_NUMBERS:
        found = pattern.search(message)
        if found:
            limit, used = int(found["limit"]), int(found["used"])
            break
    where = f"HTTP {status}" if status is not None else "in stream"
    return ContextLimitError(
        f"{spec.name} model {model!r} rejected the request as too long ({where}): {message}",
        model=model,
        estimated_tokens=used,
        limit_tokens=limit,
    )


def _is_context(message: str, code: str | None) -> bool:
    lowered = message.lower()
    return code == "context_length_exceeded" or any(phrase in lowered for phrase in _CONTEXT_PHRASES)


def error_from_status(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    spec: ProviderSpec,
    model: str,
    secrets: Sequence[str] = (),
) -> TinyAgentsError:
    """The typed error for an HTTP error response (status, body and retry headers)."""
    text = body.decode("utf-8", "replace")
    try:
        payload: object = json.loads(text)
    except ValueError:
        payload = text.strip()
    message, code, kind = _error_fields(payload)
    message = scrub(message or text.strip() or "no error message", secrets)
    lowered = message.lower()
    if status == 404 and (
        code == "model_not_found" or model.lower() in lowered or ("model" in lowered and "not" in lowered)
    ):
        return ModelNotFound(
            model,
            detail=f"{spec.name} answered HTTP 404: {message}",
            hint=f"check the model name and that your {spec.name} account can use it",
        )
    if status in (400, 413, 422) and _is_context(message, code):
        return _context_error(message, spec=spec, model=model, status=status)
    markers = f"{code or ''} {kind or ''} {lowered}"
    if status == 429:
        retryable = not any(marker in markers for marker in _NOT_RETRYABLE_429)
    else:
        retryable = status in (408, 409) or status >= 500
    should_retry = (headers.get("x-should-retry") or "").strip().lower()
    if should_retry in ("true", "false"):
        retryable = should_retry == "true"
    hint = None
    if status in (401, 403):
        hint = f"the key was rejected; {spec.key_hint}"
    elif status == 429 and not retryable:
        hint = f"check the plan, quota and billing of your {spec.name} account, or reduce the request size"
    label = f" {code}" if code else (f" {kind}" if kind else "")
    return ProviderError(
        f"{spec.name} model {model!r}: HTTP {status}{label}: {message}",
        status=status,
        retryable=retryable,
        retry_after_s=parse_retry_after(headers),
        provider=spec.name,
        model=model,
        code=code or kind,
        hint=hint,
    )


def error_from_payload(
    payload: object, *, spec: ProviderSpec, model: str, secrets: Sequence[str] = ()
) -> TinyAgentsError:
    """The typed error for an ``{"error": ...}`` event inside a 200 stream (or a 200 body).

    Without a status, classification goes by code and type: client-side kinds (invalid request,
    auth, quota, not found) are final; anything else is a server-side failure mid-generation and
    retryable.
    """
    message, code, kind = _error_fields({"error": payload})
    message = scrub(message or "error event without a message", secrets)
    if _is_context(message, code):
        return _context_error(message, spec=spec, model=model, status=None)
    markers = f"{code or ''} {kind or ''} {message.lower()}"
    retryable = not any(marker in markers for marker in (*_CLIENT_SIDE_TYPES, *_NOT_RETRYABLE_429))
    label = f" {code}" if code else (f" {kind}" if kind else "")
    return ProviderError(
        f"{spec.name} model {model!r}: error in stream{label}: {message}",
        retryable=retryable,
        provider=spec.name,
        model=model,
        code=code or kind or "stream_error",
    )
