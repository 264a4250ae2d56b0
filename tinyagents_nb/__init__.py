"""TinyAgents-NB: a recursive-language-model agent harness, made Jupyter-native.

``tinyagents_nb.harness`` is the harness (pure asyncio, usable from any Python program). Importing
this package loads no Jupyter module: ``%load_ext tinyagents_nb`` imports ``tinyagents_nb.magics``
only when IPython calls the hooks below.
"""

from __future__ import annotations

import typing

if typing.TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell as _Shell

__version__ = "0.1.0"

__all__ = ["__version__", "load_ipython_extension", "unload_ipython_extension"]


def load_ipython_extension(ipython: _Shell) -> None:
    """``%load_ext tinyagents_nb``: register the ``%%agent``/``%agent`` magics (see ``tinyagents_nb.magics``)."""
    from .magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: _Shell) -> None:
    """``%unload_ext tinyagents_nb``: remove the magics and close the session."""
    from .magics import unload_ipython_extension as unload

    unload(ipython)
