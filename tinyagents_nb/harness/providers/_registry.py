"""Where models come from: provider specs, a name registry, and ``resolve_model``.

A ``ProviderSpec`` is the static description of one OpenAI-Chat-Completions host (base URL, the
environment variable holding its key, wire quirks); it holds no secret, so it can be listed, shown
and compared freely. ``resolve_model`` turns what a user types (``"openai:gpt-4o-mini"``,
``"groq:llama-3.3-70b-versatile"``, a registered name, or a ready ``ChatModel``) into a model.
Keys are read from the environment when a model is built, never stored on the spec.

Providers with a native adapter (Anthropic's Messages API) register a builder here from their own
package (``register_native_builder``), so this module never imports them: the dependency points
one way, from the adapters to the specs.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from .._errors import ConfigurationError
from .._profile import profile_for

__all__ = [
    "ProviderSpec",
    "known_providers",
    "profile_for",
]

_NAME_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


def _frozen_headers(headers: Mapping[str, str] | None = None) -> Mapping[str, str]:
    return MappingProxyType(dict(headers or {}))


def _nonblank(value: object) -> str | None:
    """``value`` stripped when it is a non-blank string, else ``None`` (runtime checks of typed input)."""
    return (value.strip() or None) if isinstance(value, str) else None


@dataclass(frozen=True, kw_only=True, slots=True)
class ProviderSpec:
    """One OpenAI-compatible host: where it lives, which env var holds its key, and its quirks.

    Attributes:
        name: Short provider name used in model strings (``"groq"`` in ``"groq:llama-3.3-70b-versatile"``).
        base_url: The API root; requests go to ``{base_url}/chat/completions``.
        api_key_env: The environment variable holding the key, or ``None`` when keys are not used.
        requires_key: Whether a request without a key is pointless (the model refuses to build).
        default_headers: Extra non-secret headers sent with every request.
        max_tokens_field: The body field carrying the output cap: OpenAI deprecated ``max_tokens``
            (o-series models reject it) in favour of ``max_completion_tokens``; most compatible
            hosts still document ``max_tokens``.
        reasoning_outside_completion: The host reports reasoning tokens *outside*
            ``completion_tokens`` (xAI), so the adapter adds them to normalise usage.
        send_prompt_cache_key: Send a digest of the request's ``thread_id`` as ``prompt_cache_key``
            (OpenAI routes requests sharing a key to the same prompt cache).
        send_message_names: Whether ``messages[].name`` may be sent (Groq rejects it with a 400).
        alt_key_envs: Further environment variables to read the key from, in order, when
            ``api_key_env`` is unset (Gemini: ``GOOGLE_API_KEY``).
        api_key_header: Send the key in this header as is (Azure's ``api-key``) instead of
            ``Authorization: Bearer <key>``.
        query: Query parameters for every request (Azure's ``api-version``).
        omit_fields: Body fields the adapter would send by default but the host rejects (Mistral
            answers ``stream_options`` with a 422); removed from every request body. A request's
            ``settings`` may still set them explicitly.
    """

    name: str
    base_url: str
    api_key_env: str | None = None
    requires_key: bool = True
    default_headers: Mapping[str, str] = field(default_factory=_frozen_headers, hash=False)
    max_tokens_field: str = "max_tokens"
    reasoning_outside_completion: bool = False
    send_prompt_cache_key: bool = False
    send_message_names: bool = True
    alt_key_envs: tuple[str, ...] = ()
    api_key_header: str | None = None
    query: Mapping[str, str] = field(default_factory=_frozen_headers, hash=False)
    omit_fields: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        name: object = self.name
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise ConfigurationError(
                f"provider name must be letters, digits, '.', '_' or '-' (no ':'), got {self.name!r}"
            )
        base_url: object = self.base_url
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ConfigurationError(f"base_url must start with http:// or https://, got {self.base_url!r}")
        if self.api_key_env is not None and _nonblank(self.api_key_env) is None:
            raise ConfigurationError(f"api_key_env must be a non-empty string or None, got {self.api_key_env!r}")
        if self.requires_key and self.api_key_env is None:
            raise ConfigurationError(f"provider {self.name!r} requires a key but names no api_key_env")
        if self.max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise ConfigurationError(
                f"max_tokens_field must be 'max_tokens' or 'max_completion_tokens', got {self.max_tokens_field!r}"
            )
        object.__setattr__(self, "default_headers", _frozen_headers(self.default_headers))
        object.__setattr__(self, "query", _frozen_headers(self.query))
        object.__setattr__(self, "alt_key_envs", tuple(self.alt_key_envs))
        omitted: object = self.omit_fields
        names = frozenset(omitted) if isinstance(omitted, Iterable) and not isinstance(omitted, str) else None
        if names is None or not all(_nonblank(name) for name in names):
            raise ConfigurationError(f"omit_fields must be a set of field names, got {self.omit_fields!r}")
        object.__setattr__(self, "omit_fields", names)

    # ----------------------------------------------------------------------------------- keys
    def api_key_from_env(self) -> str | None:
        """The key from ``api_key_env``, read now (not at import), or ``None`` when unset or blank."""
        for name in (self.api_key_env, *self.alt_key_envs) if self.api_key_env is not None else ():
            value = os.environ.get(name, "").strip()
            if value:
                return value
        return None

    def auth_headers(self, key: str) -> dict[str, str]:
        """The header(s) that carry ``key`` to this host."""
        if self.api_key_header is not None:
            return {self.api_key_header: key}
        return {"Authorization": f"Bearer {key}"}

    def endpoint(self, path: str) -> str:
        """The URL of ``path`` under ``base_url``, with this host's ``query`` parameters."""
        url = self.base_url.rstrip("/") + "/" + path.lstrip("/")
        return f"{url}?{urllib.parse.urlencode(dict(self.query))}" if self.query else url

    @property
    def has_key(self) -> bool:
        """Whether a request can be made now: a key is in the environment, or none is needed."""
        return not self.requires_key or self.api_key_from_env() is not None

    @property
    def key_hint(self) -> str:
        """What to tell a user whose key is missing or rejected."""
        if self.api_key_env is None:
            return f"pass api_key=... for provider {self.name!r}"
        return f"set {self.api_key_env} in the environment (in a notebook: %env {self.api_key_env}=<your key>), or pass api_key=..."

    # ----------------------------------------------------------------------------------- hosts (data-libs §3.7)
    @classmethod
    def openai(cls) -> ProviderSpec:
        """OpenAI's own API."""
        return cls(
            name="openai",
            base_url="https://api.openai.com/v1",
            api_key_env="OPENAI_API_KEY",
            max_tokens_field="max_completion_tokens",
            send_prompt_cache_key=True,
        )

    @classmethod
    def anthropic(cls) -> ProviderSpec:
        """Anthropic's API root: ``AnthropicModel`` calls ``{base_url}/messages`` on it."""
        return cls(name="anthropic", base_url="https://api.anthropic.com/v1", api_key_env="ANTHROPIC_API_KEY")

    @classmethod
    def anthropic_compat(cls) -> ProviderSpec:
        """Anthropic's OpenAI-SDK-compatible endpoint (ignores ``strict`` and ``response_format``; no thinking or caching)."""
        return cls(name="anthropic-compat", base_url="https://api.anthropic.com/v1/", api_key_env="ANTHROPIC_API_KEY")

    @classmethod
    def gemini(cls) -> ProviderSpec:
        """Google Gemini's OpenAI-compatible endpoint (key in ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``).

        Its usage counts hidden thinking in ``total_tokens`` only; the adapter counts the difference
        as reasoning output.
        """
        return cls(
            name="gemini",
            base_url="https://generativelanguage.googleapis.com/v1beta/openai",
            api_key_env="GEMINI_API_KEY",
            alt_key_envs=("GOOGLE_API_KEY",),
        )

    @classmethod
    def azure(
        cls, *, deployment: str, endpoint: str | None = None, api_version: str | None = "2024-10-21"
    ) -> ProviderSpec:
        """An Azure OpenAI deployment: ``{endpoint}/openai/deployments/{deployment}?api-version=...``.

        ``endpoint`` defaults to ``AZURE_OPENAI_ENDPOINT``; the key (``AZURE_OPENAI_API_KEY``) goes
        in the ``api-key`` header. ``api_version=None`` selects Azure's version-less ``/openai/v1``
        API, where the deployment is the model name.

        Raises:
            ConfigurationError: No endpoint (argument or env var), or a blank deployment.
        """
        root = _nonblank(endpoint) or _nonblank(os.environ.get("AZURE_OPENAI_ENDPOINT"))
        name = _nonblank(deployment)
        if root is None or name is None:
            raise ConfigurationError(
                "Azure OpenAI needs an endpoint and a deployment",
                hint="pass endpoint='https://<resource>.openai.azure.com' or set AZURE_OPENAI_ENDPOINT",
            )
        path = "openai/v1" if api_version is None else f"openai/deployments/{urllib.parse.quote(name, safe='')}"
        return cls(
            name="azure",
            base_url=f"{root.rstrip('/')}/{path}",
            api_key_env="AZURE_OPENAI_API_KEY",
            api_key_header="api-key",
            query={} if api_version is None else {"api-version": api_version},
        )

    @classmethod
    def deepseek(cls) -> ProviderSpec:
        """DeepSeek (``reasoning_content`` on reasoner models, ``prompt_cache_hit_tokens`` usage)."""
        return cls(name="deepseek", base_url="https://api.deepseek.com", api_key_env="DEEPSEEK_API_KEY")

    @classmethod
    def groq(cls) -> ProviderSpec:
        """Groq (rejects ``messages[].name``)."""
        return cls(
            name="groq",
            base_url="https://api.groq.com/openai/v1",
            api_key_env="GROQ_API_KEY",
            send_message_names=False,
        )

    @classmethod
    def xai(cls) -> ProviderSpec:
        """The xAI API (reasoning tokens are reported outside ``completion_tokens``)."""
        return cls(
            name="xai",
            base_url="https://api.x.ai/v1",
            api_key_env="XAI_API_KEY",
            reasoning_outside_completion=True,
        )

    @classmethod
    def openrouter(cls) -> ProviderSpec:
        """OpenRouter (model ids are ``vendor/model``; sends keep-alive comments)."""
        return cls(name="openrouter", base_url="https://openrouter.ai/api/v1", api_key_env="OPENROUTER_API_KEY")

    @classmethod
    def together(cls) -> ProviderSpec:
        """Together AI."""
        return cls(name="together", base_url="https://api.together.xyz/v1", api_key_env="TOGETHER_API_KEY")

    @classmethod
    def mistral(cls) -> ProviderSpec:
        """Mistral's chat endpoint (rejects ``stream_options``; its streams report usage anyway)."""
        return cls(
            name="mistral",
            base_url="https://api.mistral.ai/v1",
            api_key_env="MISTRAL_API_KEY",
            omit_fields=frozenset({"stream_options"}),
        )

    @classmethod
    def ollama(cls) -> ProviderSpec:
        """A local Ollama server; no key needed."""
        return cls(name="ollama", base_url="http://localhost:11434/v1", api_key_env=None, requires_key=False)

    @classmethod
    def compatible(
        cls,
        *,
        base_url: str,
        name: str = "compatible",
        api_key_env: str | None = None,
        requires_key: bool | None = None,
        default_headers: Mapping[str, str] | None = None,
    ) -> ProviderSpec:
        """Any other OpenAI-compatible host (vLLM, LM Studio, a gateway, a test server).

        ``requires_key`` defaults to whether ``api_key_env`` is given.
        """
        return cls(
            name=name,
            base_url=base_url,
            api_key_env=api_key_env,
            requires_key=api_key_env is not None if requires_key is None else requires_key,
            default_headers=_frozen_headers(default_headers),
        )

    @classmethod
    def named(cls, name: str) -> ProviderSpec:
        """The built-in spec called ``name`` (case-insensitive).

        Raises:
            ConfigurationError: ``name`` is not a built-in provider; the message lists the known ones.
        """
        key = _nonblank(name)
        factory = _NAMED.get(key.lower()) if key is not None else None
        if factory is None:
            raise ConfigurationError(
                f"unknown provider {name!r}; known providers: {', '.join(_NAMED)}",
                hint='use ProviderSpec.compatible(base_url="...") for any other OpenAI-compatible host',
            )
        return factory()


_NAMED: Final[Mapping[str, Callable[[], ProviderSpec]]] = MappingProxyType(
    {
        "openai": ProviderSpec.openai,
        "anthropic": ProviderSpec.anthropic,
        "anthropic-compat": ProviderSpec.anthropic_compat,
        "gemini": ProviderSpec.gemini,
        "deepseek": ProviderSpec.deepseek,
        "groq": ProviderSpec.groq,
        "xai": ProviderSpec.xai,
        "openrouter": ProviderSpec.openrouter,
        "together": ProviderSpec.together,
        "mistral": ProviderSpec.mistral,
        "ollama": ProviderSpec.ollama,
    }
)


def known_providers() -> list[tuple[ProviderSpec, bool]]:
    """Every built-in provider with whether it is ready: its key is in the environment, or none is needed.

    Reads only the environment, builds no model and opens no connection (for ``%agent models``).
    """
    specs = [factory() for factory in _NAMED.values()]
    return [(spec, spec.has_key) for spec in specs]
