"""TinyAgents-NB: a recursive-language-model agent harness, made Jupyter-native.

``tinyagents_nb.harness`` is the harness (pure asyncio, usable from any Python program). Importing
this package loads no Jupyter module.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
