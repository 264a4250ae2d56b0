"""What every HTTP chat-model adapter shares: its clients, its timeout, tool payloads, transport errors.

``OpenAIChatModel`` and ``AnthropicModel`` speak different wires over the same plumbing: one
``httpx.AsyncClient`` per event loop (``PerLoopClients``) unless the caller supplied one, a single
``httpx.Timeout``, the tool list converted once per tuple the loop passes every turn, and the same
typed, key-free ``ProviderError`` for a transport failure. The adapters subclass this and keep only
their wire.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from .._errors import ProviderError
from ._http import Sealed, SecretHeaders, httpx_module, public_url, tls_context
from ._loop_clients import PerLoopClients
from ._openai_errors import scrub
from ._ratelimit import RateLimitInfo, parse_rate_limit_headers

if TYPE_CHECKING:
    import httpx

    from .._model import ModelRequest
    from ._registry import ProviderSpec

__all__ = ["HTTPAdapter"]


class HTTPAdapter:
    """The client lifecycle and error mapping of an adapter; subclasses set the fields in ``_init_http``."""

    __slots__ = (
        "_clients",
        "_given_client",
        "_headers",
        "_model",
        "_rate_info",
        "_secrets",
        "_spec",
        "_timeout",
        "_timeout_s",
        "_tools_cache",
        "_url",
    )

    _headers: Sealed[dict[str, str]]  # every request's headers, credentials included (set by the subclass)

    if TYPE_CHECKING:

        def _payload(self, request: ModelRequest, *, stream: bool) -> bytes:
            """The exact request body bytes for ``request`` (each wire builds its own)."""

    def _init_http(
        self,
        *,
        spec: ProviderSpec,
        model: str,
        url: str,
        secrets: Sequence[str],
        timeout_s: float,
        http_client: httpx.AsyncClient | None,
    ) -> None:
        self._spec = spec
        self._model = model
        self._url = url
        self._secrets = Sealed(tuple(secrets))
        self._timeout_s = float(timeout_s)
        self._timeout: Any = None
        self._given_client = http_client
        self._clients: PerLoopClients[httpx.AsyncClient] = PerLoopClients(self._new_client)
        self._tools_cache: tuple[object, list[dict[str, Any]]] | None = None
        self._rate_info: RateLimitInfo | None = None

    # ----------------------------------------------------------------------------------- requests by others
    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body a non-streaming call for ``request`` sends, exactly (what a Batch API line carries).

        It holds the prompt and the settings, never a key: credentials travel only in headers.

        Raises:
            ConfigurationError: The request is not JSON-serializable.
        """
        body: dict[str, Any] = json.loads(self._payload(request, stream=False))
        return body

    def request_headers(self) -> Mapping[str, str]:
        """The headers a call sends, credentials included, for a client that calls this host itself.

        The mapping's ``repr`` shows the names only. Keep it in memory: never write it anywhere.
        """
        return SecretHeaders(self._headers.reveal())

    # ----------------------------------------------------------------------------------- identity
    @property
    def model_name(self) -> str:
        return self._model

    @property
    def provider(self) -> str:
        return self._spec.name

    @property
    def base_url(self) -> str:
        return self._spec.base_url

    @property
    def rate_limit_info(self) -> RateLimitInfo | None:
        """The rate-limit state the provider reported on the latest response (``None``: none yet).

        Every response of every call updates it (successes, errors and 429s alike), so a pacer
        shared by many rows (``agent_map``'s ``RateLimits``) can slow down before the provider
        refuses. Limits are per account, so the latest answer is the freshest view of them.
        """
        return self._rate_info

    def _observe(self, headers: Any) -> None:
        info = parse_rate_limit_headers(headers)
        if info is not None:
            self._rate_info = info

    # ----------------------------------------------------------------------------------- client lifecycle
    async def _http(self) -> httpx.AsyncClient:
        """The supplied client, else this model's client for the running loop.

        An httpx connection pool is bound to the loop that opened it, and one model may serve
        several loops at once (``run_sync`` from a thread pool, a notebook's loop and a worker
        thread), so each loop gets its own client and closes it itself.
        """
        if self._given_client is not None:
            return self._given_client
        return await self._clients.get()

    def _new_client(self) -> httpx.AsyncClient:
        # Plain-http hosts (local servers) never do TLS, so skip building a context for them.
        verify: Any = tls_context() if self._url.startswith("https://") else False
        client: httpx.AsyncClient = httpx_module().AsyncClient(
            timeout=self._timeout_obj(), follow_redirects=False, verify=verify
        )
        return client

    def _timeout_obj(self) -> Any:
        """The ``httpx.Timeout`` for every request (also applied to a caller's own client)."""
        if self._timeout is None:
            self._timeout = httpx_module().Timeout(self._timeout_s)
        return self._timeout

    async def aclose(self) -> None:
        """Close this model's HTTP client for the running loop (a supplied ``http_client`` is left open).

        Clients other loops use are theirs to close: closing one from here would cut their
        requests. A loop ended by ``asyncio.run`` or anyio closes its client itself. The model
        stays usable; the next call opens a new client.
        """
        await self._clients.aclose()  # a supplied client never enters the pool

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # ----------------------------------------------------------------------------------- requests
    def _tools_for(self, tools: Sequence[Any], convert: Callable[[Sequence[Any]], list[dict[str, Any]]]) -> Any:
        """``convert(tools)``, once per tuple: the loop passes the same tuple every turn."""
        if not tools:
            return None
        cached = self._tools_cache
        if cached is not None and cached[0] is tools:
            return cached[1]
        payload = convert(tools)
        self._tools_cache = (tools, payload)
        return payload

    def _connect_advice(self) -> str | None:
        """A hint for a refused connection (an adapter for local servers says what to start)."""
        return None

    def _transport_error(self, exc: Exception, *, interrupted: bool) -> ProviderError:
        """A retryable, key-free ``ProviderError`` for a failure below HTTP (or a stream cut short)."""
        httpx = httpx_module()
        detail = scrub(f"{type(exc).__name__}: {exc}", self._secrets.reveal())
        where = f"{self._spec.name} model {self._model!r}"
        if interrupted:
            message, code = f"{where}: the stream was interrupted ({detail})", "stream_interrupted"
        elif isinstance(exc, httpx.TimeoutException):
            message, code = f"{where}: no answer within {self._timeout_s:g}s ({detail})", "timeout"
        elif isinstance(exc, httpx.ConnectError):
            message = f"{where}: cannot connect to {public_url(self._spec.base_url)} ({detail})"
            code = "connect_error"
        else:
            message, code = f"{where}: transport failure ({detail})", "transport_error"
        hint = self._connect_advice() if code == "connect_error" else None
        return ProviderError(message, retryable=True, provider=self._spec.name, model=self._model, code=code, hint=hint)
