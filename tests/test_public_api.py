"""The curated namespaces stay exact, and importing the harness loads nothing from Jupyter."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

import tinyagents_nb
import tinyagents_nb.harness as harness

PRIVATE_HOMES = ("tinyagents_nb.harness._", "tinyagents_nb.harness.providers._")
JUPYTER_MODULES = ("IPython", "ipykernel", "ipywidgets", "traitlets", "comm", "zmq")


def public_names(module: types.ModuleType) -> list[str]:
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and name != "annotations" and not isinstance(value, types.ModuleType)
    )


def test_harness_all_is_sorted_and_exact() -> None:
    assert harness.__all__ == sorted(harness.__all__)
    assert sorted(harness.__all__) == public_names(harness)


def test_every_public_harness_name_is_defined_in_a_private_module() -> None:
    for name in harness.__all__:
        obj = getattr(harness, name)
        if isinstance(obj, type) or (callable(obj) and hasattr(obj, "__code__")):
            # a core module (harness._x) or a family's private module (harness.family._x)
            parts = obj.__module__.split(".")
            assert parts[:2] == ["tinyagents_nb", "harness"], (name, obj.__module__)
            assert parts[-1].startswith("_"), (name, obj.__module__)


def test_providers_namespace_is_exact() -> None:
    from tinyagents_nb.harness import providers

    assert providers.__all__ == sorted(providers.__all__) == public_names(providers)
    assert harness.AnthropicModel is providers.AnthropicModel


FRONT_LIMIT = 120  # issue 12: about 120; docs/index.md says where the rest lives

FRONT: list[str] = [  # what most users import; the rest is in a family or a core sub-namespace
    "AgentEvent",
    "AgentHarness",
    "AgentInput",
    "AgentRun",
    "AgentStream",
    "AnthropicModel",
    "ApprovalDecision",
    "ApprovalDesk",
    "ApprovalError",
    "ApprovalRequest",
    "AssistantMessage",
    "BudgetExceeded",
    "CancellationToken",
    "Cancelled",
    "ChatModel",
    "ConfigurationError",
    "ContentBlock",
    "ContextLimitError",
    "ContextWindow",
    "CostTotals",
    "CostTracker",
    "EventSink",
    "FallbackPolicy",
    "FunctionTool",
    "GuardrailTripped",
    "ImageRef",
    "InMemoryStore",
    "InjectMessage",
    "Injected",
    "InvalidIdError",
    "JsonBlock",
    "LimitExceeded",
    "MCPServer",
    "Message",
    "Middleware",
    "ModelCompleted",
    "ModelDelta",
    "ModelNotFound",
    "ModelPricing",
    "ModelProfile",
    "ModelRequest",
    "ModelResponse",
    "ModelStarted",
    "OpenAIChatModel",
    "OutputSpec",
    "Pause",
    "PromptTemplate",
    "ProviderError",
    "RateLimiter",
    "Resume",
    "RetryPolicy",
    "RunCancelled",
    "RunCancelledEvent",
    "RunCompleted",
    "RunConfig",
    "RunContext",
    "RunError",
    "RunFailed",
    "RunId",
    "RunLimits",
    "RunPolicy",
    "RunStarted",
    "RunTimeout",
    "SQLiteStore",
    "SkipTool",
    "SteeringError",
    "SteeringHandle",
    "StopWithFinal",
    "Store",
    "StoreError",
    "StreamChunk",
    "StreamMode",
    "StructuredOutputError",
    "SubAgent",
    "SubAgentCompleted",
    "SubAgentDepthError",
    "SubAgentSession",
    "SubAgentStarted",
    "SubAgentTool",
    "SystemMessage",
    "TextBlock",
    "TextDelta",
    "ThinkingBlock",
    "ThinkingDelta",
    "ThreadId",
    "TinyAgentsError",
    "Tool",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallDelta",
    "ToolCompleted",
    "ToolDefinitionError",
    "ToolDelta",
    "ToolError",
    "ToolFailed",
    "ToolMessage",
    "ToolProvider",
    "ToolRegistry",
    "ToolReporter",
    "ToolResult",
    "ToolSchema",
    "ToolStarted",
    "TreeBudget",
    "UnknownToolError",
    "Usage",
    "UsageTracker",
    "UserMessage",
    "dump_messages",
    "event_to_dict",
    "load_messages",
    "messages_from_json",
    "messages_to_json",
    "require_approval",
    "resolve_model",
    "tool",
]

LEFT_THE_FRONT: dict[str, str] = {  # issue 12: names that were in the front, and their public home now
    "Cancel": "steering",
    "ContextPressure": "events",
    "EventSubscription": "events",
    "HarnessRunStatus": "runtime",
    "MessageDelta": "models",
    "MiddlewareStack": "middleware",
    "ModelOverrides": "models",
    "ModelRegistry": "providers",
    "ModelStreamItem": "models",
    "ProviderSpec": "providers",
    "RETRIEVED_TAG": "runtime",
    "Redirect": "steering",
    "SetMetadata": "steering",
    "SteeringOutcome": "steering",
    "StreamFinish": "models",
    "StructuredOutput": "models",
    "SubAgentHandle": "steering",
    "known_providers": "providers",
}


def test_front_namespace_is_exact() -> None:
    assert harness.__all__ == FRONT
    assert len(FRONT) <= FRONT_LIMIT


@pytest.mark.parametrize("name", sorted(LEFT_THE_FRONT))
def test_a_name_that_left_the_front_is_public_in_its_namespace(name: str) -> None:
    import importlib

    module = importlib.import_module(f"tinyagents_nb.harness.{LEFT_THE_FRONT[name]}")
    assert name not in harness.__all__
    assert not hasattr(harness, name)
    assert name in module.__all__


FAMILIES: dict[str, list[str]] = {  # each family's curated namespace, exactly
    "batch": [
        "BatchJobRecord",
        "Executor",
        "JobStatus",
        "MapCheckpoint",
        "MapProgress",
        "MapSnapshot",
        "MapState",
        "Prompt",
        "RateLimits",
        "RowStatus",
        "agent_map",
        "agent_map_async",
        "batch_job_status",
        "batch_jobs",
        "cancel_batch_job",
    ],
    "durable": [
        "DurableJournal",
        "Pruned",
        "ResumePlan",
        "RunStore",
        "RunStoreCorrupt",
        "RunStoreVersionError",
        "StoredRun",
        "bound_names",
        "plan_resume",
        "resume_run",
        "resume_streaming",
    ],
    "memory": [
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
    ],
    "observability": [
        "AgentCallLatency",
        "AgentLatencyMetrics",
        "AgentObservation",
        "CONVENTIONS",
        "DEFAULT_PATTERNS",
        "DEFAULT_SENSITIVE_KEYS",
        "EventJournal",
        "FanOutSink",
        "GenAIConventions",
        "InMemoryEventJournal",
        "JournalSink",
        "JsonlEventJournal",
        "JsonlSink",
        "OTelSink",
        "Observed",
        "RedactingSink",
        "RunLatency",
        "RunStatusStore",
        "SQLiteEventJournal",
        "UnrecognizedEvent",
        "as_observations",
        "event_detail",
        "event_from_dict",
        "events_to_dataframe",
        "looks_like_credential",
        "secrets_from_env",
    ],
    "providers": [
        "AnthropicModel",
        "CacheTTL",
        "HostTokenCounter",
        "ModelRegistry",
        "OpenAIChatModel",
        "ProviderSpec",
        "RateLimitInfo",
        "known_providers",
        "resolve_model",
    ],
    "retrieval": [
        "Document",
        "EmbeddingModel",
        "EmbeddingResult",
        "InMemoryVectorStore",
        "MockEmbeddingModel",
        "OpenAIEmbeddingModel",
        "Retriever",
        "SQLiteVectorStore",
        "ScoredDocument",
        "VectorStore",
        "cosine_similarity",
    ],
    "stores": [
        "CacheRegistry",
        "InMemoryResponseCache",
        "InMemoryStore",
        "JsonValue",
        "Namespace",
        "ResponseCache",
        "ResponseCacheStats",
        "SQLiteResponseCache",
        "SQLiteStore",
        "Store",
        "StoreRegistry",
        "StoreResponseCache",
        "cache_key",
        "lookup_response",
        "open_sqlite",
        "store_response",
    ],
    "testkit": [
        "DeterministicClock",
        "DeterministicIds",
        "EchoModel",
        "EventRecorder",
        "FakeTool",
        "FunctionModel",
        "ScriptedModel",
        "SlowModel",
        "StreamingMock",
        "Trajectory",
    ],
}


CORE_NAMESPACES: dict[str, list[str]] = {  # core sub-namespaces: the full catalogue of a core concern
    "events": [
        "AgentEvent",
        "ApprovalDecided",
        "ApprovalRequested",
        "BudgetReconciled",
        "BudgetReserved",
        "CacheHit",
        "CacheLayoutEvent",
        "CacheMiss",
        "ContextPressure",
        "ControlApplied",
        "CostRecorded",
        "EventListener",
        "EventSink",
        "EventSubscription",
        "FallbackUsed",
        "GuardrailTrippedEvent",
        "LimitReached",
        "MemoryLoaded",
        "MemorySaved",
        "MiddlewareCompleted",
        "MiddlewareStarted",
        "ModelCompleted",
        "ModelDelta",
        "ModelDiscarded",
        "ModelFailed",
        "ModelRetracted",
        "ModelSelected",
        "ModelStarted",
        "RateLimitWaited",
        "RetryScheduled",
        "RunCancelledEvent",
        "RunCompleted",
        "RunFailed",
        "RunResumed",
        "RunStarted",
        "SteeringApplied",
        "StructuredRepair",
        "SubAgentCompleted",
        "SubAgentReused",
        "SubAgentStarted",
        "ToolCompleted",
        "ToolDeltaEvent",
        "ToolFailed",
        "ToolReplayed",
        "ToolStarted",
        "UsageRecorded",
        "event_to_dict",
    ],
    "middleware": [
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
    ],
    "models": [
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
    ],
    "prompts": [
        "MessagesTemplate",
        "PromptBuilder",
        "PromptSegment",
        "PromptTemplate",
        "SegmentKind",
        "TemplateRole",
    ],
    "runtime": [
        "CallId",
        "CellId",
        "Clock",
        "CostBreakdown",
        "CostRecord",
        "CostUnknownWarning",
        "EventId",
        "HarnessRunStatus",
        "IdSource",
        "Identifier",
        "LimitKind",
        "LimitTracker",
        "MODE_KINDS",
        "PriceSource",
        "RANDOM_IDS",
        "REPAIR_TAG",
        "RETRIEVED_TAG",
        "RunId",
        "RunPhase",
        "RunStatus",
        "SUBAGENT_INPUT_FIELD",
        "SYSTEM_CLOCK",
        "SessionId",
        "TRUNCATED_TAG",
        "ThreadId",
        "ToolResultLimit",
        "UsageRecord",
        "arguments_sha256",
        "call_with_retry",
        "describe_error",
        "freeze_json",
        "freeze_json_object",
        "is_retryable",
        "thaw_json",
    ],
    "steering": [
        "Cancel",
        "InjectMessage",
        "Pause",
        "Redirect",
        "Resume",
        "SetMetadata",
        "SteeringCommand",
        "SteeringHandle",
        "SteeringKind",
        "SteeringOutcome",
        "SteeringPolicy",
        "SteeringReceipt",
        "SubAgentHandle",
        "steering_from_dict",
        "steering_to_dict",
    ],
}


@pytest.mark.parametrize("name", sorted(CORE_NAMESPACES))
def test_core_namespace_is_exact(name: str) -> None:
    import importlib

    module = importlib.import_module(f"tinyagents_nb.harness.{name}")
    assert module.__all__ == sorted(module.__all__) == public_names(module) == CORE_NAMESPACES[name]
    for attr in module.__all__:
        home = getattr(getattr(module, attr), "__module__", "")
        if home.startswith("tinyagents_nb."):
            package, private = home.rsplit(".", 1)
            assert package == "tinyagents_nb.harness", (attr, home)
            assert private.startswith("_"), (attr, home)


def test_the_front_namespace_stays_small_and_re_exports_each_family_name_from_its_family() -> None:
    import importlib

    assert len(harness.__all__) <= FRONT_LIMIT
    for family in (*FAMILIES, *CORE_NAMESPACES):
        module = importlib.import_module(f"tinyagents_nb.harness.{family}")
        for name in set(module.__all__) & set(harness.__all__):
            assert getattr(harness, name) is getattr(module, name), (family, name)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_namespace_is_exact(family: str) -> None:
    import importlib

    module = importlib.import_module(f"tinyagents_nb.harness.{family}")
    assert module.__all__ == sorted(module.__all__) == public_names(module) == FAMILIES[family]
    for name in module.__all__:
        obj = getattr(module, name)
        home = getattr(obj, "__module__", "")
        if (isinstance(obj, type) or callable(obj)) and home.startswith("tinyagents_nb."):
            assert home.startswith(f"tinyagents_nb.harness.{family}._"), (name, home)


PROVIDERS_WIRE = [  # what an adapter author reuses from the built-in adapters
    "AnthropicWireOptions",
    "ChunkParser",
    "EventParser",
    "PerLoopClients",
    "SSEDecoder",
    "SSEEvent",
    "anthropic_body",
    "anthropic_tools",
    "error_from_payload",
    "normalize_usage",
    "parse_anthropic_message",
    "parse_rate_limit_headers",
    "parse_retry_after",
    "scrub",
    "scrub_value",
]


def test_providers_wire_namespace_is_exact() -> None:
    from tinyagents_nb.harness.providers import wire

    assert wire.__all__ == sorted(wire.__all__) == public_names(wire) == PROVIDERS_WIRE
    for name in wire.__all__:
        assert getattr(wire, name).__module__.startswith("tinyagents_nb.harness.providers._"), name
    assert not set(wire.__all__) & set(harness.__all__)


def test_mcp_namespace_is_exact() -> None:
    from tinyagents_nb.harness import mcp

    assert mcp.__all__ == sorted(mcp.__all__) == public_names(mcp)
    assert harness.MCPServer is mcp.MCPServer


def test_top_level_exports() -> None:
    assert tinyagents_nb.__all__ == ["__version__", "load_ipython_extension", "unload_ipython_extension"]
    assert sorted(n for n in tinyagents_nb.__all__ if n != "__version__") == public_names(tinyagents_nb)
    assert callable(tinyagents_nb.load_ipython_extension)
    assert callable(tinyagents_nb.unload_ipython_extension)


def test_magics_namespace_is_exact() -> None:
    import tinyagents_nb.magics as magics

    assert magics.__all__ == sorted(magics.__all__) == public_names(magics)


@pytest.mark.parametrize("module", ["tinyagents_nb", "tinyagents_nb.harness"])
def test_import_in_a_fresh_interpreter_loads_no_jupyter_module(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {JUPYTER_MODULES!r})\n"
        "heavy = sorted(m for m in ('pandas', 'genai_prices', 'tiktoken', 'httpx', 'mcp', 'httpx2') if m in sys.modules)\n"
        "print(repr((bad, heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    bad, heavy = eval(out)
    assert bad == [], f"importing {module} loaded Jupyter modules: {bad}"
    assert heavy == [], f"importing {module} eagerly loaded heavy modules: {heavy}"


def test_rlm_namespace_is_exact() -> None:
    import tinyagents_nb.rlm as rlm

    assert rlm.__all__ == sorted(rlm.__all__) == public_names(rlm)
    for name in rlm.__all__:
        obj = getattr(rlm, name)
        if isinstance(obj, type):
            assert obj.__module__.startswith("tinyagents_nb.rlm._"), (name, obj.__module__)


def test_importing_rlm_loads_no_jupyter_module() -> None:
    code = (
        "import sys, tinyagents_nb.rlm\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {(*JUPYTER_MODULES, 'jupyter_client')!r}"
        " or m.startswith(('tinyagents_nb.magics', 'tinyagents_nb.widgets')))\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


NOTEBOOK_NAMES = [  # issue 25: the notebook-access family's curated namespace, exactly
    "ACCESS_MODES",
    "AccessMode",
    "CellEntry",
    "CellLog",
    "GUIDANCE",
    "MASK",
    "MAX_IMAGES",
    "MAX_IMAGE_CHARS",
    "MainThreadRunner",
    "Masker",
    "NotebookAccess",
    "NotebookImage",
    "Proposal",
    "READ_TOOLS",
    "WRITE_TOOLS",
    "access_line",
    "describe_call",
    "describe_variable",
    "image_of",
    "list_variables",
    "notebook_tools",
    "quoted",
    "trim_traceback",
]


def test_notebook_namespace_is_exact() -> None:
    import tinyagents_nb.notebook as notebook

    assert notebook.__all__ == sorted(notebook.__all__) == public_names(notebook) == NOTEBOOK_NAMES
    assert notebook.READ_TOOLS == ("notebook_variables", "inspect_variable", "notebook_cells", "last_error")
    assert notebook.WRITE_TOOLS == ("run_code", "propose_cell")


def test_importing_the_harness_never_loads_notebook_access() -> None:
    code = "import sys, tinyagents_nb.harness\nprint(sorted(m for m in sys.modules if 'tinyagents_nb.notebook' in m))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


SEED_NAMES = (  # issue 13 rows built on seeds-a: each must stay public
    "CONFIGURABLE_KEYS",
    "ControlApplied",
    "HookCounter",
    "HookCounts",
    "LimitKind",
    "MODE_KINDS",
    "MiddlewareCompleted",
    "MiddlewareStarted",
    "ModelOverrides",
    "ModelSelected",
    "RateLimitWaited",
    "SkipTool",
    "SteeringOutcome",
    "StopWithFinal",
    "StreamChunk",
    "StreamMode",
    "SubAgentHandle",
    "ToolDelta",
    "ToolDeltaEvent",
    "ToolReporter",
)


def test_seed_names_are_public() -> None:
    import importlib

    public = set(harness.__all__)
    for name in CORE_NAMESPACES:
        public |= set(importlib.import_module(f"tinyagents_nb.harness.{name}").__all__)
    missing = [name for name in SEED_NAMES if name not in public]
    assert missing == []
    for method in ("invoke_with_events", "invoke_streaming_with_status"):
        assert callable(getattr(harness.AgentHarness, method))
    for method in ("chunks", "children", "child"):
        assert callable(getattr(harness.AgentStream, method))
