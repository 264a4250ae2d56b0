"""Middleware: the hook protocol, the built-in middleware, guardrails and prompt-cache policy.

``tinyagents_nb.harness`` re-exports ``Middleware`` and ``MiddlewareStack``; the built-ins
(logging, trimming, usage accounting, the prompt-cache guard), guardrails and hook counters live here.
"""

from __future__ import annotations

from ._builtin_middleware import (
    LoggingMiddleware as LoggingMiddleware,
    MessageTrimMiddleware as MessageTrimMiddleware,
    PromptCacheGuardMiddleware as PromptCacheGuardMiddleware,
    UsageAccountingMiddleware as UsageAccountingMiddleware,
)
from ._cache_policy import (
    CachePolicy as CachePolicy,
    PrefixStatus as PrefixStatus,
    PromptCacheLayout as PromptCacheLayout,
)
from ._guardrails import (
    GuardrailResult as GuardrailResult,
    GuardrailsMiddleware as GuardrailsMiddleware,
    GuardrailStage as GuardrailStage,
    InputGuardrail as InputGuardrail,
    OutputGuardrail as OutputGuardrail,
    ToolGuardrail as ToolGuardrail,
)
from ._hook_counts import (
    HookCounter as HookCounter,
    HookCounts as HookCounts,
)
from ._middleware import (
    Middleware as Middleware,
    MiddlewareStack as MiddlewareStack,
)

__all__ = [
    "CachePolicy",
    "GuardrailResult",
    "GuardrailStage",
    "GuardrailsMiddleware",
    "HookCounter",
    "HookCounts",
    "InputGuardrail",
    "LoggingMiddleware",
    "MessageTrimMiddleware",
    "Middleware",
    "MiddlewareStack",
    "OutputGuardrail",
    "PrefixStatus",
    "PromptCacheGuardMiddleware",
    "PromptCacheLayout",
    "ToolGuardrail",
    "UsageAccountingMiddleware",
]
