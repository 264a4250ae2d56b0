"""Re-running a cell whose run is still going stops that run first, in a waiting cell too.

A frontend re-runs a busy cell (Ctrl-Enter on a ``[*]`` cell) by clearing its output and sending a
new execute request with the same cell id (``metadata.cellId``). The kernel queues that request
behind the cell still waiting for its run, so nothing the new cell does can stop the old run: the
old run would stream on into an output area the frontend already discarded and only then would
the new one start. So while a cell waits, the execute requests that arrive are looked at (the
header and metadata only, never the code's content or a signature check's state) and one for the
waiting cell's own id stops its run cooperatively, with the reason ``RERUN``. The run leaves its
record, the cell ends, and the queued request runs and says which run it stopped.

Where requests are seen depends on the kernel (the same split as ``_waiting``):

- **ipykernel 7.x** receives every shell message on the main loop, through the callback the
  shell-channel thread's ``SubshellManager`` calls, before the message waits for the running
  cell's lock. The callback is wrapped once per kernel (``set_on_recv_callback``, not a documented
  API: without it, or with another shape, nothing is wrapped and a re-run waits as it used to).
- **ipykernel 6.x** hands each message to ``kernel.shell_handlers`` while the waiting cell pumps
  the kernel (``jupyter_ui_poll`` stashes execute requests there); the stash is wrapped while the
  cell pumps.

A request without a cell id never stops anything: matching sources instead could mistake a copy
of the cell, queued by Run All, for a re-run.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ._busy import busy_while_waiting
from ._handle import NotebookRun

__all__ = ["RERUN", "RerunWatch"]

RERUN = "the cell was run again"
"""The cancel reason of a run stopped because its cell was run again (the record says it)."""

_HOOKED: set[int] = set()  # id() of the kernels whose shell callback is wrapped (never unwrapped)


class RerunWatch:
    """The waiting cells by frontend cell id, and the runs a re-run of their cell stopped.

    Args:
        stopped: Called with a run just cancelled because its cell was run again.
    """

    def __init__(self, stopped: Callable[[NotebookRun], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, NotebookRun] = {}
        self._stopped = stopped
        self.hook_failure: str | None = None
        """Why an ipykernel 7.x kernel's messages could not be watched (re-runs then wait instead)."""

    @contextmanager
    def watching(self, shell: Any, cell_id: str | None, run: NotebookRun) -> Iterator[None]:
        """While inside, an execute request for ``cell_id`` stops ``run`` (no-op without a cell id)."""
        if not cell_id:
            yield
            return
        kernel = getattr(shell, "kernel", None)
        parent = None
        if kernel is not None:
            self._hook_receiving(kernel)
            parent = kernel.get_parent() if hasattr(kernel, "get_parent") else None
        with self._lock:
            self._waiting[cell_id] = run
        try:
            with busy_while_waiting(kernel, parent):
                yield
        finally:
            with self._lock:
                if self._waiting.get(cell_id) is run:
                    del self._waiting[cell_id]

    def request(self, cell_id: object) -> None:
        """An execute request for ``cell_id`` arrived: stop the run its cell is waiting for, if any."""
        if not isinstance(cell_id, str):
            return
        with self._lock:
            run = self._waiting.pop(cell_id, None)
        if run is None or run.done:
            return
        run.cancel(RERUN)
        if self._stopped is not None:
            self._stopped(run)

    # ------------------------------------------------------------------ ipykernel 7.x
    def _hook_receiving(self, kernel: Any) -> None:
        """Wrap the main shell's receive callback (7.x), once per kernel; nothing on other kernels.

        ``SubshellManager.set_on_recv_callback`` is not a documented API: when it is missing, has
        another signature or refuses, nothing is wrapped and ``hook_failure`` says why. Cells then
        work as before the hook (a re-run waits for the earlier run instead of stopping it).
        """
        if id(kernel) in _HOOKED:
            return
        manager = getattr(getattr(kernel, "shell_channel_thread", None), "manager", None)
        shell_main = getattr(kernel, "shell_main", None)
        if manager is None or shell_main is None:
            return  # ipykernel 6.x: see ``intercepting`` (the pump path)
        setter = getattr(manager, "set_on_recv_callback", None)
        if not callable(setter) or not _takes(shell_main, 2) or not _takes(setter, 1):
            self.hook_failure = "this ipykernel has no SubshellManager.set_on_recv_callback(callback) to wrap"
            _HOOKED.add(id(kernel))  # asked once per kernel
            return
        session = kernel.session

        async def received(subshell_id: str | None, msg: list[Any]) -> None:
            if self._waiting:
                self._look(session, msg)
            await shell_main(subshell_id, msg)

        try:
            setter(received)
        except AssertionError:  # not on the kernel's main thread: try again from the next waiting cell
            return
        except Exception as exc:  # an ipykernel whose callback setter changed: leave the kernel as it is
            self.hook_failure = f"SubshellManager.set_on_recv_callback refused the hook: {type(exc).__name__}: {exc}"
        _HOOKED.add(id(kernel))

    def _look(self, session: Any, msg: list[Any]) -> object:
        """The message's type, after stopping the waiting run its cell's re-run asks for (never raises)."""
        try:
            kind, cell_id = _peek(session, msg)  # only while a cell waits: one header parse per message
            if kind == "execute_request":
                self.request(cell_id)
            return kind
        except Exception:  # the kernel's own handling of the message must go on regardless
            return None

    # ------------------------------------------------------------------ ipykernel 6.x
    @contextmanager
    def intercepting(self, shell: Any) -> Iterator[None]:
        """While a 6.x cell pumps the kernel: look at each execute request the pump hands on."""
        kernel = getattr(shell, "kernel", None)
        handlers = getattr(kernel, "shell_handlers", None)
        inner = handlers.get("execute_request") if isinstance(handlers, dict) else None
        if handlers is None or inner is None:
            yield
            return

        async def execute_request(stream: Any, ident: Any, parent: dict[str, Any]) -> None:
            self.request((parent.get("metadata") or {}).get("cellId"))
            await inner(stream, ident, parent)

        handlers["execute_request"] = execute_request
        try:
            yield
        finally:
            if handlers.get("execute_request") is execute_request:
                handlers["execute_request"] = inner


def _takes(fn: Any, count: int) -> bool:
    """Whether ``fn`` can be called with ``count`` positional arguments (``True`` when unknowable)."""
    try:
        inspect.signature(fn).bind(*range(count))
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): assume the documented shape
        return True
    return True


def _peek(session: Any, msg: list[Any]) -> tuple[object, object]:
    """``(msg_type, cellId)`` of a shell message, from its header and metadata only."""
    try:
        _, frames = session.feed_identities(msg, copy=False)
        parsed = session.deserialize(frames, content=False, copy=False)  # content=False records no signature
    except Exception:  # a message the kernel itself will reject: not ours to judge
        return None, None
    return parsed.get("header", {}).get("msg_type"), (parsed.get("metadata") or {}).get("cellId")
