"""``MainThreadRunner``: the agent's code runs in the person's namespace, on the kernel's main thread.

A run lives on the session's loop thread, but code the agent runs must act as a person's cell would:
on the main thread (GUI toolkits, ``signal``, libraries that check), in ``user_ns``, its variables there
for the next cell. So ``run_code`` hands the code to the main thread and awaits the outcome. The main
thread picks jobs up two ways: as a callback on the kernel's own event loop (an idle kernel, and a
waiting ``%%agent`` cell on ipykernel 7, which awaits on that loop), and from the waiting loop of a
synchronous ``%%agent`` cell (ipykernel 6), which calls ``drain`` every few milliseconds.

While the code runs, what it prints or displays on the main thread is captured (not sent to the cell;
the dashboard shows it) and returned as an ``ExecutionResult``, the RLM environments' outcome type.
Stopping it: a watcher thread sends ``SIGINT`` to the main thread when the per-call timeout passes or
the run is stopped (any thread may stop it), so ``time.sleep(60)`` and a busy loop end within
milliseconds; a temporary SIGINT handler tells those signals from a person's ■, which stops the run
too. Code that swallows ``KeyboardInterrupt`` is signalled again every second, three times at most.
"""

from __future__ import annotations

import ast
import asyncio
import io
import queue
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from tinyagents_nb.rlm import ExecutionResult

from ._cells import display_text, trim_traceback
from ._images import MAX_IMAGES, NotebookImage

__all__ = ["MainThreadRunner"]

T = TypeVar("T")
_WATCH_S: Final = 0.02
_RESEND_S: Final = 1.0
_MAX_SIGNALS: Final = 3


@dataclass(slots=True)
class _Job:
    code: str
    timeout_s: float | None
    should_stop: Callable[[], bool]
    future: Future[ExecutionResult]
    queued_at: float
    on_interrupt: Callable[[], object] | None = None
    started: bool = False
    finished: bool = False
    sent: int = 0
    pending: int = 0
    reason: str | None = None
    person: bool = False
    images: list[NotebookImage] | None = None


class _Capture(io.TextIOBase):
    """A stream that keeps what the main thread writes and passes every other thread's text on."""

    def __init__(self, original: Any, buffer: io.StringIO, prefix: str = "") -> None:
        self._original = original
        self._buffer = buffer
        self._prefix = prefix
        self._main = threading.main_thread().ident

    def write(self, text: str) -> int:
        if threading.get_ident() != self._main:
            return int(self._original.write(text))
        if self._prefix:
            text = "".join(self._prefix + line for line in text.splitlines(keepends=True))
        self._buffer.write(text)
        return len(text)

    def flush(self) -> None:
        if threading.get_ident() != self._main:
            self._original.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._original, name)


class _Publisher:
    """``display()`` from the main thread goes to the capture; from any other thread, to the frontend."""

    def __init__(self, original: Any, buffer: io.StringIO, images: list[NotebookImage] | None) -> None:
        self._original = original
        self._buffer = buffer
        self._images = images
        self._main = threading.main_thread().ident

    def publish(self, data: Any, metadata: Any = None, *args: Any, **kwargs: Any) -> None:
        if threading.get_ident() != self._main:
            self._original.publish(data, metadata, *args, **kwargs)
            return
        text, image = display_text(dict(data))
        if image is not None and self._images is not None and len(self._images) < MAX_IMAGES:
            self._images.append(image)
        self._buffer.write(text + "\n")

    def clear_output(self, *args: Any, **kwargs: Any) -> None:
        if threading.get_ident() != self._main:
            self._original.clear_output(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._original, name)


