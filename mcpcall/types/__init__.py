"""Typed views of MCP results: frozen dataclasses that keep the wire dict as ``raw``.

Only the fields a caller reaches for are lifted out (snake_case); everything
the server sent stays in ``raw``, untouched. Parsing is lenient (unknown
fields stay in ``raw``, an optional field of the wrong type is left out) and
strict where it must be: a missing required field raises
:class:`~mcpcall.errors.ProtocolError` naming the server and the field.

Part of the ground floor: it may import only other ground modules (errors, schema, ...).
"""

from .content import (
    AudioContent,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceContents,
    ResourceLink,
    TextContent,
    UnknownContent,
    parse_content,
    parse_resource_contents,
)
from .prompts import (
    Completion,
    GetPromptResult,
    Prompt,
    PromptArgument,
    PromptMessage,
    parse_completion,
    parse_prompt,
    parse_prompt_result,
)
from .resources import ReadResourceResult, Resource, ResourceTemplate, parse_read_result, parse_resource, parse_template
from .tools import CallToolResult, Implementation, Tool, ToolList, parse_call_result, parse_tool

__all__ = [
    "AudioContent",
    "CallToolResult",
    "Completion",
    "ContentBlock",
    "EmbeddedResource",
    "GetPromptResult",
    "ImageContent",
    "Implementation",
    "Prompt",
    "PromptArgument",
    "PromptMessage",
    "ReadResourceResult",
    "Resource",
    "ResourceContents",
    "ResourceLink",
    "ResourceTemplate",
    "TextContent",
    "Tool",
    "ToolList",
    "UnknownContent",
    "parse_call_result",
    "parse_completion",
    "parse_content",
    "parse_prompt",
    "parse_prompt_result",
    "parse_read_result",
    "parse_resource",
    "parse_resource_contents",
    "parse_template",
    "parse_tool",
]
