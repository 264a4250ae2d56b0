"""ipywidgets views of harness runs: the live run dashboard and its panes.

``RunDashboard(stream)`` shows one streaming run (header, controls, context gauge, transcript, tool
calls, sub-agent tree, cost table); ``render_markdown`` is the safe renderer its transcript uses, and ``safe_markdown`` neutralises
untrusted text before a frontend's own Markdown renderer sees it.
ipywidgets and pandas are imported only when a dashboard is built.
"""

from __future__ import annotations

from ._dashboard import (
    RunDashboard as RunDashboard,
)
from ._markdown import (
    render_markdown as render_markdown,
)
from ._safe_markdown import (
    safe_markdown as safe_markdown,
)

__all__ = [
    "RunDashboard",
    "render_markdown",
    "safe_markdown",
]
