"""``RunPolicy``: the harness-wide settings every run of a harness reads (limits, retry, errors, caching)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ._approval import ApprovalTimeoutAction, UnattendedApproval
from ._cache_policy import CachePolicy
from ._calibration import TokenCounting
from ._clock import RANDOM_IDS, SYSTEM_CLOCK, Clock, IdSource
from ._errors import ConfigurationError
from ._limits import RunLimits
from ._retry import FallbackPolicy, RateLimiter, RetryPolicy
from ._structured import OutputSpec, StructuredStrategy
from .stores import ResponseCache

__all__ = ["ErrorPolicy", "RunPolicy"]

ErrorPolicy = Literal["return_error", "fail"]
"""What a tool-level problem does: ``return_error`` tells the model, ``fail`` ends the run."""


@dataclass(frozen=True, kw_only=True)
class RunPolicy:
    """Harness-wide settings for every run.

    Attributes:
        limits: Caps on model calls, tool calls, wall clock, retries, concurrency and depth.
        retry: Backoff for retryable provider errors.
        fallback: Models to try, in order, when the primary model keeps failing.
        unknown_tool: ``return_error`` tells the model the tool does not exist; ``fail`` ends the run.
        invalid_args: The same choice for arguments that do not parse or validate.
        tool_errors: The same choice for a tool that raises.
        tool_timeout_s: Default per-tool timeout (a tool's own ``timeout_s`` wins); expiry is reported to the model.
        output: Structured output to extract from the final answer (a type, JSON schema or ``OutputSpec``).
        structured_strategy: ``auto`` chooses from the model profile.
        structured_retries: How many times an invalid structured answer is sent back to the model
            with its validation error before the run fails with ``StructuredOutputError``; each
            repair is one more model call under the usual limits (0: no repair).
        reactive_compactions: How many times one model call is compacted and re-sent after the
            provider rejects its prompt as too long (``ContextLimitError``) despite the estimate;
            0 lets that error end the run.
        max_output_tokens: Cap on each request's output tokens.
        temperature: Sampling temperature passed to the model.
        model_settings: Extra provider parameters for every request.
        response_cache: A local response cache (else the context's ``cache.response_cache`` is used, if any).
        cache: Which caches are used at all: the response cache and provider prompt-cache breakpoints.
        rate_limiter: Throttles model calls.
        clock: Time source (the testkit's ``DeterministicClock`` makes durations reproducible).
        ids: Id source for call ids and child run ids (``DeterministicIds`` in tests).
        middleware_events: Emit ``middleware.started``/``middleware.completed`` around every
            middleware hook (off by default: it doubles the events of a round trip).
        unattended_approval: How a tool call that needs approval is decided when nobody can answer
            (no run handle, or an unattended session): ``deny``, ``approve``, or ``None`` (deny).
        approval_timeout_s: How long a tool call waits for a person's decision (default 300 s, as
            the TypeScript peer does; ``None``: until the run's deadline or a Stop).
        approval_timeout_action: What an unanswered call becomes then: ``deny`` (the model is told),
            ``approve``, or ``fail`` (the run fails with ``ApprovalError``). Recorded as
            ``decided_by="timeout"``.
        tool_result_limit: The default size limit, in characters, of one tool result as it arrives
            (a 10 MB MCP result, a whole web page): a longer one is cut, its raw output kept in the
            run's store, and a ``read_tool_output`` tool to page through it is offered once something
            was cut. ``None`` turns the default off; a ``ToolResultLimit`` middleware of your own
            replaces it (per-tool limits, another store).
        token_counting: ``exact`` asks the model's host to count each request's prompt tokens
            before it is sent (a ``PromptTokenCounter`` model, e.g. ``OpenAIChatModel`` against
            llama.cpp's ``llama-server``), so the window is fitted to the real figure; a host that
            cannot count, or does not answer within 2 s, gets the calibrated estimate (the default,
            ``estimate``). Costs one or two small local requests per model call.
    """

    limits: RunLimits = field(default_factory=RunLimits)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    fallback: FallbackPolicy | None = None
    unknown_tool: ErrorPolicy = "return_error"
    invalid_args: ErrorPolicy = "return_error"
    tool_errors: ErrorPolicy = "return_error"
    tool_timeout_s: float | None = None
    output: OutputSpec | None = None
    structured_strategy: Literal["auto"] | StructuredStrategy = "auto"
    structured_retries: int = 2
    reactive_compactions: int = 2
    max_output_tokens: int | None = None
    temperature: float | None = None
    model_settings: Mapping[str, Any] = field(default_factory=dict)
    response_cache: ResponseCache | None = None
    cache: CachePolicy = field(default_factory=CachePolicy)
    rate_limiter: RateLimiter | None = None
    clock: Clock = SYSTEM_CLOCK
    ids: IdSource = RANDOM_IDS
    unattended_approval: UnattendedApproval | None = None
    approval_timeout_s: float | None = 300.0
    approval_timeout_action: ApprovalTimeoutAction = "deny"
    middleware_events: bool = False
    tool_result_limit: int | None = 20_000
    token_counting: TokenCounting = "estimate"

    def __post_init__(self) -> None:
        for name in ("unknown_tool", "invalid_args", "tool_errors"):
            if getattr(self, name) not in ("return_error", "fail"):
                raise ConfigurationError(f"{name} must be 'return_error' or 'fail', got {getattr(self, name)!r}")
        if self.tool_timeout_s is not None and self.tool_timeout_s <= 0:
            raise ConfigurationError("tool_timeout_s must be > 0")
        if self.unattended_approval not in (None, "deny", "approve"):
            raise ConfigurationError(
                f"unattended_approval must be 'deny', 'approve' or None, got {self.unattended_approval!r}"
            )
        wait: object = self.approval_timeout_s
        if wait is not None and (isinstance(wait, bool) or not isinstance(wait, int | float) or not wait > 0):
            raise ConfigurationError(f"approval_timeout_s must be a number > 0 or None, got {wait!r}")
        if self.approval_timeout_action not in ("deny", "approve", "fail"):
            raise ConfigurationError(
                f"approval_timeout_action must be 'deny', 'approve' or 'fail', got {self.approval_timeout_action!r}"
            )
        limit: object = self.tool_result_limit
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 500):
            raise ConfigurationError(f"tool_result_limit must be an int >= 500 or None, got {limit!r}")
        if self.token_counting not in ("estimate", "exact"):
            raise ConfigurationError(f"token_counting must be 'estimate' or 'exact', got {self.token_counting!r}")
        retries: object = self.structured_retries
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigurationError(f"structured_retries must be an int >= 0, got {retries!r}")
        reactive: object = self.reactive_compactions
        if isinstance(reactive, bool) or not isinstance(reactive, int) or reactive < 0:
            raise ConfigurationError(f"reactive_compactions must be an int >= 0, got {reactive!r}")
        output: object = self.output
        if output is not None and not isinstance(output, OutputSpec):  # a type or a schema, for convenience
            object.__setattr__(self, "output", OutputSpec.of(output))
