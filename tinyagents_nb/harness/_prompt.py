r"""Deterministic prompts: ``{{var}}`` templates and a builder that keeps the cacheable prefix stable.

Template syntax: ``{{ name }}`` is a placeholder (spaces inside the braces are allowed; names are
ASCII identifiers). ``\{{`` renders a literal ``{{``; any other backslash is literal text. A ``{{``
that does not open a valid placeholder is a ``ConfigurationError`` at construction, so a typo never
reaches a model as literal braces. Templates are parsed once; rendering joins precomputed parts.

Providers cache the longest unchanged prefix of a request. ``PromptBuilder`` therefore takes its
segments in order, stable ones (system text, tools, instructions, history) before volatile ones
(the current time, retrieved snippets), refuses a stable segment after a volatile one, and
``fingerprint()`` hashes only the stable segments: it changes exactly when the cacheable prefix does.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Self, TypeAlias

from ._cache_policy import PromptCacheLayout, message_digests, tools_digest
from ._errors import ConfigurationError
from ._messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage, dump_messages
from ._model import ModelRequest, ToolSchema

__all__ = [
    "MessagesTemplate",
    "PromptBuilder",
    "PromptCacheLayout",
    "PromptSegment",
    "PromptTemplate",
    "SegmentKind",
    "TemplateRole",
]

TemplateRole: TypeAlias = Literal["system", "user", "assistant"]
"""The role of the message a template renders to."""

SegmentKind: TypeAlias = Literal["system", "tools", "instructions", "history", "volatile"]
"""What a ``PromptBuilder`` segment holds; every kind but ``volatile`` is part of the cacheable prefix."""

_ROLES: tuple[TemplateRole, ...] = ("system", "user", "assistant")
_MESSAGE_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolMessage)
_TOKEN = re.compile(r"\\\{\{|\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}|\{\{")


# ------------------------------------------------------------------------------------------ templates
def _parse(template: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Split into literals and names, interleaved: ``lit0 name0 lit1 ... nameN-1 litN``."""
    literals: list[str] = []
    names: list[str] = []
    text: list[str] = []
    pos = 0
    for match in _TOKEN.finditer(template):
        text.append(template[pos : match.start()])
        pos = match.end()
        token = match.group(0)
        if token == "\\{{":
            text.append("{{")
        elif match.group(1) is not None:
            literals.append("".join(text))
            names.append(match.group(1))
            text = []
        else:
            snippet = template[match.start() : match.start() + 30]
            raise ConfigurationError(
                f"invalid placeholder at position {match.start()} of the template: {snippet!r}",
                hint=r"placeholders look like {{ name }} (an identifier); write \{{ for literal braces",
            )
    text.append(template[pos:])
    literals.append("".join(text))
    return tuple(literals), tuple(names)


def _check_role(role: object) -> TemplateRole:
    for known in _ROLES:
        if role == known:
            return known
    raise ConfigurationError(f"template role must be one of {', '.join(_ROLES)}, got {role!r}")


def _check_values(
    expected: frozenset[str], given: Iterable[str], *, allow_extra: bool, what: str = "prompt template"
) -> None:
    keys = set(given)
    missing = expected - keys
    extra = set() if allow_extra else keys - expected
    if not missing and not extra:
        return
    parts = []
    if missing:
        parts.append(f"missing variable(s) {', '.join(map(repr, sorted(missing)))}")
    if extra:
        parts.append(f"unexpected variable(s) {', '.join(map(repr, sorted(extra)))}")
    known = ", ".join(map(repr, sorted(expected))) or "none"
    raise ConfigurationError(f"{what}: {'; '.join(parts)} (expected: {known})")


def _check_unknown(expected: frozenset[str], given: Iterable[str], what: str) -> None:
    unknown = set(given) - expected
    if unknown:
        known = ", ".join(map(repr, sorted(expected))) or "none"
        raise ConfigurationError(
            f"{what}: unexpected variable(s) {', '.join(map(repr, sorted(unknown)))} (expected: {known})"
        )


def _message(role: TemplateRole, text: str) -> SystemMessage | UserMessage | AssistantMessage:
    if role == "system":
        return SystemMessage(text=text)
    if role == "assistant":
        return AssistantMessage(text=text)
    return UserMessage(text=text)


