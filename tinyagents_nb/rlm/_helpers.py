"""The REPL side of the protocol: ``llm``, ``llm_batch``, ``rlm_query``, ``answer``, ``FINAL``, ``SHOW_VARS``.

This module is stdlib-only on purpose: the child kernel runs its *source* (it need not be able to
import ``tinyagents_nb``), and the in-process environment imports it. Each helper turns a call into
one request to the harness (``call(payload) -> reply``); the harness decides everything else
(limits, concurrency, depth, which model), so code in the REPL cannot change those decisions.

The ``answer`` dict is the official protocol's way to end a run: after every block the REPL side
looks at it (``after_block``) and reports a changed ``answer["content"]`` (the run's best partial
answer so far) or, once ``answer["ready"]`` is true, the final answer, as ``FINAL`` does.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any

__all__ = [
    "RLMCallError",
    "bound_write",
    "cap_output",
    "hook_after_blocks",
    "install",
    "load_arrow",
    "socket_transport",
]

Transport = Callable[[dict[str, Any]], dict[str, Any]]


class RLMCallError(Exception):
    """The harness refused or failed a sub-query (raised inside the REPL, where the model's code can catch it)."""


def _checked(reply: dict[str, Any]) -> dict[str, Any]:
    if not reply.get("ok"):
        raise RLMCallError(f"{reply.get('type', 'Error')}: {reply.get('error', 'the request failed')}")
    return reply


def install(namespace: MutableMapping[str, Any], call: Transport) -> Callable[..., None]:
    """Define the helpers in ``namespace``; every request goes through ``call``.

    Returns the hook to call after every block (it reads ``answer``).
    """

    def llm(prompt: str, model: object = None) -> str:
        """Ask the sub-model one question; it sees only ``prompt`` (``model`` is the harness's choice: ignored)."""
        if not isinstance(prompt, str):
            raise TypeError(f"llm(prompt) needs a str, got {type(prompt).__name__}")
        results: list[str] = _checked(call({"op": "llm", "prompts": [prompt]}))["results"]
        return results[0]

    def llm_batch(prompts: Iterable[str], model: object = None) -> list[str]:
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
    namespace.update(llm_query=llm, llm_query_batched=llm_batch)  # the official implementation's names
    return _install_recursion_and_answer(namespace, call)


def _install_recursion_and_answer(namespace: MutableMapping[str, Any], call: Transport) -> Callable[..., None]:
    """``rlm_query``, ``rlm_query_batched``, ``SHOW_VARS`` and ``answer``; returns the after-block hook."""

    def rlm_query(prompt: str, context: object = None, *, model: object = None) -> str:
        """Start a child RLM run on ``prompt`` with its own REPL holding ``context``; returns its answer.

        Without a ``context`` the child's ``context`` is ``prompt`` (as in the official implementation,
        whose ``model=`` keyword is accepted and ignored: the harness chooses the models).
        """
        return rlm_query_batched([prompt], None if context is None else [context])[0]

    def rlm_query_batched(
        prompts: Iterable[str], contexts: Iterable[object] | None = None, *, model: object = None
    ) -> list[str]:
        """Child RLM runs, one per prompt (and context), in parallel; answers come back in the same order."""
        batch = list(prompts)
        for i, prompt in enumerate(batch):
            if not isinstance(prompt, str):
                raise TypeError(f"rlm_query_batched(prompts) needs strs, item {i} is a {type(prompt).__name__}")
        values = [None] * len(batch) if contexts is None else list(contexts)
        if len(values) != len(batch):
            raise ValueError(f"{len(batch)} prompts but {len(values)} contexts")
        if not batch:
            return []
        results: list[str] = _checked(call({"op": "rlm", "prompts": batch, "contexts": values}))["results"]
        return results

    def SHOW_VARS() -> str:  # the protocol's name
        """The REPL's own variables with their types and sizes (helpers and modules left out).

        Returned, as the official implementation does (``print(SHOW_VARS())``), as a text whose
        value shown at the end of a block is the list itself, not a quoted string.
        """
        rows = []
        for name, value in list(namespace.items()):
            if name.startswith("_") or name in _HELPER_NAMES or type(value).__name__ == "module":
                continue
            size = ""
            try:
                size = f", len {len(value)}"
            except Exception:
                pass
            rows.append(f"{name}: {type(value).__name__}{size}")
        return _Shown("\n".join(rows) if rows else "(no variables yet)")

    namespace.update(rlm_query=rlm_query, rlm_query_batched=rlm_query_batched, SHOW_VARS=SHOW_VARS)
    namespace["answer"] = {"content": "", "ready": False}  # each task starts unanswered (a session keeps the rest)
    seen: dict[str, Any] = {"content": ""}

    def after_block(*_: Any) -> None:
        """Report ``answer`` to the harness when it changed (a partial answer) or is ready (the final one)."""
        value = namespace.get("answer")
        if not isinstance(value, dict) or "content" not in value:
            return
        content = value["content"]
        text = content if isinstance(content, str) else _as_text(content)
        if value.get("ready"):
            value["ready"] = False  # reported once: a re-asked answer must be set ready again
            call({"op": "final", "answer": text})
        elif text and text != seen["content"]:
            call({"op": "answer", "content": text})
        seen["content"] = text

    return after_block


class _Shown(str):
    """A text that shows as itself as a block's last value (``SHOW_VARS()``), not as a quoted ``repr``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


def _as_text(value: object) -> str:
    """A non-string answer as JSON when it is JSON data (a typed answer's usual form), else ``str``.

    A DataFrame goes as pandas' table JSON (its column types included) for a ``DataFrameSchema`` answer.
    """
    to_json = getattr(value, "to_json", None)
    if callable(to_json) and hasattr(value, "columns") and hasattr(value, "dtypes"):
        try:
            return str(to_json(orient="table", date_format="iso"))
        except (TypeError, ValueError):
            pass
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


_HELPER_NAMES = frozenset(
    {
        "llm",
        "llm_batch",
        "llm_query",
        "llm_query_batched",
        "rlm_query",
        "rlm_query_batched",
        "FINAL",
        "FINAL_VAR",
        "SHOW_VARS",
        "RLMCallError",
        "In",
        "Out",
        "print",
        "exit",
        "quit",
        "get_ipython",  # what the kernel's namespace holds after a reset
        "open",
    }
)


def hook_after_blocks(shell: Any, after_block: Callable[..., None]) -> None:
    """In the child kernel: run ``after_block`` after every cell (idempotent across runs in one kernel)."""
    previous = getattr(shell, "_tinyagents_answer_hook", None)
    if previous is not None:
        try:
            shell.events.unregister("post_run_cell", previous)
        except ValueError:
            pass
    shell.events.register("post_run_cell", after_block)
    shell._tinyagents_answer_hook = after_block


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


def load_arrow(kind: str, path: str) -> Any:
    """In the child kernel: one value from the Arrow IPC file the harness wrote (``_transport``).

    The file is memory-mapped, never read into a ``bytes``: a DataFrame or an array is built from
    the mapping into memory of its own (so it is writable, and the file can go), a table stays a
    zero-copy view of the mapping (removing the file does not unmap it).
    """
    import pyarrow as pa  # the kernel's interpreter needs it only when a large value came this way

    source = pa.memory_map(path)
    if kind == "ndarray":
        return pa.ipc.read_tensor(source).to_numpy().copy()
    table = pa.ipc.open_file(source).read_all()
    return table if kind == "table" else table.to_pandas()


def bound_write(text: str, room: int, tail: str, tail_limit: int) -> tuple[str, int, str]:
    """``(part kept at the head, characters past the head, new tail)`` for one write to a bounded stream.

    The rest past the head is never sliced whole: a copy of a 50 MB rest is what this avoids.
    """
    part = text[:room] if room > 0 else ""
    rest = len(text) - len(part)
    if rest > 0:
        keep = min(tail_limit, rest)
        tail = (tail + text[len(text) - keep :])[-tail_limit:] if keep else ""
    return part, rest, tail


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
        part, rest, self.tail = bound_write(text, head - self.sent, self.tail, tail)
        if part:
            self.inner.write(part)
            self.sent += len(part)
        self.overflow += rest
        return len(text)

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
