"""Memory: chat history, session state, long-term memory, and the chain that keeps a run inside its context window.

``ShortTermMemory``/``MemoryMiddleware`` load and save a thread's history in a store;
``LongTermMemory`` recalls facts across threads; ``ContextPressureChain`` applies pressure
policies (drop retrieved context, compact tool outputs, trim, summarize) when a request outgrows its
window; ``ContextFitter`` is what a harness fits each request with, and ``compact_rejected``
shrinks a request the provider rejected as too long.
"""

from __future__ import annotations

from ._context_providers import (
    ContextProvider as ContextProvider,
    ContextProvidersMiddleware as ContextProvidersMiddleware,
    ContextTransform as ContextTransform,
    compose_transforms as compose_transforms,
)
from ._fitting import (
    ContextFitter as ContextFitter,
)
from ._long_term import (
    LongTermMemory as LongTermMemory,
    LongTermMemoryMiddleware as LongTermMemoryMiddleware,
    MemoryRecord as MemoryRecord,
    MemoryScope as MemoryScope,
)
from ._memory import (
    PARTIAL_TAG as PARTIAL_TAG,
    ChatHistory as ChatHistory,
    InMemoryChatHistory as InMemoryChatHistory,
    MemoryMiddleware as MemoryMiddleware,
    SessionState as SessionState,
    ShortTermMemory as ShortTermMemory,
    StoreChatHistory as StoreChatHistory,
    get_state as get_state,
    set_state as set_state,
    update_state as update_state,
)
from ._pressure import (
    COMPACTED_TAG as COMPACTED_TAG,
    TOOL_OUTPUT_NAMESPACE as TOOL_OUTPUT_NAMESPACE,
    CompactToolOutputs as CompactToolOutputs,
    ContextPressureChain as ContextPressureChain,
    DropRetrieved as DropRetrieved,
    PressurePolicy as PressurePolicy,
    PressureResult as PressureResult,
    SummarizeOldMessages as SummarizeOldMessages,
    TrimOldMessages as TrimOldMessages,
    default_policies as default_policies,
    load_tool_output as load_tool_output,
)
from ._reactive import (
    compact_rejected as compact_rejected,
)
from ._summarization import (
    SUMMARY_HEADER as SUMMARY_HEADER,
    SUMMARY_TAG as SUMMARY_TAG,
    CompressionProvenance as CompressionProvenance,
    ConcatSummarizer as ConcatSummarizer,
    ModelSummarizer as ModelSummarizer,
    SummarizationPolicy as SummarizationPolicy,
    Summarizer as Summarizer,
    SummaryPlan as SummaryPlan,
    SummaryRecord as SummaryRecord,
)
from ._summarization_middleware import SummarizationMiddleware as SummarizationMiddleware
from ._thread_compaction import (
    THREAD_COMPACTIONS_NAMESPACE as THREAD_COMPACTIONS_NAMESPACE,
    PersistedSummary as PersistedSummary,
    ThreadCompaction as ThreadCompaction,
    thread_compactions as thread_compactions,
)
from ._trim import (
    KeepFirstAndLast as KeepFirstAndLast,
    KeepLast as KeepLast,
    MaxTokens as MaxTokens,
    TrimStrategy as TrimStrategy,
    trim_messages as trim_messages,
)

__all__ = [
    "COMPACTED_TAG",
    "ChatHistory",
    "CompactToolOutputs",
    "CompressionProvenance",
    "ConcatSummarizer",
    "ContextFitter",
    "ContextPressureChain",
    "ContextProvider",
    "ContextProvidersMiddleware",
    "ContextTransform",
    "DropRetrieved",
    "InMemoryChatHistory",
    "KeepFirstAndLast",
    "KeepLast",
    "LongTermMemory",
    "LongTermMemoryMiddleware",
    "MaxTokens",
    "MemoryMiddleware",
    "MemoryRecord",
    "MemoryScope",
    "ModelSummarizer",
    "PARTIAL_TAG",
    "PersistedSummary",
    "PressurePolicy",
    "PressureResult",
    "SUMMARY_HEADER",
    "SUMMARY_TAG",
    "SessionState",
    "ShortTermMemory",
    "StoreChatHistory",
    "SummarizationMiddleware",
    "SummarizationPolicy",
    "SummarizeOldMessages",
    "Summarizer",
    "SummaryPlan",
    "SummaryRecord",
    "THREAD_COMPACTIONS_NAMESPACE",
    "TOOL_OUTPUT_NAMESPACE",
    "ThreadCompaction",
    "TrimOldMessages",
    "TrimStrategy",
    "compact_rejected",
    "compose_transforms",
    "default_policies",
    "get_state",
    "load_tool_output",
    "set_state",
    "thread_compactions",
    "trim_messages",
    "update_state",
]
