"""HTML views of tools, results and content blocks, for Jupyter's rich display (``_repr_html_``).

Everything a server sent is escaped with :func:`html.escape`; nothing it sent
becomes markup, a script or a link it chose the scheme of. Sizes are bounded:
text is cut at :data:`MAX_TEXT` characters, tables at :data:`MAX_ROWS` rows,
results at :data:`MAX_BLOCKS` blocks, and media is inlined only up to
:data:`MAX_INLINE_BYTES`. Images are inlined only as PNG, JPEG, GIF or WebP
(never SVG: it can carry scripts); anything else is described in words.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

from . import _markup
from ._markup import INLINE_IMAGE_TYPES, MAX_INLINE_BYTES, MAX_TEXT, _code, _cut, _json, _link, _size
from .content import content_html

__all__ = [
    "INLINE_IMAGE_TYPES",
    "MAX_BLOCKS",
    "MAX_INLINE_BYTES",
    "MAX_ROWS",
    "MAX_TEXT",
    "content_html",
    "parameters",
    "prompt_html",
    "resource_html",
    "result_html",
    "tool_html",
    "tools_html",
]

_SHARED = frozenset({"INLINE_IMAGE_TYPES", "MAX_INLINE_BYTES", "MAX_TEXT"})  # read by every view, from _markup


class _Limits(types.ModuleType):
    """This module, where setting a limit :mod:`._markup` holds sets it there too, so every view sees it."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SHARED:
            setattr(_markup, name, value)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Limits

MAX_ROWS = 200  #: rows of a tool table
MAX_BLOCKS = 50  #: content blocks of one result

_STYLE = "border-collapse:collapse;text-align:left"
_CELL = "padding:2px 8px;vertical-align:top;text-align:left"


# -- tools --------------------------------------------------------------------------------------


