"""Model selection: choosing a model by hint and capabilities, and recording who served each call.

``select_model(registry, selection)`` resolves a ``ModelSelection`` against the registry's models
and their profiles. Inside a run the loop uses ``eligible_models``: a request that says
``with_required_capabilities(...)`` goes to the first model of the harness's chain (its model, then
its fallbacks) whose profile covers them. ``resolved_model`` is what the loop records on every
response, so a parent and its sub-agents (whose responses reach the same event stream) agree on
which provider and model actually answered. ``route_call`` orders the chain for one call: a model a
middleware named in ``request.model`` first (resolved, or ``ModelNotFound``), then the first one
with the required capabilities. ``refit_for`` re-fits a request to a chosen model's smaller window
(a fallback's, a capability route's, a requested one's) before it is sent there, and ``fit_images``
leaves the images of tool results out for a model whose profile lacks vision.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._capabilities import CapabilitySet, ModelResolutionSource, ModelSelection, ResolvedModel
from ._errors import ModelNotFound
from ._messages import ImageRef, Message, ToolMessage
from ._model import ModelResponse
from ._profile import ModelProfile, profile_for
from ._tokens import TokenEstimator
from ._window import ContextWindow
from .providers import ModelRegistry, resolve_model

if TYPE_CHECKING:
    from ._context import RunContext
    from ._model import ChatModel, ModelRequest
    from .memory import ContextFitter

__all__ = ["select_model"]


def _profile(model: ChatModel) -> ModelProfile:
    own = getattr(model, "profile", None)
    return own if isinstance(own, ModelProfile) else profile_for(model.provider, model.model_name)


def select_model(registry: ModelRegistry, selection: ModelSelection) -> tuple[ChatModel, ResolvedModel]:
    """The first model that fits ``selection``: its hint's names in order, else every registered name.

    A hint's provider narrows the candidates; each candidate's profile (registered, the model's own,
    or guessed from its name) must cover ``selection.required``.

    Raises:
        ModelNotFound: No candidate fits; the message says why each was rejected.
    """
    hint = selection.hint
    hinted = bool(hint and hint.names)
    names = list(hint.names) if hint and hint.names else registry.names()
    rejected: list[str] = []
    for name in names:
        try:
            profile = registry.profile(name)
        except ModelNotFound:
            rejected.append(f"{name}: unknown")
            continue
        if hint and hint.provider and profile.provider != hint.provider:
            rejected.append(f"{name}: provider {profile.provider}")
            continue
        lacking = CapabilitySet.of(profile).missing(selection.required)
        if lacking:
            rejected.append(f"{name}: lacks {', '.join(lacking)}")
            continue
        model = registry.resolve(name) if name in registry else resolve_model(name)
        return model, ResolvedModel(
            provider=model.provider, model=model.model_name, source="hint" if hinted else "registry"
        )
    raise ModelNotFound(
        ", ".join(names) or "(no models registered)",
        detail="no model fits the selection" + (f" ({'; '.join(rejected)})" if rejected else ""),
    )


def eligible_models(chain: Sequence[ChatModel], request: ModelRequest) -> Sequence[ChatModel]:
    """The chain, from the first model that covers the request's required capabilities.

    Raises:
        ModelNotFound: No model of the chain covers them.
    """
    required = request.required_capabilities
    if required is None:
        return chain
    lacks: list[str] = []
    for i, model in enumerate(chain):
        missing = CapabilitySet.of(_profile(model)).missing(required)
        if not missing:
            return chain[i:] if i else chain
        lacks.append(f"{model.model_name}: lacks {', '.join(missing)}")
    raise ModelNotFound(
        chain[0].model_name,
        detail=f"no model of the chain has the required capabilities ({'; '.join(lacks)})",
        hint="add a capable model to the FallbackPolicy or drop the requirement",
    )


def route_call(
    chain: Sequence[ChatModel], request: ModelRequest, configured: ChatModel, built: dict[str, ChatModel]
) -> tuple[Sequence[ChatModel], str | None]:
    """The models to try for one call, and why the first is not the call's default (``model.selected``).

    The reason is ``capabilities`` (the required capabilities skipped the first choice), ``request``
    (a middleware named the model in ``request.model``) or ``None``.

    ``chain[0]`` is the model the call would go to (the harness's, or the configurable override);
    the loop fills ``request.model`` with the ``configured`` model's name, and a middleware naming
    another model (``name`` or ``provider:name`` of the chain, or any spec
    ``resolve_model`` builds, once, into ``built``) puts that model first: a middleware's choice is
    honoured, never silently ignored.

    Raises:
        ModelNotFound: ``request.model`` names no model, or no model covers the capabilities.
    """
    name = request.model
    if (not name or name == configured.model_name) and request.required_capabilities is None:
        return chain, None  # the common case: nothing asked for, nothing to route
    asked = _requested(chain, name, configured, built)
    if asked is not None:
        chain = (asked, *(m for m in chain if m is not asked))
    models = eligible_models(chain, request)
    return models, "capabilities" if models[0] is not chain[0] else "request" if asked is not None else None


def _requested(
    chain: Sequence[ChatModel], name: str | None, configured: ChatModel, built: dict[str, ChatModel]
) -> ChatModel | None:
    if not name or name in (configured.model_name, f"{configured.provider}:{configured.model_name}"):
        return None
    for model in chain:
        if name in (model.model_name, f"{model.provider}:{model.model_name}"):
            return model
    made = built.get(name)
    if made is None:
        made = built[name] = resolve_model(name)
    return made


def with_resolved(response: ModelResponse, model: ChatModel, source: ModelResolutionSource) -> ModelResponse:
    """``response`` naming who served it: ``model``/``provider`` filled in when missing, and its ``ResolvedModel``.

    One constructor call on the hot path (``dataclasses.replace`` costs several times more), and the
    ``ResolvedModel`` is shared between calls served alike.
    """
    served = response.model or model.model_name
    provider = response.provider or model.provider
    return ModelResponse(
        message=response.message,
        usage=response.usage,
        finish_reason=response.finish_reason,
        model=served,
        provider=provider,
        resolved=_resolved(provider, served, source),
        response_id=response.response_id,
    )


@functools.lru_cache(maxsize=256)
def _resolved(provider: str, model: str, source: ModelResolutionSource) -> ResolvedModel:
    return ResolvedModel(provider=provider, model=model, source=source)


async def refit_for(
    fitter: ContextFitter, ctx: RunContext[Any], request: ModelRequest, model: ChatModel
) -> ModelRequest:
    """``request`` made to fit ``model``'s window when that is smaller than the one it was fitted to."""
    size = _profile(model).context_window
    fitted = fitter.window
    if size is None or (fitted is not None and fitted.max_tokens <= size):
        return request
    reserved = min(_profile(model).max_output_tokens or 4_096, size // 4)
    window = ContextWindow(model=model.model_name, max_tokens=size, reserved_output_tokens=reserved)
    return await fitter.refit(ctx, request, window, estimator=TokenEstimator.for_model(model.model_name))


@functools.lru_cache(maxsize=64)
def _guessed_vision(provider: str, model: str) -> bool:
    return profile_for(provider, model).supports_vision


def _vision(model: ChatModel) -> bool:
    own = getattr(model, "profile", None)
    if isinstance(own, ModelProfile):
        return own.supports_vision
    return _guessed_vision(model.provider, model.model_name)


def _imageless(message: ToolMessage) -> ToolMessage:
    kept = [block for block in message.blocks if not isinstance(block, ImageRef)]
    left = len(message.blocks) - len(kept)
    if not left:
        return message
    note = f"\n[{left} image{'s' if left > 1 else ''} left out: this model does not accept images]"
    return ToolMessage(
        tool_call_id=message.tool_call_id,
        name=message.name,
        text=message.text + note,
        is_error=message.is_error,
        blocks=kept,
        tags=message.tags,
    )


def fit_images(request: ModelRequest, model: ChatModel) -> ModelRequest:
    """``request`` without the images of tool results when ``model``'s profile says it has no vision.

    Tools may return images (a chart, a plot a cell drew) beside their text; only a model that accepts
    images gets them, any other reads the text alone (which says what the image was), so a fallback or
    a text-only model never receives a request its host would reject. Costs one scan of the messages.
    """
    messages = request.messages
    if not any(isinstance(m, ToolMessage) and m.blocks for m in messages) or _vision(model):
        return request
    fitted: list[Message] = [_imageless(m) if isinstance(m, ToolMessage) and m.blocks else m for m in messages]
    return request.with_messages(fitted)
