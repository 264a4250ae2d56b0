"""Conversation continuity: chat history per thread, short-term memory around a run, session state.

A thread's history is an append-only list of messages. ``StoreChatHistory`` keeps it in any
``Store`` with **one key per message** (``m000000000042`` under the namespace ``(namespace, thread)``)
plus a sequence counter (``seq``) in the same namespace, so an append writes only the new messages
and its cost does not grow with the thread. Measured on ``SQLiteStore`` (one committed transaction
per append): 5,000 single-message appends take about 1 s, flat at ~0.2 ms each, and loading the
5,000 messages about 0.1 s; rewriting one JSON list per append took 9 s for the first 1,000 and
235 s for 5,000.
On the shipped stores an append runs inside the store's atomic ``update`` of the counter, so a
batch (a user turn with its assistant and tool messages) is reserved, written and committed as one
unit: concurrent writers never interleave inside a batch or lose a message, and a crash never
leaves half a turn.

``ShortTermMemory`` loads a thread before a run (optionally trimmed, with repaired cut points) and
saves what the run added; ``MemoryMiddleware`` wires both into ``AgentHarness`` so a follow-up run
on the same thread continues the conversation. ``SessionState`` keeps small JSON values per thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from pydantic import ValidationError

from .._errors import ConfigurationError, StoreError
from .._events import MemoryLoaded, MemorySaved
from .._ids import ThreadId
from .._messages import (
    RETRIEVED_TAG,
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
    dump_messages,
    load_messages,
)
from .._middleware import Middleware
from ..stores._stores import JsonValue, Store, _StoreBase
from ._thread_compaction import ThreadCompaction, is_summary
from ._trim import KeepFirstAndLast, KeepLast, MaxTokens, TrimStrategy, trim_messages

if TYPE_CHECKING:
    from .._context import RunContext
    from .._run import AgentRun

__all__ = [
    "PARTIAL_TAG",
    "ChatHistory",
    "InMemoryChatHistory",
    "MemoryMiddleware",
    "SessionState",
    "ShortTermMemory",
    "StoreChatHistory",
    "get_state",
    "set_state",
    "update_state",
]

PARTIAL_TAG = "partial"
"""Tag the loop puts on streamed text of a run that did not finish; such text is never saved."""

_MESSAGE_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolMessage)
_SEQ = "seq"
_PREFIX = "m"
_WIDTH = 12  # zero-padded so keys sort in append order up to 10**12 messages per thread


def _thread(thread_id: object) -> str:
    if not isinstance(thread_id, str):
        raise ConfigurationError(f"thread_id must be a str, got {type(thread_id).__name__}")
    return str.__str__(ThreadId(thread_id))  # the id rules of RunConfig; InvalidIdError otherwise


def _batch(messages: Iterable[Message]) -> list[Message]:
    if isinstance(messages, (str, *_MESSAGE_TYPES)):
        raise ConfigurationError("messages must be a sequence of messages, not a single message or str")
    batch = list(messages)
    for message in batch:
        if not isinstance(message, _MESSAGE_TYPES):
            raise ConfigurationError(f"chat history holds messages only, got {type(message).__name__}")
    return batch


def _namespace_segment(namespace: object) -> str:
    if not isinstance(namespace, str) or not namespace:
        raise ConfigurationError(f"namespace must be a non-empty str, got {namespace!r}")
    return namespace


# ------------------------------------------------------------------------------------------ histories
@runtime_checkable
class ChatHistory(Protocol):
    """Messages per thread, in append order; synchronous and thread-safe like the stores under it."""

    def load(self, thread_id: str) -> list[Message]:
        """The thread's messages, oldest first (empty for an unknown thread)."""
        ...

    def append(self, thread_id: str, messages: Sequence[Message]) -> None:
        """Add messages to the end of the thread, as one unit."""
        ...

    def replace(self, thread_id: str, messages: Sequence[Message]) -> None:
        """Make ``messages`` the whole thread (e.g. after summarizing it)."""
        ...

    def clear(self, thread_id: str) -> None:
        """Forget the thread."""
        ...

    def threads(self) -> list[str]:
        """Threads that hold at least one message, sorted."""
        ...


