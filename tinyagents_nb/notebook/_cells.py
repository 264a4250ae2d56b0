"""``CellLog``: what this kernel executed since the extension loaded, with what each cell showed.

IPython's ``pre_run_cell``/``post_run_cell`` events give each cell's source and execution count; its
outputs are taken where the frontend gets them, at the kernel session's ``send`` (stream text,
``execute_result``, ``display_data`` and ``error`` messages), matched to the cell by the request's
message id. One hook sees all of them on ipykernel 6 and 7 whichever thread wrote them (stdout is
flushed from the kernel's IO thread, after the cell's ``post_run_cell``), and it costs one dict
lookup per message. Cells run before the extension loaded come from IPython's history (sources) and
``Out`` (results).

Everything is bounded: at most ``max_cells`` cells, each keeping at most ``max_output_chars`` of output
(its head and its tail, where errors and totals are). PNG and JPEG displays are kept as images too
(``NotebookImage``, for models with vision), at most ``MAX_IMAGES`` per cell and ``max_image_chars`` in
all: the oldest cells' images go first, their text descriptions stay.
"""

from __future__ import annotations

import re
import sys
import threading
import traceback
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from ._images import MAX_IMAGES, NotebookImage, image_of

__all__ = ["CellEntry", "CellLog", "display_text", "strip_ansi", "trim_traceback"]

_ANSI: Final = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_TRACEBACK_LINES: Final = 20
_OUTPUT_KINDS: Final = frozenset({"stream", "execute_result", "display_data", "error"})
_WIDGET: Final = "application/vnd.jupyter.widget-view+json"


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def trim_traceback(text: str, *, lines: int = _TRACEBACK_LINES) -> str:
    """A traceback without colour codes, cut to its last ``lines`` lines (where the error is)."""
    kept = [line.rstrip() for line in strip_ansi(text).rstrip().splitlines()]
    kept = [line for line in kept if line.strip(" -")]  # IPython's rulers say nothing to a model
    if len(kept) > lines:
        tail = kept[-(lines - 2) :]  # the heading, a note, then the end (where the error is)
        kept = [kept[0], f"… ({len(kept) - 1 - len(tail)} lines trimmed)", *tail]
    return "\n".join(kept)


@dataclass(slots=True)
class CellEntry:
    """One executed cell: its count, source, outputs (as text, in order) and error."""

    count: int | None
    source: str
    msg_id: str | None = None
    outputs: list[str] = field(default_factory=list)
    error: str | None = None
    error_name: str | None = None
    size: int = 0
    cut: int = 0
    images: list[NotebookImage] = field(default_factory=list)

    def add(self, text: str, limit: int) -> None:
        if not text:
            return
        if self.size + len(text) > limit:
            keep = max(0, limit - self.size)
            self.cut += len(text) - keep
            text = text[:keep]
            if not text:
                return
        self.outputs.append(text)
        self.size += len(text)


def display_text(data: dict[str, Any]) -> tuple[str, NotebookImage | None]:
    """A display output's ``data`` as text for the model, and its image when it has one that fits."""
    if _WIDGET in data:
        return "", None  # a live widget (a dashboard): its record, once the run ended, arrives as its own output
    image, described = image_of(data)
    text = str(data.get("text/plain", ""))
    if described:
        return f"[{described}{': ' + text if text and not text.startswith('<') else ''}]", image
    if "text/markdown" in data and (not text or text.startswith("<")):
        return str(data["text/markdown"]), None
    return text, None


