from __future__ import annotations

import dataclasses
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from tinyagents_nb.harness import (
    AssistantMessage,
    ConfigurationError,
    JsonBlock,
    ModelRequest,
    ModelResponse,
    StoreError,
    SystemMessage,
    TextBlock,
    ToolCall,
    ToolMessage,
    ToolSchema,
    Usage,
    UserMessage,
)
from tinyagents_nb.harness.models import ResponseFormat
from tinyagents_nb.harness.stores import (
    CacheRegistry,
    InMemoryResponseCache,
    InMemoryStore,
    ResponseCache,
    ResponseCacheStats,
    SQLiteResponseCache,
    SQLiteStore,
    Store,
    StoreResponseCache,
    cache_key,
)

REPO = Path(__file__).resolve().parents[3]
NS = "response-cache"

WEATHER = ToolSchema(
    name="weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def base_request() -> ModelRequest:
    return ModelRequest(
        messages=[SystemMessage(text="Be brief."), UserMessage(text="Weather in Oslo?")],
        tools=[WEATHER],
        tool_choice="auto",
        response_format=ResponseFormat(type="json_schema", name="w", schema={"type": "object"}),
        model="gpt-4o-mini",
        max_output_tokens=256,
        temperature=0.2,
        settings={"seed": 7, "top_p": 0.9},
        thread_id="thread-a",
    )


def rich_response() -> ModelResponse:
    return ModelResponse(
        message=AssistantMessage(
            text="Checking… ✓ 日本",
            tool_calls=[
                ToolCall(id="c1", name="weather", arguments={"city": "Oslo", "units": ["C", None], "n": 1.5}),
                ToolCall(id="c2", name="broken", raw_arguments="{not json"),
            ],
            reasoning="The user wants weather; call the tool.",
            blocks=[TextBlock(text="extra"), JsonBlock(data={"k": [1, 2]})],
        ),
        usage=Usage(
            input_tokens=120, output_tokens=40, cached_input_tokens=100, reasoning_tokens=12, cache_write_tokens=5
        ),
        finish_reason="tool_calls",
        model="gpt-4o-mini-2024-07-18",
        provider="openai",
    )


def text_response(text: str) -> ModelResponse:
    return ModelResponse(message=AssistantMessage(text=text), usage=Usage(input_tokens=3, output_tokens=1))


# ------------------------------------------------------------------------------------------ cache_key
def test_key_is_sha256_hex_and_deterministic() -> None:
    key = cache_key(base_request(), model="openai:gpt-4o-mini")
    assert len(key) == 64
    assert int(key, 16) >= 0
    assert cache_key(base_request(), model="openai:gpt-4o-mini") == key


def test_key_is_stable_across_processes() -> None:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from tests.harness.stores.test_response_cache import base_request\n"
        "from tinyagents_nb.harness.stores import cache_key\n"
        "print(cache_key(base_request(), model='openai:gpt-4o-mini'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(REPO)], capture_output=True, text=True, check=True, timeout=60, cwd=REPO
    )
    assert out.stdout.strip() == cache_key(base_request(), model="openai:gpt-4o-mini")


def test_key_ignores_thread_and_mapping_order_and_int_vs_float_temperature() -> None:
    req = base_request()
    key = cache_key(req, model="m")
    assert cache_key(dataclasses.replace(req, thread_id="other-thread"), model="m") == key
    assert cache_key(dataclasses.replace(req, thread_id=None), model="m") == key
    reordered = dataclasses.replace(req, settings=MappingProxyType({"top_p": 0.9, "seed": 7}))
    assert cache_key(reordered, model="m") == key
    assert cache_key(dataclasses.replace(req, temperature=1), model="m") == cache_key(
        dataclasses.replace(req, temperature=1.0), model="m"
    )