class InMemoryChatHistory:
    """A process-local ``ChatHistory``; messages are immutable, so they are shared, not copied."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: dict[str, list[Message]] = {}

    def load(self, thread_id: str) -> list[Message]:
        key = _thread(thread_id)
        with self._lock:
            return list(self._threads.get(key, ()))

    def append(self, thread_id: str, messages: Sequence[Message]) -> None:
        key, batch = _thread(thread_id), _batch(messages)
        if batch:
            with self._lock:
                self._threads.setdefault(key, []).extend(batch)

    def replace(self, thread_id: str, messages: Sequence[Message]) -> None:
        key, batch = _thread(thread_id), _batch(messages)
        with self._lock:
            if batch:
                self._threads[key] = batch
            else:
                self._threads.pop(key, None)

    def clear(self, thread_id: str) -> None:
        key = _thread(thread_id)
        with self._lock:
            self._threads.pop(key, None)

    def threads(self) -> list[str]:
        with self._lock:
            return sorted(k for k, v in self._threads.items() if v)

    def __repr__(self) -> str:
        return f"InMemoryChatHistory(threads={len(self.threads())})"


class StoreChatHistory:
    """A ``ChatHistory`` in a ``Store``: durable on ``SQLiteStore``, one key per message.

    Args:
        store: Where to keep the messages (shared with other features; only ``namespace`` is used).
        namespace: The first namespace segment; each thread lives under ``(namespace, thread_id)``.

    Raises:
        ConfigurationError: ``store`` is not a ``Store`` or ``namespace`` is not a non-empty str.
    """

    def __init__(self, store: Store, *, namespace: str = "threads") -> None:
        if not isinstance(store, Store):
            raise ConfigurationError(f"{type(store).__name__} does not implement the Store protocol")
        self.store = store
        self.namespace = _namespace_segment(namespace)
        # The shipped stores let an update callback use the store (re-entrant lock, one transaction),
        # which makes a whole batch atomic; any other store gets reserve-then-write.
        self._nested_writes = isinstance(store, _StoreBase)

    def _ns(self, thread_id: str) -> tuple[str, str]:
        return (self.namespace, _thread(thread_id))

    def load(self, thread_id: str) -> list[Message]:
        ns = self._ns(thread_id)
        records = [value for _, value in self.store.items(ns, prefix=_PREFIX)]
        try:
            return load_messages(records)
        except ValidationError as exc:
            raise StoreError(
                f"thread {ns[1]!r} in {self.store!r} holds a record that is not a message: {exc.errors()[0]['msg']}",
                hint="the history was written by an incompatible version; clear or migrate the thread",
            ) from None

    def append(self, thread_id: str, messages: Sequence[Message]) -> None:
        ns, batch = self._ns(thread_id), _batch(messages)
        if not batch:
            return
        records = dump_messages(batch)
        count = len(records)
        store = self.store
        if self._nested_writes:

            def write(seq: JsonValue) -> int:
                start = _counter(seq)
                for offset, record in enumerate(records):
                    store.put(ns, _key(start + offset), record)
                return start + count

            store.update(ns, _SEQ, write, default=0)
        else:
            end = _counter(store.update(ns, _SEQ, lambda seq: _counter(seq) + count, default=0))
            for offset, record in enumerate(records):
                store.put(ns, _key(end - count + offset), record)

    def replace(self, thread_id: str, messages: Sequence[Message]) -> None:
        ns, batch = self._ns(thread_id), _batch(messages)
        if not batch:
            self.store.clear(ns)
            return
        records = dump_messages(batch)
        store = self.store

        def rewrite(_: JsonValue) -> int:
            store.clear(ns)
            for seq, record in enumerate(records):
                store.put(ns, _key(seq), record)
            return len(records)

        if self._nested_writes:
            store.update(ns, _SEQ, rewrite, default=0)
        else:
            store.put(ns, _SEQ, rewrite(None))

    def clear(self, thread_id: str) -> None:
        self.store.clear(self._ns(thread_id))

    def threads(self) -> list[str]:
        return [ns[1] for ns in self.store.namespaces(prefix=self.namespace) if len(ns) == 2]

    def __repr__(self) -> str:
        return f"StoreChatHistory({self.store!r}, namespace={self.namespace!r})"


def _key(seq: int) -> str:
    return f"{_PREFIX}{seq:0{_WIDTH}d}"


def _counter(value: JsonValue) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise StoreError(f"chat history sequence counter is corrupt: {value!r}")
    return value


# ------------------------------------------------------------------------------------------ short-term memory
def _require_thread(ctx: RunContext[Any], what: str) -> str:
    thread_id = ctx.thread_id
    if thread_id is None:
        raise ConfigurationError(
            f"{what} needs a thread, but run {ctx.run_id} has no thread_id",
            hint="pass config=RunConfig(thread_id=...) so the run knows which conversation it continues",
        )
    return str.__str__(thread_id)


class ShortTermMemory:
    """A thread's recent conversation, loaded before a run and saved after it (``scope == "short_term"``).

    Args:
        history: Where the thread's messages live.
        max_messages: Keep only the last ``max_messages`` non-system messages when loading.
        trim: A further ``TrimStrategy`` applied when loading (e.g. ``MaxTokens``).
        compaction: Compacts the stored thread when it is loaded and has grown too long, persisting
            the summary in the thread (``ThreadCompaction``); applied before ``max_messages`` and ``trim``.

    Cut points are repaired by ``trim_messages``: a loaded window keeps earlier turns whole (never
    an answer without its question) and never starts with tool results whose call was cut off.
    """

    scope: Literal["short_term"] = "short_term"  # a MemoryScope; LongTermMemory's is "long_term"

    def __init__(
        self,
        history: ChatHistory,
        *,
        max_messages: int | None = None,
        trim: TrimStrategy | None = None,
        compaction: ThreadCompaction | None = None,
    ) -> None:
        if not isinstance(history, ChatHistory):
            raise ConfigurationError(f"{type(history).__name__} does not implement the ChatHistory protocol")
        limit: object = max_messages
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ConfigurationError(f"max_messages must be an int >= 1 or None, got {max_messages!r}")
        if trim is not None and not isinstance(trim, KeepLast | KeepFirstAndLast | MaxTokens):
            raise ConfigurationError(f"trim must be a TrimStrategy (KeepLast, ...), got {type(trim).__name__}")
        if compaction is not None and not isinstance(compaction, ThreadCompaction):
            raise ConfigurationError(f"compaction must be a ThreadCompaction, got {type(compaction).__name__}")
        self.history = history
        self.max_messages = max_messages
        self.trim = trim
        self.compaction = compaction

    async def load(self, ctx: RunContext[Any]) -> list[Message]:
        """The run's thread, trimmed as configured; emits ``memory.loaded``."""
        thread_id = _require_thread(ctx, "ShortTermMemory.load")
        messages = self.history.load(thread_id)
        if self.compaction is not None:
            messages = await self.compaction.compact_if_needed(ctx, self.history, thread_id, messages)
        if self.max_messages is not None:
            messages = trim_messages(messages, KeepLast(n=self.max_messages))
        if self.trim is not None:
            messages = trim_messages(messages, self.trim)
        ctx.emit(MemoryLoaded, thread_id=thread_id, messages=len(messages))
        return messages

    async def save(self, ctx: RunContext[Any], new_messages: Sequence[Message]) -> None:
        """Append this run's new messages to its thread; emits ``memory.saved``."""
        thread_id = _require_thread(ctx, "ShortTermMemory.save")
        batch = _batch(new_messages)
        self.history.append(thread_id, batch)
        ctx.emit(MemorySaved, thread_id=thread_id, messages=len(batch))

    def __repr__(self) -> str:
        return f"ShortTermMemory({self.history!r}, max_messages={self.max_messages!r}, trim={self.trim!r})"


