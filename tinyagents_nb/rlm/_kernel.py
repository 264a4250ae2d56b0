"""``KernelEnvironment``: the REPL as a child ipykernel, started with ``jupyter_client``.

The kernel is started lazily from the session's own interpreter (``sys.executable``, so it has the
same packages), reused across runs (each run resets its namespace) and restarted when it dies.
Values are copied in through private temporary files: pickled, or as Arrow IPC for large tables
and arrays (``_transport``). Memory and CPU-time limits are OS limits on the kernel (``_oslimits``). All ZeroMQ traffic happens on
one worker thread owned by the environment (ZeroMQ sockets are not thread-safe, and a blocking
client does not care which event loop a run uses); the run's loop only awaits that thread.

What it isolates: the model's code runs in another process, so a crash, a ``sys.exit`` or a
runaway loop cannot take the notebook's kernel down, and Stop interrupts it with SIGINT (a kernel
that ignores the interrupt is restarted). Environment variables that are secrets are kept from the
child: by name (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSW*``, ``*CREDENTIAL*``, ``*AUTH*``)
or by value (``looks_like_credential``: ``GITHUB_PAT=ghp_…``, an ``sk-…`` key under any name);
a URL with a password (``DATABASE_URL``) is passed with the password masked. What it does not isolate: the child runs as the same user, with the
same files, network and packages: it is not a security boundary.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import pickle
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tinyagents_nb.harness.observability import looks_like_credential

from . import _helpers
from ._bridge import BridgeServer
from ._config import ContextValueError, RLMError
from ._environment import (
    OUTPUT_HEAD,
    OUTPUT_TAIL,
    BoundedOutput,
    ExecutionResult,
    StopReason,
    check_names,
    trim_traceback,
)
from ._oslimits import OSLimits, limit_error
from ._transport import ARROW_MIN_BYTES, PreparedValues, pack_values

if TYPE_CHECKING:
    from ._bridge import SubQueries

__all__ = ["KernelEnvironment"]

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
_POLL_S = 0.05
_SPEC = "tinyagents-rlm"


_URL_PASSWORD = re.compile(r"(?i)^([a-z][a-z0-9+.\-]*://[^\s:/@]*:)[^\s@/]+@")


def _child_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for name, value in os.environ.items():
        if _SECRET_NAME.search(name):
            continue
        masked = _URL_PASSWORD.sub(r"\1***@", value)
        if looks_like_credential(masked.replace(":***@", "@")):  # a key shape anywhere else in it
            continue
        env[name] = masked
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    env.pop("TINYAGENTS_NB_BLOCKING", None)
    return env


def _shutdown(state: dict[str, Any]) -> None:
    """Stop the kernel and remove the temporary directory (also at interpreter exit)."""
    kc, km, workdir = state.pop("kc", None), state.pop("km", None), state.pop("dir", None)
    if kc is not None:
        with contextlib.suppress(Exception):
            kc.stop_channels()
    if km is not None:
        with contextlib.suppress(Exception):
            km.shutdown_kernel(now=True)
    if workdir is not None:
        shutil.rmtree(workdir, ignore_errors=True)


def _shutdown_on_worker(state: dict[str, Any]) -> None:
    _shutdown(state)
    from jupyter_core.utils import ensure_event_loop  # the loop jupyter_client's blocking API made here

    ensure_event_loop().close()
    asyncio.set_event_loop(None)


_RESET = """\
get_ipython().run_line_magic("reset", "-f")
"""
_SETUP = """\
def __rlm_setup(path, arrow, port, token, source):
    import json, os, pickle
    ns = get_ipython().user_ns
    helpers = {{"__name__": "tinyagents_rlm_helpers"}}
    exec(compile(source, "<tinyagents-rlm-helpers>", "exec"), helpers)
    with open(path, "rb") as f:
        blobs = pickle.load(f)
    os.unlink(path)
    failed = {{}}
    for name, blob in blobs.items():
        try:
            ns[name] = pickle.loads(blob)
        except Exception as exc:
            failed[name] = f"{{type(exc).__name__}}: {{exc}}"
        del blob
    del blobs
    for name, (kind, file) in arrow.items():
        try:
            ns[name] = helpers["load_arrow"](kind, file)
        except Exception as exc:
            failed[name] = f"{{type(exc).__name__}}: {{exc}}"
    after_block = helpers["install"](ns, helpers["socket_transport"](port, token))
    helpers["hook_after_blocks"](get_ipython(), after_block)
    helpers["cap_output"](get_ipython(), {head!r}, {tail!r})
    print(json.dumps(failed))
