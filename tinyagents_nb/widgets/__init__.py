"""ipywidgets views of harness runs: the live run dashboard and its panes.

``RunDashboard(stream)`` shows one streaming run (header, controls, context gauge, transcript, tool
calls, sub-agent tree, cost table); ``render_markdown`` is the safe renderer its transcript uses and
``safe_markdown`` the filter for text handed to the frontend's own Markdown renderer. ``RunLog``
(``RunDashboard.log``) keeps what a run's messages do not say: RLM code steps (``CodeStep``),
approval decisions (``Decision``), guardrail trips and limits reached (``Alert``).
ipywidgets and pandas are imported only when a dashboard is built.
"""

from __future__ import annotations

from ._dashboard import (
    RunDashboard as RunDashboard,
)
from ._details import (
    RunDetails as RunDetails,
)
from ._map_view import (
    MapView as MapView,
    map_record as map_record,
)
from ._markdown import (
    render_markdown as render_markdown,
)
from ._runlog import (
    Alert as Alert,
    CodeStep as CodeStep,
    Decision as Decision,
    RunLog as RunLog,
)
from ._safe_markdown import (
    safe_markdown as safe_markdown,
    strip_controls as strip_controls,
)

__all__ = [
    "Alert",
    "CodeStep",
    "Decision",
    "MapView",
    "RunDashboard",
    "RunDetails",
    "RunLog",
    "map_record",
    "render_markdown",
    "safe_markdown",
    "strip_controls",
]
