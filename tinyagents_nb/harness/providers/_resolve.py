"""Resolving a model spec: registered names, ``provider:model`` strings and the adapters that build them.

``ModelRegistry`` maps names to ready models or factories; ``resolve_model`` turns a spec into a
``ChatModel``. Adapters register their builders here when the providers package loads, so this
module never imports an adapter.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from .._errors import ConfigurationError, ModelNotFound
from .._model import ChatModel
from .._profile import ModelProfile, profile_for
from ._registry import _NAMED, ProviderSpec, _nonblank

__all__ = [
    "ModelRegistry",
    "resolve_model",
    "register_wire_builder",
    "register_native_builder",
    "ModelFactory",
    "NativeBuilder",
]

ModelFactory: TypeAlias = Callable[[], ChatModel]
"""A zero-argument callable that builds a model on first use (so registering costs nothing)."""

NativeBuilder: TypeAlias = Callable[..., ChatModel]
"""Builds a provider's native model: ``builder(model_id, **kwargs)``."""

_NATIVE: dict[str, NativeBuilder] = {}
_WIRE: NativeBuilder | None = None

_OPENAI_NAME_RE: Final = re.compile(r"(?:ft:)?(?:gpt-|chatgpt-|o[1-9](?:-|$))", re.IGNORECASE)


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