__rlm_setup({path!r}, {arrow!r}, {port!r}, {token!r}, {source!r})
del __rlm_setup
"""


def _pid(km: Any) -> int:
    return int(km.provisioner.pid)


def _returncode(km: Any) -> int | None:
    """The kernel process's exit status once it ended (negative: the signal that ended it)."""
    process = getattr(getattr(km, "provisioner", None), "process", None)
    return None if process is None else process.poll()


def _absorb(msg: dict[str, Any], parts: BoundedOutput) -> str | None:
    """Add one IOPub message's text to ``parts``; returns the exception name of an ``error``."""
    kind, content = msg["msg_type"], msg["content"]
    if kind == "stream":
        parts.write(content["text"])
    elif kind in ("execute_result", "display_data"):
        text = content.get("data", {}).get("text/plain")
        if text:
            parts.write(text + "\n")
    elif kind == "error":
        parts.write(trim_traceback("\n".join(content.get("traceback", ()))) + "\n")
        return str(content.get("ename", "Error"))
    return None


class KernelEnvironment:
    """A child ipykernel as the RLM's REPL (the default environment).

    Args:
        python: The interpreter to start the kernel with (default: this one).
        startup_timeout_s: How long the kernel may take to answer its first request.
        interrupt_grace_s: How long an interrupted block may take to stop before the kernel is restarted.
        arrow_min_bytes: DataFrames, numeric arrays and Arrow tables at least this large (in memory)
            are copied in as Arrow IPC when ``pyarrow`` is installed (extra ``[rlm]``, in the
            kernel's interpreter too); ``None``: always pickle.
    """

    name = "kernel"

    def __init__(
        self,
        *,
        python: str | None = None,
        startup_timeout_s: float = 60.0,
        interrupt_grace_s: float = 1.0,
        arrow_min_bytes: int | None = ARROW_MIN_BYTES,
    ) -> None:
        self.python = python or sys.executable
        self.startup_timeout_s = startup_timeout_s
        self.interrupt_grace_s = interrupt_grace_s
        self.arrow_min_bytes = arrow_min_bytes
        self.transport: dict[str, str] = {}
        """How the last run's values were copied in, by name: ``"pickle"`` or ``"arrow"``."""
        self._state: dict[str, Any] = {}
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tinyagents-rlm-kernel")
        self._busy = threading.Lock()
        self._run: tuple[PreparedValues, int, str] | None = None
        self._limits = OSLimits(None, None)
        self._bridge: Any = None
        self.restarts = 0
        self.keep_namespace = False
        """Keep the namespace from one run to the next (an ``RLMSession``'s REPL): no reset at the start."""
        self._finalizer = weakref.finalize(self, _shutdown, self._state)

    # ------------------------------------------------------------------ lifecycle (worker thread)
    def _start(self) -> None:
        # imported on first use: jupyter_client loads ZeroMQ, which an in-process RLM never needs
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import KernelManager

        _shutdown(self._state)
        workdir = Path(tempfile.mkdtemp(prefix="tinyagents-rlm-"))
        self._state["dir"] = workdir
        spec = workdir / "kernels" / _SPEC
        spec.mkdir(parents=True)
        argv = [self.python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        spec.joinpath("kernel.json").write_text(
            json.dumps({"argv": argv, "display_name": "TinyAgents RLM REPL", "language": "python"})
        )
        km = KernelManager(
            kernel_name=_SPEC,
            kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]),
            transport="ipc",  # Unix sockets in the private directory, not TCP ports any local user can reach
            connection_file=str(workdir / "kernel.json"),
        )
        self._state["km"] = km
        log = workdir / "kernel.log"
        try:
            with log.open("wb") as stderr:
                km.start_kernel(cwd=str(workdir), env=_child_env(), stdout=subprocess.DEVNULL, stderr=stderr)
            kc = km.client()
            self._state["kc"] = kc
            kc.start_channels()
            kc.wait_for_ready(timeout=self.startup_timeout_s)
            self._limits.apply_at_start(_pid(km))
            self._state["memory_mb"] = self._limits.memory_mb
        except Exception as exc:
            tail = log.read_text(errors="replace")[-300:].strip() if log.exists() else ""
            _shutdown(self._state)
            raise RLMError(
                f"the RLM's child kernel did not start: {type(exc).__name__}: {exc}" + (f" ({tail})" if tail else ""),
                hint=f"check that {self.python} can run `python -m ipykernel_launcher`",
            ) from exc

    def _ensure(self) -> None:
        """Start the kernel if there is none or it died."""
        km = self._state.get("km")
        if km is not None and km.is_alive():
            return
        if km is not None:
            self.restarts += 1
        self._start()

    def _run_setup(self, code: str) -> None:
        result = self._execute(code, None, lambda: False)
        lines = result.output.strip().splitlines()
        if result.error_type is not None or not lines:
            raise RLMError(f"the RLM's child kernel could not be set up: {result.output.strip()[-500:]}")
        failed: dict[str, str] = json.loads(lines[-1])
        if failed:
            name, why = next(iter(failed.items()))
            hint = (
                "values whose class is defined in the notebook cannot be unpickled in the child; "
                "use the in-process environment (--rlm local) or plain data"
            )
            if "MemoryError" in why:
                hint = "the value does not fit in the kernel's RLMLimits.memory_mb: raise it, or pass less"
            elif "pyarrow" in why:
                hint = f"install pyarrow for {self.python} (tinyagents-nb[rlm]), or KernelEnvironment(arrow_min_bytes=None)"
            raise ContextValueError(
                name, f"context value {name!r} could not be loaded in the REPL kernel: {why}", hint=hint
            )

    # ------------------------------------------------------------------ Environment
    def prepare_values(self, values: Mapping[str, Any]) -> PreparedValues:
        """Serialize each value now (pickle, or Arrow for a large table), so a bad one fails before the run."""
        check_names(values)
        return pack_values(values, arrow_min_bytes=self.arrow_min_bytes)

    async def start_run(self, prepared: Any, queries: SubQueries) -> None:
        if not self._busy.acquire(blocking=False):
            raise RLMError("this RLM kernel is busy with another run", hint="wait for it, or give the RLM its own")
        try:
            limits = OSLimits.of(getattr(queries, "limits", None))
            limits.check_platform()
            bridge = BridgeServer(queries)
            await bridge.start()
            self._bridge = bridge
            await self._call(self._begin, prepared, bridge.port, bridge.token, limits)
        except BaseException:
            await self.end_run()
            if isinstance(prepared, PreparedValues):
                prepared.cleanup()
            raise

    def _begin(self, prepared: PreparedValues, port: int, token: str, limits: OSLimits) -> None:
        self._run = None
        self.transport = dict(prepared.transport)
        self._limits = limits
        if self._state.get("memory_mb") != limits.memory_mb and self.started:
            if self.keep_namespace:  # a session's variables would be lost without a word
                raise RLMError("this REPL kernel runs under another memory limit", hint="keep memory_mb for a session")
            _shutdown(self._state)  # a hard limit cannot be raised: a new kernel gets the new one
        self._ensure()
        if self._state.pop("cpu_armed", False):  # the last run's per-block CPU limit must not cut this setup short
            OSLimits(None, None).arm_cpu(_pid(self._state["km"]))
        self._load(prepared, port, token)
        self._run = (prepared, port, token)  # kept to load the values again after a restart

    def _load(self, prepared: PreparedValues, port: int, token: str) -> None:
        """Reset the namespace, install the helpers and load the values (via private temp files)."""
        fd, path = tempfile.mkstemp(prefix="values-", suffix=".pickle", dir=self._state["dir"])
        with os.fdopen(fd, "wb") as f:
            pickle.dump(prepared.blobs, f, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            source = inspect.getsource(_helpers)
            setup = _SETUP.format(
                path=path,
                arrow=prepared.files,
                port=port,
                token=token,
                source=source,
                head=OUTPUT_HEAD,
                tail=OUTPUT_TAIL,
            )
            self._run_setup(("" if self.keep_namespace else _RESET) + setup)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    async def execute(self, code: str, *, timeout_s: float | None, should_stop: Callable[[], bool]) -> ExecutionResult:
        abandoned = threading.Event()
        try:
            result: ExecutionResult = await self._call(
                self._execute_or_restart, code, timeout_s, lambda: should_stop() or abandoned.is_set()
            )
            return result
        except BaseException:
            abandoned.set()
            raise

    def _execute_or_restart(
        self, code: str, timeout_s: float | None, should_stop: Callable[[], bool]
    ) -> ExecutionResult:
        note = ""
        km = self._state.get("km")
        if self._run is not None and (km is None or not km.is_alive()):
            self._restore()
            note = "[the REPL kernel had stopped and was restarted: the context values are back, other variables are lost]\n"
        if "kc" not in self._state:
            return ExecutionResult(
                output="[the REPL kernel is gone and could not be restarted]\n", error_type="KernelDied"
            )
        limits, km = self._limits, self._state["km"]
        if limits.cpu_seconds is not None or self._state.get("cpu_armed"):
            limits.arm_cpu(_pid(km))
            self._state["cpu_armed"] = limits.cpu_seconds is not None
        result = self._execute(code, timeout_s, should_stop)
        hit = limits.classify(result.error_type, _returncode(km)) if limits.any and result.stopped is None else None
        if hit is not None:  # the kernel is restarted whether it died or raised: its state is suspect
            note += limit_error(hit, limits, _returncode(km))
            self._shutdown_for_restart()
            if self._run is not None:
                self._restore()
            return ExecutionResult(
                output=result.output + note, error_type=hit, stopped=result.stopped, duration_s=result.duration_s
            )
        if not note:
            return result
        return ExecutionResult(
            output=note + result.output,
            error_type=result.error_type,
            stopped=result.stopped,
            duration_s=result.duration_s,
        )

    def _shutdown_for_restart(self) -> None:
        with contextlib.suppress(Exception):
            _shutdown(self._state)

    def _restore(self) -> None:
        """Restart the kernel and load the run's values and helpers again."""
        assert self._run is not None
        self.restarts += 1
        self._start()
        self._load(*self._run)

    def _execute(self, code: str, timeout_s: float | None, should_stop: Callable[[], bool]) -> ExecutionResult:
        kc, km = self._state["kc"], self._state["km"]
        with contextlib.suppress(queue.Empty):
            while True:  # replies of earlier requests nobody read
                kc.get_shell_msg(timeout=0)
        started = time.monotonic()
        msg_id = kc.execute(code, store_history=False, allow_stdin=False, stop_on_error=False)
        parts = BoundedOutput()  # the child forwards a bounded amount too (``cap_output``): this is the backstop
        error_type: str | None = None
        stopped: StopReason | None = None
        interrupted_at: float | None = None
        next_alive_check = started + 1.0
        while True:
            try:
                msg = kc.get_iopub_msg(timeout=_POLL_S)
            except queue.Empty:
                msg = None
            if msg is not None and msg["parent_header"].get("msg_id") == msg_id:
                error_type = _absorb(msg, parts) or error_type
                if msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
                    break
            now = time.monotonic()
            if interrupted_at is None:
                if should_stop():
                    stopped = "stop"
                elif timeout_s is not None and now - started > timeout_s:
                    stopped = "timeout"
                if stopped is not None:
                    km.interrupt_kernel()
                    interrupted_at = now
            elif now - interrupted_at > self.interrupt_grace_s:
                # kill it now (a restart would hold Stop up); the next block or run starts a fresh kernel
                parts.write("[the block ignored the interrupt: the REPL kernel was stopped, its variables are lost]\n")
                _shutdown(self._state)
                error_type = error_type or "KeyboardInterrupt"
                break
            if now > next_alive_check:
                next_alive_check = now + 1.0
                if not km.is_alive():
                    parts.write("[the REPL kernel died while running this block]\n")
                    error_type = error_type or "KernelDied"
                    break
        return ExecutionResult(
            output=parts.getvalue(), error_type=error_type, stopped=stopped, duration_s=time.monotonic() - started
        )

    async def end_run(self) -> None:
        bridge = getattr(self, "_bridge", None)
        self._bridge = None
        if bridge is not None:
            await bridge.close()
        if self._run is not None:
            self._run[0].cleanup()  # the Arrow files: no restart will read them again
        self._run = None
        if self._busy.locked():
            self._busy.release()

    def close(self) -> None:
        """Stop the kernel now (the next run starts a new one).

        The shutdown runs on the environment's worker thread, where ``jupyter_client``'s blocking
        calls keep their event loop; that loop is closed too, so nothing is left for the GC to warn about.
        """
        try:
            self._executor.submit(_shutdown_on_worker, self._state).result(timeout=30)
        except Exception:
            _shutdown(self._state)

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    @property
    def started(self) -> bool:
        """Whether a kernel is up right now."""
        km = self._state.get("km")
        return km is not None and bool(km.is_alive())

    def __repr__(self) -> str:
        return f"KernelEnvironment(python={self.python!r}, started={self.started})"
