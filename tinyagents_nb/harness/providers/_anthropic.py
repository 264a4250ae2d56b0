"""``AnthropicModel``: Anthropic's native Messages API over httpx (no SDK).

The wire mapping lives in ``_anthropic_wire`` (requests, unary responses) and
``_anthropic_stream`` (event streams), both pure; this module does the HTTP. Error bodies share
the OpenAI adapter's typed mapping, because Anthropic's HTTP statuses, ``retry-after`` and
``x-should-retry`` headers and error shape (``{"error": {"type", "message"}}``) fit it.

Decisions worth knowing:

- **Prompt caching is on by default**: breakpoints cost nothing when the prefix is too short to
  cache and save most of the input price when it is not. ``cache=False`` turns it off,
  ``cache_ttl="1h"`` keeps the prefix an hour (writes cost 2x input instead of 1.25x).
- **Thinking is opt-in** (``thinking_budget=``): it changes the request's constraints (no forced
  tool choice, default temperature only) and the bill.
- **The key never leaves the object** (sealed headers, scrubbed provider text, httpx exceptions
  never chained), as in ``OpenAIChatModel``.
- **Streams keep what arrived**: a connection lost before ``message_delta`` brought the stop reason
  raises a retryable ``stream_interrupted`` error after the deltas that did arrive.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, get_args

from .._errors import ConfigurationError, ProviderError, TinyAgentsError
from .._model import ModelRequest, ModelResponse, ModelStreamItem
from .._profile import ModelProfile
from ._adapter import HTTPAdapter
from ._anthropic_stream import EventParser
from ._anthropic_wire import CacheTTL, WireOptions, build_body, parse_message, tools_payload
from ._http import Sealed, check_url, httpx_module, public_url
from ._openai_errors import error_from_payload, error_from_status, malformed
from ._registry import ProviderSpec, profile_for
from ._sse import SSEDecoder

if TYPE_CHECKING:
    import httpx

__all__ = ["AnthropicModel"]

API_VERSION: Final = "2023-06-01"
DEFAULT_MAX_TOKENS: Final = 8192
MIN_THINKING_BUDGET: Final = 1024


def _positive_int(name: str, value: object, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


class AnthropicModel(HTTPAdapter):
    """A ``ChatModel`` for Anthropic's Messages API (``POST {base_url}/messages``).

    Args:
        model: The Claude model id, e.g. ``"claude-sonnet-4-5"``.
        api_key: The key; defaults to ``ANTHROPIC_API_KEY``.
        base_url: Overrides the API root (default ``https://api.anthropic.com/v1``).
        http_client: An ``httpx.AsyncClient`` to use (and not close); by default one is created per
            event loop and closed by ``aclose()``.
        timeout_s: Network timeout for connect, each read, write and pool wait.
        profile: Overrides the profile ``profile_for("anthropic", model)`` would guess; the guessed
            one's ``max_output_tokens`` is the output cap this model sends, so the harness reserves
            that much of the context window, not the family's far larger ceiling.
        max_tokens: Output cap when a request sets none; default: the model's cap, at most 8192.
        thinking_budget: Enable extended thinking with this many tokens (at least 1024).
        cache: Place prompt-cache breakpoints on the stable prefix.
        cache_ttl: ``"5m"`` or ``"1h"``.
        anthropic_version: The ``anthropic-version`` header.
        betas: ``anthropic-beta`` flags to send.
        extra_headers: Extra headers; treated as secret (never shown, scrubbed from errors).

    Raises:
        ConfigurationError: A bad argument, or no key given and ``ANTHROPIC_API_KEY`` unset.
    """

    __slots__ = ("_options", "_profile")

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        timeout_s: float = 60.0,
        profile: ModelProfile | None = None,
        max_tokens: int | None = None,
        thinking_budget: int | None = None,
        cache: bool = True,
        cache_ttl: CacheTTL = "5m",
        anthropic_version: str = API_VERSION,
        betas: Sequence[str] = (),
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        name: object = model
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"model must be a non-empty string, got {model!r}")
        spec = ProviderSpec.anthropic()
        if base_url is not None:
            spec = dataclasses.replace(spec, base_url=check_url(base_url))
        given: object = api_key
        if given is not None and (not isinstance(given, str) or not given.strip()):
            raise ConfigurationError("api_key must be a non-empty string when given", hint=spec.key_hint)
        key = api_key.strip() if api_key is not None else spec.api_key_from_env()
        if key is None:
            raise ConfigurationError(f"no API key for provider {spec.name!r}", hint=spec.key_hint)
        timeout: object = timeout_s
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ConfigurationError(f"timeout_s must be a positive number, got {timeout_s!r}")
        if profile is not None and not isinstance(profile, ModelProfile):
            raise ConfigurationError(f"profile must be a ModelProfile, got {type(profile).__name__}")
        if thinking_budget is not None:
            _positive_int("thinking_budget", thinking_budget, minimum=MIN_THINKING_BUDGET)
        if max_tokens is not None:
            _positive_int("max_tokens", max_tokens)
        if not isinstance(cache, bool):
            raise ConfigurationError(f"cache must be a bool, got {cache!r}")
        if cache_ttl not in get_args(CacheTTL):
            raise ConfigurationError(f"cache_ttl must be '5m' or '1h', got {cache_ttl!r}")
        guessed = profile if profile is not None else profile_for(spec, model.strip())
        cap = guessed.max_output_tokens
        default_max = max_tokens or min(cap or DEFAULT_MAX_TOKENS, DEFAULT_MAX_TOKENS)
        self._options = WireOptions(
            max_tokens=default_max,
            thinking_budget=thinking_budget,
            cache=cache,
            cache_ttl=cache_ttl,
            native_json=guessed.structured_output == "native",
        )
        if profile is None:
            # What this model will ask for, not the family's ceiling: the harness reserves this much
            # of the context window for the answer.
            sent = max(default_max, thinking_budget + 1024) if thinking_budget else default_max
            guessed = dataclasses.replace(guessed, max_output_tokens=min(sent, cap) if cap else sent)
        self._profile = guessed
        extra = dict(extra_headers or {})
        headers = {
            "accept": "application/json",
            "content-type": "application/json",
            "anthropic-version": anthropic_version,
            **extra,
            "x-api-key": key,
        }
        flags = [flag for flag in betas if flag]
        if flags:
            headers["anthropic-beta"] = ",".join(flags)
        self._headers = Sealed(headers)
        self._init_http(
            spec=spec,
            model=model.strip(),
            url=spec.base_url.rstrip("/") + "/messages",
            secrets=(key, *(value for value in extra.values() if value)),
            timeout_s=timeout_s,
            http_client=http_client,
        )

    # ----------------------------------------------------------------------------------- identity
    @property
    def profile(self) -> ModelProfile:
        return self._profile

    @property
    def options(self) -> WireOptions:
        """The request-shaping settings in use (output cap, thinking, caching)."""
        return self._options

    def __repr__(self) -> str:
        thinking = f", thinking_budget={self._options.thinking_budget}" if self._options.thinking_budget else ""
        cache = f"'{self._options.cache_ttl}'" if self._options.cache else "off"
        return (
            f"AnthropicModel(model={self._model!r}, base_url={public_url(self._spec.base_url)!r}, "
            f"cache={cache}{thinking}, api_key=<set>)"
        )

    __str__ = __repr__

    # ----------------------------------------------------------------------------------- requests by others
    def parse_response(self, data: Mapping[str, Any]) -> ModelResponse:
        """Read one non-streaming response body (e.g. a Batch API result line's) as this adapter would.

        Raises:
            ProviderError: The body is not a response of this API.
        """
        if not isinstance(data, Mapping):
            raise malformed(self._spec, self._model, "the response body is not a JSON object")
        return parse_message(dict(data), model=self._model, provider=self._spec.name)

    # ----------------------------------------------------------------------------------- calls
    def _payload(self, request: ModelRequest, *, stream: bool) -> bytes:
        tools = self._tools_for(request.tools, tools_payload)
        body = build_body(request, model=self._model, options=self._options, stream=stream, tools=tools)
        try:
            return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"the request is not JSON-serializable: {exc}") from None

    def _status_error(self, response: httpx.Response, body: bytes) -> TinyAgentsError:
        error = error_from_status(
            response.status_code,
            response.headers,
            body,
            spec=self._spec,
            model=self._model,
            secrets=self._secrets.reveal(),
        )
        if response.status_code == 404 and error.hint is None:
            error.hint = f"check base_url ({public_url(self._spec.base_url)}) and the model name"
        return error

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        """One non-streaming Messages call.

        Raises:
            ProviderError: HTTP, transport or format failure (``retryable`` says whether to retry).
            ModelNotFound: Anthropic does not know the model.
            ContextLimitError: The prompt is too long for the model.
        """
        content = self._payload(request, stream=False)
        httpx = httpx_module()
        error: TinyAgentsError | None = None
        try:
            response = await (await self._http()).post(
                self._url, content=content, headers=self._headers.reveal(), timeout=self._timeout_obj()
            )
        except httpx.HTTPError as exc:
            error = self._transport_error(exc, interrupted=False)
        if error is not None:
            raise error  # raised outside the handler: the httpx error (and its headers) is not chained
        self._observe(response.headers)
        body = response.content
        if response.status_code >= 300:
            raise self._status_error(response, body)
        data: object = None
        try:
            data = json.loads(body)
        except ValueError:
            error = malformed(self._spec, self._model, "the response body is not JSON")
        if error is not None:
            raise error
        if not isinstance(data, dict):
            raise malformed(self._spec, self._model, "the response body is not a JSON object")
        if data.get("type") == "error":
            raise error_from_payload(
                data.get("error"), spec=self._spec, model=self._model, secrets=self._secrets.reveal()
            )
        return parse_message(data, model=self._model, provider=self._spec.name)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        """A streaming Messages call: text, thinking and tool-input deltas as they arrive, then usage and finish.

        Raises:
            ProviderError: As ``invoke``; additionally ``code="stream_interrupted"`` (retryable) when the
                connection ends before the stop reason arrived, after the deltas that did arrive.
        """
        content = self._payload(request, stream=True)
        httpx = httpx_module()
        client = await self._http()
        parser = EventParser(spec=self._spec, model=self._model, secrets=self._secrets.reveal())
        decoder = SSEDecoder()
        error: TinyAgentsError | None = None
        receiving = False
        headers = {**self._headers.reveal(), "accept": "text/event-stream"}
        try:
            async with client.stream(
                "POST", self._url, content=content, headers=headers, timeout=self._timeout_obj()
            ) as response:
                self._observe(response.headers)
                if response.status_code >= 300:
                    error = self._status_error(response, await response.aread())
                else:
                    receiving = True
                    async for chunk in response.aiter_bytes():
                        for item in parser.feed(decoder.feed(chunk)):
                            yield item
                        if parser.done:
                            break
                    if not parser.done:
                        for item in parser.feed(decoder.close()):
                            yield item
                    error = parser.error  # raised after the deltas that arrived with it
        except httpx.HTTPError as exc:
            error = self._transport_error(exc, interrupted=receiving and not parser.saw_finish)
            if receiving and parser.saw_finish:
                error = None  # only message_stop was lost; the answer itself is complete
        if error is not None:
            raise error
        if not parser.done and not parser.saw_finish:
            raise ProviderError(
                f"{self._spec.name} model {self._model!r}: the stream ended before the model finished",
                retryable=True,
                provider=self._spec.name,
                model=self._model,
                code="stream_interrupted",
            )
        for item in parser.finish():
            yield item
