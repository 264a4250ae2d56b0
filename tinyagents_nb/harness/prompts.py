"""Prompts: templates and the builder that lays out a request's system prompt and messages."""

from __future__ import annotations

from ._prompt import (
    MessagesTemplate as MessagesTemplate,
    PromptBuilder as PromptBuilder,
    PromptSegment as PromptSegment,
    PromptTemplate as PromptTemplate,
    SegmentKind as SegmentKind,
    TemplateRole as TemplateRole,
)

__all__ = [
    "MessagesTemplate",
    "PromptBuilder",
    "PromptSegment",
    "PromptTemplate",
    "SegmentKind",
    "TemplateRole",
]
