"""Reactive compaction: when the provider says "prompt too long" despite the estimate, compact and retry.

The pressure chain fits each request to the window *estimate*; estimates can be wrong (a tokenizer
the estimator does not know, images, a provider's hidden overhead) and some models have no known
window at all. When the adapter raises ``ContextLimitError`` the loop compacts the request with the
harness's ``ContextFitter`` against a tighter target and sends it again, at most
``RunPolicy.reactive_compactions`` times per model call, before the error ends the run.

The target: when the provider reported both its limit and the prompt's real size, the estimate is
scaled by their ratio (so a miscalibrated estimator is corrected by the provider's own count), less
10 %; otherwise each attempt asks for 30 % less than the estimate. The run's transcript is not
changed: like all pressure relief, compaction applies to what is sent. The target is remembered
by the fitter (``ContextFitter.learn``), so the following turns are fitted to it up front instead of
being rejected by the provider again every turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._errors import ContextLimitError
from .._events import ContextPressure
from .._window import ContextWindow
from ._fitting import ContextFitter

if TYPE_CHECKING:
    from .._context import RunContext
    from .._model import ModelRequest

__all__ = ["compact_rejected"]

_MARGIN = 0.9
_SHRINK = 0.7


async def compact_rejected(
    fitter: ContextFitter,
    ctx: RunContext[Any],
    request: ModelRequest,
    error: ContextLimitError,
    *,
    attempt: int,
    of: int,
) -> ModelRequest:
    """A smaller request after the provider rejected ``request`` as too long (attempt ``attempt`` of ``of``).

    Raises:
        ContextLimitError: ``error`` itself when the chain cannot shrink the request further.
    """
    estimator = fitter.estimator
    estimate = estimator.estimate(
        request.messages, tools_schema_tokens=fitter.schema_tokens(estimator, tuple(request.tools))
    )
    if error.limit_tokens and error.estimated_tokens and error.estimated_tokens > error.limit_tokens:
        target = int(estimate * error.limit_tokens / error.estimated_tokens * _MARGIN)
        if request.max_output_tokens:
            target -= int(request.max_output_tokens * estimate / error.estimated_tokens)
    else:
        target = int(estimate * _SHRINK**attempt)
    target = max(target, 1)
    ctx.emit(
        ContextPressure,
        action="reactive",
        tokens_before=estimate,
        tokens_after=estimate,
        limit_tokens=target,
        detail=f"the provider rejected the prompt as too long; compacting to {target} tokens (attempt {attempt}/{of})",
    )
    window = ContextWindow(model=fitter.model_name, max_tokens=target)
    fitter.learn(target)
    try:
        smaller = await fitter.refit(ctx, request, window, estimator=estimator)
    except ContextLimitError as exc:
        raise error from exc
    if smaller is request:
        raise error
    return smaller