class MainThreadRunner:
    """Runs code in ``shell.user_ns`` on the main thread; create it on the main thread (at extension load).

    Args:
        shell: The IPython shell whose namespace, compiler and formatter the code uses.
    """

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # plain IPython: only a waiting cell's drain runs the jobs
            self._loop = None
        self._counter = 0
        self._running: _Job | None = None
        self.ran = 0

    @property
    def busy(self) -> bool:
        """Whether the main thread is executing the agent's code right now (any thread may ask)."""
        return self._running is not None

    def drain(self) -> None:
        """Run every queued job now (main thread only; elsewhere it does nothing)."""
        if threading.current_thread() is not threading.main_thread():
            return
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            if not job.future.done():
                self._run(job)

    def submit(
        self,
        code: str,
        *,
        timeout_s: float | None,
        should_stop: Callable[[], bool],
        on_interrupt: Callable[[], object] | None = None,
        images: list[NotebookImage] | None = None,
    ) -> Future[ExecutionResult]:
        """Queue ``code`` for the main thread; the future resolves with its outcome (never raises for the code).

        ``on_interrupt`` is called (on the main thread) when a person's ■ interrupted the code; ``images``
        receives the PNG and JPEG images the code displayed (at most ``MAX_IMAGES``).
        """
        job = _Job(code, timeout_s, should_stop, Future(), time.monotonic(), on_interrupt, images=images)
        self._jobs.put(job)
        threading.Thread(target=self._watch, args=(job,), name="tinyagents-run-code-watch", daemon=True).start()
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.drain)
        return job.future

    async def execute(
        self,
        code: str,
        *,
        timeout_s: float | None,
        should_stop: Callable[[], bool],
        on_interrupt: Callable[[], object] | None = None,
        images: list[NotebookImage] | None = None,
    ) -> ExecutionResult:
        """``submit`` and await the outcome; a cancelled await stops the code (or drops it if it never started)."""
        stop = threading.Event()
        future = self.submit(
            code,
            timeout_s=timeout_s,
            should_stop=lambda: stop.is_set() or should_stop(),
            on_interrupt=on_interrupt,
            images=images,
        )
        try:
            return await asyncio.wrap_future(future)
        except BaseException:
            stop.set()
            raise

    # ------------------------------------------------------------------ watcher (any thread)
    def _watch(self, job: _Job) -> None:
        """Interrupt the job's code when it is stopped or overruns; drop it if that happens before it starts."""
        last = 0.0
        while not job.finished:
            time.sleep(_WATCH_S)
            now = time.monotonic()
            reason = "stop" if job.should_stop() else None
            if reason is None and job.timeout_s is not None and now - job.queued_at > job.timeout_s:
                reason = "timeout"
            if reason is None:
                continue
            if not job.started:
                if not job.future.done():
                    waited = now - job.queued_at
                    note = "the run was stopped" if reason == "stop" else f"the kernel stayed busy for {waited:.1f} s"
                    job.future.set_result(
                        ExecutionResult(output=f"[not run: {note}]\n", error_type=None, stopped=reason)  # type: ignore[arg-type]
                    )
                return
            if job.sent < _MAX_SIGNALS and now - last >= _RESEND_S and not job.finished:
                job.reason = job.reason or reason
                job.sent += 1
                job.pending += 1
                last = now
                main = threading.main_thread().ident
                if main is not None:
                    signal.pthread_kill(main, signal.SIGINT)

    # ------------------------------------------------------------------ the job (main thread)
    def _run(self, job: _Job) -> None:
        job.started = True
        self._running = job
        try:
            self._run_job(job)
        finally:
            self._running = None

    def _run_job(self, job: _Job) -> None:
        buffer = io.StringIO()
        started = time.monotonic()
        error_type: str | None = None
        try:
            with self._sigint(job), self._captured(buffer, job.images):
                try:
                    self._exec(job.code, buffer, job.images)
                except KeyboardInterrupt:
                    error_type = "KeyboardInterrupt"
                    why = (
                        "■ (kernel interrupt)"
                        if job.person
                        else ("the run was stopped" if job.reason == "stop" else f"the {job.timeout_s:g} s time limit")
                    )
                    buffer.write(f"[interrupted: {why}]\n")
                except BaseException as exc:  # errors are data for the model (SystemExit too)
                    error_type = type(exc).__name__
                    frames = [f for f in traceback.format_exception(exc) if "tinyagents_nb/notebook/" not in f]
                    buffer.write(trim_traceback("".join(frames)) + "\n")
                finally:
                    job.finished = True
        except KeyboardInterrupt:  # a late signal of ours, landing after the code ended
            job.finished = True
        self.ran += 1
        stopped = "stop" if job.person or job.reason == "stop" else ("timeout" if job.reason else None)
        if error_type != "KeyboardInterrupt":
            stopped = None
        result = ExecutionResult(
            output=buffer.getvalue(),
            error_type=error_type,
            stopped=stopped,  # type: ignore[arg-type]
            duration_s=time.monotonic() - started,
        )
        if job.person and job.on_interrupt is not None:
            # ■ stops the run, as it does while a waiting cell waits: before the result is handed back,
            # or the run (on its own thread) could go on to its next step first and finish "completed"
            job.on_interrupt()
        if not job.future.done():
            job.future.set_result(result)

    def _exec(self, code: str, buffer: io.StringIO, images: list[NotebookImage] | None) -> None:
        """Run ``code`` as a cell: IPython's syntax (magics), then the last expression's value shown."""
        shell = self.shell
        self._counter += 1
        source = shell.transform_cell(code) if hasattr(shell, "transform_cell") else code
        filename = (
            shell.compile.cache(source, -self._counter) if hasattr(shell, "compile") else f"<agent-{self._counter}>"
        )
        tree = ast.parse(source, filename, "exec")
        last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        if last is not None:
            tree.body.pop()
        namespace = shell.user_ns
        exec(compile(tree, filename, "exec"), namespace)
        if last is None:
            return
        value = eval(compile(ast.Expression(last.value), filename, "eval"), namespace)
        if value is None:
            return
        formatter = getattr(shell, "display_formatter", None)
        text = repr(value)
        if formatter is not None:
            data, _ = formatter.format(value)
            shown, image = display_text(dict(data))
            text = shown or text
            if image is not None and images is not None and len(images) < MAX_IMAGES:
                images.append(image)
        buffer.write(text + "\n")

    @contextmanager
    def _captured(self, buffer: io.StringIO, images: list[NotebookImage] | None) -> Iterator[None]:
        shell = self.shell
        stdout, stderr = sys.stdout, sys.stderr
        publisher = getattr(shell, "display_pub", None)
        sys.stdout = _Capture(stdout, buffer)
        sys.stderr = _Capture(stderr, buffer, "[stderr] ")
        if publisher is not None:
            shell.display_pub = _Publisher(publisher, buffer, images)
        try:
            yield
        finally:
            sys.stdout, sys.stderr = stdout, stderr
            if publisher is not None:
                shell.display_pub = publisher

    @contextmanager
    def _sigint(self, job: _Job) -> Iterator[None]:
        """While the job runs, SIGINT raises ``KeyboardInterrupt`` in it; the runner's own late signals are dropped."""

        def handler(signum: int, frame: Any) -> None:
            if job.pending:
                job.pending -= 1
            else:
                job.person = True
            if not job.finished:
                raise KeyboardInterrupt

        previous = signal.getsignal(signal.SIGINT)
        signal.signal(signal.SIGINT, handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)
