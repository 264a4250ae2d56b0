"""Run controls: Stop, Pause, Resume and a steer box.

Widget callbacks can run on a kernel subshell thread (ipykernel 7.0-7.3 with JupyterLab's default
comms-over-subshells), in parallel with the run's event loop. So a callback does only two things:
call the run handle's thread-safe methods (``cancel``, ``pause``, ``resume``, ``steer``, which hop
to the run's loop themselves) and set plain flags. Every widget change that follows (disabling
Stop, clearing the steer box, showing a refused command) is made by the flusher on the loop thread.

Every press is acknowledged in words under the header: Pause says when it takes effect (before the
next model call, not mid-answer), Send says the message is queued for the next model call (or
that there is nothing to send), and Enter in the steer box sends like the button. Whether a queued
message was delivered is only known later; the dashboard reports it when the run ends.
"""

from __future__ import annotations

from typing import Any

from tinyagents_nb.harness import AgentStream, TinyAgentsError

from ._header import Notice

__all__ = ["ADDED_PREFIX", "PAUSING_NOTICE", "QUEUED_PREFIX", "RunControls"]

PAUSING_NOTICE = "pausing — will pause before the next model call (the current answer finishes first)"
QUEUED_PREFIX = "queued for the next model call: "
ADDED_PREFIX = "added to the conversation (the next model call reads it): "

_WAITING = frozenset({"paused", "pausing"})


class RunControls:
    """The control row of a dashboard; ``stop``, ``pause``, ``resume``, ``steer_text`` and ``send`` are widgets.

    Args:
        stream: The run to control.
    """

    def __init__(self, stream: AgentStream) -> None:
        import ipywidgets as widgets

        self._stream = stream
        self.steerable = stream.context.steering is not None
        no_steering = "" if self.steerable else " (this run was started without a SteeringHandle)"
        self.stop: Any = widgets.Button(
            description="Stop", icon="stop", button_style="danger", tooltip="Cancel the run cooperatively"
        )
        self.pause: Any = widgets.Button(
            description="Pause",
            icon="pause",
            disabled=not self.steerable,
            tooltip="Hold the run before its next model call" + no_steering,
        )
        self.resume: Any = widgets.Button(
            description="Resume", icon="play", disabled=True, tooltip="Continue a paused run" + no_steering
        )
        self.steer_text: Any = widgets.Text(
            value="",
            placeholder="Steer: a message for the run's next step" if self.steerable else "steering not enabled",
            disabled=not self.steerable,
            layout=widgets.Layout(flex="1 1 12em", min_width="10em"),
        )
        self.send: Any = widgets.Button(
            description="Send", icon="paper-plane", disabled=not self.steerable, tooltip="Send the steer message"
        )
        self.stop.on_click(self._on_stop)
        self.pause.on_click(self._on_pause)
        self.resume.on_click(self._on_resume)
        self.send.on_click(self._on_send)
        self.steer_text.on_msg(self._on_text_msg)
        self.widget: Any = widgets.HBox(
            children=(self.stop, self.pause, self.resume, self.steer_text, self.send),
            layout=widgets.Layout(flex_flow="row wrap", max_width="56rem"),
        )
        # Plain flags, written by callbacks from any thread and read by the flusher.
        self.stop_requested = False
        self.pause_requested = False
        self.notice: Notice | None = None
        """The last acknowledgement or refused command (e.g. a ``SteeringError``), shown in the header."""
        self.sent: list[str] = []
        """Steer messages sent from the box, in order."""
        self._clear_text = False
        self.unreachable: str | None = None
        """Set when clicks cannot reach the run (a waiting cell on a kernel that cannot deliver them):
        every control is disabled and this text says what to do instead."""

    # ------------------------------------------------------------------ callbacks (any thread)
    def _on_stop(self, _button: object) -> None:
        self.stop_requested = True
        self._stream.cancel("stop button")

    def _on_pause(self, _button: object) -> None:
        if self._attempt(lambda: self._stream.pause("pause button"), PAUSING_NOTICE):
            self.pause_requested = True

    def _on_resume(self, _button: object) -> None:
        if self._attempt(self._stream.resume, "resuming"):
            self.pause_requested = False

    def _on_text_msg(self, _widget: object, content: Any, _buffers: object) -> None:
        if isinstance(content, dict) and content.get("event") == "submit":  # Enter in the box
            self._on_send(None)

    def _on_send(self, _button: object) -> None:
        text = str(self.steer_text.value).strip()
        if not text:
            self.notice = Notice("nothing to send: type a message in the box first", "warn")
            return
        ack = QUEUED_PREFIX + (text if len(text) <= 80 else text[:79] + "…")
        if self._attempt(lambda: self._stream.steer(text), ack):
            self.sent.append(text)
            self._clear_text = True

    def _attempt(self, action: Any, ack: str) -> bool:
        """Run a steering call; a refusal becomes the notice instead of a traceback in the kernel log."""
        if self._stream.done:
            self.notice = Notice("not delivered: the run has already finished", "warn")
            return False
        try:
            action()
        except TinyAgentsError as exc:
            hint = f" ({exc.hint})" if exc.hint else ""
            self.notice = Notice(f"{type(exc).__name__}: {exc}{hint}", "warn")
            return False
        self.notice = Notice(ack)
        return True

    # ------------------------------------------------------------------ flusher side (widgets)
    def render(self, *, status: str, terminal: bool) -> None:
        """Enable what makes sense for ``status``; everything is disabled once the run ended."""
        stopping = self.stop_requested or status == "stopping"
        steer_off = terminal or stopping or not self.steerable or self.unreachable is not None
        with self.stop.hold_sync():
            self.stop.disabled = terminal or stopping or self.unreachable is not None
            self.stop.tooltip = self.unreachable or "Cancel the run cooperatively"
            self.stop.description = "Stopping…" if stopping and not terminal else "Stop"
            self.stop.button_style = "" if self.stop.disabled else "danger"  # a grey, not red, dead button
        self.pause.disabled = steer_off or status in _WAITING
        self.resume.disabled = steer_off or status not in _WAITING
        with self.steer_text.hold_sync():
            if self._clear_text:
                self._clear_text = False
                self.steer_text.value = ""
            self.steer_text.disabled = steer_off
        self.send.disabled = steer_off
