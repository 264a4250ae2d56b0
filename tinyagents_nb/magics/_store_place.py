"""Where a notebook session keeps its store when ``AgentMagics.store_path`` is not set.

Every session journals its runs and thread history to SQLite by default, so a killed kernel loses
nothing. The file sits beside the notebook, ``.tinyagents/<notebook>.sqlite``, when the kernel knows
which notebook it serves. Kernels learn that from their launcher, not from the protocol:

- jupyter_server 2 (JupyterLab 4, Notebook 7, Voila) starts a notebook's kernel with
  ``JPY_SESSION_NAME`` set to the notebook's absolute path (older servers: its path relative to the
  server root), and writes it as ``jupyter_session`` into the connection file;
- ipykernel (recent 6.x and 7) copies ``JPY_SESSION_NAME`` into the namespace as ``__session__``;
- VS Code sets ``__vsc_ipynb_file__``;
- nbclient, nbconvert, papermill and nbval set none of these (they start the kernel in the notebook's
  folder).

With no notebook path, the file goes to the user's cache folder (``~/.cache/tinyagents-nb/runs/`` on
Linux), one file per working folder, so headless runs of the same notebooks share one. The
``TINYAGENTS_NB_STORE_DIR`` environment variable puts these default files in another folder (tests and
CI point it at a temporary one), and an empty value turns the default store off.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from traitlets import Float, HasTraits, Unicode, observe

from ._durable import announce_interrupted, run_store_of

__all__ = ["ENV_DIR", "FOLDER", "StoreSettings", "default_store_path", "notebook_path", "session_store_path"]

ENV_DIR = "TINYAGENTS_NB_STORE_DIR"
FOLDER = ".tinyagents"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _candidates(shell: Any) -> list[str]:
    """What the launcher may have told the kernel about its notebook, most direct first."""
    found: list[object] = [os.environ.get("JPY_SESSION_NAME", "")]
    user_ns = getattr(shell, "user_ns", None)
    if isinstance(user_ns, dict):
        found += [user_ns.get("__session__"), user_ns.get("__vsc_ipynb_file__")]
    found.append(_connection_session(shell))
    return [value for value in found if isinstance(value, str) and value]


def _connection_session(shell: Any) -> str:
    """The ``jupyter_session`` jupyter_client wrote into this kernel's connection file, if any."""
    app = getattr(getattr(shell, "kernel", None), "parent", None)
    path = getattr(app, "abs_connection_file", None) or getattr(app, "connection_file", None)
    if not isinstance(path, str) or not path:
        return ""
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, ValueError):
        return ""
    value = info.get("jupyter_session") if isinstance(info, dict) else None
    return value if isinstance(value, str) else ""


def notebook_path(shell: Any, *, cwd: Path | None = None) -> Path | None:
    """The notebook this kernel serves, when its launcher said so (see the module docstring).

    Only ``.ipynb`` paths count (a console's session name is not a notebook). A relative path is
    the server's API path: the kernel runs in the notebook's folder, so its file name is looked up there.
    """
    here = cwd or Path.cwd()
    for value in _candidates(shell):
        path = Path(value).expanduser()
        if path.suffix.lower() != ".ipynb":
            continue
        if path.is_absolute():
            return path
        for guess in (here / path, here / path.name):
            if guess.exists():
                return guess.resolve()
    return None


def _cache_dir() -> Path:
    try:
        from platformdirs import user_cache_dir
    except ImportError:  # platformdirs comes with jupyter_core; a bare interpreter falls back to XDG
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tinyagents-nb" / "runs"
    return Path(user_cache_dir("tinyagents-nb", appauthor=False)) / "runs"


def default_store_path(shell: Any, *, cwd: Path | None = None) -> str:
    """The default store file of a session in ``shell``: ``""`` when ``TINYAGENTS_NB_STORE_DIR`` is empty."""
    override = os.environ.get(ENV_DIR)
    if override is not None and not override.strip():
        return ""
    here = (cwd or Path.cwd()).resolve()
    notebook = notebook_path(shell, cwd=here)
    if notebook is not None:
        folder = Path(override) if override else notebook.parent / FOLDER
        return os.fspath(folder / f"{_UNSAFE.sub('_', notebook.stem) or 'notebook'}.sqlite")
    folder = Path(override) if override else _cache_dir()
    digest = hashlib.sha256(os.fspath(here).encode()).hexdigest()[:12]
    return os.fspath(folder / f"{_UNSAFE.sub('_', here.name) or 'root'}-{digest}.sqlite")


def session_store_path(setting: str | None, shell: Any) -> str:
    """What ``AgentMagics.store_path`` means: ``None`` the default place, ``""`` off (memory), else that file."""
    if setting is None:
        return default_store_path(shell) or ":memory:"
    return setting or ":memory:"


class StoreSettings(HasTraits):
    """``AgentMagics``'s store settings (a mixin, so the magics module stays one concept long)."""

    store_path = Unicode(
        None,
        allow_none=True,
        help="SQLite file for run journals, history, session state and the event journal. None (the default): "
        ".tinyagents/<notebook>.sqlite beside the notebook, or the user cache folder when the kernel does not "
        "know its notebook; empty: in memory only (no durable runs). Read when the session is created and at "
        "%agent reset.",
    ).tag(config=True)
    store_keep_days = Float(
        30.0,
        allow_none=True,
        min=0.0,
        help="Runs, events and threads older than this many days are removed from the store when a session "
        "opens it; None keeps them.",
    ).tag(config=True)
    store_max_mb = Float(
        200.0,
        allow_none=True,
        min=1.0,
        help="When a session opens its store and the data in it exceeds this many MB, the oldest runs, events "
        "and threads are removed until it fits; None: no size bound.",
    ).tag(config=True)

    _ready: bool
    session: Any

    def open_store(self, session: Any) -> None:
        """Apply the retention settings to the session's store, then say if a dead kernel left runs in it."""
        store = run_store_of(session)
        store.prune(keep_days=self.store_keep_days, max_mb=self.store_max_mb, keep_threads=(session.thread_id,))
        announce_interrupted(store)

    @observe("store_path")
    def _store_path_changed(self, change: Any) -> None:
        if self._ready:
            print(f"store_path takes effect at the next %agent reset (now: {self.session.store_path})")
