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
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, TypeAlias

from .._errors import ConfigurationError, ModelNotFound
from .._model import ChatModel
from .._profile import ModelProfile, profile_for

__all__ = [
    "ModelFactory",
    "ModelRegistry",
    "NativeBuilder",
    "ProviderSpec",
    "known_providers",
    "profile_for",
    "register_native_builder",
    "register_wire_builder",
    "resolve_model",
]

ModelFactory: TypeAlias = Callable[[], ChatModel]
"""A zero-argument callable that builds a model on first use (so registering costs nothing)."""

NativeBuilder: TypeAlias = Callable[..., ChatModel]
"""Builds a provider's native model: ``builder(model_id, **kwargs)``."""

_NATIVE: dict[str, NativeBuilder] = {}
_WIRE: NativeBuilder | None = None

_NAME_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
_OPENAI_NAME_RE: Final = re.compile(r"(?:ft:)?(?:gpt-|chatgpt-|o[1-9](?:-|$))", re.IGNORECASE)


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


# ------------------------------------------------------------------------------------------ registry
@dataclass(kw_only=True, slots=True)
class _Entry:
    model: ChatModel | None
    factory: ModelFactory | None
    profile: ModelProfile | None


def _is_model(obj: object) -> bool:
    # A class has the protocol's attributes too; only instances are models.
    return not isinstance(obj, type) and isinstance(obj, ChatModel)


class ModelRegistry:
    """Names for models: ``register("fast", model)`` then ``resolve("fast")``.

    Entries are models or zero-argument factories; a factory runs once, on first ``resolve``, and its
    model is kept. Thread-safe (a notebook widget may resolve while a cell registers).
    """

    __slots__ = ("_entries", "_lock")

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.RLock()

    def register(
        self,
        name: str,
        model_or_factory: ChatModel | ModelFactory,
        *,
        profile: ModelProfile | None = None,
        replace: bool = False,
    ) -> None:
        """Make ``model_or_factory`` resolvable as ``name``.

        Raises:
            ConfigurationError: ``name`` is blank or already registered (without ``replace=True``), or
                the value is neither a ``ChatModel`` nor a callable, or ``profile`` is not a profile.
        """
        key = _nonblank(name)
        if key is None:
            raise ConfigurationError(f"model name must be a non-empty string, got {name!r}")
        if profile is not None and not isinstance(profile, ModelProfile):
            raise ConfigurationError(f"profile must be a ModelProfile, got {type(profile).__name__}")
        if _is_model(model_or_factory):
            entry = _Entry(model=model_or_factory, factory=None, profile=profile)  # type: ignore[arg-type]
        elif callable(model_or_factory):
            entry = _Entry(model=None, factory=model_or_factory, profile=profile)
        else:
            raise ConfigurationError(
                f"register() needs a ChatModel or a zero-argument factory, got {type(model_or_factory).__name__}"
            )
        with self._lock:
            if key in self._entries and not replace:
                raise ConfigurationError(f"model {key!r} is already registered", hint="pass replace=True to swap it")
            self._entries[key] = entry

    def unregister(self, name: str) -> bool:
        """Forget ``name``; True when it was registered."""
        with self._lock:
            return self._entries.pop(name.strip(), None) is not None

    def resolve(self, name: str) -> ChatModel:
        """The model registered as ``name``, building it from its factory on first use.

        Raises:
            ModelNotFound: Nothing is registered as ``name``.
            ConfigurationError: The factory returned something that is not a ``ChatModel``.
        """
        with self._lock:
            entry = self._entries.get(_nonblank(name) or "")
            if entry is None:
                raise ModelNotFound(name, hint=self._names_hint())
            if entry.model is None:
                assert entry.factory is not None
                built = entry.factory()
                if not _is_model(built):
                    raise ConfigurationError(
                        f"the factory registered as {name!r} returned {type(built).__name__}, not a ChatModel"
                    )
                entry.model = built
            return entry.model

    def profile(self, name: str) -> ModelProfile:
        """The profile for ``name``: the registered one, else the model's own, else one built by ``profile_for``.

        Unregistered names that ``resolve_model`` understands (``"groq:llama-3.3-70b-versatile"``,
        ``"gpt-4o"``) get a profile too, without building a model.

        Raises:
            ModelNotFound: ``name`` is neither registered nor a provider-qualified or OpenAI model name.
        """
        with self._lock:
            entry = self._entries.get(_nonblank(name) or "")
        if entry is not None:
            if entry.profile is not None:
                return entry.profile
            if entry.model is not None:
                own = getattr(entry.model, "profile", None)
                if isinstance(own, ModelProfile):
                    return own
                return profile_for(entry.model.provider, entry.model.model_name)
            return profile_for("unknown", name.strip())
        parsed = _parse_model_string(name)
        if parsed is None:
            raise ModelNotFound(name, hint=self._names_hint())
        spec, model = parsed
        return profile_for(spec, model)

    def names(self) -> list[str]:
        """Registered names in registration order."""
        with self._lock:
            return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.strip() in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"ModelRegistry(names={self.names()!r})"

    def _names_hint(self) -> str:
        registered = ", ".join(self.names()) or "none"
        return f"registered models: {registered}; or use 'provider:model' with one of: {', '.join(_NAMED)}, azure"