def _savable(message: Message) -> bool:
    tags = message.tags
    return not isinstance(message, SystemMessage) and PARTIAL_TAG not in tags and RETRIEVED_TAG not in tags


class MemoryMiddleware(Middleware):
    """Continues a thread across runs: loads its history before the run, saves what the run added.

    ``before_agent`` inserts the loaded history after the run's leading system messages (history
    system messages are dropped when the run brings its own; input that already starts with the
    history is not doubled). ``after_agent`` saves the run's input and the assistant and tool
    messages it produced; never the loaded history, system messages, retrieved context or partial
    text. A failed or cancelled run saves nothing: ``after_agent`` runs only on completion, so the
    thread never records a turn that did not finish.

    Args:
        memory: The short-term memory to load and save.
        root_only: Skip nested runs (sub-agents inherit the parent's thread and must not write to it).
    """

    def __init__(self, memory: ShortTermMemory, *, root_only: bool = True) -> None:
        if not isinstance(memory, ShortTermMemory):
            raise ConfigurationError(f"memory must be a ShortTermMemory, got {type(memory).__name__}")
        self.memory = memory
        self.root_only = root_only
        self._loaded: dict[str, list[Message]] = {}  # run id -> the history objects placed in its transcript

    async def before_agent(self, ctx: RunContext[Any], messages: list[Message]) -> None:
        if self.root_only and ctx.depth > 0:
            return
        history = await self.memory.load(ctx)
        lead = 0
        while lead < len(messages) and isinstance(messages[lead], SystemMessage):
            lead += 1
        if lead:  # the run brings its own system prompt: keep only the thread's summaries
            history = [m for m in history if not isinstance(m, SystemMessage) or is_summary(m)]
        if history and messages[lead : lead + len(history)] == history:
            loaded = messages[lead : lead + len(history)]  # the caller passed the transcript already
        else:
            messages[lead:lead] = history
            loaded = history
        self._loaded[ctx.run_id] = loaded

    async def after_agent(self, ctx: RunContext[Any], run: AgentRun) -> None:
        loaded = self._loaded.pop(ctx.run_id, None)
        if loaded is None:
            return
        transcript = run.messages
        start = _find_block(transcript, loaded)
        if start is not None:
            rest = transcript[:start] + transcript[start + len(loaded) :]
        else:  # another middleware rewrote the transcript: fall back to identity
            ids = {id(m) for m in loaded}
            rest = [m for m in transcript if id(m) not in ids]
        await self.memory.save(ctx, [m for m in rest if _savable(m)])

    async def on_error(self, ctx: RunContext[Any], error: BaseException) -> None:
        self._loaded.pop(ctx.run_id, None)

    def __repr__(self) -> str:
        return f"MemoryMiddleware({self.memory!r})"


