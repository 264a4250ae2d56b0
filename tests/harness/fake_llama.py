"""A fake llama.cpp host on the replay server: the counting endpoints and a chat endpoint that agrees with them.

``/apply-template`` renders a chat body with a ChatML template, ``/tokenize`` splits text with a small
regex tokenizer (special tokens whole, as llama.cpp does with ``parse_special``), and
``/v1/chat/completions`` reports the prompt tokens of the same rendering (unary or streamed).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from typing import Any

from tests.harness.replay_server import ReplayServer, _encode_chunk, chat_completion, sse_text_chunks, usage_body

__all__ = ["FakeLlama", "render", "tokens"]

_TOKEN = re.compile(r"<\|[a-z_]+\|>|\w+|[^\w\s]|\s+")


def tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def render(body: dict[str, Any]) -> str:
    """A ChatML rendering, tools in a system block first (as Qwen's template does)."""
    out = ""
    if body.get("tools"):
        out += f"<|im_start|>system\n# Tools\n{json.dumps(body['tools'])}<|im_end|>\n"
    for message in body["messages"]:
        content = message.get("content") or ""
        if message.get("tool_calls"):
            content += json.dumps(message["tool_calls"])
        out += f"<|im_start|>{message['role']}\n{content}<|im_end|>\n"
    return out + "<|im_start|>assistant\n"


class FakeLlama:
    """The counting endpoints and a chat endpoint that calls ``lookup`` until ``tool_turns`` results are in."""

    def __init__(self, server: ReplayServer, *, tool_turns: int = 0, misreport: int = 0) -> None:
        self.calls: Counter[str] = Counter()
        self.tokenized: list[str] = []
        self.tool_turns = tool_turns
        self.misreport = misreport  # added to the prompt_tokens the chat endpoint reports
        self.delay_s = 0.0
        self._lock = threading.Lock()
        server.routes.update(
            {
                "/apply-template": self.apply_template,
                "/tokenize": self.tokenize,
                "/v1/chat/completions": self.chat,
            }
        )

    def _count(self, path: str) -> None:
        with self._lock:
            self.calls[path] += 1

    def apply_template(self, body: Any) -> tuple[int, Any]:
        self._count("/apply-template")
        time.sleep(self.delay_s)
        return 200, {"prompt": render(body)}

    def tokenize(self, body: Any) -> tuple[int, Any]:
        self._count("/tokenize")
        with self._lock:
            self.tokenized.append(body["content"])
        assert body["parse_special"] is True
        found = ["<bos>"] * body["add_special"] + _TOKEN.findall(body["content"])
        if body.get("with_pieces"):
            return 200, {"tokens": [{"id": n, "piece": piece} for n, piece in enumerate(found)]}
        return 200, {"tokens": list(range(len(found)))}

    def chat(self, body: Any) -> tuple[Any, ...]:
        self._count("/v1/chat/completions")
        prompt = tokens(render(body)) + 1 + self.misreport  # +1: the BOS that add_special adds
        done = sum(1 for m in body["messages"] if m["role"] == "tool")
        usage = usage_body(prompt, 3)
        if body.get("stream"):
            sse = b"".join(_encode_chunk(c) for c in sse_text_chunks(["do", "ne"], usage=usage))
            return 200, sse, {"Content-Type": "text/event-stream"}
        if done < self.tool_turns:
            call = (f"call_{done}", "lookup", json.dumps({"key": f"item {done}"}))
            return 200, chat_completion(None, tool_calls=[call], usage=usage)
        return 200, chat_completion("done", usage=usage)
