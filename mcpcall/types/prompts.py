"""Prompts, their arguments and messages, and argument completion."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from ._record import many, optional_int, optional_str, record, require, require_str
from .content import ContentBlock, parse_content, text_of

__all__ = [
    "Completion",
    "GetPromptResult",
    "Prompt",
    "PromptArgument",
    "PromptMessage",
    "parse_completion",
    "parse_prompt",
    "parse_prompt_result",
]


@record
class PromptArgument:
    """One argument a prompt takes."""

    name: str
    description: str | None = None
    required: bool = False
    title: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@record
class Prompt:
    """A prompt template a server offers (``prompts/list``)."""

    name: str
    title: str | None = None
    description: str | None = None
    arguments: tuple[PromptArgument, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def _repr_html_(self) -> str:
        """Jupyter's rich display: name, title, description, arguments (required marked)."""
        from .html import prompt_html

        return prompt_html(self)


def parse_prompt(data: Any, server: str = "") -> Prompt:
    """A :class:`Prompt` from one entry of a ``prompts/list`` result."""
    name = require_str(data, "name", "a prompt", server)

    def argument(item: Any) -> PromptArgument:
        return PromptArgument(
            name=require_str(item, "name", f"an argument of prompt {name!r}", server),
            description=optional_str(item, "description"),
            required=item.get("required") is True,
            title=optional_str(item, "title"),
            raw=item,
        )

    return Prompt(name, optional_str(data, "title"), optional_str(data, "description"),
                  many(data.get("arguments"), argument), data)


@record
class PromptMessage:
    """One message of a prompt: ``role`` ("user" or "assistant") and a content block."""

    role: str
    content: ContentBlock
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@record
class GetPromptResult:
    """What ``prompts/get`` returned: the messages, ready for a model."""

    messages: tuple[PromptMessage, ...]
    description: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def text(self) -> str:
        """The text of every message, joined by newlines."""
        return text_of(m.content for m in self.messages)


def parse_prompt_result(data: Any, name: str, server: str = "") -> GetPromptResult:
    """A :class:`GetPromptResult` from a ``prompts/get`` result."""
    what = f"a message of prompt {name!r}"
    items = require(data, "messages", list, f"a prompts/get result for {name!r}", server)

    def message(item: Any) -> PromptMessage:
        role = require_str(item, "role", what, server)
        content = require(item, "content", dict, what, server)
        return PromptMessage(role, parse_content(content, server, f" in {what}"), item)

    return GetPromptResult(many(items, message), optional_str(data, "description"), data)


@record
class Completion:
    """Suggested values for a prompt or resource-template argument (``completion/complete``)."""

    values: tuple[str, ...]
    total: int | None = None
    has_more: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


def parse_completion(data: Any, server: str = "") -> Completion:
    """A :class:`Completion` from a ``completion/complete`` result."""
    completion = require(data, "completion", dict, "a completion/complete result", server)
    values = require(completion, "values", list, "a completion", server)
    return Completion(
        values=tuple(v for v in values if isinstance(v, str)),
        total=optional_int(completion, "total"),
        has_more=completion.get("hasMore") is True,
        raw=data,
    )
