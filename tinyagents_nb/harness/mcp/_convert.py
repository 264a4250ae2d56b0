"""MCP wire values to harness values: a listed tool to a ``ToolSchema``, a tool result to a ``ToolResult``.

Runs on the owner loop, right where the SDK hands values over, so only plain harness values cross
threads. Content blocks a text-only transcript cannot hold (images, audio, binary resources) become
a short bracketed note for the model and keep their payload in ``ToolResult.data``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from typing import Any

import mcp_types as types

from .._model import ToolSchema
from .._tool_schema import _strip_titles
from .._tools import ToolResult

__all__: list[str] = []

_INVALID = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64


def local_name(server: str, remote: str) -> str:
    """``{server}_{tool}`` made provider-safe: other characters become ``_``, long names end in a short hash."""
    name = _INVALID.sub("_", f"{server}_{remote}")
    if len(name) > _MAX_NAME:
        digest = hashlib.sha256(remote.encode()).hexdigest()[:8]
        name = f"{name[: _MAX_NAME - 9]}_{digest}"
    return name


def unique_name(name: str, remote: str, taken: set[str]) -> str:
    """``name``, or when another tool already has it, ``name`` with a hash of ``remote`` (then a counter)."""
    if name not in taken:
        return name
    digest = hashlib.sha256(remote.encode()).hexdigest()[:8]
    candidate = f"{name[: _MAX_NAME - 9]}_{digest}"
    counter = 2
    while candidate in taken:
        suffix = f"_{digest}_{counter}"
        candidate = f"{name[: _MAX_NAME - len(suffix)]}{suffix}"
        counter += 1
    return candidate


def tool_schema(name: str, tool: types.Tool) -> ToolSchema:
    """The model-visible schema of a listed tool, under its local ``name``."""
    raw: dict[str, Any] = _strip_titles(dict(tool.input_schema))
    raw.pop("$schema", None)
    parameters: dict[str, Any] = {"type": "object", **raw}
    parameters.setdefault("properties", {})
    return ToolSchema(name=name, description=tool.description or tool.title or "", parameters=parameters)


def _size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def _block_text(block: Any) -> tuple[str | None, dict[str, Any] | None]:
    """(text for the model, payload kept in data) for one content block."""
    if isinstance(block, types.TextContent):
        return block.text, None
    if isinstance(block, types.ImageContent | types.AudioContent):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        note = f"[{kind}: {block.mime_type}, {_size(block.data):,} bytes]"
        return note, {"type": kind, "mime_type": block.mime_type, "data": block.data}
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return resource.text, None
        mime = resource.mime_type or "application/octet-stream"
        note = f"[resource {resource.uri}: {mime}, {_size(resource.blob):,} bytes]"
        return note, {"type": "resource", "uri": str(resource.uri), "mime_type": mime, "data": resource.blob}
    if isinstance(block, types.ResourceLink):
        return f"[resource link: {block.uri}{' (' + block.name + ')' if block.name else ''}]", {
            "type": "resource_link",
            "uri": str(block.uri),
            "name": block.name,
        }
    return f"[unsupported content: {getattr(block, 'type', type(block).__name__)}]", None


def tool_result(result: types.CallToolResult) -> ToolResult:
    """A ``CallToolResult`` as the model should see it; ``isError`` becomes an error result."""
    texts: list[str] = []
    payloads: list[dict[str, Any]] = []
    for block in result.content:
        text, payload = _block_text(block)
        if text is not None:
            texts.append(text)
        if payload is not None:
            payloads.append(payload)
    structured = result.structured_content
    text = "\n".join(texts)
    if not text and structured is not None:
        text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
    if result.is_error:
        return ToolResult(text=text or "the tool reported an error without a message", is_error=True)
    data: Any = structured
    if payloads:
        data = {"structured": structured, "content": payloads}
    return ToolResult(text=text, data=data)