# ------------------------------------------------------------------------------------------ resolution
def _parse_model_string(spec: str) -> tuple[ProviderSpec, str] | None:
    """``"groq:llama"`` -> (groq spec, "llama"); bare OpenAI-looking names -> openai; else ``None``."""
    text = spec.strip()
    head, sep, rest = text.partition(":")
    if sep and rest and head.lower() in _NAMED:
        return ProviderSpec.named(head), rest
    if sep and rest and head.lower() == "azure":  # needs an endpoint, so it is not a plain named preset
        return ProviderSpec.azure(deployment=rest), rest
    if _OPENAI_NAME_RE.match(text):
        return ProviderSpec.openai(), text
    return None


def resolve_model(spec: str | ChatModel, *, registry: ModelRegistry | None = None, **kwargs: Any) -> ChatModel:
    """Turn a model spec into a ``ChatModel``.

    In order: a ``ChatModel`` is returned as is; a name registered in ``registry`` resolves there;
    ``"provider:model"`` builds an ``OpenAIChatModel`` for that built-in provider (``kwargs`` go to
    its constructor, e.g. ``api_key=``, ``http_client=``); a bare OpenAI-looking name (``gpt-*``,
    ``o1``/``o3``/``o4*``) means ``"openai:<name>"``.

    Raises:
        ModelNotFound: The spec matches none of these; the hint lists registered names and providers.
        ConfigurationError: ``kwargs`` were given for a model that is not built here, or the
            provider needs a key that is not set.
    """
    if not isinstance(spec, str):
        if _is_model(spec):
            if kwargs:
                raise ConfigurationError(f"constructor arguments {sorted(kwargs)} make no sense for a ready model")
            return spec
        raise ConfigurationError(f"a model spec must be a string or a ChatModel, got {type(spec).__name__}")
    if registry is not None and spec in registry:
        if kwargs:
            raise ConfigurationError(
                f"constructor arguments {sorted(kwargs)} make no sense for registered model {spec!r}"
            )
        return registry.resolve(spec)
    parsed = _parse_model_string(spec)
    if parsed is None:
        head, sep, _ = spec.strip().partition(":")
        detail = f"unknown provider {head!r}" if sep else None
        hint = (
            registry._names_hint()
            if registry is not None
            else f"use 'provider:model' with one of: {', '.join(_NAMED)}, azure, or register the model by name"
        )
        raise ModelNotFound(spec, hint=hint, detail=detail)
    provider, model = parsed
    if "provider" in kwargs:
        raise ConfigurationError("the provider comes from the model spec; do not also pass provider=")
    native = _NATIVE.get(provider.name)
    if native is not None:
        return native(model, **kwargs)
    if _WIRE is None:
        raise ConfigurationError("no Chat Completions adapter is registered (import tinyagents_nb.harness.providers)")
    return _WIRE(model, provider=provider, **kwargs)


def register_wire_builder(builder: NativeBuilder) -> None:
    """Set the adapter that ``"provider:model"`` builds for providers without a native one.

    The registry describes providers; the OpenAI-compatible adapter builds on it and registers
    itself here when the providers package loads, so neither module imports the other both ways.
    """
    global _WIRE
    _WIRE = builder


def register_native_builder(provider: str, builder: NativeBuilder) -> None:
    """Make ``resolve_model("<provider>:...")`` build ``builder(model_id, **kwargs)`` instead of an ``OpenAIChatModel``.

    Native adapter packages call this when imported (``tinyagents_nb.harness`` imports them all).
    """
    _NATIVE[provider] = builder
