"""The dashboard's stylesheet: status colours per theme, table padding, the answer's frame.

Inline colours cannot follow the notebook's theme, so the panes write class names and one
``<style>`` element (inside an ``HTML`` widget of each dashboard) maps them to colours: a light
palette, and a dark one selected by JupyterLab's and Notebook 7's ``data-jp-theme-light="false"``
(VS Code's ``vscode-dark`` too). Both palettes keep WCAG AA contrast (4.5:1) against their
theme's backgrounds; ``contrast_ratio`` lets a test prove it.

ipywidgets marks a view whose kernel connection is gone with ``jupyter-widgets-disconnected``; the
rules below use it so a dashboard left open across a kernel restart stops claiming to run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["DARK", "LIGHT", "STYLESHEET", "THEME_BACKGROUNDS", "contrast_ratio", "status_class"]

LIGHT: Final[Mapping[str, str]] = {
    "run": "#0969da",
    "warn": "#8a5a00",
    "ok": "#1a7f37",
    "err": "#cf222e",
    "muted": "#59636e",
}
"""Status colours on light themes."""

DARK: Final[Mapping[str, str]] = {
    "run": "#58a6ff",
    "warn": "#d29922",
    "ok": "#3fb950",
    "err": "#ff7b72",
    "muted": "#9198a1",
}
"""Status colours on dark themes."""

THEME_BACKGROUNDS: Final[Mapping[str, tuple[str, ...]]] = {
    "light": ("#ffffff", "#f5f5f5"),  # JupyterLab light: --jp-layout-color0 / --jp-layout-color2
    "dark": ("#111111", "#212121", "#1e1e1e"),  # JupyterLab dark color0 / color1, VS Code dark
}
"""The backgrounds each palette must stay readable on."""

_STATUS_TONE: Final[Mapping[str, str]] = {
    "running": "run",
    "pausing": "warn",
    "paused": "warn",
    "stopping": "warn",
    "completed": "ok",
    "failed": "err",
    "cancelled": "muted",
}


def status_class(status: str) -> str:
    """The CSS class that colours ``status`` (``ta-tone-muted`` for anything unknown)."""
    return f"ta-tone-{_STATUS_TONE.get(status, 'muted')}"


def _tones(palette: Mapping[str, str]) -> str:
    return "".join(f"--ta-{name}:{colour};" for name, colour in palette.items())


_DARK_SCOPES: Final = (
    'body[data-jp-theme-light="false"] .ta-dash',
    "body.vscode-dark .ta-dash",
    "body.theme-dark .ta-dash",
)

STYLESHEET: Final = (
    "<style>"
    f".ta-dash{{{_tones(LIGHT)}}}"
    f"{','.join(_DARK_SCOPES)}{{{_tones(DARK)}}}"
    + "".join(f".ta-dash .ta-tone-{tone}{{color:var(--ta-{tone})}}" for tone in LIGHT)
    + ".ta-dash .ta-status{font-weight:600}"
    ".ta-dash .ta-head{display:flex;flex-wrap:wrap;column-gap:.9em;row-gap:2px;align-items:baseline}"
    ".ta-dash .ta-dim{opacity:.75}"
    ".ta-dash .ta-gone{display:none}"
    ".ta-dash .jupyter-widgets-disconnected .ta-live{display:none}"
    ".ta-dash .jupyter-widgets-disconnected .ta-gone{display:inline;color:var(--ta-muted)}"
    ".ta-dash .jupyter-widgets-disconnected.jupyter-button,"
    ".ta-dash .jupyter-widgets-disconnected input{opacity:.4;pointer-events:none;filter:grayscale(1)}"
    ".ta-dash .jupyter-button:disabled{filter:grayscale(1);opacity:.45;cursor:not-allowed}"
    ".ta-dash .ta-notice{font-size:92%;margin-top:2px}"
    ".ta-dash .ta-error{margin-top:4px;padding:6px 8px;border-left:3px solid var(--ta-err);"
    "background:rgba(207,34,46,.08);white-space:pre-wrap;word-break:break-word}"
    ".ta-dash .jupyter-widgets-disconnected::before{display:none}"  # one sentence says it, not an icon per widget
    ".ta-dash .ta-transcript{max-width:56rem;overflow-wrap:anywhere}"
    ".ta-dash .ta-scroll-x{overflow-x:auto;max-width:100%}"
    ".ta-dash .ta-transcript .jp-RenderedMarkdown{padding-right:0}"
    ".ta-dash .ta-transcript p{margin:.35em 0}"
    ".ta-dash .ta-sub{margin-left:1.2em;padding-left:.7em;border-left:2px solid rgba(127,127,127,.35);opacity:.85;"
    "font-size:95%}"
    ".ta-dash .ta-answer{border-left:3px solid var(--ta-ok);padding-left:.7em;margin-top:.4em}"
    ".ta-dash .ta-caption{font-size:85%;opacity:.75;margin:.3em 0 0}"
    ".ta-dash .ta-note{font-size:90%;opacity:.8;margin:.2em 0}"
    ".ta-dash .ta-step-row{border-left:3px solid rgba(127,127,127,.35);padding-left:.7em;font-size:95%}"
    ".ta-dash .ta-step{font-size:90%;opacity:.85;margin:.2em 0}"
    ".ta-dash .ta-stopped{font-size:90%;color:var(--ta-muted);border-top:1px dashed var(--ta-muted);"
    "margin-top:.4em;padding-top:.2em}"
    ".ta-dash .ta-section{font-weight:600;margin:.6em 0 .15em;font-size:95%}"
    ".ta-dash table.ta-table{border-collapse:collapse;font-size:92%;font-variant-numeric:tabular-nums}"
    ".ta-dash table.ta-table th,.ta-dash table.ta-table td{padding:2px 12px 2px 0;text-align:left;"
    "border-bottom:1px solid rgba(127,127,127,.25)}"
    ".ta-dash table.ta-table .num{text-align:right;padding-left:12px}"
    ".ta-dash table.ta-table tr.ta-total td{font-weight:600}"
    ".ta-dash .widget-progress .progress{background-color:rgba(127,127,127,.22)}"
    "</style>"
)
"""The ``<style>`` element every dashboard carries (rules are scoped to ``.ta-dash``)."""


def _luminance(colour: str) -> float:
    value = colour.lstrip("#")
    if len(value) != 6:
        raise ValueError(f"expected #rrggbb, got {colour!r}")
    channels = [int(value[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast_ratio(foreground: str, background: str) -> float:
    """WCAG 2 contrast ratio of two ``#rrggbb`` colours (1.0 to 21.0)."""
    a, b = _luminance(foreground), _luminance(background)
    high, low = max(a, b), min(a, b)
    return (high + 0.05) / (low + 0.05)
