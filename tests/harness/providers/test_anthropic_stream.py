"""The Messages event parser on its own: every way of cutting the same bytes folds to the same reply."""

from __future__ import annotations

import pytest

from tests.harness.anthropic_samples import (
    event,
    message_start,
    rechunk,
    stream,
    text_block,
    thinking_block,
    tool_block,
    usage,
)
from tinyagents_nb.harness import ModelResponse, ProviderError, ThinkingBlock, ToolCall
from tinyagents_nb.harness.models import StreamAccumulator
from tinyagents_nb.harness.providers import ProviderSpec
from tinyagents_nb.harness.providers.wire import EventParser, SSEDecoder


def parse(chunks: list[bytes]) -> ModelResponse:
    decoder, parser = SSEDecoder(), EventParser(spec=ProviderSpec.anthropic(), model="m")
    acc = StreamAccumulator()
    for piece in chunks:
        for item in parser.feed(decoder.feed(piece)):
            acc.add(item)
    for item in parser.feed(decoder.close()):
        acc.add(item)
    assert parser.done
    for item in parser.finish():
        acc.add(item)
    return acc.response()


BLOCKS = (
    thinking_block(0, ["Zwei Städte — ", "二つの都市 🌍"], "c2lnbmF0dXJl/+=="),
    text_block(1, ["Prüfe ", "beide…"]),
    tool_block(2, "toolu_a", "weather", ['{"city": "Kraków', '"}']),
    tool_block(3, "toolu_b", "weather", ['{"ci', 'ty": "東京"}']),
)


@pytest.mark.parametrize("size", [1, 2, 3, 5, 13, 64, 100_000])
def test_any_split_of_the_bytes_gives_the_same_reply(size: int) -> None:
    raw = b"".join(stream(*BLOCKS, stop_reason="tool_use", usage_raw=usage(10, 1, cache_read=90), size=100_000))
    response = parse(rechunk([raw], size))
    assert response.message.text == "Prüfe beide…"
    assert response.message.reasoning == "Zwei Städte — 二つの都市 🌍"
    assert response.message.blocks == (ThinkingBlock(text="Zwei Städte — 二つの都市 🌍", signature="c2lnbmF0dXJl/+=="),)
    assert response.message.tool_calls == (
        ToolCall(id="toolu_a", name="weather", arguments={"city": "Kraków"}),
        ToolCall(id="toolu_b", name="weather", arguments={"city": "東京"}),
    )
    assert (response.usage.input_tokens, response.usage.cached_input_tokens, response.usage.output_tokens) == (
        100,
        90,
        12,
    )
    assert response.finish_reason == "tool_calls"


def test_crlf_line_endings_are_accepted() -> None:
    raw = b"".join(stream(text_block(0, ["ok"]), size=100_000)).replace(b"\n", b"\r\n")
    assert parse(rechunk([raw], 4)).message.text == "ok"


def test_events_after_message_stop_are_ignored() -> None:
    raw = b"".join(stream(text_block(0, ["ok"]), size=100_000)) + b"".join(text_block(1, ["late"]))
    assert parse([raw]).message.text == "ok"


def test_a_block_event_without_an_index_is_malformed() -> None:
    parser = EventParser(spec=ProviderSpec.anthropic(), model="m")
    decoder = SSEDecoder()
    bad = b'event: content_block_delta\ndata: {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "x"}}\n\n'
    assert parser.feed(decoder.feed(bad)) == []
    assert isinstance(parser.error, ProviderError)
    assert parser.error.code == "malformed_stream"
    assert parser.done


@pytest.mark.parametrize("size", [7, 100_000])
def test_text_before_an_error_event_is_kept_however_the_bytes_arrive(size: int) -> None:
    """Anthropic's ``overloaded_error`` can arrive in the same network read as the deltas before it."""
    text = "Die Antwort ist lang genug, um in vielen Stücken anzukommen — 二つの都市. " * 3
    pieces = [text[at : at + 5] for at in range(0, len(text), 5)]
    error = event("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}})
    raw = rechunk([message_start(usage(25, 1)), *text_block(0, pieces), error], size)
    decoder, parser = SSEDecoder(), EventParser(spec=ProviderSpec.anthropic(), model="m")
    got = []
    for piece in raw:
        got.extend(item.text for item in parser.feed(decoder.feed(piece)) if hasattr(item, "text"))
    assert "".join(got) == text
    assert isinstance(parser.error, ProviderError)
    assert (parser.error.code, parser.error.retryable) == ("overloaded_error", True)
