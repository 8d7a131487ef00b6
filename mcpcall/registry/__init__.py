"""Many MCP servers' tools, offered to an LLM as ``mcp__<server>__<tool>``, its calls routed back.

:mod:`.names` builds the exposed names (valid for OpenAI, Anthropic and Gemini)
and maps them back; :mod:`.formats` writes tools in each API's shape, reads the
LLM's tool calls and writes the tool messages that answer them. Both are pure.

It may import config (and :mod:`mcpcall.notebook`), auth, the client and everything below; never the CLI.
"""

from .formats import (
    ANTHROPIC_IMAGE_TYPES,
    GEMINI_SCHEMA_KEYS,
    ParsedCall,
    anthropic_blocks,
    gemini_schema,
    object_schema,
    parse_tool_call,
    result_text,
    to_anthropic_tools,
    to_gemini_tools,
    to_json_schema,
    to_openai_tools,
    tool_description,
    tool_message,
    unknown_tool_text,
)
from .names import NAME_PATTERN, Collision, NameTable, Renamed, build_names, sanitize
from .registry import RegisteredTool, ToolRegistry
from .stats import ToolStats

__all__ = [
    "ANTHROPIC_IMAGE_TYPES",
    "GEMINI_SCHEMA_KEYS",
    "NAME_PATTERN",
    "Collision",
    "NameTable",
    "ParsedCall",
    "RegisteredTool",
    "Renamed",
    "ToolRegistry",
    "ToolStats",
    "anthropic_blocks",
    "build_names",
    "gemini_schema",
    "object_schema",
    "parse_tool_call",
    "result_text",
    "sanitize",
    "to_anthropic_tools",
    "to_gemini_tools",
    "to_json_schema",
    "to_openai_tools",
    "tool_description",
    "tool_message",
    "unknown_tool_text",
]
