"""Embedding models and the ``Retriever`` that pulls relevant snippets into a model's context.

In the recursive-LM framing, retrieval is how an agent reads a large external environment a few
snippets at a time instead of stuffing all of it into one window. ``Retriever.index`` embeds
documents into a ``VectorStore``; ``retrieve`` embeds a query and returns the closest documents;
``retrieve_messages`` wraps them as user messages tagged ``RETRIEVED_TAG``, which the
context-pressure chain drops first when a request does not fit.

``OpenAIEmbeddingModel`` speaks ``POST {base}/embeddings`` over httpx, with the chat adapter's key
handling, secrecy and error mapping (httpx is imported on first call). ``MockEmbeddingModel`` is a
deterministic bag-of-words hasher for tests and offline notebooks.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import math
import re
import sys
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Protocol, Self, runtime_checkable

from .._errors import ConfigurationError, ProviderError
from .._retry import RetryPolicy, call_with_retry
from .._usage import Usage
from ..providers import OpenAIChatModel, ProviderSpec
from ..providers._openai_errors import malformed

if TYPE_CHECKING:
    import httpx


__all__ = ["EmbeddingModel", "EmbeddingResult", "MockEmbeddingModel", "OpenAIEmbeddingModel"]

_MAX_BATCH: Final = 2048  # OpenAI's cap on inputs per embeddings request


# ------------------------------------------------------------------------------------------ protocol
@runtime_checkable
class EmbeddingModel(Protocol):
    """Turns texts into vectors; similar texts get vectors with a high cosine similarity."""

    @property
    def model_name(self) -> str: ...
    @property
    def dimensions(self) -> int | None: ...
    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...
    async def embed_query(self, text: str) -> list[float]: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class EmbeddingResult:
    """Vectors (in input order) with the tokens they cost and the model that served them."""

    vectors: list[list[float]]
    usage: Usage
    model: str


def _texts(texts: object) -> list[str]:
    if isinstance(texts, str):
        raise ConfigurationError("embed() takes a sequence of texts; use embed_query() for a single text")
    if not isinstance(texts, Iterable):
        raise ConfigurationError(f"texts must be a sequence of str, got {type(texts).__name__}")
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise ConfigurationError(f"texts[{i}] must be a str, got {type(text).__name__}")
    return items


def _positive_int(name: str, value: object, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (maximum and value > maximum):
        bound = f"between 1 and {maximum}" if maximum else ">= 1"
        raise ConfigurationError(f"{name} must be an int {bound}, got {value!r}")
    return value


# ------------------------------------------------------------------------------------------ mock
_WORD: Final = re.compile(r"\w+")
_STOP_WORDS: Final = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to was were will with".split()
)


@functools.lru_cache(maxsize=65536)
def _bucket(token: str, dims: int) -> int:
    digest = hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % dims


class MockEmbeddingModel:
    """A deterministic offline embedder: lowercase word counts hashed into buckets, L2-normalised.

    Texts sharing words score higher than texts that do not, the same on every machine and run
    (the hash is BLAKE2, not Python's salted ``hash``). Common English stop words are ignored unless
    a text has nothing else. A text without words embeds to the zero vector (similar to nothing).

    Attributes:
        calls: Every batch of texts embedded, in order (for asserting what was, or was not, embedded).
    """

    __slots__ = ("_dims", "_last_usage", "_name", "calls")

    def __init__(self, dimensions: int = 64, *, model_name: str = "mock-embedding") -> None:
        self._dims = _positive_int("dimensions", dimensions)
        name: object = model_name
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"model_name must be a non-empty string, got {model_name!r}")
        self._name = model_name
        self._last_usage: Usage | None = None
        self.calls: list[list[str]] = []

    @property
    def model_name(self) -> str:
        return self._name

    @property
    def dimensions(self) -> int:
        return self._dims

    @property
    def last_usage(self) -> Usage | None:
        """Words counted by the last ``embed`` call, as input tokens."""
        return self._last_usage

    def vector(self, text: str) -> list[float]:
        """The embedding of ``text``, computed synchronously."""
        words = _WORD.findall(text.lower())
        tokens = [word for word in words if word not in _STOP_WORDS] or words
        counts = [0.0] * self._dims
        for token in tokens:
            counts[_bucket(token, self._dims)] += 1.0
        norm = math.hypot(*counts)
        return [c / norm for c in counts] if norm else counts

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        items = _texts(texts)
        self.calls.append(items)
        self._last_usage = Usage(input_tokens=sum(len(_WORD.findall(text)) for text in items))
        return [self.vector(text) for text in items]

    async def embed_query(self, text: str) -> list[float]:
        (vector,) = await self.embed([text])
        return vector

    def __repr__(self) -> str:
        return f"MockEmbeddingModel(dimensions={self._dims}, model_name={self._name!r})"


# ------------------------------------------------------------------------------------------ openai
class OpenAIEmbeddingModel:
    """An ``EmbeddingModel`` for OpenAI's embeddings endpoint and compatible hosts (Ollama, Together, ...).

    Texts are sent in batches of ``batch_size``, one request after another, and the vectors come
    back in input order whatever order the host lists them in (each carries its ``index``). The
    key is handled as in ``OpenAIChatModel``: read from the provider's env var, never shown in
    ``repr`` or errors. Errors are the chat adapter's: ``ProviderError`` with ``retryable`` (429 that
    is not a quota, 5xx, network), ``ModelNotFound``, ``ContextLimitError`` for an over-long text.

    Args:
        model: The embedding model id.
        base_url: Overrides the provider's API root (``{base_url}/embeddings`` is called).
        api_key: The key; defaults to the provider's env var.
        provider: A built-in provider name or a ``ProviderSpec``.
        http_client: An ``httpx.AsyncClient`` to use (and not close); by default one is created on
            first call, per event loop, and closed by ``aclose()``.
        batch_size: Texts per request (OpenAI accepts up to 2048).
        dimensions: Ask for shorter vectors (``text-embedding-3-*`` support it); sent as ``dimensions``.
        timeout_s: Network timeout for each request.
        retry: Retries each batch on retryable errors; ``None`` makes one attempt per batch.
        extra_headers: Extra headers for every request, treated as secret like the key.

    Raises:
        ConfigurationError: A bad argument, an unknown provider, or a missing required key.
    """

    __slots__ = (
        "_batch_size",
        "_dims",
        "_last_usage",
        "_observed_dims",
        "_retry",
        "_total_usage",
        "_transport",
        "_url",
    )

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        provider: str | ProviderSpec = "openai",
        http_client: httpx.AsyncClient | None = None,
        batch_size: int = 256,
        dimensions: int | None = None,
        timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        # The chat adapter owns the key, the sealed headers, the per-loop client and the error mapping;
        # an embeddings client needs exactly those, so it holds one instead of repeating them.
        self._transport = OpenAIChatModel(
            model,
            base_url=base_url,
            api_key=api_key,
            provider=provider,
            http_client=http_client,
            timeout_s=timeout_s,
            extra_headers=extra_headers,
        )
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigurationError(f"retry must be a RetryPolicy or None, got {type(retry).__name__}")
        self._url = self._transport.spec.endpoint("embeddings")
        self._batch_size = _positive_int("batch_size", batch_size, _MAX_BATCH)
        self._dims = None if dimensions is None else _positive_int("dimensions", dimensions)
        self._observed_dims: int | None = None
        self._retry = retry
        self._last_usage: Usage | None = None
        self._total_usage = Usage()

    # ----------------------------------------------------------------------------------- identity
    @property
    def model_name(self) -> str:
        return self._transport.model_name

    @property
    def provider(self) -> str:
        return self._transport.provider

    @property
    def spec(self) -> ProviderSpec:
        """The provider spec in use (with ``base_url`` overridden when one was given)."""
        return self._transport.spec

    @property
    def dimensions(self) -> int | None:
        """The requested length, else the length the host returned last, else ``None`` before any call."""
        return self._dims if self._dims is not None else self._observed_dims

    @property
    def last_usage(self) -> Usage | None:
        """Tokens the last ``embed`` call cost, summed over its batches (``None`` before any call)."""
        return self._last_usage

    @property
    def total_usage(self) -> Usage:
        """Tokens every call on this object has cost."""
        return self._total_usage

    def __repr__(self) -> str:
        return repr(self._transport).replace("OpenAIChatModel(", "OpenAIEmbeddingModel(", 1)

    __str__ = __repr__

    async def aclose(self) -> None:
        """Close the HTTP client if this model created it; the model stays usable (a new one opens on demand)."""
        await self._transport.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # ----------------------------------------------------------------------------------- calls
    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for ``texts``, in order (see ``embed_with_usage``)."""
        return (await self.embed_with_usage(texts)).vectors

    async def embed_query(self, text: str) -> list[float]:
        (vector,) = await self.embed([text])
        return vector

    async def embed_with_usage(self, texts: Sequence[str]) -> EmbeddingResult:
        """Vectors for ``texts`` in input order, with the tokens they cost (summed over batches).

        An empty sequence makes no request.

        Raises:
            ProviderError: HTTP, transport or format failure (``retryable`` says whether to retry).
            ModelNotFound: The host does not know the model.
            ContextLimitError: A text is longer than the model accepts.
        """
        items = _texts(texts)
        vectors: list[list[float]] = []
        usage = Usage()
        served = self.model_name
        for start in range(0, len(items), self._batch_size):
            attempt = functools.partial(self._request, items[start : start + self._batch_size])
            if self._retry is None:
                batch, batch_usage, served = await attempt()
            else:
                batch, batch_usage, served = await call_with_retry(attempt, policy=self._retry)
            vectors.extend(batch)
            usage += batch_usage
        if vectors:
            self._observed_dims = len(vectors[0])
        self._last_usage = usage
        self._total_usage += usage
        return EmbeddingResult(vectors=vectors, usage=usage, model=served)

    async def _request(self, batch: list[str]) -> tuple[list[list[float]], Usage, str]:
        transport = self._transport
        body: dict[str, Any] = {"model": transport.model_name, "input": batch}
        if self._dims is not None:
            body["dimensions"] = self._dims
        try:
            content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        except ValueError as exc:  # lone surrogates cannot be encoded as UTF-8
            raise ConfigurationError(f"a text cannot be sent as UTF-8: {exc}") from None
        data = await transport._post_json(self._url, content, result_key="data")
        return self._parse(data, len(batch))

    def _malformed(self, detail: str) -> ProviderError:
        return malformed(self._transport.spec, self._transport.model_name, detail)

    def _parse(self, data: object, count: int) -> tuple[list[list[float]], Usage, str]:
        """Vectors in input order (by each item's ``index``), usage and the served model name."""
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise self._malformed("the response has no 'data' list")
        if len(items) != count:
            raise self._malformed(f"asked for {count} embeddings, got {len(items)}")
        ordered: list[list[float] | None] = [None] * count
        for position, item in enumerate(items):
            index = item.get("index", position) if isinstance(item, dict) else None
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
                raise self._malformed(f"data[{position}] has no valid 'index'")
            if ordered[index] is not None:
                raise self._malformed(f"index {index} appears twice in the response")
            ordered[index] = self._vector(item.get("embedding"), position)
        vectors = [vector for vector in ordered if vector is not None]
        lengths = {len(vector) for vector in vectors}
        expected = {self._dims} if self._dims is not None else lengths
        if len(lengths) != 1:
            raise self._malformed(f"the embeddings have different lengths: {sorted(lengths)}")
        if lengths != expected:  # the host ignored `dimensions`; asking again will not change that
            raise ProviderError(
                f"{self.provider} embedding model {self.model_name!r} returned {lengths.pop()} dimensions, "
                f"not the {self._dims} requested",
                provider=self.provider,
                model=self.model_name,
                code="dimensions_mismatch",
                hint="this host may not support `dimensions`; construct the model without it",
            )
        assert isinstance(data, dict)
        served = data.get("model")
        return vectors, _usage(data.get("usage")), served if isinstance(served, str) and served else self.model_name

    def _vector(self, raw: object, position: int) -> list[float]:
        if isinstance(raw, str):  # encoding_format="base64": packed little-endian float32
            values = array("f")
            try:
                values.frombytes(base64.b64decode(raw, validate=True))
            except ValueError:
                raise self._malformed(f"data[{position}].embedding is not valid base64") from None
            if sys.byteorder == "big":
                values.byteswap()
            vector = values.tolist()
        elif isinstance(raw, list) and all(type(x) is float or type(x) is int for x in raw):
            vector = [float(x) for x in raw]
        else:
            raise self._malformed(f"data[{position}].embedding is not a list of numbers")
        if not vector or (not math.isfinite(sum(vector)) and not all(map(math.isfinite, vector))):
            raise self._malformed(f"data[{position}].embedding is empty or not finite")
        return vector


def _usage(raw: object) -> Usage:
    """Embeddings bill input only: ``prompt_tokens`` (or ``total_tokens`` when a host sends just that)."""
    if not isinstance(raw, dict):
        return Usage()
    for key in ("prompt_tokens", "total_tokens"):
        value = raw.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return Usage(input_tokens=value)
    return Usage()


# ------------------------------------------------------------------------------------------ retriever
