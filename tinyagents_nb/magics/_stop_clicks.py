"""The dashboard's Stop button stops the agent's code even while that code holds the kernel's main thread.

``run_code`` executes on the main thread, and a kernel handles widget clicks on the main thread too,
so a Stop click would wait in the queue until the agent's ``time.sleep(60)`` ended by itself. ■ does
not have that problem (it is a signal), and neither does a cancel from any other thread: the runner's
watcher interrupts the code within milliseconds once the run's token is cancelled.

So on **ipykernel 7.x**, where the shell socket is read by its own thread (the shell channel thread)
before each message is handed to the main thread, that thread's receive callback is wrapped, once
per kernel: while the main thread is executing the agent's code, a ``comm_msg`` whose comm is the
Stop button of an active run and whose data is a click cancels that run right there, with the same
reason the button gives. Its code is then interrupted by the runner (only that code: the runner
signals the main thread only while the job runs); the click itself still reaches the button
afterwards, where it finds the run already stopping. Nothing else is read: other messages, and every
message while no agent code runs, pass untouched after one attribute check. Only the header and the
content are decoded, never through the signature check (which would then reject the real delivery
as a replay).

On **ipykernel 6.x** the shell socket is read on the main thread itself, so no code sees a click while
the agent's code runs there: ■, the per-call timeout and the run's ``--timeout`` stop it instead.
"""

from __future__ import annotations

import inspect
from typing import Any

from . import _session
from ._session import NotebookSession

__all__ = ["STOP_REASON", "install_stop_clicks"]

STOP_REASON = "stop button"
"""The cancel reason the dashboard's Stop button gives (``RunControls``); the early cancel uses it too."""

_HOOKED: set[int] = set()  # id() of the kernels whose shell channel callback is wrapped (never unwrapped)


def _loaded() -> NotebookSession | None:
    """The kernel's session if the extension made one (never creates one: an unloaded extension stays quiet)."""
    current: NotebookSession | None = getattr(_session, "_current", None)
    return current


def install_stop_clicks(shell: Any) -> bool:
    """Hear Stop clicks on the shell channel thread (ipykernel 7.x); returns whether this kernel allows it."""
    kernel = getattr(shell, "kernel", None)
    thread = getattr(kernel, "shell_channel_thread", None)
    stream = getattr(kernel, "shell_stream", None)
    original = getattr(kernel, "shell_channel_thread_main", None)
    loop = getattr(thread, "io_loop", None)
    if kernel is None or thread is None or stream is None or original is None or loop is None:
        return False  # ipykernel 6.x (or no kernel): see the module's note
    if id(kernel) in _HOOKED:
        return True

    async def received(msg: list[Any]) -> None:
        session = _loaded()
        try:
            if session is not None:
                _stop_if_clicked(kernel.session, session, msg)
        except Exception:  # looking must never lose a message
            pass
        handled = original(msg)
        if inspect.isawaitable(handled):
            await handled

    loop.add_callback(stream.on_recv, received, copy=False)  # on_recv belongs to the stream's own thread
    _HOOKED.add(id(kernel))
    return True


def _stop_if_clicked(codec: Any, session: NotebookSession, msg: list[Any]) -> None:
    """Cancel the run whose Stop button ``msg`` clicks, if the main thread is running the agent's code."""
    access = session.notebook
    if access is None or not access.runner.busy:
        return
    _, frames = codec.feed_identities(msg, copy=False)
    parsed = codec.deserialize(frames, content=False, copy=False)  # content=False: no signature recorded
    if parsed.get("header", {}).get("msg_type") != "comm_msg":
        return
    content = codec.unpack(parsed["content"])
    data = content.get("data") or {}
    if data.get("method") != "custom" or (data.get("content") or {}).get("event") != "click":
        return
    comm_id = content.get("comm_id")
    for run in session.active_runs():
        dashboard = getattr(run, "dashboard", None)
        stop = getattr(getattr(dashboard, "controls", None), "stop", None)
        if stop is not None and getattr(stop, "model_id", None) == comm_id and not stop.disabled:
            run.cancel(STOP_REASON)
            return
