"""What a credential looks like: by the name it is stored under, or by its own shape.

One rule for every place that must keep secrets out (``RedactingSink``'s default patterns,
``secrets_from_env``, the RLM's child kernel environment): names miss ``GITHUB_PAT=ghp_…`` and
``DATABASE_URL=postgres://app:pw@db/x``; shapes catch them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Final

__all__ = ["DEFAULT_PATTERNS", "looks_like_credential", "secrets_from_env"]

_KEY_NAMES = (
    r"(?:api[_-]?key|apikey|access[_-]?token|refresh[_-]?token|auth[_-]?token|id[_-]?token|"
    r"secret[_-]?key|client[_-]?secret|private[_-]?key|password|passwd)"
)

DEFAULT_PATTERNS: Final[tuple[re.Pattern[str], ...]] = (
    # Header values: "Authorization: Bearer x", "'authorization': 'Basic abc'". The value runs to a quote or EOL.
    re.compile(r"(?i)\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?P<secret>[^\"'\r\n]+)"),
    re.compile(r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9\-._~+/]{8,}=*)"),
    # Assignments: api_key=..., "api_key": "...", OPENAI_API_KEY=..., password: ...
    re.compile(rf"(?i){_KEY_NAMES}[\"']?\s*[:=]\s*[\"']?(?P<secret>[^\s\"'&,;}}\]]+)"),
    # Provider key shapes: OpenAI / Anthropic / OpenRouter (sk-, sk-ant-, sk-proj-, sk-or-), AWS, Google,
    # xAI, Groq, GitHub, GitLab, Hugging Face, Slack.
    re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"),
    re.compile(r"\bxai-[A-Za-z0-9]{20,}"),
    re.compile(r"\b(?:gsk|ghp|gho|ghs|ghu|github_pat|glpat|hf)_[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"),
    # A password in a URL: postgres://user:PASSWORD@host/db, https://token:x-oauth@github.com
    re.compile(r"(?i)\b[a-z][a-z0-9+.\-]*://[^\s:/@]*:(?P<secret>[^\s@/]+)@"),
)
"""What ``RedactingSink`` scrubs by default, besides configured secrets: key-shaped strings and header values.

A pattern with a ``secret`` group has only that group replaced (``"Bearer [REDACTED]"``)."""

# Every default pattern needs one of these substrings, so text without any skips the patterns (the common case).
_DEFAULT_TRIGGERS: Final = (
    "sk-", "akia", "asia", "aiza", "xai-", "gsk_", "ghp_", "gho_", "ghs_", "ghu_", "github_pat", "glpat", "hf_",
    "xox", "bearer", "authoriz", "key", "token", "secret", "passw", "://",
)  # fmt: skip
_CREDENTIAL_NAME: Final = re.compile(r"(?i)(?:key|token|secret|password|passwd|credential)")


def _triggered(text: str) -> bool:
    """Whether ``text`` has one of the substrings some default pattern needs (``in`` tests beat one regex here)."""
    lowered = text.lower()
    return any(word in lowered for word in _DEFAULT_TRIGGERS)


def looks_like_credential(value: str) -> bool:
    """Whether ``value`` has a credential's shape, whatever it is called.

    The rule (the same ``DEFAULT_PATTERNS`` ``RedactingSink`` scrubs with): a known key prefix
    (``sk-``, ``AKIA``/``ASIA``, ``AIza``, ``xai-``, ``gsk_``, ``ghp_``/``gho_``/``ghs_``/``ghu_``,
    ``github_pat_``, ``glpat_``, ``hf_``, ``xox?-``), a URL carrying a password
    (``postgres://user:pw@host``), an ``Authorization``/``Bearer`` value, or ``name=value`` with a
    credential-like name. Names miss ``GITHUB_PAT`` or ``DATABASE_URL``; shapes catch them.
    """
    return _triggered(value) and any(pattern.search(value) for pattern in DEFAULT_PATTERNS)


def secrets_from_env(environ: Mapping[str, str] | None = None, *, min_length: int = 8) -> tuple[str, ...]:
    """Values of environment variables that are credentials, by name or by shape.

    By name: ``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*CREDENTIAL*``; by shape:
    ``looks_like_credential`` (``GITHUB_PAT=ghp_…``, ``DATABASE_URL=postgres://u:pw@…``). Feed them
    to ``RedactingSink(secrets=...)`` so keys loaded from the environment never reach a journal.
    """
    env = os.environ if environ is None else environ
    return tuple(
        sorted(
            {
                v
                for k, v in env.items()
                if len(v) >= min_length and (_CREDENTIAL_NAME.search(k) or looks_like_credential(v))
            }
        )
    )
