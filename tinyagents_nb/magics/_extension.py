"""``load_ipython_extension`` / ``unload_ipython_extension``: what ``%load_ext tinyagents_nb`` runs.

Besides the magics it wires two kernel hooks (see ``_waiting`` and ``_interrupt``): on ipykernel
7.x input transformers make waiting ``%%agent`` cells and ``%agent wait`` lines awaiting ones, so
the dashboards' buttons work while they wait, and Stop clicks are heard on the shell channel thread
while the agent's code holds the main thread (``_stop_clicks``); ■ on an idle kernel cancels
background runs; and a shut-down or restart of the kernel first stops the runs so that their records
replace their dashboards.
"""

from __future__ import annotations

from typing import Any

from ._interrupt import install_idle_interrupt, uninstall_idle_interrupt
from ._magics import AgentMagics
from ._session import _replace_session, get_session
from ._shutdown import install_shutdown_hook, uninstall_shutdown_hook
from ._stop_clicks import install_stop_clicks
from ._trajectory_view import register_trajectory_view, unregister_trajectory_view
from ._waiting import agent_cell_transformer, agent_wait_transformer, kernel_major

__all__ = ["load_ipython_extension", "unload_ipython_extension"]

_TRANSFORMERS: dict[int, list[Any]] = {}  # id(shell) -> the transformers we added


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics on ``ipython`` and create the kernel's session (idempotent)."""
    if "AgentMagics" in ipython.magics_manager.registry:
        return
    magics = AgentMagics(ipython)
    ipython.register_magics(magics)
    ipython.events.register("pre_run_cell", magics.pre_run_cell)
    ipython.events.register("post_run_cell", magics.post_run_cell)
    if (kernel_major(ipython) or 0) >= 7:
        transforms = [agent_cell_transformer(magics.waits), agent_wait_transformer()]
        ipython.input_transformers_cleanup.extend(transforms)
        _TRANSFORMERS[id(ipython)] = transforms
        install_stop_clicks(ipython)  # Stop clicks heard while the agent's code holds the main thread
    install_idle_interrupt(ipython, get_session)
    register_trajectory_view(ipython)  # an RLM trajectory displays as its sanitised static view
    install_shutdown_hook(ipython, lambda: get_session().runs)


def unload_ipython_extension(ipython: Any) -> None:
    """Undo ``load_ipython_extension``: remove the magics and hooks, cancel active runs, close the session.

    ``%reload_ext`` therefore starts a fresh session; models, tools and MCP servers registered go with it.
    """
    magics = ipython.magics_manager.registry.pop("AgentMagics", None)
    if magics is None:
        return
    for kind in ("line", "cell"):
        table = ipython.magics_manager.magics[kind]
        if getattr(table.get("agent"), "__self__", None) is magics:
            del table["agent"]
    for event, hook in (("pre_run_cell", magics.pre_run_cell), ("post_run_cell", magics.post_run_cell)):
        try:
            ipython.events.unregister(event, hook)
        except ValueError:  # already gone
            pass
    for transform in _TRANSFORMERS.pop(id(ipython), []):
        if transform in ipython.input_transformers_cleanup:
            ipython.input_transformers_cleanup.remove(transform)
    uninstall_idle_interrupt(ipython)
    unregister_trajectory_view(ipython)
    uninstall_shutdown_hook(ipython)
    if magics in ipython.configurables:
        ipython.configurables.remove(magics)
    session = _replace_session(None)
    if session is not None:
        if session.notebook is not None:
            session.notebook.close()
        session.close()
        session.mcp.close_all()  # its MCP server processes go with it
        session.loop.close()
