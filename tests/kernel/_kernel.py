"""A real ipykernel driven through jupyter_client, the way a frontend drives it.

``KernelHarness`` starts a kernel from a given Python interpreter (so the suite can run against
ipykernel 7.x from the test venv and 6.x from a second venv), executes cells, collects the IOPub
output of each cell, and sends widget ``comm_msg``s exactly as JupyterLab does when a button is
clicked.
"""

from __future__ import annotations

import json
import os
import queue
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager


@dataclass
class CellResult:
    msg_id: str
    status: str
    stdout: str = ""
    stderr: str = ""
    error: dict[str, Any] | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    elapsed_s: float = 0.0

    def text(self) -> str:
        """All plain-text output: streams plus text/plain of results and displays."""
        parts = [self.stdout]
        for out in self.outputs:
            data = out.get("data", {})
            if "text/plain" in data:
                parts.append(data["text/plain"])
        return "\n".join(p for p in parts if p)


def _update(outputs: list[dict[str, Any]], content: dict[str, Any]) -> None:
    """Apply an ``update_display_data`` the way frontends do: replace the outputs with its display id."""
    display_id = content.get("transient", {}).get("display_id")
    for index, out in enumerate(outputs):
        if display_id is not None and out.get("transient", {}).get("display_id") == display_id:
            outputs[index] = {**out, "data": content["data"], "metadata": content.get("metadata", {})}


class KernelHarness:
    def __init__(self, python: str, workdir: Path, *, env: dict[str, str | None] | None = None) -> None:
        self.workdir = workdir
        spec_dir = workdir / "kernels" / "tinyagents-test"
        spec_dir.mkdir(parents=True, exist_ok=True)
        (spec_dir / "kernel.json").write_text(
            json.dumps(
                {
                    "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    "display_name": "tinyagents test kernel",
                    "language": "python",
                    "env": {"PYDEVD_DISABLE_FILE_VALIDATION": "1"},
                }
            )
        )
        ksm = KernelSpecManager(kernel_dirs=[str(workdir / "kernels")])
        self.km = KernelManager(kernel_name="tinyagents-test", kernel_spec_manager=ksm)
        # the session's default store goes to the kernel's folder (tests must not write the user's cache)
        merged: dict[str, str | None] = {
            **os.environ,
            "TINYAGENTS_NB_STORE_DIR": str(workdir / "stores"),
            **(env or {}),
        }
        self.km.start_kernel(cwd=str(workdir), env={k: v for k, v in merged.items() if v is not None})
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.version = self.execute("import ipykernel; print(ipykernel.__version__)").stdout.strip()

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    def execute(self, code: str, *, timeout: float = 60.0, allow_stdin: bool = True) -> CellResult:
        """Run a cell; ``allow_stdin=False`` is how nbclient, papermill and nbval execute."""
        start = time.monotonic()
        msg_id = self.kc.execute(code, store_history=True, allow_stdin=allow_stdin)
        result = self._collect(msg_id, timeout)
        reply = self.kc.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.kc.get_shell_msg(timeout=timeout)
        result.status = reply["content"]["status"]
        result.elapsed_s = time.monotonic() - start
        return result

    def _collect(self, msg_id: str, timeout: float) -> CellResult:
        result = CellResult(msg_id=msg_id, status="")
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"cell {msg_id} did not go idle within {timeout} s")
            try:
                msg = self.kc.get_iopub_msg(timeout=remaining)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                if content["name"] == "stdout":
                    result.stdout += content["text"]
                else:
                    result.stderr += content["text"]
            elif kind in ("execute_result", "display_data"):
                result.outputs.append(content)
            elif kind == "update_display_data":
                _update(result.outputs, content)
            elif kind == "error":
                result.error = content
            elif kind == "status" and content["execution_state"] == "idle":
                return result

    def click(self, comm_id: str) -> None:
        """Send the frontend's button-click message for the widget with this model id."""
        msg = self.kc.session.msg(
            "comm_msg", {"comm_id": comm_id, "data": {"method": "custom", "content": {"event": "click"}}}
        )
        self.kc.shell_channel.send(msg)

    def interrupt(self) -> None:
        self.km.interrupt_kernel()

    def value(self, expr: str, *, timeout: float = 30.0) -> Any:
        """Evaluate an expression in the kernel and return it (it must be JSON-serializable)."""
        out = self.execute(f"import json as _j; print(_j.dumps({expr}))", timeout=timeout)
        if out.error:
            raise AssertionError(f"{expr!r} failed in the kernel: {out.error['ename']}: {out.error['evalue']}")
        return json.loads(out.stdout.strip().splitlines()[-1])


