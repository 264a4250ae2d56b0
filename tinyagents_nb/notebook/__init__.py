"""Notebook access: the agent sees and works in the notebook it runs in.

Tools over the live kernel, built per run by access mode (``read``: ``notebook_variables``,
``inspect_variable``, ``notebook_cells``, ``last_error``; ``ask``/``auto`` add ``run_code`` and
``propose_cell``), the cell log they read (sources, outputs and errors since the extension loaded,
earlier cells from IPython's history), the main-thread runner that executes the agent's code in the
person's namespace with capture, a timeout and Stop, the masking every result passes through, and the
PNG/JPEG outputs kept as image parts for models with vision.
A Jupyter-layer family: it imports IPython's objects (through the shell it is given) and the harness,
never the widgets; the harness never imports it; the magics wire it to ``%%agent``.
"""

from __future__ import annotations

from ._access import (
    ACCESS_MODES as ACCESS_MODES,
    GUIDANCE as GUIDANCE,
    AccessMode as AccessMode,
    NotebookAccess as NotebookAccess,
    Proposal as Proposal,
    access_line as access_line,
)
from ._cells import (
    CellEntry as CellEntry,
    CellLog as CellLog,
    trim_traceback as trim_traceback,
)
from ._images import (
    MAX_IMAGE_CHARS as MAX_IMAGE_CHARS,
    MAX_IMAGES as MAX_IMAGES,
    NotebookImage as NotebookImage,
    image_of as image_of,
)
from ._mask import (
    MASK as MASK,
    Masker as Masker,
    quoted as quoted,
)
from ._runner import (
    MainThreadRunner as MainThreadRunner,
)
from ._tools import (
    READ_TOOLS as READ_TOOLS,
    WRITE_TOOLS as WRITE_TOOLS,
    describe_call as describe_call,
    notebook_tools as notebook_tools,
)
from ._variables import (
    describe_variable as describe_variable,
    list_variables as list_variables,
)

__all__ = [
    "ACCESS_MODES",
    "AccessMode",
    "CellEntry",
    "CellLog",
    "GUIDANCE",
    "MASK",
    "MAX_IMAGES",
    "MAX_IMAGE_CHARS",
    "MainThreadRunner",
    "Masker",
    "NotebookAccess",
    "NotebookImage",
    "Proposal",
    "READ_TOOLS",
    "WRITE_TOOLS",
    "access_line",
    "describe_call",
    "describe_variable",
    "image_of",
    "list_variables",
    "notebook_tools",
    "quoted",
    "trim_traceback",
]
