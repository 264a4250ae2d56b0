"""``OpenAIChatModel``: one adapter for every host that speaks OpenAI Chat Completions, over httpx.

The wire mapping lives in ``_openai_wire`` and ``_openai_errors`` (pure functions); this module
does the HTTP. httpx is
imported on first call, not at import, so ``import tinyagents_nb.harness`` stays light.

Decisions worth knowing:

- **A missing key fails at construction** with ``ConfigurationError`` naming the env var: in a
  notebook the model is built in one cell and used in another, and the first cell is the right
  place to learn the key is not set. ``known_providers()`` answers "which keys are set" without
  building anything.
- **The key never leaves the object**: it is kept only in a sealed header map (``repr`` shows
  ``api_key=<set>``); every provider text in an error is scrubbed; httpx exceptions, whose
  ``request`` carries the Authorization header, are never chained as ``__cause__``/``__context__``.
- **Streams keep what arrived**: deltas are yielded as they come; a connection lost before the
  finish chunk raises ``ProviderError(retryable=True, code="stream_interrupted")`` after them. A
  lost connection after the finish chunk only loses the usage chunk and counts as complete.
  Malformed chunks are ``ProviderError(retryable=True, code="malformed_stream")``: garbled output is
  usually a transient proxy or server fault, and the retry policy bounds the attempts. A 200
  stream with no byte at all (llama-cpp-python's server, when the prompt is over its window) is
  asked again once without streaming: the unary answer says why (a ``ContextLimitError`` with
  the counts), or is the answer.
- **One model, many loops**: an owned httpx client exists per event loop (``PerLoopClients``), so a
  model shared by threads or by a notebook loop and ``run_sync`` workers never cuts another loop's
  requests (which would also make the retry policy pay for them again).
"""

from __future__ import annotations

import dataclasses
import json
import os
import urllib.parse
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any

from .._errors import ConfigurationError, ProviderError, TinyAgentsError
from .._messages import TextDelta, ThinkingDelta, ToolCallDelta
from .._model import ModelRequest, ModelResponse, ModelStreamItem, StreamFinish, StreamUsage
from .._profile import ModelProfile
from ._adapter import HTTPAdapter
from ._host_tokens import HostTokenCounter, host_token_counter
from ._http import Sealed, check_url, httpx_module, public_url
from ._openai_errors import error_from_payload, error_from_status, malformed
from ._openai_wire import ChunkParser, build_body, parse_completion, tools_payload
from ._registry import ProviderSpec, profile_for
from ._sse import SSEDecoder

if TYPE_CHECKING:
    import httpx

__all__ = ["OpenAIChatModel"]


