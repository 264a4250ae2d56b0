"""``load_ipython_extension`` / ``unload_ipython_extension``: what ``%load_ext tinyagents_nb`` runs."""

from __future__ import annotations

from typing import Any

from ._magics import AgentMagics
from ._session import _replace_session

__all__ = ["load_ipython_extension", "unload_ipython_extension"]


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics on ``ipython`` and create the kernel's session (idempotent)."""
    if "AgentMagics" in ipython.magics_manager.registry:
        return
    magics = AgentMagics(ipython)
    ipython.register_magics(magics)
    ipython.events.register("pre_run_cell", magics.pre_run_cell)


def unload_ipython_extension(ipython: Any) -> None:
    """Undo ``load_ipython_extension``: remove the magics and hook, cancel active runs, close the session.

    ``%reload_ext`` therefore starts a fresh session; models, tools and MCP servers registered go with it.
    """
    magics = ipython.magics_manager.registry.pop("AgentMagics", None)
    if magics is None:
        return
    for kind in ("line", "cell"):
        table = ipython.magics_manager.magics[kind]
        if getattr(table.get("agent"), "__self__", None) is magics:
            del table["agent"]
    try:
        ipython.events.unregister("pre_run_cell", magics.pre_run_cell)
    except ValueError:  # already gone
        pass
    if magics in ipython.configurables:
        ipython.configurables.remove(magics)
    session = _replace_session(None)
    if session is not None:
        session.close()
        session.mcp.close_all()  # its MCP server processes go with it