def _variants() -> dict[str, tuple[ModelRequest, str]]:
    req = base_request()
    r = dataclasses.replace
    rf = req.response_format
    assert rf is not None
    return {
        "model": (req, "openai:gpt-4o"),
        "model_hint": (r(req, model="gpt-4o"), "m"),
        "message text": (r(req, messages=[SystemMessage(text="Be brief."), UserMessage(text="Weather in Rome?")]), "m"),
        "message role": (r(req, messages=[UserMessage(text="Be brief."), UserMessage(text="Weather in Oslo?")]), "m"),
        "extra message": (r(req, messages=[*req.messages, AssistantMessage(text="ok")]), "m"),
        "tool message": (
            r(req, messages=[*req.messages, ToolMessage(tool_call_id="c", name="weather", text="sunny")]),
            "m",
        ),
        "tool name": (r(req, tools=[r(WEATHER, name="weather2")]), "m"),
        "tool description": (r(req, tools=[r(WEATHER, description="Other.")]), "m"),
        "tool parameters": (r(req, tools=[r(WEATHER, parameters={"type": "object", "properties": {}})]), "m"),
        "tool strict": (r(req, tools=[r(WEATHER, strict=True)]), "m"),
        "no tools": (r(req, tools=()), "m"),
        "tool_choice": (r(req, tool_choice="required"), "m"),
        "tool_choice none": (r(req, tool_choice=None), "m"),
        "response_format type": (r(req, response_format=r(rf, type="json_object")), "m"),
        "response_format name": (r(req, response_format=r(rf, name="x")), "m"),
        "response_format schema": (r(req, response_format=r(rf, schema={"type": "array"})), "m"),
        "response_format strict": (r(req, response_format=r(rf, strict=False)), "m"),
        "no response_format": (r(req, response_format=None), "m"),
        "max_output_tokens": (r(req, max_output_tokens=257), "m"),
        "temperature": (r(req, temperature=0.3), "m"),
        "no temperature": (r(req, temperature=None), "m"),
        "settings value": (r(req, settings={"seed": 8, "top_p": 0.9}), "m"),
        "settings key": (r(req, settings={"seed": 7}), "m"),
    }


@pytest.mark.parametrize("field", list(_variants()))
def test_key_is_sensitive_to_every_included_field(field: str) -> None:
    variant, model = _variants()[field]
    assert cache_key(variant, model=model) != cache_key(base_request(), model="m")


def test_all_variants_give_distinct_keys() -> None:
    keys = {cache_key(req, model=model) for req, model in _variants().values()}
    assert len(keys) == len(_variants())


@pytest.mark.parametrize(
    "settings",
    [{"obj": object()}, {"nan": float("nan")}, {"inf": float("inf")}, {"set": {1, 2}}],
    ids=["object", "nan", "inf", "set"],
)
def test_unkeyable_request_raises_configuration_error(settings: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match="cannot be cache-keyed"):
        cache_key(dataclasses.replace(base_request(), settings=settings), model="m")


# ------------------------------------------------------------------------------------------ in memory
def test_in_memory_hit_returns_the_same_frozen_object_and_counts() -> None:
    cache = InMemoryResponseCache()
    assert isinstance(cache, ResponseCache)
    response = rich_response()
    assert cache.get("k") is None
    cache.put("k", response)
    assert cache.get("k") is response
    assert "k" in cache
    assert len(cache) == 1
    assert cache.stats == ResponseCacheStats(hits=1, misses=1, puts=1, evictions=0)
    assert cache.stats.hit_rate == 0.5
    cache.clear()
    assert len(cache) == 0
    assert cache.get("k") is None


