"""Every error the harness raises, in one tree.

```
TinyAgentsError
├── ConfigurationError (ValueError)      bad input, caught at construction
│   ├── InvalidIdError                   an identifier that is empty, too long or has whitespace
│   └── ToolDefinitionError              a function that cannot become a tool
├── ModelNotFound (LookupError)          a model name no registry, profile or provider knows
├── StoreError                           a store is closed, locked past its timeout, or the disk failed
└── RunError                             a run ended without a normal completion
    ├── Cancelled                        cooperative cancellation was observed
    │   └── RunCancelled                 ... carrying the partial transcript and usage (in _cancel)
    ├── LimitExceeded                    a fail-closed cap tripped (model/tool calls, depth, ...)
    │   └── RunTimeout (TimeoutError)    the wall-clock budget ran out
    ├── SubAgentDepthError               a child would run deeper than ``max_depth``
    ├── ContextLimitError                the request cannot be made to fit the context window
    ├── SteeringError                    a steering command was rejected
    ├── ToolError                        a tool failed and the policy says the run fails
    │   ├── UnknownToolError             the model asked for a tool that is not registered
    │   └── ToolArgumentsError           the model's arguments do not parse or validate
    ├── StructuredOutputError            the final answer does not match the requested schema
    ├── GuardrailTripped                 an input, output or tool guardrail blocked the run
    └── ProviderError                    a model provider answered with an error
```

Signals the loop understands are errors too, so ``except TinyAgentsError`` catches everything the
harness means; Python's own ``asyncio.CancelledError`` is never swallowed or converted here.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "Cancelled",
    "ConfigurationError",
    "ContextLimitError",
    "GuardrailTripped",
    "InvalidIdError",
    "LimitExceeded",
    "ModelNotFound",
    "ProviderError",
    "RunError",
    "RunTimeout",
    "SteeringError",
    "StoreError",
    "StructuredOutputError",
    "SubAgentDepthError",
    "TinyAgentsError",
    "ToolDefinitionError",
    "ToolArgumentsError",
    "ToolError",
    "UnknownToolError",
]


class TinyAgentsError(Exception):
    """Root of every error the harness raises.

    Attributes:
        hint: A one-line suggestion for the person reading the error, or ``None``.
    """

    hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


def describe_error(error: BaseException) -> str:
    """``"TypeName: message"`` for any exception, without ever raising.

    Error reports are built from third-party exceptions (tools, summarizers) whose ``__str__`` may
    itself raise; a report that crashes would turn a recoverable tool failure into a failed run.
    Falls back to ``repr`` and finally to the bare type name.
    """
    name = type(error).__name__
    for render in (str, repr):
        try:
            text = render(error)
        except Exception:
            continue
        return f"{name}: {text}" if text else name
    return f"{name}: <unprintable>"


class ConfigurationError(TinyAgentsError, ValueError):
    """A value passed to a constructor is invalid; raised before any run starts."""


class InvalidIdError(ConfigurationError):
    """An identifier is empty, too long, or contains whitespace or control characters."""


class ToolDefinitionError(ConfigurationError):
    """A Python callable cannot be turned into a tool (e.g. an unannotated parameter)."""


class ModelNotFound(TinyAgentsError, LookupError):
    """No profile, registry entry or provider knows this model name."""

    def __init__(self, model: str, *, hint: str | None = None, detail: str | None = None) -> None:
        text = f"unknown model {model!r}" + (f": {detail}" if detail else "")
        super().__init__(text, hint=hint)
        self.model = model


class StoreError(TinyAgentsError):
    """A store could not be read or written: it is closed, locked past its timeout, or the disk failed."""


class RunError(TinyAgentsError):
    """A run ended without completing normally."""


class Cancelled(RunError):
    """Cooperative cancellation was observed at a checkpoint."""

    def __init__(self, reason: str | None = None) -> None:
        super().__init__("run cancelled" + (f": {reason}" if reason else ""))
        self.reason = reason


class LimitExceeded(RunError):
    """A fail-closed limit tripped.

    Attributes:
        limit: Which limit: ``"model_calls"``, ``"tool_calls"``, ``"wall_clock"``, ``"depth"``, ...
        maximum: The configured cap, when it is a count.
    """

    def __init__(self, limit: str, message: str, *, maximum: float | None = None) -> None:
        super().__init__(f"limit exceeded: {message}")
        self.limit = limit
        self.maximum = maximum


class RunTimeout(LimitExceeded, TimeoutError):
    """The run's wall-clock budget ran out."""

    def __init__(self, message: str, *, timeout_s: float | None = None) -> None:
        super().__init__("wall_clock", message, maximum=timeout_s)


