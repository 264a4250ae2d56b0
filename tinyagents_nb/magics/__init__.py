"""The IPython extension: ``%load_ext tinyagents_nb``, the ``%%agent`` cell magic and ``%agent …`` line magics.

``get_session()`` returns the kernel's ``NotebookSession`` (the root run context, threads, history,
tools, models and runs) for use from Python; ``agent_tool`` registers a notebook function as a tool;
``demo_model`` registers an offline stand-in model for tutorials.
Settings live on ``AgentMagics`` (``%config AgentMagics.default_model = "openai:gpt-4o-mini"``).
"""

from __future__ import annotations

from ._agent_tool import agent_tool as agent_tool
from ._demo_model import (
    demo_model as demo_model,
)
from ._extension import (
    load_ipython_extension as load_ipython_extension,
    unload_ipython_extension as unload_ipython_extension,
)
from ._handle import (
    NotebookRun as NotebookRun,
)
from ._magics import (
    AgentMagics as AgentMagics,
)
from ._session import (
    NotebookSession as NotebookSession,
    get_session as get_session,
)

__all__ = [
    "AgentMagics",
    "NotebookRun",
    "NotebookSession",
    "agent_tool",
    "demo_model",
    "get_session",
    "load_ipython_extension",
    "unload_ipython_extension",
]