def parameters(schema: Mapping[str, Any]) -> list[tuple[str, str, bool, str]]:
    """``(name, type, required, description)`` of each property of an object schema."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    required = schema.get("required")
    needed = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    out = []
    for name, prop in properties.items():
        prop = prop if isinstance(prop, Mapping) else {}
        kind = prop.get("type")
        if isinstance(kind, list):
            kind = " | ".join(str(k) for k in kind)
        elif not isinstance(kind, str):
            kind = "enum" if "enum" in prop else ("any" if not prop else "")
        description = prop.get("description")
        out.append((str(name), kind, name in needed, description if isinstance(description, str) else ""))
    return out


def _parameters_html(schema: Mapping[str, Any]) -> str:
    items = parameters(schema)
    if not items:
        return "<i>none</i>"
    shown = []
    for name, kind, required, description in items[:MAX_ROWS]:
        line = _code(name) + (f" <small>{_cut(kind, 100)}</small>" if kind else "")
        if required:
            line += ' <b title="required">*</b>'
        if description:
            line += f" — {_cut(description, 300)}"
        shown.append(line)
    if len(items) > MAX_ROWS:
        shown.append(f"<i>… and {len(items) - MAX_ROWS} more</i>")
    return "<br>".join(shown)


def _about(tool: Any) -> str:
    """Title (bold, when it differs from the name) and description."""
    title = getattr(tool, "display_name", "")
    parts = [f"<b>{_cut(title, 200)}</b>"] if title and title != tool.name else []
    if tool.description:
        parts.append(_cut(tool.description, 500))
    return "<br>".join(parts)


def tool_html(tool: Any) -> str:
    """One :class:`~mcpcall.types.Tool`: its name, title, description and parameters."""
    rows = [("name", _code(tool.name)), ("about", _about(tool) or "<i>no description</i>"),
            ("parameters", _parameters_html(tool.input_schema))]
    if tool.output_schema is not None:
        rows.append(("returns", _parameters_html(tool.output_schema)))
    body = "".join(f'<tr><th style="{_CELL}">{k}</th><td style="{_CELL}">{v}</td></tr>' for k, v in rows)
    return f'<table class="mcpcall-tool" style="{_STYLE}">{body}</table>'


def tools_html(items: Iterable[Any]) -> str:
    """A table of tools: :class:`~mcpcall.types.Tool` or registered tools (name, server, tool).

    Parameters marked ``*`` are required; past :data:`MAX_ROWS` rows the rest are counted.
    """
    items = list(items)
    registered = any(hasattr(item, "server") and hasattr(item, "tool") for item in items)
    head = ["name", *(["server"] if registered else []), "description", "parameters"]
    rows = []
    for item in items[:MAX_ROWS]:
        tool = getattr(item, "tool", item)
        if not hasattr(tool, "input_schema"):  # not a tool: shown as it prints
            rows.append(f'<tr><td colspan="{len(head)}" style="{_CELL}">{_cut(repr(item), 300)}</td></tr>')
            continue
        cells = [_code(getattr(item, "name", tool.name))]
        if registered:
            cells.append(escape(str(getattr(item, "server", ""))))
        cells += [_about(tool), _parameters_html(tool.input_schema)]
        rows.append("<tr>" + "".join(f'<td style="{_CELL}">{c}</td>' for c in cells) + "</tr>")
    if len(items) > MAX_ROWS:
        rows.append(f'<tr><td colspan="{len(head)}" style="{_CELL}"><i>… and {len(items) - MAX_ROWS} more tools</i></td></tr>')
    header = "".join(f'<th style="{_CELL}">{h}</th>' for h in head)
    caption = f"{len(items)} tool{'' if len(items) == 1 else 's'} (<b>*</b> required)"
    return (f'<table class="mcpcall-tools" style="{_STYLE}"><caption style="text-align:left">{caption}</caption>'
            f"<thead><tr>{header}</tr></thead><tbody>{''.join(rows)}</tbody></table>")


# -- results and content --------------------------------------------------------------------------


def result_html(result: Any) -> str:
    """A :class:`~mcpcall.types.CallToolResult`: which tool, error or not, its blocks and structured content."""
    what = f"tool {_code(result.tool)}" if result.tool else "tool result"
    if result.server:
        what += f" of server {escape(result.server)}"
    status = '<b style="color:#b00">error</b>' if result.is_error else "ok"
    parts = [f"<div><small>{what}: {status}</small></div>"]
    blocks = list(result.content)
    parts += [content_html(block) for block in blocks[:MAX_BLOCKS]]
    if len(blocks) > MAX_BLOCKS:
        parts.append(f"<div><i>… and {len(blocks) - MAX_BLOCKS} more blocks</i></div>")
    if result.structured_content is not None:
        parts.append("<div><small>structured content:</small></div>" + _json(result.structured_content))
    if not blocks and result.structured_content is None:
        parts.append("<div><i>(no content)</i></div>")
    return f'<div class="mcpcall-result">{"".join(parts)}</div>'


# -- prompts and resources -------------------------------------------------------------------------


def prompt_html(prompt: Any) -> str:
    """A :class:`~mcpcall.types.Prompt`: name, title, description, arguments (required marked ``*``)."""
    head = _code(prompt.name) + (f" <b>{_cut(prompt.title, 200)}</b>" if prompt.title else "")
    description = f"<div>{_cut(prompt.description, 500)}</div>" if prompt.description else ""
    arguments = []
    for argument in prompt.arguments[:MAX_ROWS]:
        line = _code(argument.name) + (' <b title="required">*</b>' if argument.required else "")
        if argument.description:
            line += f" — {_cut(argument.description, 300)}"
        arguments.append(f"<li>{line}</li>")
    listing = f"<ul>{''.join(arguments)}</ul>" if arguments else "<div><i>no arguments</i></div>"
    return f'<div class="mcpcall-prompt"><div>{head}</div>{description}{listing}</div>'


def resource_html(resource: Any) -> str:
    """A :class:`~mcpcall.types.Resource`: name or title, URI, type, size and description."""
    parts = [f"<b>{_cut(resource.title or resource.name, 200)}</b> {_link(resource.uri, resource.uri)}"]
    about = [escape(resource.mime_type)] if resource.mime_type else []
    if resource.size is not None:
        about.append(_size(resource.size))
    if about:
        parts.append(f"<small>{', '.join(about)}</small>")
    if resource.description:
        parts.append(f"<div>{_cut(resource.description, 500)}</div>")
    return f'<div class="mcpcall-resource">{" ".join(parts)}</div>'
