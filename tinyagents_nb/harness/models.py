"""Models: the ``ChatModel`` protocol and its stream, structured output, profiles, capabilities and selection, token estimates and context windows.

``tinyagents_nb.harness`` re-exports the names most code needs (``ChatModel``, ``ModelRequest``,
``ModelResponse``, ``ContextWindow``, ``ModelProfile`` ...). What a custom model's ``stream`` yields
(``ModelStreamItem``, ``StreamFinish``, ``MessageDelta``) is imported from here; the adapters live in
``tinyagents_nb.harness.providers``.
"""

from __future__ import annotations

from ._calibration import (
    Calibration as Calibration,
    PromptTokenCounter as PromptTokenCounter,
    TokenCounting as TokenCounting,
    calibration_for as calibration_for,
    clear_calibrations as clear_calibrations,
)
from ._capabilities import (
    CapabilitySet as CapabilitySet,
    ModelHint as ModelHint,
    ModelResolutionSource as ModelResolutionSource,
    ModelSelection as ModelSelection,
    ResolvedModel as ResolvedModel,
)
from ._configurable import (
    CONFIGURABLE_KEYS as CONFIGURABLE_KEYS,
    ModelOverrides as ModelOverrides,
)
from ._messages import (
    MessageDelta as MessageDelta,
)
from ._model import (
    ChatModel as ChatModel,
    ModelRequest as ModelRequest,
    ModelResponse as ModelResponse,
    ModelStreamItem as ModelStreamItem,
    ResponseFormat as ResponseFormat,
    StreamAccumulator as StreamAccumulator,
    StreamBlock as StreamBlock,
    StreamFinish as StreamFinish,
    StreamUsage as StreamUsage,
    ToolChoice as ToolChoice,
    ToolSchema as ToolSchema,
    collect_stream as collect_stream,
)
from ._profile import (
    ModelProfile as ModelProfile,
    StructuredOutputSupport as StructuredOutputSupport,
    profile_for as profile_for,
)
from ._selection import (
    select_model as select_model,
)
from ._structured import (
    OutputSpec as OutputSpec,
    StructuredOutput as StructuredOutput,
    StructuredStrategy as StructuredStrategy,
    prepare_request as prepare_request,
    strategy_for_profile as strategy_for_profile,
)
from ._structured_extract import (
    extract_structured as extract_structured,
    is_structured_call as is_structured_call,
)
from ._tokens import (
    EstimatorStats as EstimatorStats,
    HeuristicCounter as HeuristicCounter,
    TokenCounter as TokenCounter,
    TokenEstimator as TokenEstimator,
    estimate_tokens as estimate_tokens,
    loaded_tokenizer_for_model as loaded_tokenizer_for_model,
    tokenizer_for_model as tokenizer_for_model,
)
from ._window import (
    ContextWindow as ContextWindow,
    context_window_for as context_window_for,
    register_context_window as register_context_window,
    unregister_context_window as unregister_context_window,
)

__all__ = [
    "CONFIGURABLE_KEYS",
    "Calibration",
    "CapabilitySet",
    "ChatModel",
    "ContextWindow",
    "EstimatorStats",
    "HeuristicCounter",
    "MessageDelta",
    "ModelHint",
    "ModelOverrides",
    "ModelProfile",
    "ModelRequest",
    "ModelResolutionSource",
    "ModelResponse",
    "ModelSelection",
    "ModelStreamItem",
    "OutputSpec",
    "PromptTokenCounter",
    "ResolvedModel",
    "ResponseFormat",
    "StreamAccumulator",
    "StreamBlock",
    "StreamFinish",
    "StreamUsage",
    "StructuredOutput",
    "StructuredOutputSupport",
    "StructuredStrategy",
    "TokenCounter",
    "TokenCounting",
    "TokenEstimator",
    "ToolChoice",
    "ToolSchema",
    "calibration_for",
    "clear_calibrations",
    "collect_stream",
    "context_window_for",
    "estimate_tokens",
    "extract_structured",
    "is_structured_call",
    "loaded_tokenizer_for_model",
    "prepare_request",
    "profile_for",
    "register_context_window",
    "select_model",
    "strategy_for_profile",
    "tokenizer_for_model",
    "unregister_context_window",
]