class OpenAIChatModel(HTTPAdapter):
    """A ``ChatModel`` for OpenAI and every OpenAI-Chat-Completions-compatible host.

    Args:
        model: The provider's model id, e.g. ``"gpt-4o-mini"``.
        base_url: Overrides the provider's API root (``{base_url}/chat/completions`` is called).
        api_key: The key; defaults to the provider's env var (``OPENAI_API_KEY`` for openai).
        provider: A built-in provider name or a ``ProviderSpec``.
        http_client: An ``httpx.AsyncClient`` to use (and not close), bound to one event loop; by
            default the model owns one client per event loop, created on first call there and
            closed by ``aclose()`` on that loop or when ``asyncio.run`` ends that loop.
        timeout_s: Network timeout for connect, each read, write and pool wait, on every request.
        profile: Overrides the profile ``profile_for`` would guess.
        extra_headers: Extra headers for every request; treated as secret (never shown, scrubbed
            from errors), so they may carry gateway credentials.

    Raises:
        ConfigurationError: A bad argument, an unknown provider, or a missing key for a provider
            that requires one (the hint names the env var).
    """

    __slots__ = ("_profile",)

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        provider: str | ProviderSpec = "openai",
        http_client: httpx.AsyncClient | None = None,
        timeout_s: float = 60.0,
        profile: ModelProfile | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        name: object = model
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"model must be a non-empty string, got {model!r}")
        spec = provider if isinstance(provider, ProviderSpec) else ProviderSpec.named(provider)
        if base_url is not None:
            spec = dataclasses.replace(spec, base_url=check_url(base_url))
        given: object = api_key
        if given is not None and (not isinstance(given, str) or not given.strip()):
            raise ConfigurationError("api_key must be a non-empty string when given", hint=spec.key_hint)
        key = api_key.strip() if api_key is not None else spec.api_key_from_env()
        if key is None and spec.requires_key:
            raise ConfigurationError(f"no API key for provider {spec.name!r}", hint=spec.key_hint)
        timeout: object = timeout_s
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ConfigurationError(f"timeout_s must be a positive number, got {timeout_s!r}")
        if profile is not None and not isinstance(profile, ModelProfile):
            raise ConfigurationError(f"profile must be a ModelProfile, got {type(profile).__name__}")
        extra = dict(extra_headers or {})
        headers = {"Accept": "application/json", "Content-Type": "application/json", **spec.default_headers, **extra}
        secrets = [value for value in extra.values() if value]
        # "Token abc..." / "Basic abc...": a host may echo only the credential part of the value.
        for value in list(secrets):
            credential = value.split()[-1] if value.split() else value
            if credential != value and len(credential) >= 8:
                secrets.append(credential)
        if key is not None:
            headers.update(spec.auth_headers(key))
            secrets.append(key)
        password = urllib.parse.urlsplit(spec.base_url).password
        if password:
            secrets.append(password)
        self._init_http(
            spec=spec,
            model=model.strip(),
            url=spec.endpoint("chat/completions"),
            secrets=secrets,
            timeout_s=timeout_s,
            http_client=http_client,
        )
        self._headers = Sealed(headers)
        self._profile = profile

    @classmethod
    def from_env(cls, model: str, *, provider: str | ProviderSpec = "openai", **kwargs: Any) -> OpenAIChatModel:
        """A model configured from the environment only.

        The key comes from the provider's env var and, for openai, the base URL from
        ``OPENAI_BASE_URL`` when set (as the official SDK does).

        Raises:
            ConfigurationError: ``api_key=`` was passed (use the constructor), or the key is not set.
        """
        if "api_key" in kwargs:
            raise ConfigurationError("from_env() reads the key from the environment; pass api_key= to the constructor")
        spec = provider if isinstance(provider, ProviderSpec) else ProviderSpec.named(provider)
        if spec.name == "openai" and kwargs.get("base_url") is None:
            env_url = os.environ.get("OPENAI_BASE_URL", "").strip()
            if env_url:
                kwargs["base_url"] = env_url
        return cls(model, provider=spec, **kwargs)

    # ----------------------------------------------------------------------------------- identity
    @property
    def spec(self) -> ProviderSpec:
        """The provider spec in use (with ``base_url`` overridden when one was given)."""
        return self._spec

    @property
    def profile(self) -> ModelProfile:
        """The explicit profile, else ``profile_for(provider, model)`` (computed once, on first use)."""
        if self._profile is None:
            self._profile = profile_for(self._spec, self._model)
        return self._profile

    def __repr__(self) -> str:
        keyed = "set" if (self._spec.api_key_header or "Authorization") in self._headers.reveal() else "none"
        return (
            f"OpenAIChatModel(model={self._model!r}, provider={self._spec.name!r}, "
            f"base_url={public_url(self._spec.base_url)!r}, api_key=<{keyed}>)"
        )

    __str__ = __repr__

    # ----------------------------------------------------------------------------------- requests by others
    def parse_response(self, data: Mapping[str, Any]) -> ModelResponse:
        """Read one non-streaming response body (e.g. a Batch API result line's) as this adapter would.

        Raises:
            ProviderError: The body is not a response of this API.
        """
        return parse_completion(data, spec=self._spec, model=self._model)

    # ----------------------------------------------------------------------------------- exact counts
    @property
    def host_token_counter(self) -> HostTokenCounter:
        """This host's exact-count state for the process (shared by every model object for the same host and model)."""
        root = self._spec.base_url.rstrip("/")
        return host_token_counter(root.removesuffix("/v1"), self._model)

    async def count_prompt_tokens(self, request: ModelRequest, *, timeout_s: float = 2.0) -> int | None:
        """The exact prompt tokens ``request`` costs, by the host's own template and tokenizer.

        For hosts that serve llama.cpp's ``/apply-template`` and ``/tokenize``; ``None`` when the host
        has no such endpoints (learnt once), or does not answer within ``timeout_s``. Never raises
        for the host's sake: the caller falls back to its estimate.
        """
        counter = self.host_token_counter
        if counter.mode == "off":
            return None
        body = self._payload(request, stream=False)
        return await counter.count(await self._http(), body, self._headers.reveal(), timeout_s=timeout_s)

    def check_prompt_tokens(self, counted: int, reported: int) -> None:
        """Compare a ``count_prompt_tokens`` figure with the ``prompt_tokens`` the response reported."""
        self.host_token_counter.check(counted, reported)

    # ----------------------------------------------------------------------------------- calls
    def _payload(self, request: ModelRequest, *, stream: bool) -> bytes:
        tools = self._tools_for(request.tools, tools_payload)
        body = build_body(request, model=self._model, spec=self._spec, stream=stream, tools=tools)
        try:
            return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"the request is not JSON-serializable: {exc}") from None

    def _connect_advice(self) -> str | None:
        return _connect_hint(self._spec.name, self._spec.base_url)

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

    async def _post_json(self, url: str, content: bytes, *, result_key: str) -> object:
        """POST a JSON body to this host and return the decoded JSON answer (shared by the embeddings client).

        Transport failures, HTTP errors, a non-JSON body and an ``{"error": ...}`` payload without
        ``result_key`` all become typed, key-free errors.
        """
        httpx = httpx_module()
        client = await self._http()
        error: TinyAgentsError | None = None
        try:
            response = await client.post(
                url, content=content, headers=self._headers.reveal(), timeout=self._timeout_obj()
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
        if isinstance(data, dict) and data.get("error") and result_key not in data:
            raise error_from_payload(data["error"], spec=self._spec, model=self._model, secrets=self._secrets.reveal())
        return data

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        """One non-streaming completion.

        Raises:
            ProviderError: HTTP, transport or format failure (``retryable`` says whether to retry).
            ModelNotFound: The host does not know the model.
            ContextLimitError: The host rejected the request as too long.
        """
        content = self._payload(request, stream=False)
        data = await self._post_json(self._url, content, result_key="choices")
        return parse_completion(data, spec=self._spec, model=self._model)

    async def _ask_unary(self, request: ModelRequest) -> ModelResponse:
        """``invoke``, and once more on a transport failure.

        The server may be closing the connection that carried the empty stream (llama-cpp-python's
        does, just after it), and the connection pool may hand that one out again.
        """
        try:
            return await self.invoke(request)
        except ProviderError as exc:
            if exc.code != "transport_error":
                raise
        return await self.invoke(request)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        """A streaming completion: text, reasoning and tool-call deltas as they arrive, then usage and finish.

        Raises:
            ProviderError: As ``invoke``; additionally ``code="stream_interrupted"`` (retryable) when the
                connection ends before the finish chunk, after the deltas that did arrive.
        """
        content = self._payload(request, stream=True)
        httpx = httpx_module()
        client = await self._http()
        parser = ChunkParser(spec=self._spec, model=self._model, secrets=self._secrets.reveal())
        decoder = SSEDecoder()
        error: TinyAgentsError | None = None
        receiving = False
        received = 0  # body bytes: a 200 stream that ends with none says nothing, not even why
        try:
            async with client.stream(
                "POST", self._url, content=content, headers=self._headers.reveal(), timeout=self._timeout_obj()
            ) as response:
                self._observe(response.headers)
                if response.status_code >= 300:
                    error = self._status_error(response, await response.aread())
                else:
                    receiving = True
                    async for chunk in response.aiter_bytes():
                        received += len(chunk)
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
                error = None  # only the usage chunk was lost; the answer itself is complete
        if error is not None:
            raise error
        if not received and not parser.saw_finish:
            # llama-cpp-python's server answers a prompt over its window this way (the error is
            # raised inside its event stream); the unary call says why, or answers after all
            for item in _response_items(await self._ask_unary(request)):
                yield item
            return
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


def _response_items(response: ModelResponse) -> list[ModelStreamItem]:
    """A unary response as the stream items that would have carried it."""
    message = response.message
    items: list[ModelStreamItem] = []
    if message.reasoning:
        items.append(ThinkingDelta(text=message.reasoning))
    if message.text:
        items.append(TextDelta(text=message.text))
    for index, call in enumerate(message.tool_calls):
        arguments = call.raw_arguments if call.raw_arguments is not None else json.dumps(dict(call.arguments))
        items.append(ToolCallDelta(index=index, id=call.id, name=call.name, arguments=arguments))
    if not response.usage.is_empty:  # none reported: the harness estimates it, as for any stream
        items.append(StreamUsage(usage=response.usage))
    items.append(
        StreamFinish(finish_reason=response.finish_reason, model=response.model, response_id=response.response_id)
    )
    return items


def _connect_hint(provider: str, base_url: str) -> str:
    """Why a connection may have failed: a local server not started, or no network."""
    host = (urllib.parse.urlsplit(base_url).hostname or "").lower()
    if provider == "ollama" or host in ("localhost", "127.0.0.1", "::1"):
        return "is `ollama serve` running?" if provider == "ollama" else f"is the server at {host} running?"
    return "no network? check the connection (and any proxy) to the provider"
