"""Errors from OpenAI-compatible hosts: the HTTP status, error body and retry headers, typed.

Maps what a host answers to the harness's error tree: ``ProviderError`` with ``retryable`` and
``retry_after_s`` for the retry policy, ``ModelNotFound`` for an unknown model, ``ContextLimitError``
for a request that is too long. Every text that came from the provider passes through ``scrub``
first, so a host that echoes the key or the Authorization header cannot leak it.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, NamedTuple

from .._errors import ContextLimitError, ModelNotFound, ProviderError, TinyAgentsError
from ._registry import ProviderSpec

__all__ = ["error_from_payload", "error_from_status", "malformed", "parse_retry_after", "scrub", "scrub_value"]

_BEARER: Final = re.compile(r"(?i)\b(bearer\s+)[^\s\"',;]+")
_SK_KEY: Final = re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}")
_MAX_MESSAGE: Final = 600
_MAX_DETAIL: Final = 4000
_CONTEXT_PHRASES: Final = (
    # How hosts word "the prompt does not fit" (their error references, SDKs and recorded traffic)
    "maximum context length",  # OpenAI, DeepSeek, vLLM, OpenRouter ("this endpoint's maximum context length")
    "context_length_exceeded",
    "context length",
    "context window",  # OpenAI Responses: "your input exceeds the context window of this model"
    "prompt is too long",  # Anthropic
    "prompt too long",
    "exceed context limit",  # Anthropic: "input length and `max_tokens` exceed context limit"
    "too many tokens",
    "exceeds the available context size",  # llama.cpp's llama-server
    "context size has been exceeded",  # llama.cpp, older builds
    "input token count",  # Gemini: "the input token count (N) exceeds the maximum number of tokens allowed"
    "maximum prompt length",  # xAI: "this model's maximum prompt length is N but the request contains M"
    "reduce the length of the messages",  # Groq, Cerebras
    "too large for model with",  # Mistral: "prompt contains N tokens ... too large for model with M maximum"
    "input is too long",  # Bedrock: "input is too long for requested model"
    "greater than the context length",  # LM Studio
    "exceeded model token limit",  # Moonshot / Kimi
)
_CONTEXT_KINDS: Final = frozenset({"context_length_exceeded", "exceed_context_size_error"})
_CONTEXT_NUMBERS: Final = tuple(
    re.compile(pattern, re.S | re.IGNORECASE)
    for pattern in (
        # OpenAI, DeepSeek, vLLM: "maximum context length is 128000 tokens. However, your messages resulted in
        # 130120 tokens"; OpenRouter: "... you requested about 9000 tokens"; vLLM: "... your request has N input"
        r"maximum context length is (?P<limit>\d+).*?(?:resulted in|requested(?: about)?|request has) (?P<used>\d+)",
        # llama.cpp: "request (2638 tokens) exceeds the available context size (2048 tokens)"
        r"request \((?P<used>\d+) tokens\) exceeds the available context size \((?P<limit>\d+) tokens\)",
        # Anthropic: "prompt is too long: 213462 tokens > 200000 maximum"
        r"(?P<used>\d+) tokens > (?P<limit>\d+)",
        # Gemini: "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)"
        r"input token count \((?P<used>\d+)\) exceeds the maximum number of tokens allowed \((?P<limit>\d+)\)",
        # xAI: "This model's maximum prompt length is 131072 but the request contains 537812 tokens"
        r"maximum prompt length is (?P<limit>\d+) but the request contains (?P<used>\d+)",
        # Mistral: "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context"
        r"prompt contains (?P<used>\d+) tokens.*?too large for model with (?P<limit>\d+)",
        # Cerebras: "Current length is 9000 while limit is 8192"
        r"current length is (?P<used>\d+) while limit is (?P<limit>\d+)",
    )
)
# pydantic's words for a request body that fails validation; llama-cpp-python's server reports it as a 500
_INVALID_INPUT: Final = ("input should be", "field required", "extra inputs are not permitted")
_NOT_RETRYABLE_429: Final = ("insufficient_quota", "exceeded your current quota", "request too large")
_KIND_STATUS: Final[Mapping[str, int]] = {
    # Anthropic's error types, with the status its HTTP API answers each with (its error reference)
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
    # OpenAI's codes and types (its error-code guide)
    "invalid_api_key": 401,
    "model_not_found": 404,
    "context_length_exceeded": 400,
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "server_error": 500,
    "server_is_overloaded": 503,
    "slow_down": 503,
}
_CLIENT_SIDE_TYPES: Final = (
    "invalid_request",
    "authentication",
    "permission",
    "not_found",
    "insufficient_quota",
    "invalid_api_key",
)


# ------------------------------------------------------------------------------------------ secrets
@functools.lru_cache(maxsize=64)
def _secret_re(secrets: tuple[str, ...]) -> re.Pattern[str] | None:
    """One case-insensitive pattern for ``secrets``, longest first (a gateway may change a key's case)."""
    values = sorted({secret for secret in secrets if secret}, key=len, reverse=True)
    return re.compile("|".join(map(re.escape, values)), re.IGNORECASE) if values else None


def _scrub_full(text: str, secrets: tuple[str, ...]) -> str:
    pattern = _secret_re(secrets)
    if pattern is not None:
        text = pattern.sub("***", text)
    text = _BEARER.sub(r"\1***", text)
    return _SK_KEY.sub("sk-***", text)


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every secret (any case), bearer token and ``sk-`` key replaced by ``***``, cut to a sane length."""
    text = _scrub_full(text, tuple(secrets))
    return _cut(text, _MAX_MESSAGE)


def scrub_value(value: object, secrets: Iterable[str] = ()) -> object:
    """``value`` (decoded JSON) with every string in it scrubbed, keys included, at any depth.

    Provider errors are scrubbed whole before anything is built from them: a host or gateway may
    echo the key or the Authorization header in ``code``, ``type``, ``param`` or metadata as well as
    in ``message``, and any of those may end up in an error's text, its attributes or an event.
    """
    return _scrub_tree(value, tuple(secrets), 0)


def _scrub_tree(value: object, secrets: tuple[str, ...], depth: int) -> object:
    if isinstance(value, str):
        return _scrub_full(value, secrets)
    if depth > 32:  # deeper than any real error body: keep nothing rather than walk on
        return "***"
    if isinstance(value, Mapping):
        return {_scrub_full(str(k), secrets): _scrub_tree(v, secrets, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub_tree(item, secrets, depth + 1) for item in value]
    return value  # numbers, booleans, null


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


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


class _Fields(NamedTuple):
    message: str
    code: str | None
    kind: str | None
    status: int | None  # a numeric ``code`` in the HTTP range (OpenRouter, vLLM), read as a status
    details: dict[str, str]
    counts: tuple[int | None, int | None] = (None, None)  # (prompt tokens, window) stated as fields (llama.cpp)


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _error_fields(payload: object) -> _Fields:
    """The message, code, type and actionable details from the many error-body shapes hosts use.

    ``details`` keeps what tells a user what to do: OpenAI's ``param``, Groq's ``failed_generation``
    (the model output that failed to parse as a tool call) and OpenRouter's ``metadata`` (``raw``
    is the upstream provider's own reason, e.g. "temporarily rate-limited upstream").
    """
    err = payload.get("error", payload) if isinstance(payload, Mapping) else payload
    if isinstance(err, str):
        return _Fields(err, None, None, None, {})
    if not isinstance(err, Mapping):
        return _Fields("", None, None, None, {})
    message = err.get("message") or err.get("detail") or ""
    raw_code = err.get("code")
    kind = err.get("type")
    code = str(raw_code) if isinstance(raw_code, str | int) and not isinstance(raw_code, bool) else None
    status = None
    if code is not None and code.isdigit() and 400 <= int(code) <= 599:
        status = int(code)
    details: dict[str, str] = {}
    for key in ("param", "failed_generation"):
        value = err.get(key)
        if value not in (None, "", [], {}):
            details[key] = _cut(_text(value), _MAX_DETAIL)
    metadata = err.get("metadata")
    if isinstance(metadata, Mapping):
        for key, value in metadata.items():
            if value not in (None, "", [], {}):
                details[f"metadata.{key}"] = _cut(_text(value), _MAX_DETAIL)
    counts = (_count(err.get("n_prompt_tokens")), _count(err.get("n_ctx")))
    return _Fields(
        _text(message), code or None, kind if isinstance(kind, str) and kind else None, status, details, counts
    )


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _detail_suffix(details: Mapping[str, str]) -> str:
    """The actionable details as a short tail for the error message (each cut; ``details`` keeps them whole)."""
    parts = []
    raw = details.get("metadata.raw")
    if raw:
        upstream = details.get("metadata.provider_name")
        parts.append(f"upstream{f' {upstream}' if upstream else ''}: {_cut(raw, 300)}")
    failed = details.get("failed_generation")
    if failed:
        parts.append(f"failed_generation: {_cut(failed, 300)}")
    param = details.get("param")
    if param:
        parts.append(f"param: {_cut(param, 100)}")
    return f" ({'; '.join(parts)})" if parts else ""


def _context_error(
    message: str, *, spec: ProviderSpec, model: str, status: int | None, counts: tuple[int | None, int | None]
) -> ContextLimitError:
    """The typed overflow, with the host's own token counts: fields of the body first, else the message's."""
    used, limit = counts
    if used is None or limit is None:
        for pattern in _CONTEXT_NUMBERS:
            found = pattern.search(message)
            if found:
                used, limit = used or int(found["used"]), limit or int(found["limit"])
                break
    where = f"HTTP {status}" if status is not None else "in stream"
    return ContextLimitError(
        f"{spec.name} model {model!r} rejected the request as too long ({where}): {message}",
        model=model,
        estimated_tokens=used,
        limit_tokens=limit,
    )


def _is_context(message: str, fields: _Fields) -> bool:
    if fields.code in _CONTEXT_KINDS or fields.kind in _CONTEXT_KINDS:
        return True
    lowered = message.lower()
    return any(phrase in lowered for phrase in _CONTEXT_PHRASES)


def _retryable_status(status: int, markers: str) -> bool:
    if status == 429:
        return not any(marker in markers for marker in _NOT_RETRYABLE_429)
    if status >= 500 and "validation error" in markers and any(word in markers for word in _INVALID_INPUT):
        return False  # the same request fails the same way (llama-cpp-python answers a bad body with 500)
    return status in (408, 409) or status >= 500


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
    text = _scrub_full(body.decode("utf-8", "replace"), tuple(secrets)).strip()
    try:
        payload: object = scrub_value(json.loads(text), secrets)
    except ValueError:
        payload = text
    else:  # the decoded, scrubbed JSON, not the raw text (whose escapes could hide a secret)
        text = json.dumps(payload, ensure_ascii=False)
    fields = _error_fields(payload)
    message = scrub(fields.message or text or "no error message", secrets)
    if status in (400, 413, 422) and _is_context(message, fields):
        return _context_error(message, spec=spec, model=model, status=status, counts=fields.counts)
    return _status_error(status, fields, message, spec=spec, model=model, headers=headers, in_stream=False)


def _status_error(
    status: int,
    fields: _Fields,
    message: str,
    *,
    spec: ProviderSpec,
    model: str,
    headers: Mapping[str, str],
    in_stream: bool,
) -> TinyAgentsError:
    """The error for a known status: the same class, retry decision and hint wherever it was reported."""
    code, kind = fields.code, fields.kind
    lowered = message.lower()
    where = f"error in stream (as HTTP {status})" if in_stream else f"HTTP {status}"
    if status == 404 and (
        code == "model_not_found" or model.lower() in lowered or ("model" in lowered and "not" in lowered)
    ):
        return ModelNotFound(
            model,
            detail=f"{spec.name} answered {where}: {message}",
            hint=f"check the model name and that your {spec.name} account can use it",
        )
    retryable = _retryable_status(status, f"{code or ''} {kind or ''} {lowered}")
    should_retry = (headers.get("x-should-retry") or "").strip().lower()
    if should_retry in ("true", "false"):
        retryable = should_retry == "true"
    hint = None
    if status in (401, 403):
        hint = f"the key was rejected; {spec.key_hint}"
    elif status == 429 and not retryable:
        hint = f"check the plan, quota and billing of your {spec.name} account, or reduce the request size"
    return ProviderError(
        f"{spec.name} model {model!r}: {where}{_label(code, kind, status)}: {message}{_detail_suffix(fields.details)}",
        status=status,
        retryable=retryable,
        retry_after_s=parse_retry_after(headers),
        provider=spec.name,
        model=model,
        code=code or kind or ("stream_error" if in_stream else None),
        hint=hint,
        details=fields.details,
    )


def _label(code: str | None, kind: str | None, status: int | None) -> str:
    if code and code != str(status):
        return f" {code}"
    return f" {kind}" if kind else ""


def _implied_status(fields: _Fields) -> int | None:
    """The HTTP status an error without one stands for: a numeric code, else the code's or type's usual status."""
    if fields.status is not None:
        return fields.status
    for name in (fields.code, fields.kind):
        if name is not None and name in _KIND_STATUS:
            return _KIND_STATUS[name]
    return None


def error_from_payload(
    payload: object, *, spec: ProviderSpec, model: str, secrets: Sequence[str] = ()
) -> TinyAgentsError:
    """The typed error for an ``{"error": ...}`` event inside a 200 stream (or a 200 body).

    Such an error has no HTTP status of its own, so it gets the one the same error would have come
    with as a response, and from there the same class, retry decision and hint: a numeric ``code``
    in the HTTP range is that status (OpenRouter sends ``{"code": 400, ...}`` for a request that
    cannot succeed, ``429``/``502`` for transient trouble); otherwise a known code or type maps to
    its status (Anthropic's in-stream ``overloaded_error`` is a 529 and retried like one, OpenAI's
    ``rate_limit_exceeded`` a 429). An unknown kind keeps ``status=None``: client-side kinds
    (invalid request, auth, quota, not found) are final, anything else is a server-side failure
    mid-generation and retryable. A request too long is a ``ContextLimitError`` either way.
    """
    fields = _error_fields({"error": scrub_value(payload, secrets)})
    code, kind = fields.code, fields.kind
    message = scrub(fields.message or "error event without a message", secrets)
    if _is_context(message, fields):
        return _context_error(message, spec=spec, model=model, status=None, counts=fields.counts)
    status = _implied_status(fields)
    if status is not None:
        return _status_error(status, fields, message, spec=spec, model=model, headers={}, in_stream=True)
    markers = f"{code or ''} {kind or ''} {message.lower()}"
    retryable = not any(marker in markers for marker in (*_CLIENT_SIDE_TYPES, *_NOT_RETRYABLE_429))
    return ProviderError(
        f"{spec.name} model {model!r}: error in stream{_label(code, kind, None)}: {message}"
        f"{_detail_suffix(fields.details)}",
        retryable=retryable,
        provider=spec.name,
        model=model,
        code=code or kind or "stream_error",
        details=fields.details,
    )
