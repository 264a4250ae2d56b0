"""Per-run model settings read from ``RunConfig.configurable``.

A caller tunes one run without building another harness: ``RunConfig(configurable={"temperature":
0.0})``. The keys are read once when the run starts and checked then, so a typo'd value fails the
run before any model call instead of reaching a provider. Children inherit ``configurable``, so a
setting applies to the whole run tree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._errors import ConfigurationError
from ._json import thaw_json

if TYPE_CHECKING:
    from ._model import ChatModel

__all__ = ["CONFIGURABLE_KEYS", "ModelOverrides"]

CONFIGURABLE_KEYS = ("max_output_tokens", "model", "model_settings", "temperature")
"""The ``configurable`` keys the loop reads; any other key is left for tools and middleware."""


@dataclass(frozen=True, slots=True)
class ModelOverrides:
    """What ``configurable`` changes for one run's requests (``None``: the policy's value stands).

    Attributes:
        temperature: Replaces ``RunPolicy.temperature``.
        max_output_tokens: Replaces ``RunPolicy.max_output_tokens`` (the config's per-turn cap still binds).
        model_settings: Merged over ``RunPolicy.model_settings`` (these keys win).
        model: The index in the harness's model chain of the model to call first.
    """

    temperature: float | None = None
    max_output_tokens: int | None = None
    model_settings: Mapping[str, Any] | None = None
    model: int | None = None

    @classmethod
    def read(cls, configurable: Mapping[str, Any], chain: Sequence[ChatModel], *, depth: int) -> ModelOverrides:
        """Read and check the keys; ``chain`` is the harness's primary model then its fallbacks.

        ``model`` names one of them (``"gpt-4o"`` or ``"openai:gpt-4o"``). Since children inherit
        ``configurable``, a sub-agent whose harness has no model of that name keeps its own; at the
        root an unknown name is an error.

        Raises:
            ConfigurationError: A value of the wrong type or range, or an unknown model at the root.
        """
        if not configurable or not any(key in configurable for key in CONFIGURABLE_KEYS):
            return _NONE
        temperature = configurable.get("temperature")
        if temperature is not None and (
            isinstance(temperature, bool) or not isinstance(temperature, int | float) or not math.isfinite(temperature)
        ):
            raise ConfigurationError(f"configurable['temperature'] must be a number, got {temperature!r}")
        tokens = configurable.get("max_output_tokens")
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1):
            raise ConfigurationError(f"configurable['max_output_tokens'] must be an int >= 1, got {tokens!r}")
        settings = configurable.get("model_settings")
        if settings is not None and not isinstance(settings, Mapping):
            raise ConfigurationError(f"configurable['model_settings'] must be an object, got {settings!r}")
        return cls(
            temperature=None if temperature is None else float(temperature),
            max_output_tokens=tokens,
            model_settings=None if settings is None else thaw_json(settings),
            model=_model_index(configurable.get("model"), chain, depth=depth),
        )

    def settings(self, base: Mapping[str, Any]) -> Mapping[str, Any]:
        return base if self.model_settings is None else {**base, **self.model_settings}


_NONE = ModelOverrides()


def _model_index(name: object, chain: Sequence[ChatModel], *, depth: int) -> int | None:
    if name is None:
        return None
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"configurable['model'] must be a model name, got {name!r}")
    for index, model in enumerate(chain):
        if name in (model.model_name, f"{model.provider}:{model.model_name}"):
            return index
    if depth > 0:
        return None
    known = ", ".join(repr(m.model_name) for m in chain)
    raise ConfigurationError(
        f"configurable['model'] names {name!r}, which this harness does not have",
        hint=f"use one of its models ({known}), or add it to RunPolicy(fallback=...)",
    )