class PromptTemplate:
    """A text template with ``{{ name }}`` placeholders that renders to a string or a message.

    Args:
        template: The template text (see the module docstring for the syntax and escaping).
        role: The role ``render_message`` uses.
        allow_extra: Ignore values for names the template does not use (else they are an error,
            which catches misspelled variables).

    Raises:
        ConfigurationError: The text has an invalid placeholder, or ``role`` is unknown.
    """

    __slots__ = ("_bound", "_literals", "_names", "_variables", "allow_extra", "role", "template")

    template: str
    role: TemplateRole
    allow_extra: bool
    _literals: tuple[str, ...]
    _names: tuple[str, ...]
    _variables: frozenset[str]
    _bound: Mapping[str, str]

    def __init__(self, template: str, *, role: TemplateRole = "user", allow_extra: bool = False) -> None:
        if not isinstance(template, str):
            raise ConfigurationError(f"template must be a str, got {type(template).__name__}")
        literals, names = _parse(template)
        self._init(template, _check_role(role), allow_extra, literals, names, {})

    def _init(
        self,
        template: str,
        role: TemplateRole,
        allow_extra: bool,
        literals: tuple[str, ...],
        names: tuple[str, ...],
        bound: Mapping[str, str],
    ) -> None:
        self.template = template
        self.role = role
        self.allow_extra = bool(allow_extra)
        self._literals = literals
        self._names = names
        self._variables = frozenset(names)
        self._bound = bound

    @property
    def variables(self) -> frozenset[str]:
        """The names ``render`` needs (names bound by ``partial`` are no longer listed)."""
        return self._variables

    def render(self, /, **values: object) -> str:
        """Substitute every placeholder with ``str(value)``.

        Raises:
            ConfigurationError: Naming every missing variable (and every unexpected one, unless
                ``allow_extra``).
        """
        if values.keys() != self._variables:
            _check_values(self._variables, values, allow_extra=self.allow_extra)
        literals = self._literals
        out = [literals[0]]
        for name, literal in zip(self._names, literals[1:], strict=True):
            out.append(str(values[name]))
            out.append(literal)
        return "".join(out)

    def render_system(self, /, **values: object) -> SystemMessage:
        return SystemMessage(text=self.render(**values))

    def render_user(self, /, **values: object) -> UserMessage:
        return UserMessage(text=self.render(**values))

    def render_assistant(self, /, **values: object) -> AssistantMessage:
        return AssistantMessage(text=self.render(**values))

    def render_message(self, /, **values: object) -> SystemMessage | UserMessage | AssistantMessage:
        """Render to a message of this template's ``role``."""
        return _message(self.role, self.render(**values))

    def partial(self, /, **values: object) -> PromptTemplate:
        """A template with some variables filled in now (their values are rendered with ``str()`` here)."""
        if not self.allow_extra:
            _check_unknown(self._variables, values, "prompt template")
        fill = {k: str(v) for k, v in values.items() if k in self._variables}
        literals: list[str] = [self._literals[0]]
        names: list[str] = []
        for name, literal in zip(self._names, self._literals[1:], strict=True):
            if name in fill:
                literals[-1] += fill[name] + literal
            else:
                names.append(name)
                literals.append(literal)
        clone = object.__new__(PromptTemplate)
        clone._init(self.template, self.role, self.allow_extra, tuple(literals), tuple(names), {**self._bound, **fill})
        return clone

    def _key(self) -> tuple[object, ...]:
        return (self._literals, self._names, self.role)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PromptTemplate) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        bound = f", bound={sorted(self._bound)!r}" if self._bound else ""
        return f"PromptTemplate({self.template!r}, role={self.role!r}{bound})"


TemplateItem: TypeAlias = PromptTemplate | Message | tuple[str, str]


class MessagesTemplate:
    """An ordered conversation of templates and fixed messages, rendered with one set of values.

    Args:
        items: ``PromptTemplate``s, ready messages (kept as they are), or ``(role, template_text)`` pairs.
        allow_extra: Ignore values no item uses.

    Raises:
        ConfigurationError: An item has an unknown shape or role, or a template is invalid.
    """

    __slots__ = ("_variables", "allow_extra", "items")

    def __init__(self, items: Iterable[TemplateItem], *, allow_extra: bool = False) -> None:
        if isinstance(items, str | PromptTemplate):
            raise ConfigurationError("MessagesTemplate takes a sequence of items, not a single template")
        built: list[PromptTemplate | Message] = []
        entries: Iterable[object] = items
        for item in entries:
            if isinstance(item, PromptTemplate | SystemMessage | UserMessage | AssistantMessage | ToolMessage):
                built.append(item)
            elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], str):
                built.append(PromptTemplate(item[1], role=_check_role(item[0])))
            else:
                raise ConfigurationError(
                    f"a MessagesTemplate item must be a PromptTemplate, a message or a (role, text) pair, got {item!r}"
                )
        self.items: tuple[PromptTemplate | Message, ...] = tuple(built)
        self.allow_extra = bool(allow_extra)
        self._variables = frozenset().union(*(i.variables for i in built if isinstance(i, PromptTemplate)))

    @property
    def variables(self) -> frozenset[str]:
        """The union of every template's variables."""
        return self._variables

    def render(self, /, **values: object) -> list[Message]:
        """Render every template with the values it uses; fixed messages are passed through."""
        _check_values(self._variables, values, allow_extra=self.allow_extra, what="messages template")
        out: list[Message] = []
        for item in self.items:
            if isinstance(item, PromptTemplate):
                out.append(item.render_message(**{k: values[k] for k in item.variables}))
            else:
                out.append(item)
        return out

    def partial(self, /, **values: object) -> MessagesTemplate:
        """A conversation with some variables filled in now."""
        if not self.allow_extra:
            _check_unknown(self._variables, values, "messages template")
        items = [
            i.partial(**{k: v for k, v in values.items() if k in i.variables}) if isinstance(i, PromptTemplate) else i
            for i in self.items
        ]
        return MessagesTemplate(items, allow_extra=self.allow_extra)

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        return f"MessagesTemplate({len(self.items)} items, variables={sorted(self._variables)!r})"


