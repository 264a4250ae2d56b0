"""A replay-server responder that answers one row per request: structured JSON, some rows failing.

Each prompt carries ``#<n>``; the answer is ``{"label": ..., "score": n}`` with fixed usage, and
rows with ``n % 100 == 7`` get a 400 (a row's own failure, not retried). ``seen`` counts requests
per row number, so a test can prove every row was requested exactly once.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from tests.harness.replay_server import chat_completion, error_body, usage_body

__all__ = ["RowResponder", "row_number"]

_ROW = re.compile(r"#(\d+)")


def row_number(body: Any) -> int:
    for message in reversed(body["messages"]):
        if message["role"] == "user":
            content = message["content"]
            text = content if isinstance(content, str) else "".join(part.get("text", "") for part in content)
            match = _ROW.search(text)
            if match:
                return int(match.group(1))
    raise AssertionError(f"no row number in {body!r}")


class RowResponder:
    """Callable for ``ReplayServer.respond_with``: thread-safe counters, optional hook per request."""

    def __init__(
        self,
        *,
        failing: Callable[[int], bool] = lambda n: n % 100 == 7,
        prompt_tokens: int = 1000,
        completion_tokens: int = 100,
        on_request: Callable[[int], None] | None = None,
        echo_auth: bool = False,
    ) -> None:
        self.failing = failing
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.on_request = on_request
        self.seen: Counter[int] = Counter()
        self._lock = threading.Lock()
        self.count = 0

    def __call__(self, body: Any) -> tuple[Any, ...]:
        if body is None:  # a request cut off mid-body (its row was cancelled): nobody reads the answer
            return 400, error_body("no body")
        n = row_number(body)
        with self._lock:
            self.seen[n] += 1
            self.count += 1
            count = self.count
        if self.on_request is not None:
            self.on_request(count)
        if self.failing(n):
            return 400, error_body(f"row {n} is not acceptable", code="invalid_value")
        content = json.dumps({"label": "pos" if n % 2 else "neg", "score": n})
        return 200, chat_completion(content, usage=usage_body(self.prompt_tokens, self.completion_tokens))