class CellLog:
    """Records cells and their outputs in a running kernel (``install`` it once per shell).

    Args:
        max_cells: How many recent cells are kept.
        max_output_chars: Output kept per cell (the rest is counted, not kept).
        max_image_chars: Base64 characters of images kept over all cells.
    """

    def __init__(
        self, *, max_cells: int = 200, max_output_chars: int = 20_000, max_image_chars: int = 8_000_000
    ) -> None:
        self._cells: OrderedDict[int, CellEntry] = OrderedDict()
        self._by_msg: dict[str, CellEntry] = {}
        self._lock = threading.Lock()
        self._next = 0
        self._max_cells = max_cells
        self._max_output = max_output_chars
        self._max_images = max_image_chars
        self._image_chars = 0
        self._shell: Any = None
        self._session: Any = None
        self._send: Callable[..., Any] | None = None
        self.first_count: int | None = None
        """The execution count of the first cell recorded (earlier ones come from history)."""

    # ------------------------------------------------------------------ wiring
    def install(self, shell: Any) -> None:
        """Listen to ``shell``'s cell events and, in a kernel, to what its session sends to the frontend."""
        if self._shell is not None:
            return
        self._shell = shell
        shell.events.register("pre_run_cell", self.pre_run_cell)
        shell.events.register("post_run_cell", self.post_run_cell)
        session = getattr(getattr(shell, "kernel", None), "session", None)
        if session is not None and callable(getattr(session, "send", None)):
            self._session, self._send = session, session.send
            session.send = self._sending  # an instance attribute: the class and other sessions are untouched

    def uninstall(self) -> None:
        shell, self._shell = self._shell, None
        if shell is None:
            return
        for name, hook in (("pre_run_cell", self.pre_run_cell), ("post_run_cell", self.post_run_cell)):
            try:
                shell.events.unregister(name, hook)
            except ValueError:
                pass
        if self._session is not None and self._session.__dict__.get("send") == self._sending:
            del self._session.send
        self._session = self._send = None

    def _sending(
        self, stream: Any, msg_or_type: Any, content: Any = None, parent: Any = None, *args: Any, **kw: Any
    ) -> Any:
        """``Session.send`` with every argument passed on as given (callers pass ``ident`` by position too)."""
        send = self._send
        assert send is not None
        try:
            self._observe(msg_or_type, content, parent)
        except Exception:  # recording must never break what the frontend receives
            pass
        return send(stream, msg_or_type, content, parent, *args, **kw)

    def _observe(self, msg_or_type: Any, content: Any, parent: Any) -> None:
        if isinstance(msg_or_type, dict):
            kind = msg_or_type.get("msg_type") or msg_or_type.get("header", {}).get("msg_type")
            content = msg_or_type.get("content", content)
            parent = msg_or_type.get("parent_header", parent)
        else:
            kind = msg_or_type
        if kind not in _OUTPUT_KINDS or not isinstance(parent, dict) or not isinstance(content, dict):
            return
        entry = self._by_msg.get(str(parent.get("msg_id", "")))
        if entry is None:
            return
        if kind == "stream":
            text = str(content.get("text", ""))
            if content.get("name") == "stderr":
                text = "".join(f"[stderr] {line}" for line in text.splitlines(keepends=True))
        elif kind == "error":
            text = ""
            with self._lock:
                entry.error_name = str(content.get("ename", "")) or entry.error_name
                entry.error = trim_traceback("\n".join(map(str, content.get("traceback", ()))))
        else:
            text, image = display_text(content.get("data", {}) or {})
            if image is not None:
                self._keep(entry, image)
            if kind == "execute_result" and text:
                text = f"Out[{content.get('execution_count', entry.count)}]: {text}"
        if text:
            with self._lock:
                entry.add(text if text.endswith("\n") else text + "\n", self._max_output)

    def _keep(self, entry: CellEntry, image: NotebookImage) -> None:
        """Keep ``image`` with its cell; the oldest cells' images go when the total passes the bound."""
        with self._lock:
            if len(entry.images) >= MAX_IMAGES:
                return
            entry.images.append(image)
            self._image_chars += len(image.data)
            for old in self._cells.values():
                if self._image_chars <= self._max_images:
                    break
                while old.images and self._image_chars > self._max_images:
                    self._image_chars -= len(old.images.pop(0).data)

    # ------------------------------------------------------------------ IPython events
    def pre_run_cell(self, info: Any) -> None:
        shell = self._shell
        count = getattr(shell, "execution_count", None)
        kernel = getattr(shell, "kernel", None)
        msg_id = None
        if kernel is not None and hasattr(kernel, "get_parent"):
            msg_id = str(kernel.get_parent().get("header", {}).get("msg_id", "")) or None
        entry = CellEntry(count=count, source=str(getattr(info, "raw_cell", "") or ""), msg_id=msg_id)
        with self._lock:
            key = self._next
            self._next += 1
            self._cells[key] = entry
            if msg_id:
                self._by_msg[msg_id] = entry
            if self.first_count is None and isinstance(count, int):
                self.first_count = count
            while len(self._cells) > self._max_cells:
                _, old = self._cells.popitem(last=False)
                self._image_chars -= sum(len(image.data) for image in old.images)
                if old.msg_id:
                    self._by_msg.pop(old.msg_id, None)

    def post_run_cell(self, result: Any) -> None:
        with self._lock:
            if not self._cells:
                return
            entry = next(reversed(self._cells.values()))
            count = getattr(result, "execution_count", None)
            if isinstance(count, int):
                entry.count = count
            error = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
            if error is not None and entry.error is None:
                entry.error_name = type(error).__name__
                entry.error = trim_traceback("".join(traceback.format_exception(error)))

    # ------------------------------------------------------------------ reading
    def entries(self) -> list[CellEntry]:
        """The recorded cells, oldest first (copies of the lists, safe to read)."""
        with self._lock:
            return [
                CellEntry(
                    e.count, e.source, e.msg_id, list(e.outputs), e.error, e.error_name, e.size, e.cut, list(e.images)
                )
                for e in self._cells.values()
            ]

    def history(self) -> Iterator[tuple[int, str, Any]]:
        """``(count, source, Out value or None)`` of the cells run before the first recorded one."""
        shell = self._shell
        manager = getattr(shell, "history_manager", None)
        if manager is None:
            return
        stop = self.first_count
        out = getattr(shell, "user_ns", {}).get("Out", {})
        try:
            rows = list(manager.get_range(session=0, start=1, stop=stop, raw=True, output=False))
        except Exception:
            return
        for _, line, source in rows:
            yield int(line), str(source), out.get(line) if isinstance(out, dict) else None

    def last_error(self) -> CellEntry | None:
        """The newest cell that raised: from the log, else IPython's ``sys.last_value`` (an earlier cell)."""
        for entry in reversed(self.entries()):
            if entry.error is not None:
                return entry
        error = getattr(sys, "last_value", None)
        if isinstance(error, BaseException):
            text = trim_traceback("".join(traceback.format_exception(error)))
            return CellEntry(count=None, source="", error=text, error_name=type(error).__name__)
        return None
