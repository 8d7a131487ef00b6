"""Content blocks, shared by tool results, prompt messages and embedded resources.

Every block has ``type`` (the wire ``type``), ``annotations`` and ``raw``.
Binary data (images, audio, blobs) is decoded from base64 into ``bytes``. A
block of a type this version does not know is kept as :class:`UnknownContent`.
Every block shows itself in Jupyter (``_repr_html_``, :func:`content_html`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from html import escape
from typing import Any, ClassVar, Union

from ._markup import _PRE, _code, _cut, _json, _link, _media, _size
from ._record import decode_base64, mapping, optional_int, optional_str, record, require, require_str

__all__ = [
    "AudioContent",
    "ContentBlock",
    "EmbeddedResource",
    "ImageContent",
    "ResourceContents",
    "ResourceLink",
    "TextContent",
    "UnknownContent",
    "parse_content",
    "parse_resource_contents",
    "text_of",
]


@record
class ResourceContents:
    """What ``resources/read`` (or an embedded resource) holds for one URI: ``text`` or ``blob``.

    ``blob`` is the decoded bytes; :attr:`data` is whichever the server sent,
    as bytes (text encoded as UTF-8).
    """

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: bytes | None = field(default=None, repr=False)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def data(self) -> bytes:
        """The contents as bytes."""
        if self.blob is not None:
            return self.blob
        return (self.text or "").encode("utf-8")


def parse_resource_contents(data: Any, server: str = "") -> ResourceContents:
    """A :class:`ResourceContents` from its wire dict (text or base64 blob)."""
    what = "resource contents"
    uri = require_str(data, "uri", what, server)
    text = data.get("text")
    blob = data.get("blob")
    if isinstance(blob, str):
        return ResourceContents(uri, optional_str(data, "mimeType"), None, decode_base64(blob, "blob", what, server), data)
    if isinstance(text, str):
        return ResourceContents(uri, optional_str(data, "mimeType"), text, None, data)
    require_str(data, "text", what, server)  # neither: name the field that is missing
    raise AssertionError("unreachable")  # pragma: no cover


class _HTMLBlock:
    """What every block shares: Jupyter's rich display (see :mod:`mcpcall.types.html`)."""

    __slots__ = ()

    def _repr_html_(self) -> str:
        return content_html(self)


@record
class TextContent(_HTMLBlock):
    """A text block."""

    type: ClassVar[str] = "text"
    text: str
    annotations: Mapping[str, Any] = field(default_factory=dict, repr=False, hash=False)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@record
class ImageContent(_HTMLBlock):
    """An image; ``data`` is the decoded bytes."""

    type: ClassVar[str] = "image"
    data: bytes = field(repr=False)
    mime_type: str
    annotations: Mapping[str, Any] = field(default_factory=dict, repr=False, hash=False)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@record
class AudioContent(_HTMLBlock):
    """Audio; ``data`` is the decoded bytes."""

    type: ClassVar[str] = "audio"
    data: bytes = field(repr=False)
    mime_type: str
    annotations: Mapping[str, Any] = field(default_factory=dict, repr=False, hash=False)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@record
class ResourceLink(_HTMLBlock):
    """A link to a resource the client may read with ``read_resource(link.uri)``."""

    type: ClassVar[str] = "resource_link"
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: Mapping[str, Any] = field(default_factory=dict, repr=False, hash=False)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@record
class EmbeddedResource(_HTMLBlock):
    """A resource's contents carried inside the block."""

    type: ClassVar[str] = "resource"
    resource: ResourceContents
    annotations: Mapping[str, Any] = field(default_factory=dict, repr=False, hash=False)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@record
class UnknownContent(_HTMLBlock):
    """A block of a type mcpcall does not know (newer protocol, an extension): all in ``raw``."""

    type: str
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, hash=False)  # all it has: compared


ContentBlock = Union[TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource, UnknownContent]


def parse_content(data: Any, server: str = "", where: str = "") -> ContentBlock:
    """One content block from its wire dict; ``where`` (" in the result of tool 'x'") goes into errors."""
    if data.__class__ is dict and data.get("type") == "text":  # the common block, read without the checks' calls
        text = data.get("text")
        if text.__class__ is str:
            annotations = data.get("annotations")
            return TextContent(text, {} if annotations is None or not isinstance(annotations, dict) else annotations, data)
    kind = require_str(data, "type", f"a content block{where}", server)
    annotations = mapping(data.get("annotations"))
    label = f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind} block{where}"
    if kind == "text":
        return TextContent(require_str(data, "text", label, server), annotations, data)
    if kind in ("image", "audio"):
        payload = decode_base64(require_str(data, "data", label, server), "data", label, server)
        mime = require_str(data, "mimeType", label, server)
        cls = ImageContent if kind == "image" else AudioContent
        return cls(payload, mime, annotations, data)
    if kind == "resource_link":
        return ResourceLink(
            uri=require_str(data, "uri", label, server),
            name=require_str(data, "name", label, server),
            title=optional_str(data, "title"),
            description=optional_str(data, "description"),
            mime_type=optional_str(data, "mimeType"),
            size=optional_int(data, "size"),
            annotations=annotations,
            raw=data,
        )
    if kind == "resource":
        resource = require(data, "resource", dict, label, server)
        return EmbeddedResource(parse_resource_contents(resource, server), annotations, data)
    return UnknownContent(kind, data)


def text_of(blocks: Any) -> str:
    """The text blocks among ``blocks`` joined by newlines."""
    return "\n".join(block.text for block in blocks if isinstance(block, TextContent))


# -- HTML (Jupyter's rich display; the other views are in :mod:`.html`) ------------------------------


def _contents_html(contents: ResourceContents) -> str:
    head = _link(contents.uri, contents.uri) + (f" <small>{escape(contents.mime_type)}</small>" if contents.mime_type else "")
    if contents.text is not None:
        return f'<div>{head}<pre style="{_PRE}">{_cut(contents.text)}</pre></div>'
    return f"<div>{head} <i>{_size(len(contents.data))} of binary data</i></div>"


def content_html(block: Any) -> str:
    """One content block as HTML (text escaped; media inlined when safe and small)."""
    if isinstance(block, TextContent):
        return f'<pre style="{_PRE}">{_cut(block.text)}</pre>'
    if isinstance(block, (ImageContent, AudioContent)):
        return _media(block.type, block.mime_type, block.data)
    if isinstance(block, ResourceLink):
        about = [escape(block.mime_type)] if block.mime_type else []
        if block.size is not None:
            about.append(_size(block.size))
        extra = f" <small>{', '.join(about)}</small>" if about else ""
        description = f" — {_cut(block.description, 500)}" if block.description else ""
        return f"<div>🔗 {_link(block.uri, block.title or block.name)}{extra}{description}</div>"
    if isinstance(block, EmbeddedResource):
        return _contents_html(block.resource)
    if isinstance(block, UnknownContent):
        return f"<div><i>a {_code(block.type)} block</i>{_json(dict(block.raw), 500)}</div>"
    return f"<div>{_cut(repr(block), 500)}</div>"
