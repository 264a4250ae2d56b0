"""The ipykernel 7.x re-run hook without ``SubshellManager.set_on_recv_callback`` (an undocumented API).

The hook wraps the callback through which a 7.x kernel receives every shell message. A future
ipykernel may drop that setter, rename it or change what it takes: then nothing must be wrapped,
no cell may fail, and the kernel's messages must keep flowing. Fake kernels stand in for those
ipykernels here; the real 7.x path is covered by tests/kernel/test_kernel_rerun.py.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import anyio
import zmq
from IPython.core.interactiveshell import InteractiveShell
from jupyter_client.session import Session

from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.magics import NotebookRun, NotebookSession


def _kernel(manager: object) -> tuple[Any, list[Any]]:
    seen: list[Any] = []

    async def shell_main(subshell_id: str | None, msg: list[Any]) -> None:
        seen.append(msg)

    kernel = SimpleNamespace(
        shell_channel_thread=SimpleNamespace(manager=manager),
        shell_main=shell_main,
        session=Session(key=b"k"),
        iopub_socket=None,
        get_parent=lambda: {"header": {"msg_id": "waiting-cell"}},
    )
    return kernel, seen


def _watch(shell: InteractiveShell) -> Any:
    return shell.magics_manager.registry["AgentMagics"].reruns


def _run(session: NotebookSession) -> NotebookRun:
    session.register_model("quiet", ScriptedModel(["ok"]))
    return session.new_run("hello", model="quiet", cell_key="cell:c1")


def _request(session: Session, cell_id: str) -> list[Any]:
    msg = session.msg("execute_request", {"code": "1"}, metadata={"cellId": cell_id})
    return [zmq.Message(frame) for frame in [b"client", *session.serialize(msg)]]  # as the kernel receives it


def test_a_kernel_without_the_setter_is_left_alone(shell: InteractiveShell, session: NotebookSession) -> None:
    kernel, _ = _kernel(SimpleNamespace())  # a SubshellManager that lost set_on_recv_callback
    run, watch = _run(session), _watch(shell)
    with watch.watching(SimpleNamespace(kernel=kernel), "c1", run):  # the cell waits as usual
        pass
    assert "set_on_recv_callback" in watch.hook_failure
    assert not run.context.cancellation.is_cancelled


def test_a_setter_of_another_shape_or_that_refuses_is_left_alone(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    calls: list[tuple[Any, ...]] = []

    def two_arguments(subshell_id: object, callback: object) -> None:  # a changed signature
        calls.append((subshell_id, callback))

    def refuses(callback: object) -> None:
        raise TypeError("callback must be a coroutine function of three arguments")

    for setter, why in ((two_arguments, "no SubshellManager.set_on_recv_callback(callback)"), (refuses, "refused")):
        kernel, _ = _kernel(SimpleNamespace(set_on_recv_callback=setter))
        watch = _watch(shell)
        watch.hook_failure = None
        with watch.watching(SimpleNamespace(kernel=kernel), "c1", _run(session)):
            pass
        assert why in watch.hook_failure
    assert calls == []


def test_the_wrapped_callback_stops_a_rerun_and_always_passes_the_message_on(
    shell: InteractiveShell, session: NotebookSession
) -> None:
    installed: list[Callable[..., Any]] = []
    kernel, seen = _kernel(SimpleNamespace(set_on_recv_callback=installed.append))
    run, watch = _run(session), _watch(shell)
    with watch.watching(SimpleNamespace(kernel=kernel), "c1", run):
        assert watch.hook_failure is None
        (received,) = installed
        anyio.run(received, None, [b"not", b"a", b"message"])  # unreadable: the kernel judges it, not us
        assert not run.context.cancellation.is_cancelled
        anyio.run(received, None, _request(kernel.session, "another-cell"))
        assert not run.context.cancellation.is_cancelled
        anyio.run(received, None, _request(kernel.session, "c1"))  # the waiting cell, run again
        assert run.context.cancellation.is_cancelled
    assert len(seen) == 3  # every message reached the kernel's own handler, once
