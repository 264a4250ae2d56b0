"""Providers: the model adapters, the provider registry and the profiles that describe each model.

``OpenAIChatModel`` speaks Chat Completions to OpenAI and every compatible endpoint;
``AnthropicModel`` speaks Anthropic's Messages API (prompt caching, extended thinking, native JSON
output). ``ProviderSpec`` describes an endpoint; ``resolve_model("provider:model")`` builds the right
adapter (``"anthropic:..."`` the native one, ``"anthropic-compat:..."`` Chat Completions);
``RateLimitInfo`` is what a provider said about its rate limits on the latest response
(``model.rate_limit_info``); ``HostTokenCounter`` is what exact prompt-token counting learnt about a
host (``model.host_token_counter``).
"""

from __future__ import annotations

from ._anthropic import AnthropicModel as AnthropicModel
from ._anthropic_wire import CacheTTL as CacheTTL
from ._host_tokens import HostTokenCounter as HostTokenCounter
from ._openai import OpenAIChatModel as OpenAIChatModel
from ._ratelimit import RateLimitInfo as RateLimitInfo
from ._registry import ProviderSpec as ProviderSpec, known_providers as known_providers
from ._resolve import (
    ModelRegistry as ModelRegistry,
    register_native_builder as _register_native_builder,
    register_wire_builder as _register_wire_builder,
    resolve_model as resolve_model,
)

__all__ = [
    "AnthropicModel",
    "CacheTTL",
    "HostTokenCounter",
    "ModelRegistry",
    "OpenAIChatModel",
    "ProviderSpec",
    "RateLimitInfo",
    "known_providers",
    "resolve_model",
]

_register_wire_builder(OpenAIChatModel)
_register_native_builder("anthropic", AnthropicModel)