def test_in_memory_lru_evicts_least_recently_used() -> None:
    cache = InMemoryResponseCache(max_entries=2)
    a, b, c = text_response("a"), text_response("b"), text_response("c")
    cache.put("a", a)
    cache.put("b", b)
    assert cache.get("a") is a  # a is now most recent
    cache.put("c", c)
    assert "b" not in cache
    assert cache.get("a") is a
    assert cache.get("c") is c
    cache.put("a", text_response("a2"))  # overwrite refreshes, never grows past the cap
    cache.put("d", text_response("d"))
    assert sorted(k for k in "abcd" if k in cache) == ["a", "d"]
    assert cache.stats.evictions == 2


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10", None])
def test_in_memory_rejects_bad_max_entries(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_entries"):
        InMemoryResponseCache(max_entries=bad)


def test_in_memory_rejects_bad_keys_and_values() -> None:
    cache = InMemoryResponseCache()
    with pytest.raises(ConfigurationError):
        cache.put("", text_response("x"))
    with pytest.raises(ConfigurationError):
        cache.get(123)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="ModelResponse"):
        cache.put("k", AssistantMessage(text="x"))  # type: ignore[arg-type]


def test_in_memory_is_thread_safe() -> None:
    cache = InMemoryResponseCache(max_entries=50)
    response = text_response("x")

    def work(offset: int) -> None:
        for i in range(300):
            cache.put(f"k{(offset + i) % 120}", response)
            cache.get(f"k{i % 120}")

    threads = [threading.Thread(target=work, args=(n * 7,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = cache.stats
    assert len(cache) == 50
    assert stats.puts == 1800
    assert stats.hits + stats.misses == 1800
    assert 0 < stats.evictions <= stats.puts - 50


# ------------------------------------------------------------------------------------------ store-backed
@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s: Store = InMemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "cache.sqlite")
    yield s
    s.close()


def test_store_cache_round_trip_is_lossless(store: Store) -> None:
    cache = StoreResponseCache(store)
    assert isinstance(cache, ResponseCache)
    original = rich_response()
    cache.put("k", original)
    first, second = cache.get("k"), cache.get("k")
    assert first == original
    assert first is not second  # every read is a fresh object
    assert first is not None
    assert first.message.tool_calls[1].raw_arguments == "{not json"
    assert first.message.reasoning == original.message.reasoning
    assert first.usage == original.usage
    assert (first.finish_reason, first.model, first.provider) == ("tool_calls", "gpt-4o-mini-2024-07-18", "openai")


def test_store_cache_round_trips_a_minimal_response(store: Store) -> None:
    cache = StoreResponseCache(store)
    cache.put("k", ModelResponse(message=AssistantMessage()))
    assert cache.get("k") == ModelResponse(message=AssistantMessage())


def test_store_cache_stats_len_clear_and_namespace_isolation(store: Store) -> None:
    store.put("other", "keep", 1)
    cache = StoreResponseCache(store, namespace="rc")
    assert cache.get("missing") is None
    cache.put("a", text_response("a"))
    cache.put("b", text_response("b"))
    assert cache.get("a") is not None
    assert len(cache) == 2
    assert "a" in cache
    assert "zzz" not in cache
    assert cache.stats == ResponseCacheStats(hits=1, misses=1, puts=2)
    cache.clear()
    assert len(cache) == 0
    assert store.get("other", "keep") == 1


def test_store_cache_evicts_oldest_writes_and_reads_do_not_refresh(store: Store) -> None:
    cache = StoreResponseCache(store, max_entries=2)
    cache.put("a", text_response("a"))
    cache.put("b", text_response("b"))
    assert cache.get("a") is not None  # a read does not make "a" younger
    cache.put("c", text_response("c"))
    assert sorted(store.keys(NS)) == ["b", "c"]
    cache.put("b", text_response("b2"))  # rewriting makes it the youngest
    cache.put("d", text_response("d"))
    assert sorted(store.keys(NS)) == ["b", "d"]
    assert cache.stats.evictions == 2


@pytest.mark.parametrize(
    "entry",
    [
        {"garbage": 1},
        "just a string",
        [1, 2],
        {"seq": 1, "response": {"v": 999}},
        {"seq": 1, "response": {"v": 1, "message": {"role": "user", "text": "hi"}, "usage": {}}},
        {"seq": 1, "response": {"v": 1, "message": {"role": "assistant"}, "usage": {"input_tokens": -1}}},
        {"seq": 1, "response": {"v": 1, "message": {"role": "assistant"}, "usage": {"bogus": 1}}},
        {"seq": 1, "response": {"v": 1, "message": {"role": "assistant"}}},
        {"seq": 1, "response": {"v": 1, "message": {"role": "assistant"}, "usage": {}, "model": 5}},
        {"seq": 1, "response": {"v": 1, "message": {"role": "nope"}, "usage": {}}},
    ],
    ids=[
        "no-response",
        "string",
        "list",
        "version",
        "user-role",
        "bad-usage",
        "usage-key",
        "no-usage",
        "model-type",
        "bad-role",
    ],
)
def test_corrupt_entry_is_a_miss_and_is_removed(store: Store, entry: object) -> None:
    cache = StoreResponseCache(store)
    store.put(NS, "k", entry)
    assert cache.get("k") is None
    assert not store.has(NS, "k")
    assert cache.stats.misses == 1
    cache.put("k", text_response("fresh"))  # the slot is usable again
    hit = cache.get("k")
    assert hit is not None
    assert hit.message.text == "fresh"


def test_sqlite_cache_persists_across_reopen_and_self_heals_non_json_rows(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "responses.sqlite"
    with SQLiteResponseCache(path) as cache:
        cache.put("good", rich_response())
        cache.put("bad", text_response("soon corrupt"))
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE tinyagents_kv SET value = '{not json' WHERE key = 'bad'")
    conn.close()
    with SQLiteResponseCache(path) as reopened:
        assert reopened.get("good") == rich_response()
        assert reopened.get("bad") is None
        assert len(reopened) == 1
        assert reopened.stats == ResponseCacheStats(hits=1, misses=1)


def test_sqlite_cache_evicts_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with SQLiteResponseCache(path, max_entries=3) as first, SQLiteResponseCache(path, max_entries=3) as second:
        for i in range(3):
            first.put(f"k{i}", text_response(str(i)))
        second.put("k3", text_response("3"))
        assert sorted(first.store.keys(NS)) == ["k1", "k2", "k3"]


def test_closed_sqlite_cache_raises_store_error(tmp_path: Path) -> None:
    cache = SQLiteResponseCache(tmp_path / "c.sqlite")
    cache.close()
    cache.close()  # idempotent
    with pytest.raises(StoreError):
        cache.get("k")


def test_store_cache_does_not_close_a_borrowed_store() -> None:
    store = InMemoryStore()
    registry = CacheRegistry(response_cache=StoreResponseCache(store))
    registry.close()  # StoreResponseCache has no close(): the store stays the caller's
    store.put("x", "y", 1)
    assert isinstance(registry.response_cache, StoreResponseCache)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"store": object()}, "Store protocol"),
        ({"store": InMemoryStore(), "namespace": ""}, "namespace"),
        ({"store": InMemoryStore(), "namespace": "a\x00b"}, "namespace"),
        ({"store": InMemoryStore(), "max_entries": 0}, "max_entries"),
    ],
)
def test_store_cache_rejects_bad_configuration(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        StoreResponseCache(**kwargs)


def test_store_cache_rejects_bad_keys(store: Store) -> None:
    cache = StoreResponseCache(store)
    for bad in ("", "a\x00b"):
        with pytest.raises(ConfigurationError, match="cache key"):
            cache.get(bad)
        with pytest.raises(ConfigurationError, match="cache key"):
            cache.put(bad, text_response("x"))


def test_key_and_cache_work_together(store: Store) -> None:
    cache = StoreResponseCache(store)
    key = cache_key(base_request(), model="m")
    cache.put(key, rich_response())
    other_thread = dataclasses.replace(base_request(), thread_id="thread-b")
    assert cache.get(cache_key(other_thread, model="m")) == rich_response()
    assert cache.get(cache_key(base_request(), model="other")) is None
