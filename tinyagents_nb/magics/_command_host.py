"""What a ``%agent`` command needs from the magics that run it, so the commands sit below ``AgentMagics``.

``AgentMagics`` imports the commands to dispatch to them; were the commands typed against the class,
the two modules would need each other. They are typed against ``CommandHost`` instead, which
``AgentMagics`` satisfies structurally, and which names all they use: the session, the shell (for
the notebook's names) and the two settings a command reads or writes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ._session import NotebookSession

__all__ = ["Command", "CommandHost"]


class CommandHost(Protocol):
    """The side of ``AgentMagics`` the ``%agent`` commands see."""

    default_model: str
    """Written by ``%agent model NAME``, so the setting (and ``%config``) agrees with the session."""

    @property
    def store_path(self) -> str | None:
        """Where ``%agent reset`` reopens the session's store: ``None`` the default place, empty in memory."""

    def open_store(self, session: NotebookSession) -> None:
        """Apply the store's retention settings and announce interrupted runs (after a reset)."""

    @property
    def session(self) -> NotebookSession:
        """The kernel's session, the one every command acts on."""

    @property
    def shell(self) -> Any:
        """IPython's shell (its ``user_ns`` holds the notebook's names), or ``None`` outside one."""


Command = Callable[[CommandHost, NotebookSession, list[str]], Any]
"""A ``%agent`` subcommand: the host, its session and the words after the command's name."""
