"""MCP tools as smolagents tools: ``tools(source)`` gives one :class:`smolagents.Tool` per MCP tool.

Each tool is an instance of a :class:`smolagents.Tool` subclass made for its MCP
tool. Its ``name`` is a Python identifier (``get-sum`` -> ``get_sum``; the
server is still called by the MCP name), its ``description`` the MCP
description, and its ``inputs`` the tool's ``inputSchema`` as smolagents wants
them: every input has a ``description`` (made up from its name and type when
the schema has none), an optional input is ``nullable`` (so the model may leave
it out and the server's default applies), and its ``type`` is one of
smolagents' types: a JSON type as it is, a type and ``null`` as the type made
``nullable``, a union of plain types as their list, anything else (``allOf``, a
``$ref`` that leads nowhere or back to itself, no type at all) ``"any"``. The
rest of each property (``enum``, ``items``, nested ``properties``, ``default``,
``format``) is kept for the model to read, with local ``$ref``\\ s written out.

A call runs on the caller's thread (smolagents has no async path: a
``ToolCallingAgent`` runs several tool calls of one step on its own threads).
The result is the text a model should read of it; a tool that declares an
``outputSchema`` has ``output_type`` ``"object"`` and returns its structured
content (a dict, which a ``CodeAgent`` can index). With ``images=True`` a
result holding an image returns it as an :class:`smolagents.AgentImage`, which
a ``ToolCallingAgent`` keeps in its state as ``image.png``; by default an
image is the short text ``[image/png, N bytes]``, never its base64.

A failing tool (``isError``, a timeout, a server that is gone, arguments the
server refused) raises :class:`mcpcall.ToolCallFailed` with text the model may
read; a ``ToolCallingAgent`` turns it into an error the model sees in its next
step (``Error executing tool …: ToolCallFailed: …``) and the run goes on.
Arguments of a wrong type or a missing required one are refused first by
smolagents' own validation, the same way. smolagents has no progress callback:
``on_progress`` given to :func:`tools` (``on_progress(tool_name, progress,
total, message)``) hears every call's progress.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
from collections.abc import Mapping
from typing import Any

from ..client import Client
from ..registry import ToolRegistry
from ..registry.gemini import resolve_pointer
from ._core import MCPTool, ToolCallFailed, ToolProgress, Unique, identifier, mcp_tools, media, require, result_text

smolagents = require("smolagents", "smolagents", "smolagents")

JSON_TYPES = ("string", "boolean", "integer", "number", "array", "object", "null")  # smolagents' names for them too
MAX_REF_DEPTH = 8  # nested $refs written out into an input; deeper or recursive ones become {} (anything)
MAX_NODES = 2_000  # schema nodes copied per input


_Tool: Any = smolagents.Tool


class MCPSmolagentsTool(_Tool):  # type: ignore[misc]
    """The smolagents tool of one MCP tool; :func:`tools` makes a subclass per tool with its class attributes."""

    skip_forward_signature_validation = True  # forward takes **kwargs: the inputs are the MCP tool's
    mcp_tool: MCPTool
    images: bool = False

    def forward(self, /, **kwargs: Any) -> Any:
        """Call the MCP tool with the model's arguments; its text, structured content, or image."""
        result = self.mcp_tool.call(self.mcp_tool.arguments(kwargs))
        if self.images:
            image = _first_image(result)
            if image is not None:
                return image
        if self.output_type == "object" and isinstance(result.structured_content, dict):
            return result.structured_content
        return result_text(result)


def tools(source: Client | ToolRegistry, timeout: float | None = None, *, images: bool = False,
          on_progress: ToolProgress | None = None) -> list[Any]:
    """The tools of ``source`` (a :class:`~mcpcall.Client` or a :class:`~mcpcall.ToolRegistry`) as smolagents tools.

    ``timeout`` is the seconds to list them and each call's limit (None: the
    source's default). With ``images``, a result holding an image returns it
    as an :class:`smolagents.AgentImage` (the tool's ``output_type`` is then
    ``"any"``); otherwise it is described in the text.
    ``on_progress(tool_name, progress, total, message)`` hears every call's progress (on the client's callbacks thread).
    """
    out: list[Any] = []
    taken = Unique()
    for mcp in mcp_tools(source, timeout, on_progress=on_progress):
        name = identifier(mcp.name, taken)
        out.append(make_tool(mcp, name, images=images))
    return out


def make_tool(mcp: MCPTool, name: str | None = None, *, images: bool = False) -> Any:
    """One smolagents tool for ``mcp``, named ``name`` (default: its name as an identifier)."""
    output_schema = mcp.tool.output_schema
    structured = isinstance(output_schema, Mapping)
    attributes: dict[str, Any] = {
        "name": name or identifier(mcp.name),
        "description": mcp.description or f"The MCP tool {mcp.name}.",
        "inputs": inputs_for(mcp),
        "output_type": "object" if structured else ("any" if images else "string"),
        "output_schema": dict(output_schema) if isinstance(output_schema, Mapping) else None,
        "mcp_tool": mcp,
        "images": images,
    }
    cls = type(_class_name(attributes["name"]), (MCPSmolagentsTool,), attributes)
    return cls()


