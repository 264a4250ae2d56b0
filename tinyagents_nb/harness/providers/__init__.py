"""Native provider adapters: models that speak a provider's own API rather than Chat Completions.

``AnthropicModel`` talks to Anthropic's Messages API (prompt caching, extended thinking, native
JSON output). ``resolve_model("anthropic:...")`` builds one; ``"anthropic-compat:..."`` still
reaches Anthropic's OpenAI-compatible endpoint through ``OpenAIChatModel``.
"""

from __future__ import annotations

from .._providers import register_native_builder as _register_native_builder
from ._anthropic import AnthropicModel as AnthropicModel
from ._anthropic_wire import CacheTTL as CacheTTL

__all__ = ["AnthropicModel", "CacheTTL"]

_register_native_builder("anthropic", AnthropicModel)