def _find_block(transcript: Sequence[Message], block: Sequence[Message]) -> int | None:
    """Where ``block`` sits in ``transcript``, by object identity (equal messages may repeat)."""
    if not block:
        return 0
    first, size = block[0], len(block)
    for i in range(len(transcript) - size + 1):
        if transcript[i] is first and all(transcript[i + j] is block[j] for j in range(1, size)):
            return i
    return None


# ------------------------------------------------------------------------------------------ session state
class SessionState:
    """Small JSON values per thread (a user's preferences, a notebook's variables), kept in a store.

    Args:
        store: Where the values live; on ``SQLiteStore`` they survive restarts.
        namespace: The first namespace segment; each thread's values live under ``(namespace, thread_id)``.
    """

    def __init__(self, store: Store, *, namespace: str = "state") -> None:
        if not isinstance(store, Store):
            raise ConfigurationError(f"{type(store).__name__} does not implement the Store protocol")
        self.store = store
        self.namespace = _namespace_segment(namespace)

    def _ns(self, thread_id: str) -> tuple[str, str]:
        return (self.namespace, _thread(thread_id))

    def get_state(self, thread_id: str, key: str, default: JsonValue = None) -> JsonValue:
        """The value under ``key`` (a fresh copy), or ``default``."""
        return self.store.get(self._ns(thread_id), key, default)

    def set_state(self, thread_id: str, key: str, value: object) -> None:
        """Store a JSON value; anything JSON cannot hold is a ``ConfigurationError``."""
        self.store.put(self._ns(thread_id), key, value)

    def update_state(
        self, thread_id: str, key: str, fn: Callable[[JsonValue], object], *, default: JsonValue = None
    ) -> JsonValue:
        """Atomically replace the value with ``fn(current or default)`` and return the new value."""
        return self.store.update(self._ns(thread_id), key, fn, default=default)

    def delete_state(self, thread_id: str, key: str) -> bool:
        """Remove ``key``; says whether it existed."""
        return self.store.delete(self._ns(thread_id), key)

    def state(self, thread_id: str) -> dict[str, JsonValue]:
        """Every value of the thread, by key."""
        return dict(self.store.items(self._ns(thread_id)))

    def clear(self, thread_id: str) -> None:
        """Forget every value of the thread."""
        self.store.clear(self._ns(thread_id))

    def __repr__(self) -> str:
        return f"SessionState({self.store!r}, namespace={self.namespace!r})"


def _session(ctx: RunContext[Any], what: str) -> tuple[SessionState, str]:
    return SessionState(ctx.stores.default), _require_thread(ctx, what)


def get_state(ctx: RunContext[Any], key: str, default: JsonValue = None) -> JsonValue:
    """The run's thread's value under ``key`` from the context's default store, or ``default``."""
    state, thread_id = _session(ctx, "get_state")
    return state.get_state(thread_id, key, default)


def set_state(ctx: RunContext[Any], key: str, value: object) -> None:
    """Store a JSON value for the run's thread in the context's default store."""
    state, thread_id = _session(ctx, "set_state")
    state.set_state(thread_id, key, value)


def update_state(
    ctx: RunContext[Any], key: str, fn: Callable[[JsonValue], object], *, default: JsonValue = None
) -> JsonValue:
    """Atomically update the run's thread's value under ``key``; returns the new value."""
    state, thread_id = _session(ctx, "update_state")
    return state.update_state(thread_id, key, fn, default=default)
