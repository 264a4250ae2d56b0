"""The REPL side of the protocol: ``llm``, ``llm_batch``, ``FINAL`` and ``FINAL_VAR``.

This module is stdlib-only on purpose: the child kernel runs its *source* (it need not be able to
import ``tinyagents_nb``), and the in-process environment imports it. Each helper turns a call into
one request to the harness (``call(payload) -> reply``); the harness decides everything else
(limits, concurrency, depth, which model), so code in the REPL cannot change those decisions.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any

__all__ = ["RLMCallError", "cap_output", "install", "socket_transport"]

Transport = Callable[[dict[str, Any]], dict[str, Any]]


class RLMCallError(Exception):
    """The harness refused or failed a sub-query (raised inside the REPL, where the model's code can catch it)."""


def _checked(reply: dict[str, Any]) -> dict[str, Any]:
    if not reply.get("ok"):
        raise RLMCallError(f"{reply.get('type', 'Error')}: {reply.get('error', 'the request failed')}")
    return reply


def install(namespace: MutableMapping[str, Any], call: Transport) -> None:
    """Define the helpers in ``namespace``; every request goes through ``call``."""

    def llm(prompt: str) -> str:
        """Ask the sub-model one question; it sees only ``prompt``."""
        if not isinstance(prompt, str):
            raise TypeError(f"llm(prompt) needs a str, got {type(prompt).__name__}")
        results: list[str] = _checked(call({"op": "llm", "prompts": [prompt]}))["results"]
        return results[0]

    def llm_batch(prompts: Iterable[str]) -> list[str]:
        """Ask the sub-model many questions in parallel; answers come back in the same order."""
        batch = list(prompts)
        for i, prompt in enumerate(batch):
            if not isinstance(prompt, str):
                raise TypeError(f"llm_batch(prompts) needs strs, item {i} is a {type(prompt).__name__}")
        if not batch:
            return []
        results: list[str] = _checked(call({"op": "llm", "prompts": batch}))["results"]
        return results

    def FINAL(answer: object) -> None:  # the protocol's name
        """End the run with ``str(answer)`` as its final answer (after the current block)."""
        _checked(call({"op": "final", "answer": str(answer)}))

    def FINAL_VAR(name: object) -> None:  # the protocol's name
        """End the run with the value of the REPL variable ``name``."""
        if not isinstance(name, str) or name not in namespace:
            raise NameError(f"FINAL_VAR: no REPL variable named {name!r}")
        FINAL(namespace[name])

    namespace.update(llm=llm, llm_batch=llm_batch, FINAL=FINAL, FINAL_VAR=FINAL_VAR, RLMCallError=RLMCallError)


def socket_transport(port: int, token: str) -> Transport:
    """Requests as JSON lines over one 127.0.0.1 connection, opened lazily and authenticated by ``token``.

    A request interrupted half-way (the kernel was interrupted while waiting) drops the connection,
    so a late reply can never be read as the answer to the next request.
    """
    lock = threading.Lock()
    state: dict[str, Any] = {}

    def close() -> None:
        stream, conn = state.pop("file", None), state.pop("sock", None)
        for item in (stream, conn):
            if item is not None:
                try:
                    item.close()
                except OSError:
                    pass

    def call(payload: dict[str, Any]) -> dict[str, Any]:
        with lock:
            try:
                if "file" not in state:
                    conn = socket.create_connection(("127.0.0.1", port), timeout=None)
                    state["sock"], state["file"] = conn, conn.makefile("rwb")
                    state["file"].write(json.dumps({"token": token}).encode() + b"\n")
                stream = state["file"]
                stream.write(json.dumps(payload).encode() + b"\n")
                stream.flush()
                line = stream.readline()
            except BaseException:
                close()
                raise
            if not line:
                close()
                raise RLMCallError("the sub-query channel is closed (the run has ended)")
        reply: dict[str, Any] = json.loads(line)
        return reply

    return call


class _Capped:
    """A stream forwarding at most ``head`` characters per block, then keeping only the last ``tail``."""

    def __init__(self, inner: Any, head: int, tail: int) -> None:
        self.inner = inner
        self.limits = (head, tail)
        self.reset()

    def reset(self) -> None:
        self.sent = 0
        self.tail = ""
        self.overflow = 0

    def write(self, text: str) -> int:
        head, tail = self.limits
        size = len(text)
        start = 0
        room = head - self.sent
        if room > 0:
            part = text[:room]
            self.inner.write(part)
            self.sent += len(part)
            start = len(part)
        rest = size - start  # never sliced whole: a copy of a 50 MB rest is what this avoids
        if rest > 0:
            self.overflow += rest
            keep = min(tail, rest)
            self.tail = (self.tail + text[size - keep :])[-tail:] if keep else ""
        return size

    def finish(self) -> None:
        """After a block: the kept end, with how much of the middle was not sent."""
        if self.overflow:
            dropped = self.overflow - len(self.tail)
            note = f"\n[… output flood: {dropped:,} characters in the middle were not kept]\n" if dropped else ""
            self.inner.write(note + self.tail)
            self.inner.flush()
        self.reset()

    def __getattr__(self, name: str) -> Any:  # flush, fileno, encoding, isatty, ...
        return getattr(self.inner, name)


def cap_output(shell: Any, head: int, tail: int) -> None:
    """In the child kernel: bound what a block's ``stdout``/``stderr`` send while it runs.

    A 50 MB ``print`` would otherwise travel as one 50 MB message, and ``while True: print()`` as an
    endless stream, into the notebook process; the model sees a few thousand characters of it.
    Idempotent: the setup runs again for every RLM run in the same kernel.
    """
    import sys

    capped: list[_Capped] = []
    for name in ("stdout", "stderr"):
        current = getattr(sys, name)
        inner = getattr(current, "inner", current) if type(current).__name__ == "_Capped" else current
        stream = _Capped(inner, head, tail)
        setattr(sys, name, stream)
        capped.append(stream)

    def before(*_: Any) -> None:
        for stream in capped:
            stream.reset()

    def after(*_: Any) -> None:
        for stream in capped:
            stream.finish()

    hook = shell.displayhook  # a last expression's value: only its text is read, cut to the head
    write = getattr(hook, "_tinyagents_write", None) or hook.write_format_data

    def write_format_data(format_dict: dict[str, Any], md_dict: Any = None) -> None:
        text = format_dict.get("text/plain")
        if isinstance(text, str) and len(text) > head:
            text = text[:head] + f"\n[… {len(text) - head:,} more characters of this value were not kept]"
        write({"text/plain": text} if text is not None else {}, md_dict)

    hook._tinyagents_write = write
    hook.write_format_data = write_format_data
    for event, callback in getattr(shell, "_tinyagents_cap_hooks", ()):
        try:
            shell.events.unregister(event, callback)
        except ValueError:
            pass
    shell.events.register("pre_run_cell", before)
    shell.events.register("post_run_cell", after)
    shell._tinyagents_cap_hooks = (("pre_run_cell", before), ("post_run_cell", after))