class LiveCell:
    """A cell sent without waiting for it, watched message by message (widgets included), as a frontend does.

    Tracks the widget models the kernel opens (``comm_open``) with their state and every state update
    (``comm_msg``), and the cell's outputs with ``update_display_data`` applied.
    """

    def __init__(self, kernel: KernelHarness, code: str, *, cell_id: str | None = None) -> None:
        self.kernel = kernel
        if cell_id is None:
            self.msg_id = kernel.kc.execute(code, store_history=True)
        else:  # as JupyterLab and Notebook 7 send it: the cell's id in the request's metadata
            content = {"code": code, "silent": False, "store_history": True, "user_expressions": {}}
            content |= {"allow_stdin": True, "stop_on_error": True}
            msg = kernel.kc.session.msg("execute_request", content, metadata={"cellId": cell_id})
            kernel.kc.shell_channel.send(msg)
            self.msg_id = msg["header"]["msg_id"]
        self.result = CellResult(msg_id=self.msg_id, status="")
        self.models: dict[str, dict[str, Any]] = {}
        self.opened: set[str] = set()
        """The widget models this cell opened (``models`` is shared with the cells it ``adopt``-ed)."""
        self.others: list[dict[str, Any]] = []
        self.idle = False

    def adopt(self, earlier: LiveCell) -> None:
        """Take the messages for this cell that ``earlier`` read while it was pumped (widgets shared)."""
        self.models = earlier.models
        for msg in earlier.others:
            self._handle(msg)
        earlier.others = []

    def pump(self, until: Any = None, *, timeout: float = 30.0) -> bool:
        """Process IOPub messages until ``until(self)`` holds or the cell is idle; returns whether it held."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if until is not None and until(self):
                return True
            if self.idle and until is None:
                return True
            try:
                msg = self.kernel.kc.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                continue
            self._handle(msg)
        return until(self) if until is not None else self.idle

    def _handle(self, msg: dict[str, Any]) -> None:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "comm_open":
            self.models[content["comm_id"]] = dict(content.get("data", {}).get("state", {}))
            if msg["parent_header"].get("msg_id") == self.msg_id:
                self.opened.add(content["comm_id"])
        elif kind == "comm_msg":
            data = content.get("data", {})
            if data.get("method") in ("update", "echo_update"):
                self.models.setdefault(content["comm_id"], {}).update(data.get("state", {}))
        if msg["parent_header"].get("msg_id") != self.msg_id:
            self.others.append(msg)  # another cell's: a LiveCell sent meanwhile may want it
            return
        if kind == "stream":
            self.result.stdout += content["text"] if content["name"] == "stdout" else ""
        elif kind in ("execute_result", "display_data"):
            self.result.outputs.append(content)
        elif kind == "update_display_data":
            _update(self.result.outputs, content)
        elif kind == "error":
            self.result.error = content
        elif kind == "status" and content["execution_state"] == "idle":
            self.idle = True

    def widget(self, model: str, **match: Any) -> str:
        """The comm id of the first widget of this model name whose state has these values."""
        for comm_id, state in self.models.items():
            if state.get("_model_name") == model and all(state.get(k) == v for k, v in match.items()):
                return comm_id
        raise LookupError(f"no {model} with {match} among {len(self.models)} widgets")

    def html(self, *, own: bool = False) -> str:
        """What the dashboard shows: every HTML/Label widget's value and every Output widget's Markdown, joined.

        ``own``: only the widgets this cell opened (not an adopted cell's dashboard).
        """
        parts: list[str] = []
        for comm_id, state in self.models.items():
            if own and comm_id not in self.opened:
                continue
            name = state.get("_model_name")
            if name in ("HTMLModel", "LabelModel"):
                parts.append(str(state.get("value", "")))
            elif name == "OutputModel":
                parts.extend(str(o.get("data", {}).get("text/markdown", "")) for o in state.get("outputs", ()))
        return "\n".join(parts)

    def markdown(self) -> str:
        return "\n".join(o.get("data", {}).get("text/markdown", "") for o in self.result.outputs)

    def send_state(self, comm_id: str, **state: Any) -> None:
        """The frontend's message when the user edits a widget (e.g. types in a Text box)."""
        msg = self.kernel.kc.session.msg(
            "comm_msg", {"comm_id": comm_id, "data": {"method": "update", "state": state, "buffer_paths": []}}
        )
        self.kernel.kc.shell_channel.send(msg)

    def finish(self, timeout: float = 60.0) -> CellResult:
        if not self.pump(timeout=timeout):
            raise TimeoutError(f"cell {self.msg_id} did not finish in {timeout} s")
        reply = self.kernel.kc.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != self.msg_id:
            reply = self.kernel.kc.get_shell_msg(timeout=timeout)
        self.result.status = reply["content"]["status"]
        return self.result
