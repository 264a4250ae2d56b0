"""An incremental Server-Sent Events decoder, fed raw bytes as they arrive from the network.

Network reads split events anywhere: inside a UTF-8 character, between CR and LF, in the
middle of a JSON payload. ``SSEDecoder`` buffers across those splits and yields one ``SSEEvent``
per blank-line-terminated event, following the WHATWG rules that matter for model streams: lines
end in LF, CRLF or CR; ``:`` lines are comments (keep-alives such as OpenRouter's
``: OPENROUTER PROCESSING``); several ``data:`` lines join with a newline; one space after the colon
is dropped. Lines are split on those three terminators only, never on ``str.splitlines``'s extra
separators, which may appear raw inside JSON strings.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Final

__all__ = ["SSEDecoder", "SSEEvent"]

_EOL: Final = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, kw_only=True, slots=True)
class SSEEvent:
    """One dispatched event: its ``data`` (lines joined by newlines) and its ``event`` name, if any."""

    data: str
    event: str | None = None


class SSEDecoder:
    """Turns a byte stream into ``SSEEvent``s; call ``feed`` per chunk and ``close`` at end of stream."""

    __slots__ = ("_buffer", "_data", "_decoder", "_event")

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._data: list[str] = []
        self._event: str | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events completed by ``chunk`` (often none, sometimes several)."""
        text = self._buffer + self._decoder.decode(chunk)
        events: list[SSEEvent] = []
        pos = 0
        end = len(text)
        for match in _EOL.finditer(text):
            if match.end() == end and match.group() == "\r":
                break  # maybe the first half of a CRLF split across reads: decide on the next chunk
            self._line(text[pos : match.start()], events)
            pos = match.end()
        self._buffer = text[pos:]
        return events

    def close(self) -> list[SSEEvent]:
        """Flush at end of stream.

        An event without its terminating blank line is incomplete and dropped (the spec's rule, and
        what makes a cut connection detectable), except a lone ``[DONE]``, which some servers send
        without the final blank line.
        """
        text = self._buffer + self._decoder.decode(b"", final=True)
        events: list[SSEEvent] = []
        lines = _EOL.split(text)
        for line in lines[:-1]:
            self._line(line, events)
        if lines[-1]:
            self._line(lines[-1], events)  # a non-empty line never dispatches
        if [line.strip() for line in self._data] == ["[DONE]"]:
            events.append(SSEEvent(data="[DONE]", event=self._event))
        self._buffer = ""
        self._data = []
        self._event = None
        return events

    def _line(self, line: str, events: list[SSEEvent]) -> None:
        if not line:
            if self._data:
                events.append(SSEEvent(data="\n".join(self._data), event=self._event))
                self._data = []
            self._event = None
            return
        if line[0] == ":":
            return  # comment / keep-alive
        field, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        # "id" and "retry" do not matter to a one-shot model stream
