"""Tools, tool results and a peer's identity."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import field
from typing import Any, Generic, TypeVar

from ..errors import NestedTooDeep, ToolError
from ..schema import MAX_DEPTH, deeper_than
from ._record import mapping, optional_str, record, require, require_str
from .content import ContentBlock, parse_content, text_of

__all__ = ["CallToolResult", "Implementation", "NestedTooDeep", "Tool", "ToolList", "parse_call_result", "parse_tool"]

T = TypeVar("T")


@record
class Implementation:
    """A peer's name and version, as sent in ``serverInfo`` / ``clientInfo``."""

    name: str
    version: str
    title: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, data: Any) -> Implementation:
        """Build from a wire dict; tolerant of missing fields."""
        data = mapping(data)
        return cls(name=str(data.get("name", "")), version=str(data.get("version", "")),
                   title=optional_str(data, "title"), raw=data)

    def to_wire(self) -> dict[str, Any]:
        """The dict sent on the wire."""
        out = dict(self.raw)
        out.update(name=self.name, version=self.version)
        if self.title:
            out["title"] = self.title
        return out


@record
class Tool:
    """A tool a server offers."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=dict, repr=False, hash=False)
    output_schema: Mapping[str, Any] | None = field(default=None, repr=False, hash=False)
    title: str | None = None
    annotations: Mapping[str, Any] = field(default_factory=dict, repr=False, hash=False)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def display_name(self) -> str:
        """``title``, then ``annotations.title``, then ``name`` (the spec's order)."""
        title = self.title or self.annotations.get("title")
        return title if isinstance(title, str) and title else self.name

    def _repr_html_(self) -> str:
        """Jupyter's rich display: name, title, description, parameters (required marked)."""
        from .html import tool_html

        return tool_html(self)


class ToolList(list[T], Generic[T]):
    """A ``list`` of tools (what ``list_tools()`` and ``ToolRegistry.tools()`` return) that Jupyter shows as a table.

    In every other way it is a plain list: it compares equal to one, and
    slicing or copying it gives one.
    """

    __slots__ = ()

    def _repr_html_(self) -> str:
        """Jupyter's rich display: a table of name, description and parameters (required marked ``*``)."""
        from .html import tools_html

        return tools_html(self)


def parse_tool(data: Any, server: str = "") -> Tool:
    """A :class:`Tool` from one entry of a ``tools/list`` result.

    Raises :class:`NestedTooDeep` (a ``ProtocolError``) for a definition nested deeper than
    :data:`~mcpcall.schema.MAX_DEPTH` levels: copying, checking and showing it would recurse that deep.
    """
    name = require_str(data, "name", "a tool", server)
    if deeper_than(data, MAX_DEPTH):
        raise NestedTooDeep(f"server {server!r}: the definition of tool {name!r} nests deeper than {MAX_DEPTH} levels")
    output_schema = data.get("outputSchema")
    return Tool(
        name=name,
        description=optional_str(data, "description") or "",
        input_schema=mapping(data.get("inputSchema")),
        output_schema=output_schema if isinstance(output_schema, dict) else None,
        title=optional_str(data, "title"),
        annotations=mapping(data.get("annotations")),
        raw=data,
    )


@record
class CallToolResult:
    """What a ``tools/call`` returned.

    ``content`` holds typed blocks (:class:`~mcpcall.types.TextContent`, …);
    ``is_error`` is the tool's own failure report (the call itself worked);
    :meth:`raise_for_error` turns it into a :class:`~mcpcall.errors.ToolError`.
    """

    content: tuple[ContentBlock, ...] = ()
    structured_content: Any | None = field(default=None, hash=False)
    is_error: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    tool: str = ""
    server: str = ""

    @property
    def text(self) -> str:
        """The text blocks of ``content`` joined by newlines; structured content as JSON if none."""
        text = text_of(self.content)
        if text:
            return text
        if self.structured_content is not None:
            try:
                return json.dumps(self.structured_content, ensure_ascii=False)
            except RecursionError:
                return "(structured content nested too deeply to show)"
        return ""

    def raise_for_error(self) -> CallToolResult:
        """Raise :class:`ToolError` if the tool reported failure; else return self."""
        if self.is_error:
            name = f"tool {self.tool!r}" if self.tool else "tool"
            if self.server:
                name += f" of server {self.server!r}"
            raise ToolError(f"{name} reported an error: {self.text or '(no message)'}", self)
        return self

    def _repr_html_(self) -> str:
        """Jupyter's rich display: each block (text escaped, safe images inline) and the structured content."""
        from .html import result_html

        return result_html(self)


def parse_call_result(data: dict[str, Any], tool: str = "", server: str = "") -> CallToolResult:
    """A :class:`CallToolResult` from a ``tools/call`` result dict."""
    if data.__class__ is not dict and not isinstance(data, dict):
        require(data, "content", list, f"a result of tool {tool!r}", server)  # raises: not an object
    content = data.get("content")
    blocks: list[ContentBlock] = []
    if content.__class__ is list or isinstance(content, list):
        where = f" in the result of tool {tool!r}"
        for block in content:  # a loop, not a comprehension: no frame of its own
            blocks.append(parse_content(block, server, where))
    elif content is not None:
        require(data, "content", list, f"a result of tool {tool!r}", server)
    # content, structured_content, is_error, raw, tool, server: by position (keywords cost a third more)
    return CallToolResult(tuple(blocks), data.get("structuredContent"), data.get("isError") is True, data, tool, server)
