"""Exact prompt-token counts from a host that exposes its tokenizer (llama.cpp's ``llama-server``).

An estimate counts with a tokenizer that is rarely the model's own and cannot see the chat template
(role markers, a default system prompt, the tool block); calibration learns the gap only after a
response, and a window's edge is where a few per cent decide. A host that serves its own
``/apply-template`` and ``/tokenize`` can say exactly what a request costs before it is sent.

How the count stays cheap over a long run: the request body the adapter would send is rendered by the
host once per request (``/apply-template``: template, tools and default system prompt included), the
prompt is cut before each turn marker (the special token that opens every turn, read from the end
of the prompt, where the reply's turn opens), and each piece is tokenized once and cached by its
text. A 25-turn run tokenizes only the turns added since the previous request; the history is never
tokenized again. A cut before a special token is exact (the tokenizer splits there anyway), and
every count is checked against the ``prompt_tokens`` the response reports (``check``): pieces that
do not add up switch the host to whole prompts, and a whole count that disagrees turns counting off.

A host without the endpoints (404) is remembered for the process after its first answer, so a
session makes one probe, not one per request. Every count is bounded by a timeout; a timeout or an
error degrades that request to the estimate, and a few failures in a row turn counting off.
``llama-server`` also serves ``/v1/chat/completions/input_tokens`` (one request, but the whole
history is tokenized again every time), which is why the two-endpoint path is used.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, Literal

import anyio

from ._http import httpx_module, public_url

if TYPE_CHECKING:
    import httpx

__all__ = ["CountMode", "HostTokenCounter", "host_token_counter"]

CountMode = Literal["pieces", "whole", "off"]
"""How a host's prompts are counted: cut into cached pieces, whole, or not at all (the estimate is used)."""

_PIECES_KEPT: Final = 4096  # cached piece counts per host and model (least recently used dropped first)
_FAILURES_ALLOWED: Final = 3  # failures in a row (timeouts, 5xx) before counting is turned off
_UNSUPPORTED: Final = frozenset({404, 405, 501})
# the special token that opens the reply's turn at the end of a rendered prompt: "<|im_start|>assistant\n",
# "<|start_header_id|>assistant<|end_header_id|>\n\n", "<start_of_turn>model\n"
_TURN_MARKER: Final = re.compile(r"(<[^<>\s]{1,40}>)[^<>]{0,8}(?:assistant|model)(?:<[^<>]{1,40}>)?\s*$")