class SubAgentDepthError(RunError):
    """A nested run would exceed the recursion cap."""

    def __init__(self, max_depth: int) -> None:
        super().__init__(
            f"sub-agent recursion exceeded the maximum depth of {max_depth}",
            hint="raise max_depth on the RunConfig or restructure the delegation",
        )
        self.max_depth = max_depth


class ContextLimitError(RunError):
    """The request does not fit the model's context window and nothing more may be dropped."""

    def __init__(
        self,
        message: str,
        *,
        model: str | None = None,
        estimated_tokens: int | None = None,
        limit_tokens: int | None = None,
    ) -> None:
        super().__init__(message, hint="start a new thread, enable summarization, or use a model with a larger window")
        self.model = model
        self.estimated_tokens = estimated_tokens
        self.limit_tokens = limit_tokens


class SteeringError(RunError):
    """A steering command was not allowed by the run's steering policy, or is malformed."""


class ToolError(RunError):
    """A tool failed and the run's tool-error policy is to fail the run."""

    def __init__(self, message: str, *, tool_name: str | None = None, call_id: str | None = None) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.call_id = call_id


class UnknownToolError(ToolError):
    """The model asked for a tool that is not registered (by default reported back to the model)."""


class ToolArgumentsError(ToolError):
    """The model's tool arguments are not a JSON object or fail validation (by default reported back)."""


class StructuredOutputError(RunError):
    """The model's final answer does not validate against the requested output type."""


class GuardrailTripped(RunError):
    """A guardrail blocked the run.

    Attributes:
        guardrail: The guardrail's name.
        stage: Where it tripped: ``"input"``, ``"output"``, ``"tool_input"`` or ``"tool_output"``.
        reason: Why, as the guardrail said.
        info: The guardrail's extra facts.
        tool_name: The tool concerned, for the tool stages.
    """

    def __init__(
        self,
        guardrail: str,
        stage: str,
        reason: str,
        *,
        info: Mapping[str, object] | None = None,
        tool_name: str | None = None,
    ) -> None:
        where = f"{stage} of tool `{tool_name}`" if tool_name else stage
        super().__init__(f"guardrail {guardrail!r} tripped on the {where}: {reason or '(no reason given)'}")
        self.guardrail = guardrail
        self.stage = stage
        self.reason = reason
        self.info: dict[str, object] = dict(info or {})
        self.tool_name = tool_name


class ProviderError(RunError):
    """A model provider returned an error or the connection to it failed.

    Attributes:
        status: The HTTP status code; for an error reported inside a 200 stream, the status the API
            gives the same error (Anthropic's ``overloaded_error`` is 529); ``None`` for transport
            failures and error kinds without a known status.
        retryable: Whether a retry may succeed (network, timeout, 429 that is not a quota, 5xx).
        retry_after_s: The provider's requested wait, when it sent one.
        provider: The provider's name, e.g. ``"openai"``.
        code: The provider's machine-readable error code, when given.
        details: What the provider added to tell a user what to do, scrubbed of secrets, e.g.
            ``{"metadata.raw": <the upstream host's reason>}`` (OpenRouter),
            ``{"failed_generation": <the model output that failed>}`` (Groq) or ``{"param": ...}``.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after_s: float | None = None,
        provider: str | None = None,
        model: str | None = None,
        code: str | None = None,
        hint: str | None = None,
        details: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.details: dict[str, str] = dict(details or {})
        self.status = status
        self.retryable = retryable
        self.retry_after_s = retry_after_s
        self.provider = provider
        self.model = model
        self.code = code
