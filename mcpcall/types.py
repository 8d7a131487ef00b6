"""Typed views of MCP results: small frozen dataclasses that keep the wire dict as ``raw``.

Only the fields a caller reaches for are lifted out (snake_case); everything the
server sent stays in ``raw``, untouched.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ProtocolError, ToolError

__all__ = ["CallToolResult", "Implementation", "Tool", "parse_call_result", "parse_tool"]


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Implementation:
    """A peer's name and version, as sent in ``serverInfo`` / ``clientInfo``."""

    name: str
    version: str
    title: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, data: Any) -> Implementation:
        """Build from a wire dict; tolerant of missing fields."""
        data = _mapping(data)
        title = data.get("title")
        return cls(
            name=str(data.get("name", "")),
            version=str(data.get("version", "")),
            title=title if isinstance(title, str) else None,
            raw=data,
        )

    def to_wire(self) -> dict[str, Any]:
        """The dict sent on the wire."""
        out = dict(self.raw)
        out.update(name=self.name, version=self.version)
        if self.title:
            out["title"] = self.title
        return out


@dataclass(frozen=True)
class Tool:
    """A tool a server offers."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=dict, repr=False)
    output_schema: Mapping[str, Any] | None = field(default=None, repr=False)
    title: str | None = None
    annotations: Mapping[str, Any] = field(default_factory=dict, repr=False)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def display_name(self) -> str:
        """``title``, then ``annotations.title``, then ``name`` (the spec's order)."""
        title = self.title or self.annotations.get("title")
        return title if isinstance(title, str) and title else self.name


def parse_tool(data: Any) -> Tool:
    """A :class:`Tool` from one entry of a ``tools/list`` result."""
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ProtocolError(f"a tool entry needs a string name: {data!r:.200}")
    output_schema = data.get("outputSchema")
    title = data.get("title")
    description = data.get("description")
    return Tool(
        name=data["name"],
        description=description if isinstance(description, str) else "",
        input_schema=_mapping(data.get("inputSchema")),
        output_schema=output_schema if isinstance(output_schema, dict) else None,
        title=title if isinstance(title, str) else None,
        annotations=_mapping(data.get("annotations")),
        raw=data,
    )


@dataclass(frozen=True)
class CallToolResult:
    """What a ``tools/call`` returned.

    ``is_error`` is the tool's own failure report (the call itself worked);
    :meth:`raise_for_error` turns it into a :class:`~mcpcall.errors.ToolError`.
    """

    content: list[dict[str, Any]]
    structured_content: Any | None = None
    is_error: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    tool: str = ""
    server: str = ""

    @property
    def text(self) -> str:
        """The text blocks of ``content`` joined by newlines; structured content as JSON if none."""
        parts = [block["text"] for block in self.content if block.get("type") == "text" and isinstance(block.get("text"), str)]
        if parts:
            return "\n".join(parts)
        if self.structured_content is not None:
            return json.dumps(self.structured_content, ensure_ascii=False)
        return ""

    def raise_for_error(self) -> CallToolResult:
        """Raise :class:`ToolError` if the tool reported failure; else return self."""
        if self.is_error:
            name = f"tool {self.tool!r}" if self.tool else "tool"
            if self.server:
                name += f" of server {self.server!r}"
            raise ToolError(f"{name} reported an error: {self.text or '(no message)'}", self)
        return self


def parse_call_result(data: dict[str, Any], tool: str = "", server: str = "") -> CallToolResult:
    """A :class:`CallToolResult` from a ``tools/call`` result dict."""
    content = data.get("content")
    if content is None:
        content = []
    if not isinstance(content, list):
        raise ProtocolError(f"tools/call result 'content' must be a list, got {type(content).__name__}")
    # Filled in place of __init__: the same frozen object at a third of the cost
    # (this runs once per call, on the reader thread).
    result = _new(CallToolResult)
    result.__dict__.update(
        content=[block for block in content if isinstance(block, dict)],
        structured_content=data.get("structuredContent"),
        is_error=data.get("isError") is True,
        raw=data,
        tool=tool,
        server=server,
    )
    return result


_new = object.__new__
