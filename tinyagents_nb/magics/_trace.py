"""``%agent trace …``: every run of the kernel exported as OpenTelemetry GenAI spans (OTLP/HTTP)."""

from __future__ import annotations

from IPython.core.error import UsageError

from ._command_host import CommandHost
from ._session import NotebookSession

__all__ = ["trace_command"]

USAGE = "use %agent trace, %agent trace otlp [URL] [--content], or %agent trace off"


def trace_command(host: CommandHost, session: NotebookSession, args: list[str]) -> None:
    """``%agent trace [otlp [URL] [--content] | off]``."""
    tracing = session.tracing
    if not args:
        print(tracing.describe())
        return
    action, rest = args[0], args[1:]
    if action == "off" and not rest:
        print("tracing: stopped" if tracing.stop() else "tracing: was off")
        return
    if action != "otlp":
        raise UsageError(USAGE)
    content = "--content" in rest
    urls = [word for word in rest if word != "--content"]
    if len(urls) > 1 or any(not u.startswith(("http://", "https://")) for u in urls):
        raise UsageError(f"%agent trace otlp takes one http(s) URL, got {' '.join(urls)!r}; {USAGE}")
    tracing.start(urls[0] if urls else None, capture_content=True if content else None)
    print(tracing.describe())