class HostTokenCounter:
    """The exact-count state of one host and model for this process: mode, piece cache, failures.

    Attributes:
        root: The host's root URL (``/apply-template`` and ``/tokenize`` live there).
        mode: ``pieces`` (the default), ``whole`` (pieces did not add up), ``off`` (no count).
        reason: Why counting is ``whole`` or ``off`` (``None`` while pieces work).
        requests: HTTP requests made so far (what the piece cache saves shows here).
        checked: Counts compared with a response's reported ``prompt_tokens``.
        agreed: How many of those were equal.
    """

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")
        self.mode: CountMode = "pieces"
        self.reason: str | None = None
        self.requests = 0
        self.checked = 0
        self.agreed = 0
        self._pieces: OrderedDict[tuple[bool, str], int] = OrderedDict()
        self._marker: str | None = None
        self._failures = 0
        self._lock = threading.Lock()

    @property
    def cached_pieces(self) -> int:
        """Pieces whose token count is cached."""
        return len(self._pieces)

    async def count(
        self, client: httpx.AsyncClient, body: bytes, headers: Mapping[str, str], *, timeout_s: float
    ) -> int | None:
        """The exact prompt tokens of the chat request ``body``; ``None`` when the host cannot say in time.

        Never raises for the host's sake: a missing endpoint turns counting off, a timeout or an
        error costs this request its count (and, a few times in a row, turns counting off).
        """
        if self.mode == "off":
            return None
        httpx = httpx_module()
        try:
            with anyio.fail_after(timeout_s):
                prompt = await self._render(client, body, headers, timeout_s)
                if prompt is None:
                    return None
                total = await self._tokens(client, prompt, headers, timeout_s)
        except TimeoutError:
            self._failed(f"no count within {timeout_s:g}s")
            return None
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            self._failed(f"the count failed ({type(exc).__name__})")
            return None
        if total is not None:
            self._failures = 0
        return total

    def check(self, counted: int, reported: int) -> None:
        """Compare a count with the ``prompt_tokens`` the host reported for the same request."""
        with self._lock:
            self.checked += 1
            if counted == reported:
                self.agreed += 1
                return
            if self.mode == "pieces":
                self.mode = "whole"
                self.reason = f"pieces added up to {counted} where the host counted {reported}: whole prompts now"
            elif self.mode == "whole":
                self._off(f"the host's count ({counted}) disagrees with the usage it reported ({reported})")

    # ------------------------------------------------------------------------------------- requests
    async def _post(
        self, client: httpx.AsyncClient, path: str, payload: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> object | None:
        """POST to the host; the decoded JSON, or ``None`` when the answer shows it has no such endpoint."""
        self.requests += 1
        response = await client.post(self.root + path, content=payload, headers=dict(headers), timeout=timeout_s)
        if response.status_code in _UNSUPPORTED:
            self._off(f"the host has no {path} endpoint (HTTP {response.status_code})")
            return None
        if response.status_code >= 300:
            raise ValueError(f"HTTP {response.status_code}")
        data: object = json.loads(response.content)
        return data

    async def _render(
        self, client: httpx.AsyncClient, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> str | None:
        data = await self._post(client, "/apply-template", body, headers, timeout_s)
        if data is None:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("prompt"), str):
            raise ValueError("no prompt in the answer")
        prompt: str = data["prompt"]
        return prompt

    async def _tokens(
        self, client: httpx.AsyncClient, prompt: str, headers: Mapping[str, str], timeout_s: float
    ) -> int | None:
        pieces = self._split(prompt)
        counts = [self._pieces.get(key) for key in pieces]
        new = [key for key, known in zip(pieces, counts, strict=True) if known is None]
        found: dict[tuple[bool, str], int] = {}
        together = [key for key in new if not key[0]]  # each opens with the marker: one request for them all
        if len(together) > 1:
            found = await self._tokenize_together(client, [piece for _, piece in together], headers, timeout_s)
        for key in new:
            if self.mode == "off":
                return None
            if key not in found:
                known = await self._tokenize(client, key, headers, timeout_s)
                if known is None:
                    return None
                found[key] = known
        with self._lock:
            for key in pieces:
                if key in found:
                    self._pieces[key] = found[key]
                elif key in self._pieces:
                    self._pieces.move_to_end(key)
            while len(self._pieces) > _PIECES_KEPT:
                self._pieces.popitem(last=False)
        return sum(known if known is not None else found[key] for key, known in zip(pieces, counts, strict=True))

    async def _tokenize(
        self, client: httpx.AsyncClient, key: tuple[bool, str], headers: Mapping[str, str], timeout_s: float
    ) -> int | None:
        first, piece = key
        payload = json.dumps({"content": piece, "add_special": first, "parse_special": True}).encode()
        data = await self._post(client, "/tokenize", payload, headers, timeout_s)
        if data is None:
            return None
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list):
            raise ValueError("no tokens in the answer")
        return len(tokens)

    async def _tokenize_together(
        self, client: httpx.AsyncClient, pieces: list[str], headers: Mapping[str, str], timeout_s: float
    ) -> dict[tuple[bool, str], int]:
        """Counts of several marker-led pieces from one request, split where the marker token recurs.

        Empty when the tokens do not split into exactly those pieces (the caller then asks one by one).
        """
        content = "".join(pieces)
        payload = json.dumps(
            {"content": content, "add_special": False, "parse_special": True, "with_pieces": True}
        ).encode()
        data = await self._post(client, "/tokenize", payload, headers, timeout_s)
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list):
            return {}
        sizes: list[int] = []
        for token in tokens:
            opens = isinstance(token, dict) and token.get("piece") == self._marker
            if opens:
                sizes.append(0)
            if not sizes:
                return {}
            sizes[-1] += 1
        if len(sizes) != len(pieces):
            return {}
        return {(False, piece): size for piece, size in zip(pieces, sizes, strict=True)}

    def _split(self, prompt: str) -> list[tuple[bool, str]]:
        """``(first, piece)`` for each piece of ``prompt``: cut before every turn marker (pieces mode)."""
        if self.mode == "whole":
            return [(True, prompt)]
        if self._marker is None:
            found = _TURN_MARKER.search(prompt)
            self._marker = found.group(1) if found else ""
        marker = self._marker
        if not marker:
            return [(True, prompt)]
        pieces: list[tuple[bool, str]] = []
        start = 0
        at = prompt.find(marker, 1)
        while at != -1:
            pieces.append((start == 0, prompt[start:at]))
            start = at
            at = prompt.find(marker, at + 1)
        pieces.append((start == 0, prompt[start:]))
        return pieces

    # ------------------------------------------------------------------------------------- state
    def _failed(self, why: str) -> None:
        with self._lock:
            self._failures += 1
            if self._failures >= _FAILURES_ALLOWED:
                self._off(f"{why}, {self._failures} times in a row")

    def _off(self, why: str) -> None:
        self.mode = "off"
        self.reason = why
        self._pieces.clear()

    def __repr__(self) -> str:
        return (
            f"HostTokenCounter(root={public_url(self.root)!r}, mode={self.mode!r}, requests={self.requests}, "
            f"cached_pieces={self.cached_pieces}, agreed={self.agreed}/{self.checked})"
        )


_COUNTERS: dict[tuple[str, str], HostTokenCounter] = {}
_COUNTERS_LOCK = threading.Lock()


def host_token_counter(root: str, model: str) -> HostTokenCounter:
    """The process's counter for ``model`` at ``root`` (what a host lacks is learnt once per session)."""
    key = (root.rstrip("/"), model)
    with _COUNTERS_LOCK:
        found = _COUNTERS.get(key)
        if found is None:
            found = _COUNTERS[key] = HostTokenCounter(root)
        return found