def inputs_for(mcp: MCPTool) -> dict[str, dict[str, Any]]:
    """The tool's ``inputSchema`` as smolagents ``inputs``: each property with a description, a type and ``nullable``."""
    required = set(mcp.required)
    out: dict[str, dict[str, Any]] = {}
    for prop, sub in mcp.properties.items():
        entry = _Inliner(mcp.schema).copy(sub)
        kind, null = smolagents_type(entry, mcp.schema)
        for key in ("type", "anyOf", "oneOf", "allOf", "$ref", "nullable"):  # smolagents reads anyOf, badly: our type says it
            entry.pop(key, None)
        entry["type"] = kind
        text = entry.get("description")
        if not isinstance(text, str) or not text.strip():
            title = entry.get("title")
            entry["description"] = title if isinstance(title, str) and title.strip() else _made_up(prop, kind, prop in required)
        if prop not in required or null:
            entry["nullable"] = True
        out[prop] = entry
    return out


def smolagents_type(schema: Mapping[str, Any], root: Mapping[str, Any] | None = None) -> tuple[str | list[str], bool]:
    """The smolagents type of a property schema, and whether it allows ``null``."""
    kinds = _kinds(schema, root or {}, 0)
    if kinds is None:
        return "any", False
    null = "null" in kinds
    plain = [k for k in kinds if k != "null"]
    if not plain:
        return "null", True
    if len(plain) > 1 and "number" in plain and "integer" not in plain:
        plain.append("integer")  # smolagents lets an int through for "number" alone, not for a list holding it
    return (plain[0] if len(plain) == 1 else plain), null


def _kinds(schema: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> list[str] | None:
    """The JSON types a schema allows, or None for any (no type, or one smolagents cannot express)."""
    if depth > MAX_REF_DEPTH:
        return None
    ref = schema.get("$ref")
    if ref is not None:
        target = resolve_pointer(root, ref)
        return None if target is None else _kinds({**target, **{k: v for k, v in schema.items() if k != "$ref"}}, root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind] if kind in JSON_TYPES else None
    if isinstance(kind, list) and kind:
        return list(dict.fromkeys(kind)) if all(k in JSON_TYPES for k in kind) else None
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            out: list[str] = []
            for branch in branches:
                kinds = _kinds(branch, root, depth + 1) if isinstance(branch, Mapping) else None
                if kinds is None:
                    return None
                out += [k for k in kinds if k not in out]
            return out
    every = schema.get("allOf")
    if isinstance(every, list) and len(every) == 1 and isinstance(every[0], Mapping):
        return _kinds(every[0], root, depth + 1)
    enum = schema.get("enum")
    values = enum if isinstance(enum, list) and enum else ([schema["const"]] if "const" in schema else None)
    if values is not None:  # an enum or a const without a type: the types of its values
        found = list(dict.fromkeys(_json_type(v) for v in values))
        return None if None in found else [k for k in found if k is not None]
    if isinstance(schema.get("properties"), Mapping):
        return ["object"]
    if "items" in schema:
        return ["array"]
    return None


def _json_type(value: Any) -> str | None:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else None


class _Inliner:
    """A JSON-safe copy of a subschema with its local ``$ref``\\ s written out (the model sees no ``$defs``)."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.nodes = 0

    def copy(self, node: Any, refs: tuple[str, ...] = ()) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            return {}
        if isinstance(node, Mapping):
            ref = node.get("$ref")
            if isinstance(ref, str):
                target = resolve_pointer(self.root, ref)
                if target is None or ref in refs or len(refs) >= MAX_REF_DEPTH:
                    rest = {k: v for k, v in node.items() if k != "$ref"}
                    return self.copy(rest, refs)  # anything (what the rest allows)
                return self.copy({**target, **{k: v for k, v in node.items() if k != "$ref"}}, (*refs, ref))
            return {str(k): self.copy(v, refs) for k, v in node.items() if k not in ("$defs", "definitions", "$schema")}
        if isinstance(node, list):
            return [self.copy(v, refs) for v in node]
        return node if node is None or isinstance(node, (str, int, float, bool)) else json.loads(json.dumps(node, default=str))


def _made_up(prop: str, kind: str | list[str], required: bool) -> str:
    words = prop.replace("_", " ").replace("-", " ").strip() or prop
    kinds = kind if isinstance(kind, str) else " or ".join(kind)
    return f"The {words} argument ({kinds}{'' if required else ', optional'})."


def _class_name(name: str) -> str:
    words = [w for w in name.split("_") if w]
    out = "".join(w[:1].upper() + w[1:] for w in words) or "Tool"
    return out + "Tool"


MAX_PIXELS = 25_000_000  # an image larger (width x height) is described, not decoded: a small PNG can unpack to GBs
MAX_DECODED = 4  # images of one result tried; the rest are described


def _first_image(result: Any) -> Any:
    """The result's first image as an AgentImage (PIL is smolagents' own dependency), or None.

    The header is read first: an image of more than :data:`MAX_PIXELS` is not
    decoded (the server chose its size), nor is any after :data:`MAX_DECODED`
    tries; those are described in the text instead.
    """
    import PIL.Image  # type: ignore[import-not-found, unused-ignore]  # a dependency of smolagents

    tried = 0
    for block in media(result):
        if not block.mime_type.startswith("image/"):
            continue
        tried += 1
        if tried > MAX_DECODED:
            break
        try:
            raw: Any = block.data  # the decoded bytes (base64 text too, should a block hold it)
            data = raw if isinstance(raw, bytes) else base64.b64decode(raw)
            picture = PIL.Image.open(io.BytesIO(data))
            width, height = picture.size
            if width * height > MAX_PIXELS:
                continue
            picture.load()
        except (binascii.Error, ValueError, OSError, SyntaxError, PIL.Image.DecompressionBombError):
            continue  # not an image PIL reads (a bad checksum, …), or one too big to: the text says it
        return smolagents.AgentImage(picture)
    return None


__all__ = ["MCPSmolagentsTool", "ToolCallFailed", "inputs_for", "make_tool", "smolagents_type", "tools"]
