"""Keep the frontend's kernel indicator at "Busy" while a cell waits for its run.

JupyterLab's status bar (and Notebook 7's kernel indicator) shows the state of the last ``status``
message on IOPub, whatever request it belongs to. A kernel frames every message it handles with
``busy`` and ``idle``: widget messages a waiting cell's pump handles on ipykernel 6, deferred
execute requests (whose ``idle`` ipykernel 6 says on behalf of the waiting cell), control-channel
requests such as the debugger's on both majors. Each such ``idle`` would leave "Idle" under a
``[*]`` cell, so while inside, every ``idle`` the kernel publishes is followed by a ``busy`` for the
waiting cell's request, and one ``busy`` is said as the wait begins (for an ``idle`` that came while
the cell set its run up). The cell's own final ``idle`` comes after the wait, so it is never covered.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["busy_while_waiting"]


@contextmanager
def busy_while_waiting(kernel: Any, cell: Any) -> Iterator[None]:
    """While inside, each ``idle`` ``kernel`` publishes is followed by ``busy`` for the request ``cell``.

    A kernel without ``_publish_status`` (not an ipykernel), or one whose method is already replaced
    on the instance (by someone else), is left alone.
    """
    publish = getattr(kernel, "_publish_status", None)
    if not callable(publish) or not cell or "_publish_status" in vars(kernel):
        yield
        return

    def publish_status(status: str, channel: str, parent: Any = None) -> None:
        publish(status, channel, parent)
        if status == "idle":
            try:
                publish("busy", channel, cell)
            except Exception:  # cosmetic: never let it cost the kernel a message
                pass

    kernel._publish_status = publish_status
    try:
        publish("busy", "shell", cell)  # an idle said between the cell's start and its wait (a control request)
    except Exception:  # cosmetic, as above
        pass
    try:
        yield
    finally:
        if vars(kernel).get("_publish_status") is publish_status:
            del kernel._publish_status
