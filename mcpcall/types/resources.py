"""Resources, resource templates and what reading one returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from ._record import many, mapping, optional_int, optional_str, record, require, require_str
from .content import ResourceContents, parse_resource_contents

__all__ = ["ReadResourceResult", "Resource", "ResourceTemplate", "parse_read_result", "parse_resource", "parse_template"]


@record
class Resource:
    """A resource a server lists (``resources/list``)."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: Mapping[str, Any] = field(default_factory=dict, repr=False, hash=False)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def _repr_html_(self) -> str:
        """Jupyter's rich display: name, URI, type, size, description."""
        from .html import resource_html

        return resource_html(self)


def parse_resource(data: Any, server: str = "") -> Resource:
    """A :class:`Resource` from one entry of a ``resources/list`` result."""
    return Resource(
        uri=require_str(data, "uri", "a resource", server),
        name=require_str(data, "name", "a resource", server),
        title=optional_str(data, "title"),
        description=optional_str(data, "description"),
        mime_type=optional_str(data, "mimeType"),
        size=optional_int(data, "size"),
        annotations=mapping(data.get("annotations")),
        raw=data,
    )


@record
class ResourceTemplate:
    """A family of resources named by an RFC 6570 URI template (``resources/templates/list``)."""

    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    annotations: Mapping[str, Any] = field(default_factory=dict, repr=False, hash=False)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


def parse_template(data: Any, server: str = "") -> ResourceTemplate:
    """A :class:`ResourceTemplate` from one entry of a ``resources/templates/list`` result."""
    return ResourceTemplate(
        uri_template=require_str(data, "uriTemplate", "a resource template", server),
        name=require_str(data, "name", "a resource template", server),
        title=optional_str(data, "title"),
        description=optional_str(data, "description"),
        mime_type=optional_str(data, "mimeType"),
        annotations=mapping(data.get("annotations")),
        raw=data,
    )


@record
class ReadResourceResult:
    """What ``resources/read`` returned: one or more :class:`ResourceContents`."""

    contents: tuple[ResourceContents, ...]
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def text(self) -> str:
        """The text contents joined by newlines."""
        return "\n".join(c.text for c in self.contents if c.text is not None)

    @property
    def data(self) -> bytes:
        """The first contents as bytes (a blob, or text as UTF-8); empty if there are none."""
        return self.contents[0].data if self.contents else b""


def parse_read_result(data: Any, uri: str, server: str = "") -> ReadResourceResult:
    """A :class:`ReadResourceResult` from a ``resources/read`` result."""
    items = require(data, "contents", list, f"a resources/read result for {uri!r}", server)
    return ReadResourceResult(many(items, lambda item: parse_resource_contents(item, server)), data)
