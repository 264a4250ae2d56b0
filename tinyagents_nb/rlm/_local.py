"""``LocalEnvironment``: the REPL as a fresh namespace in this process (trusted code only).

Values are passed by reference (no copy, no pickling: anything works, including objects whose class
lives in the notebook), which also means the model's code can mutate them, and everything else in
the process: this is not a sandbox. Each block runs on its own thread so the run's event loop stays
free for sub-queries and Stop.

Stopping a thread: Python cannot kill one. Stop (or the block timeout) raises ``KeyboardInterrupt``
in it with ``PyThreadState_SetAsyncExc`` (only while its block runs: ``_Guard``), which is delivered at the next bytecode boundary: a busy
Python loop stops within milliseconds, but a block inside a C call (``time.sleep(60)``, a long
regex, a blocking read) only sees it when that call returns. The run itself does not wait: after
``interrupt_grace_s`` it ends and the thread is abandoned (it is a daemon thread and dies when it
next executes Python code). Only ``print`` output and the last expression's value are captured:
the process's ``sys.stdout`` is shared with the notebook, so it is not redirected.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import ctypes
import functools
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ._environment import OUTPUT_HEAD, BoundedOutput, ExecutionResult, StopReason, check_names, trim_traceback
from ._helpers import install
from ._repr import bounded_repr

if TYPE_CHECKING:
    from ._bridge import SubQueries

__all__ = ["LocalEnvironment"]

_POLL_S = 0.02


class _Guard:
    """One block's thread, interruptible only until the block has finished.

    Python gives a finished thread's id to the next thread it starts, and ``PyThreadState_SetAsyncExc``
    takes an id: an interrupt sent after the block's thread ended (a runner cancelled or garbage
    collected after its block was done) would land in whatever thread has that id now, such as
    another run's block. The lock orders the two ends: once ``finish`` ran, ``interrupt`` sends nothing.
    """

    __slots__ = ("finished", "lock", "thread")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.finished = False
        self.thread: threading.Thread | None = None

    def interrupt(self) -> bool:
        """Raise ``KeyboardInterrupt`` in the block's thread if the block is still running."""
        with self.lock:
            ident = None if self.finished or self.thread is None else self.thread.ident
            if ident is None:
                return False
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(KeyboardInterrupt))
            return True

    def finish(self, done: threading.Event) -> None:
        """In the block's thread, last: no interrupt is sent after this; one sent just before is spent here."""
        while True:
            try:
                with self.lock:
                    self.finished = True
                done.set()
                return
            except KeyboardInterrupt:
                continue


class LocalEnvironment:
    """A fresh in-process namespace per run (the trusted option).

    Args:
        interrupt_grace_s: How long a stopped block may take to notice the interrupt before the run
            stops waiting for it.
    """

    name = "local"

    def __init__(self, *, interrupt_grace_s: float = 1.0) -> None:
        self.interrupt_grace_s = interrupt_grace_s
        self.namespace: dict[str, Any] | None = None
        self.abandoned_threads = 0
        self._blocks = 0
        self._after_block: Callable[..., None] | None = None
        self.keep_namespace = False
        """Keep the namespace from one run to the next (an ``RLMSession``'s REPL)."""
        self._kept: dict[str, Any] | None = None

    def prepare_values(self, values: Mapping[str, Any]) -> dict[str, Any]:
        check_names(values)
        return dict(values)

    async def start_run(self, prepared: Any, queries: SubQueries) -> None:
        namespace: dict[str, Any] = {"__name__": "__rlm__", "__builtins__": builtins}
        if self.keep_namespace and self._kept is not None:
            namespace = self._kept
        namespace.update(prepared)
        self._after_block = install(namespace, queries.handle_threadsafe)
        self.namespace = namespace

    async def execute(self, code: str, *, timeout_s: float | None, should_stop: Callable[[], bool]) -> ExecutionResult:
        namespace = self.namespace
        if namespace is None:
            raise RuntimeError("LocalEnvironment.execute before start_run")
        self._blocks += 1
        filename = f"<rlm-block-{self._blocks}>"
        buffer = BoundedOutput()  # bounded while the block prints, not cut afterwards
        namespace["print"] = functools.partial(print, file=buffer)
        outcome: dict[str, BaseException] = {}
        done = threading.Event()
        guard = _Guard()
        guard.thread = thread = threading.Thread(
            target=_run_block,
            args=(code, filename, namespace, buffer, outcome, done, self._after_block, guard),
            daemon=True,
        )
        started = time.monotonic()
        thread.start()
        stopped: StopReason | None = None
        interrupted_at: float | None = None
        while not done.is_set():
            try:
                await asyncio.sleep(_POLL_S)
            except BaseException:  # the run's deadline, its task cancelled or collected: do not leave the block running
                guard.interrupt()
                raise
            now = time.monotonic()
            if interrupted_at is None:
                if should_stop():
                    stopped = "stop"
                elif timeout_s is not None and now - started > timeout_s:
                    stopped = "timeout"
                if stopped is not None:
                    guard.interrupt()
                    interrupted_at = now
            elif now - interrupted_at > self.interrupt_grace_s:
                self.abandoned_threads += 1
                buffer.write("[the block is stuck in a call that cannot be interrupted; it was abandoned]\n")
                break
        error = outcome.get("error")
        return ExecutionResult(
            output=buffer.getvalue(),
            error_type=type(error).__name__ if error is not None else ("KeyboardInterrupt" if stopped else None),
            stopped=stopped,
            duration_s=time.monotonic() - started,
        )

    async def end_run(self) -> None:
        if self.keep_namespace:
            self._kept = self.namespace
        self.namespace = None

    def close(self) -> None:
        self.namespace = self._kept = None

    def __repr__(self) -> str:
        return "LocalEnvironment()"


def _run_block(
    code: str,
    filename: str,
    namespace: dict[str, Any],
    buffer: BoundedOutput,
    outcome: dict[str, BaseException],
    done: threading.Event,
    after_block: Callable[..., None] | None,
    guard: _Guard,
) -> None:
    """Run ``code`` like a REPL cell: statements, then the last expression's value printed when not ``None``."""
    try:
        tree = ast.parse(code, filename, "exec")
        last = tree.body[-1] if tree.body else None
        if isinstance(last, ast.Expr):
            tree.body.pop()
        exec(compile(tree, filename, "exec"), namespace)
        if isinstance(last, ast.Expr):
            value = eval(compile(ast.Expression(last.value), filename, "eval"), namespace)
            if value is not None:  # its text is built only as far as the output keeps it
                text, complete = bounded_repr(value, OUTPUT_HEAD)
                cut = f"\n[this value's text was cut at {OUTPUT_HEAD:,} characters]"
                buffer.write(text + ("" if complete else cut) + "\n")
    except BaseException as exc:  # the injected KeyboardInterrupt too: errors are data
        outcome["error"] = exc
        frames = traceback.format_exception(exc)
        own = [f for f in frames if "tinyagents_nb/rlm/_local.py" not in f]
        buffer.write(trim_traceback("".join(own)) + "\n")
    finally:
        try:
            if after_block is not None:
                after_block()  # reads ``answer``, as the kernel's post-cell hook does
        except BaseException as exc:  # a failed report is output, never a lost block
            outcome.setdefault("error", exc)
            buffer.write(f"[answer could not be reported: {type(exc).__name__}: {exc}]\n")
        finally:
            guard.finish(done)