# ------------------------------------------------------------------------------------------ builder
@dataclass(frozen=True, kw_only=True, slots=True)
class PromptSegment:
    """One named part of a prompt: text (system, instructions), tool schemas, or messages."""

    kind: SegmentKind
    name: str
    text: str = ""
    messages: tuple[Message, ...] = ()
    tools: tuple[ToolSchema, ...] = ()

    @property
    def stable(self) -> bool:
        """Whether the segment is part of the cacheable prefix."""
        return self.kind != "volatile"

    def _canonical(self) -> dict[str, object]:
        # the model-visible content only: renaming a segment does not change what the provider caches
        if self.kind == "tools":
            return {"kind": self.kind, "tools": [_tool_json(t) for t in self.tools]}
        if self.kind in ("history", "volatile"):
            return {"kind": self.kind, "messages": dump_messages(self.messages)}
        return {"kind": self.kind, "text": self.text}


def _tool_json(tool: ToolSchema) -> dict[str, object]:
    return {"name": tool.name, "description": tool.description, "parameters": tool.parameters, "strict": tool.strict}


def _reject(value: object) -> object:
    raise ConfigurationError(f"a tool schema holds {type(value).__name__}, which is not JSON")


class PromptBuilder:
    """Assembles a ``ModelRequest`` from ordered segments, stable ones first.

    ``build`` puts system and instructions text into the leading system message (one, joined by a
    blank line, or one per segment with ``merge_system=False``), then history, then volatile
    messages, then the tail; tools come from the tools segments. Every ``push_*`` returns the builder.

    Args:
        tools: Tool schemas for an initial tools segment.
        merge_system: Merge system and instructions text into a single system message.
    """

    def __init__(self, tools: Sequence[ToolSchema] = (), *, merge_system: bool = True) -> None:
        self.merge_system = bool(merge_system)
        self._segments: list[PromptSegment] = []
        self._volatile = False
        self._tool_names: set[str] = set()
        self._prefix: tuple[tuple[Message, ...], tuple[ToolSchema, ...]] | None = None
        self._fingerprint: str | None = None
        if tools:
            self.push_tools_segment(tools)

    @property
    def segments(self) -> tuple[PromptSegment, ...]:
        return tuple(self._segments)

    # ---------------------------------------------------------------------------- segments
    def _push(self, segment: PromptSegment) -> Self:
        if segment.stable:
            if self._volatile:
                raise ConfigurationError(
                    f"cannot add the stable {segment.kind} segment {segment.name!r} after a volatile segment",
                    hint="push system, tools, instructions and history before anything volatile, "
                    "or the provider's prompt cache misses on every turn",
                )
            self._prefix = self._fingerprint = None
        else:
            self._volatile = True
        self._segments.append(segment)
        return self

    def _name(self, kind: SegmentKind, name: object) -> str:
        if name is None:
            return f"{kind}-{sum(s.kind == kind for s in self._segments)}"
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"segment name must be a non-empty str, got {name!r}")
        return name

    def push_system(self, text: str, *, name: str | None = None) -> Self:
        """Add system text (stable)."""
        return self._push(PromptSegment(kind="system", name=self._name("system", name), text=_text(text, "system")))

    def push_instructions(self, text: str, *, name: str | None = None) -> Self:
        """Add task instructions, sent as system text (stable)."""
        kind: SegmentKind = "instructions"
        return self._push(PromptSegment(kind=kind, name=self._name(kind, name), text=_text(text, kind)))

    def push_tools_segment(self, tools: Sequence[ToolSchema], *, name: str | None = None) -> Self:
        """Add tool schemas (stable); a tool name may appear once across all tools segments."""
        batch = tuple(tools)
        names: set[str] = set()
        for tool in batch:
            if not isinstance(tool, ToolSchema):
                raise ConfigurationError(f"tools must be ToolSchema values, got {type(tool).__name__}")
            if tool.name in self._tool_names or tool.name in names:
                raise ConfigurationError(f"tool {tool.name!r} is already in the prompt")
            names.add(tool.name)
        segment = PromptSegment(kind="tools", name=self._name("tools", name), tools=batch)
        self._push(segment)
        self._tool_names |= names
        return self

    def push_history(self, messages: Sequence[Message], *, name: str | None = None) -> Self:
        """Add earlier conversation (stable: a thread only grows at its end)."""
        batch = _messages(messages, "history")
        if any(isinstance(m, SystemMessage) for m in batch):
            raise ConfigurationError("history must not contain system messages", hint="use push_system for those")
        return self._push(PromptSegment(kind="history", name=self._name("history", name), messages=batch))

    def push_volatile(
        self, content: Sequence[Message] | str, *, name: str | None = None, role: TemplateRole = "user"
    ) -> Self:
        """Add per-turn content (not cached): messages, or text sent as one message of ``role``."""
        if isinstance(content, str):
            batch: tuple[Message, ...] = (_message(_check_role(role), _text(content, "volatile")),)
        else:
            batch = _messages(content, "volatile")
        return self._push(PromptSegment(kind="volatile", name=self._name("volatile", name), messages=batch))

    # ---------------------------------------------------------------------------- output
    def _stable_prefix(self) -> tuple[tuple[Message, ...], tuple[ToolSchema, ...]]:
        if self._prefix is None:
            texts = [s.text for s in self._segments if s.kind in ("system", "instructions")]
            messages: list[Message] = []
            if texts:
                if self.merge_system:
                    messages.append(SystemMessage(text="\n\n".join(texts)))
                else:
                    messages.extend(SystemMessage(text=t) for t in texts)
            tools: list[ToolSchema] = []
            for segment in self._segments:
                if segment.kind == "history":
                    messages.extend(segment.messages)
                elif segment.kind == "tools":
                    tools.extend(segment.tools)
            self._prefix = (tuple(messages), tuple(tools))
        return self._prefix

    def build(self, tail: Sequence[Message] | Message | str = ()) -> ModelRequest:
        """The request: stable prefix, volatile messages, then ``tail`` (a str becomes a user message).

        Other request fields (model, temperature, ...) are set with ``dataclasses.replace`` on the result.
        """
        prefix, tools = self._stable_prefix()
        messages = list(prefix)
        for segment in self._segments:
            if segment.kind == "volatile":
                messages.extend(segment.messages)
        if isinstance(tail, str):
            messages.append(UserMessage(text=tail))
        elif isinstance(tail, _MESSAGE_TYPES):
            messages.append(tail)
        else:
            messages.extend(_messages(tail, "tail"))
        return ModelRequest(messages=tuple(messages), tools=tools)

    def fingerprint(self) -> str:
        """SHA-256 of the stable segments' model-visible content, in order (volatile ones never count)."""
        if self._fingerprint is None:
            stable = [s._canonical() for s in self._segments if s.stable]
            blob = json.dumps(
                {"merge_system": self.merge_system, "segments": stable},
                sort_keys=True,
                ensure_ascii=False,
                separators=(",", ":"),
                default=_reject,
            )
            self._fingerprint = hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()
        return self._fingerprint

    def layout(self) -> PromptCacheLayout:
        """The cache layout of the prompt as it stands."""
        return PromptCacheLayout(
            fingerprint=self.fingerprint(),
            segments=tuple((s.kind, s.name) for s in self._segments),
            stable_segments=sum(s.stable for s in self._segments),
            stable_messages=len(self._stable_prefix()[0]),
            prefix_digests=message_digests(self._stable_prefix()[0]),
            tools_digest=tools_digest(self._stable_prefix()[1]),
        )

    def __repr__(self) -> str:
        kinds = ", ".join(f"{s.kind}:{s.name}" for s in self._segments)
        return f"PromptBuilder([{kinds}])"


def _text(text: object, what: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ConfigurationError(f"the {what} segment needs non-empty text, got {text!r}")
    return text


def _messages(messages: object, what: str) -> tuple[Message, ...]:
    if isinstance(messages, str | SystemMessage | UserMessage | AssistantMessage | ToolMessage):
        raise ConfigurationError(f"{what} must be a sequence of messages")
    if not isinstance(messages, Iterable):
        raise ConfigurationError(f"{what} must be a sequence of messages, got {type(messages).__name__}")
    batch = tuple(messages)
    for message in batch:
        if not isinstance(message, _MESSAGE_TYPES):
            raise ConfigurationError(f"{what} must hold messages only, got {type(message).__name__}")
    return batch
