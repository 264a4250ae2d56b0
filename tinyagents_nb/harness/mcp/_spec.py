"""What an MCP server is (how to reach it) and what of it may be shown: ``ServerSpec`` and its redactor.

Secrets (environment values, header values) live only in the spec and are handed to the transport;
everything shown to people or models (reprs, ``%agent mcp list``, errors, stderr tails, tool
results) goes through ``ServerSpec.redact`` or is built from the non-secret fields.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from .._errors import ConfigurationError

__all__: list[str] = []

Transport = Literal["stdio", "http"]

_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
_MIN_SECRET = 6  # shorter values ("1", "true") are not secrets, and masking them would garble output
MASK = "***"


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not _SERVER_NAME.match(name):
        raise ConfigurationError(
            f"invalid MCP server name {name!r}",
            hint="use 1-32 letters, digits, '_' or '-' (its tools are named NAME_TOOL)",
        )
    return name


def _str_map(what: str, value: Mapping[str, str] | None) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{what} must be a mapping of str to str, got {type(value).__name__}")
    out: dict[str, str] = {}
    for key, item in value.items():
        pair: tuple[object, object] = (key, item)  # user input: check what the annotation only promises
        if not isinstance(pair[0], str) or not isinstance(pair[1], str):
            raise ConfigurationError(f"{what} must map str to str; the entry {key!r} does not")  # never the value
        out[key] = item
    return out


def display_url(url: str) -> str:
    """``url`` without credentials, query or fragment (where tokens hide)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    tail = "?…" if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")) + tail


@dataclass(frozen=True, kw_only=True)
class ServerSpec:
    """How to start or reach one MCP server; ``env`` and ``headers`` are secret and never shown."""

    name: str
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    url: str = field(default="", repr=False)  # may carry credentials or a token in its query
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    timeout_s: float | None = None
    startup_timeout_s: float = 30.0

    @classmethod
    def stdio(
        cls,
        name: str,
        command: str,
        args: Sequence[str],
        env: Mapping[str, str] | None,
        *,
        cwd: str | None,
        timeout_s: float | None,
        startup_timeout_s: float,
    ) -> ServerSpec:
        given: object = command
        if not isinstance(given, str) or not given.strip():
            raise ConfigurationError(
                "an MCP stdio server needs a command", hint="e.g. MCPServer.stdio('fs', 'npx', [...])"
            )
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise ConfigurationError("args must be a sequence of strings (not one string)")
        return cls(
            name=_check_name(name),
            transport="stdio",
            command=command,
            args=tuple(args),
            env=_str_map("env", env),
            cwd=cwd,
            timeout_s=_positive("timeout_s", timeout_s),
            startup_timeout_s=_positive("startup_timeout_s", startup_timeout_s) or 30.0,
        )

    @classmethod
    def http(
        cls,
        name: str,
        url: str,
        headers: Mapping[str, str] | None,
        *,
        timeout_s: float | None,
        startup_timeout_s: float,
    ) -> ServerSpec:
        given: object = url
        parts = urlsplit(given) if isinstance(given, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(
                "an MCP HTTP server needs an http(s) URL",
                hint="e.g. MCPServer.http('docs', 'http://127.0.0.1:8000/mcp')",
            )
        return cls(
            name=_check_name(name),
            transport="http",
            url=url,
            headers=_str_map("headers", headers),
            timeout_s=_positive("timeout_s", timeout_s),
            startup_timeout_s=_positive("startup_timeout_s", startup_timeout_s) or 30.0,
        )

    @property
    def target(self) -> str:
        """What to show for where the server is: the command line, or the URL without credentials or query."""
        if self.transport == "http":
            return display_url(self.url)
        return " ".join([self.command, *self.args])

    @functools.cached_property
    def secrets(self) -> tuple[str, ...]:
        """Every value that must never be shown, longest first (so a secret containing another is masked whole)."""
        values: set[str] = set()
        for value in [*self.env.values(), *self.headers.values()]:
            for part in (value, *value.split()):  # "Bearer abc…": the token alone too
                if len(part) >= _MIN_SECRET:
                    values.add(part)
        parts = urlsplit(self.url) if self.url else None
        if parts is not None:
            for found in (parts.password, parts.username, parts.query):
                if found and len(found) >= _MIN_SECRET:
                    values.add(found)
        return tuple(sorted(values, key=len, reverse=True))

    def redact(self, value: Any) -> Any:
        """``value`` with every secret masked: strings, and the strings inside lists and dicts."""
        secrets = self.secrets
        return _redact(value, secrets) if secrets else value


def _redact(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        return value
    if isinstance(value, list | tuple):
        return [_redact(v, secrets) for v in value]
    if isinstance(value, dict):
        return {_redact(k, secrets): _redact(v, secrets) for k, v in value.items()}
    return value


def _positive(what: str, value: float | None) -> float | None:
    given: object = value
    if given is None:
        return None
    if isinstance(given, bool) or not isinstance(given, int | float) or not given > 0:
        raise ConfigurationError(f"{what} must be a positive number of seconds or None, got {given!r}")
    return float(given)
