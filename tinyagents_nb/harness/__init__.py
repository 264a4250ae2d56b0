"""The TinyAgents harness: typed run context, agent loop, models, tools, events, usage and cost.

This namespace re-exports what most code imports. Each family keeps its full surface in its own
subpackage (``providers``, ``memory``, ``observability``, ``retrieval``, ``stores``, ``mcp``, and
``testkit`` for the fakes), and the core's full catalogues live in ``events``, ``middleware``,
``models``, ``steering``, ``prompts`` and ``runtime``. The ``_modules`` are private. This package
imports nothing from IPython, ipykernel, ipywidgets or traitlets.
"""

from __future__ import annotations

from ._agent_stream import AgentStream as AgentStream
from ._approval import (
    ApprovalDecision as ApprovalDecision,
    ApprovalDesk as ApprovalDesk,
    ApprovalError as ApprovalError,
    ApprovalRequest as ApprovalRequest,
)
from ._approval_gate import (
    require_approval as require_approval,
)
from ._budget import (
    BudgetExceeded as BudgetExceeded,
    TreeBudget as TreeBudget,
)
from ._cancel import (
    CancellationToken as CancellationToken,
    RunCancelled as RunCancelled,
)
from ._config import RunConfig as RunConfig
from ._context import RunContext as RunContext
from ._controls import (
    SkipTool as SkipTool,
    StopWithFinal as StopWithFinal,
)
from ._cost import (
    CostTotals as CostTotals,
    CostTracker as CostTracker,
    ModelPricing as ModelPricing,
)
from ._errors import (
    Cancelled as Cancelled,
    ConfigurationError as ConfigurationError,
    ContextLimitError as ContextLimitError,
    GuardrailTripped as GuardrailTripped,
    InvalidIdError as InvalidIdError,
    LimitExceeded as LimitExceeded,
    ModelNotFound as ModelNotFound,
    ProviderError as ProviderError,
    RunError as RunError,
    RunTimeout as RunTimeout,
    SteeringError as SteeringError,
    StoreError as StoreError,
    StructuredOutputError as StructuredOutputError,
    SubAgentDepthError as SubAgentDepthError,
    TinyAgentsError as TinyAgentsError,
    ToolArgumentsError as ToolArgumentsError,
    ToolDefinitionError as ToolDefinitionError,
    ToolError as ToolError,
    UnknownToolError as UnknownToolError,
)
from ._events import (
    AgentEvent as AgentEvent,
    ModelCompleted as ModelCompleted,
    ModelDelta as ModelDelta,
    ModelStarted as ModelStarted,
    RunCancelledEvent as RunCancelledEvent,
    RunCompleted as RunCompleted,
    RunFailed as RunFailed,
    RunStarted as RunStarted,
    SubAgentCompleted as SubAgentCompleted,
    SubAgentStarted as SubAgentStarted,
    ToolCompleted as ToolCompleted,
    ToolFailed as ToolFailed,
    ToolStarted as ToolStarted,
    event_to_dict as event_to_dict,
)
from ._harness import (
    AgentHarness as AgentHarness,
    AgentInput as AgentInput,
)
from ._ids import (
    RunId as RunId,
    ThreadId as ThreadId,
)
from ._limits import (
    RunLimits as RunLimits,
)
from ._messages import (
    AssistantMessage as AssistantMessage,
    ContentBlock as ContentBlock,
    ImageRef as ImageRef,
    JsonBlock as JsonBlock,
    Message as Message,
    SystemMessage as SystemMessage,
    TextBlock as TextBlock,
    TextDelta as TextDelta,
    ThinkingBlock as ThinkingBlock,
    ThinkingDelta as ThinkingDelta,
    ToolCall as ToolCall,
    ToolCallDelta as ToolCallDelta,
    ToolMessage as ToolMessage,
    UserMessage as UserMessage,
    dump_messages as dump_messages,
    load_messages as load_messages,
    messages_from_json as messages_from_json,
    messages_to_json as messages_to_json,
)
from ._middleware import (
    Middleware as Middleware,
)
from ._model import (
    ChatModel as ChatModel,
    ModelRequest as ModelRequest,
    ModelResponse as ModelResponse,
    ToolSchema as ToolSchema,
)
from ._policy import RunPolicy as RunPolicy
from ._profile import (
    ModelProfile as ModelProfile,
)
from ._prompt import (
    PromptTemplate as PromptTemplate,
)
from ._retry import (
    FallbackPolicy as FallbackPolicy,
    RateLimiter as RateLimiter,
    RetryPolicy as RetryPolicy,
)
from ._run import (
    AgentRun as AgentRun,
)
from ._sink import (
    EventSink as EventSink,
)
from ._steering import (
    InjectMessage as InjectMessage,
    Pause as Pause,
    Resume as Resume,
    SteeringHandle as SteeringHandle,
)
from ._stream import (
    StreamChunk as StreamChunk,
    StreamMode as StreamMode,
)
from ._structured import (
    OutputSpec as OutputSpec,
)
from ._subagent import (
    SubAgent as SubAgent,
    SubAgentSession as SubAgentSession,
    SubAgentTool as SubAgentTool,
)
from ._tool_progress import (
    ToolDelta as ToolDelta,
    ToolReporter as ToolReporter,
)
from ._tool_registry import (
    ToolProvider as ToolProvider,
    ToolRegistry as ToolRegistry,
)
from ._tools import (
    FunctionTool as FunctionTool,
    Injected as Injected,
    Tool as Tool,
    ToolResult as ToolResult,
    tool as tool,
)
from ._usage import (
    Usage as Usage,
    UsageTracker as UsageTracker,
)
from ._window import (
    ContextWindow as ContextWindow,
)
from .mcp import (
    MCPServer as MCPServer,
)
from .providers import (
    AnthropicModel as AnthropicModel,
    OpenAIChatModel as OpenAIChatModel,
    resolve_model as resolve_model,
)
from .stores import (
    InMemoryStore as InMemoryStore,
    SQLiteStore as SQLiteStore,
    Store as Store,
)

__all__ = [
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
