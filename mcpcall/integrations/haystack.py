"""MCP tools as Haystack tools (``haystack.tools.Tool``), for its ``Agent`` and its tool-calling code.

:func:`tools` returns one :class:`haystack.tools.Tool` per MCP tool: its
``name`` (the server's, or the registry's ``mcp__server__tool``), the MCP
description, and the tool's ``inputSchema`` as ``parameters``, as it is when it
passes Haystack's check (the JSON Schema 2020-12 meta-schema, whatever
``$schema`` says), repaired where it does not (a draft-07 tuple ``items``
becomes ``prefixItems``, a draft-04 boolean ``exclusiveMinimum`` a number, any
other node the meta-schema refuses accepts anything), so no tool is dropped.

Each tool has both paths Haystack knows: ``function`` calls the tool on the
calling thread (``Agent.run`` runs it on a worker thread of its own pool; no
event loop is made), and ``async_function`` awaits the call, so
``Agent.run_async`` keeps its loop running during a slow tool.

What the function returns is a dict: ``text`` (what the model should read:
text blocks, structured content as JSON when there is no text, an image or
audio block described as ``[image/png, N bytes]``), ``structured_content``
(the result's ``structuredContent`` or None) and ``content`` (the message
parts: the text and the images as Haystack ``ImageContent``). The tool's
``outputs_to_string`` makes the tool message of that: the text alone, or, when
the result carried images, the text and the images (``raw_result``), which
Haystack's chat generators send to a model that takes images. The dict lets
``outputs_to_state`` put structured content in the Agent's state: pass
``outputs_to_state={"weather": {"forecast": {"source": "structured_content"}}}``
(keyed by tool name).

A failing tool (``isError``, a timeout, a server that is gone, arguments the
client refused) raises :class:`mcpcall.ToolCallFailed` with text the model may
read; Haystack wraps it in its ``ToolInvocationError``, whose message ends
with that text. The ``Agent`` (``raise_on_tool_invocation_failure=False``, its
default) turns it into a tool message with ``error=True`` that the model reads
on its next step; with ``True``, the run raises it.

Haystack has no progress callback of its own for tools: ``on_progress`` given
to :func:`tools` receives every call's progress notifications
(``on_progress(tool_name, progress, total, message)``), on the client's callbacks thread.
"""

from __future__ import annotations

import base64
import copy
import re
from collections.abc import Mapping
from typing import Any

from ..patterns import MAX_COMPILE_SIZE, MAX_PATTERN_CHARS, compile_size
from ..registry import result_text
from ..types import CallToolResult, ImageContent
from ._core import MCPTool, ToolProgress, mcp_tools, media, require, unique_strings

require("haystack", "haystack", "Haystack (haystack-ai)")
_tools = require("haystack.tools", "haystack", "Haystack (haystack-ai)")
_dataclasses = require("haystack.dataclasses", "haystack", "Haystack (haystack-ai)")
Tool: Any = _tools.Tool
HaystackImage: Any = _dataclasses.ImageContent
HaystackText: Any = _dataclasses.TextContent

from jsonschema import Draft202012Validator, FormatChecker  # a dependency of haystack-ai, which checks its tools' schemas with it
from jsonschema.exceptions import SchemaError

_MAX_REPAIRS = 500  # nodes of one schema replaced by an accept-anything schema in one pass
_PASSES = 3  # checks of the whole schema, each followed by the repairs it asks for; then the whole is replaced



def tools(source: Any, timeout: float | None = None, *, on_progress: ToolProgress | None = None,
          outputs_to_state: Mapping[str, Mapping[str, Any]] | None = None) -> list[Any]:
    """Every tool of ``source`` (an :class:`mcpcall.Client` or :class:`mcpcall.ToolRegistry`) as a Haystack ``Tool``.

    ``timeout`` bounds the listing and is every call's default; ``on_progress``
    gets every call's progress; ``outputs_to_state`` maps a tool's name to its
    Haystack ``outputs_to_state`` (the sources are ``text``, ``structured_content``
    and ``content``).
    """
    states = dict(outputs_to_state or {})
    return [_tool(mcp, states.get(mcp.name)) for mcp in mcp_tools(source, timeout, on_progress=on_progress)]


def _tool(mcp: MCPTool, state: Mapping[str, Any] | None) -> Any:
    """The Haystack ``Tool`` of one MCP tool."""

    def function(**kwargs: Any) -> dict[str, Any]:
        return _output(mcp.call(mcp.arguments(kwargs)))

    async def async_function(**kwargs: Any) -> dict[str, Any]:
        return _output(await mcp.acall(mcp.arguments(kwargs)))

    function.__name__ = async_function.__name__ = mcp.name
    function.__doc__ = async_function.__doc__ = mcp.description

    def made(schema: dict[str, Any]) -> Any:
        return Tool(
            name=mcp.name,
            description=mcp.description,
            parameters=schema,
            function=function,
            async_function=async_function,
            outputs_to_string={"handler": tool_message, "raw_result": True},
            outputs_to_state={k: dict(v) for k, v in state.items()} if state else None,
        )

    try:
        return made(parameters(mcp.schema))
    except (RecursionError, OverflowError):  # Haystack's check of a schema ours passed, run deeper in the stack
        return made({"type": "object", "properties": {}})


def _output(result: CallToolResult) -> dict[str, Any]:
    text = result_text(result)
    parts: list[Any] = [HaystackText(text)]
    for block in media(result):
        if isinstance(block, ImageContent):
            try:
                encoded = base64.b64encode(block.data).decode("ascii")  # mcpcall holds the decoded bytes
                parts.append(HaystackImage(base64_image=encoded, mime_type=block.mime_type or None))
            except ValueError:  # not base64, or a MIME type Haystack does not take as an image: the text says it
                pass
    return {"text": text, "structured_content": result.structured_content, "content": parts}


def tool_message(output: Any) -> Any:
    """The tool message's content for what a tool returned: the text, or the text and the images."""
    if not isinstance(output, Mapping):  # a user's own handler chain may hand us something else
        return output if isinstance(output, str) else str(output)
    parts = output.get("content") or []
    if any(isinstance(part, HaystackImage) for part in parts):
        return list(parts)
    return str(output.get("text", ""))


# ---------------------------------------------------------------- parameters


def parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` as Haystack's ``Tool`` takes it: valid under the JSON Schema 2020-12 meta-schema.

    A schema that is valid is returned as it is (a copy; a ``required`` or
    ``type`` list keeps each string once). One that is not gets the older
    drafts' forms rewritten (tuple ``items``, boolean
    ``exclusiveMinimum``/``exclusiveMaximum``, ``additionalItems``) and its
    ``$schema`` dropped (what is left is a 2020-12 schema); a node still
    refused is replaced by an empty schema (anything), keeping its
    description: every such node found by one check, for up to :data:`_PASSES`
    checks (the cost stays linear in the schema, however many nodes are bad);
    a schema still refused after that is an object with any properties. A
    ``pattern`` Python's ``re`` refuses, or would compile at a cost the server
    chooses (longer than :data:`mcpcall.patterns.MAX_PATTERN_CHARS`, nested
    deeper than :data:`_MAX_PATTERN_NESTING`), is dropped: Haystack's check
    compiles every pattern.
    """
    out: dict[str, Any] = _walk(copy.deepcopy(dict(schema)), _once)
    if _error(out) is None:
        return out
    out = _walk(out, _modern)
    out.pop("$schema", None)
    for _ in range(_PASSES):  # each pass loosens every node refused, found in one check of the whole
        paths = _refused(out)
        if paths is None:
            break
        if not paths:
            return out  # nothing refused: no need of a last check
        for path in paths[:_MAX_REPAIRS]:
            try:
                out = _loosened(out, path)
            except (KeyError, IndexError, TypeError):  # an earlier repair took away what the path runs through
                continue
    return {"type": "object", "properties": {}} if _error(out) is not None else out


def _regex(pattern: object) -> bool:
    """A pattern Python's ``re`` compiles at a bounded cost: the meta-schema's ``"format": "regex"``, as Haystack's
    check runs it, with every way it fails counted as a refusal (a repeat count past the C limit raises
    OverflowError, nesting past the parser's recursion RecursionError; through Haystack's check, either would make
    the tool fail to build), and a pattern re compiles slowly (a long one, a wide set) or from deep in the stack (a
    deeply nested one) refused too."""
    if not isinstance(pattern, str):
        return True
    if (len(pattern) > MAX_PATTERN_CHARS or _nesting(pattern) > _MAX_PATTERN_NESTING
            or compile_size(pattern) > MAX_COMPILE_SIZE):
        return False
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError, ValueError):
        return False
    return True


def _nesting(pattern: str) -> int:
    """The deepest nesting of ``pattern``'s groups, as the count of open parentheses (escaped ones not counted)."""
    depth = deepest = 0
    escaped = False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth = max(depth - 1, 0)
    return deepest


_MAX_PATTERN_NESTING = 50
# As check_schema checks (Haystack's check): with the format checker, so a pattern that is no regular expression
# is refused and found (and its keyword dropped).
_FORMATS = FormatChecker()
_FORMATS.checks("regex")(_regex)
_META = Draft202012Validator(Draft202012Validator.META_SCHEMA, format_checker=_FORMATS)


def _error(schema: Any) -> Exception | None:
    """What the meta-schema refuses first in ``schema``, Haystack's check with :func:`_regex` for patterns."""
    try:
        return next(iter(_META.iter_errors(schema)), None)
    except RecursionError:  # deeper than the check recurses: no schema Haystack could check either
        return SchemaError("nested too deeply")


def _refused(schema: Any) -> list[list[Any]] | None:
    """The paths of the nodes the 2020-12 meta-schema refuses, outermost first, none inside another (None: cannot tell)."""
    try:
        found = sorted({tuple(error.path) for error in _META.iter_errors(schema)}, key=len)
    except RecursionError:
        return None
    kept: set[tuple[Any, ...]] = set()
    for path in found:  # shortest first: a path is dropped when one of its prefixes was kept
        if not any(path[:size] in kept for size in range(len(path) + 1)):
            kept.add(path)
    return [list(path) for path in sorted(kept, key=len)]


# Where a schema holds schemas: name -> schema maps, lists of schemas, one schema (and items, either).
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SCHEMA_ONE = frozenset({"items", "additionalItems", "additionalProperties", "not", "if", "then", "else", "contains",
                         "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema"})


def _kind(parent: str, key: Any, value: Any) -> str:
    """What ``value`` is, found under ``key`` in a node of kind ``parent``: "schema", "map" (names to schemas),
    "list" (of schemas) or "data" (a value: an enum's, a default, a keyword this module does not know)."""
    if parent in ("map", "list"):
        return "schema"
    if parent != "schema":
        return "data"
    if key in _SCHEMA_MAPS and isinstance(value, dict):
        return "map"
    if (key in _SCHEMA_LISTS or key == "items") and isinstance(value, list):
        return "list"
    if key in _SCHEMA_ONE and isinstance(value, dict):
        return "schema"
    return "data"


def _walk(node: Any, change: Any, kind: str = "schema") -> Any:
    """``node`` with ``change`` applied to every schema in it (its own object first, then the schemas inside it);
    values (an ``enum``'s, a ``default``) are left as they are."""
    if kind == "data":
        return node
    if kind == "schema":
        if not isinstance(node, dict):
            return node
        node = change(node)
        return {key: _walk(value, change, _kind("schema", key, value)) for key, value in node.items()}
    if kind == "map":
        return {key: _walk(value, change, "schema") for key, value in node.items()}
    return [_walk(item, change, "schema") for item in node]


def _once(node: dict[str, Any]) -> dict[str, Any]:
    """``required``, ``type`` and ``dependentRequired`` lists with each string once: jsonschema's ``uniqueItems``
    compares a list it cannot sort (strings and numbers) pair by pair, a cost a server could make quadratic. The
    strings of a list that holds anything else are kept, each once (the rest would be refused)."""
    out = dict(node)
    for key in ("required", "type"):
        if isinstance(out.get(key), list):
            out[key] = unique_strings(out[key])
    needed = out.get("dependentRequired")
    if isinstance(needed, dict):
        out["dependentRequired"] = {name: unique_strings(names) if isinstance(names, list) else names
                                    for name, names in needed.items()}
    return out


def _modern(node: dict[str, Any]) -> dict[str, Any]:
    """One schema's draft-04/07 forms as 2020-12 ones (the schemas inside it are :func:`_walk`'s)."""
    out = dict(node)
    items = out.get("items")
    if isinstance(items, list):  # draft-07 tuple form
        out["prefixItems"] = items
        extra = out.pop("additionalItems", None)
        if extra is None:
            out.pop("items")
        else:
            out["items"] = extra
    elif "additionalItems" in out:  # meaningless without tuple items
        out.pop("additionalItems")
    for key, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        flag = out.get(key)
        if isinstance(flag, bool):  # draft-04: a flag on minimum/maximum
            out.pop(key)
            if flag and isinstance(out.get(bound), (int, float)) and not isinstance(out.get(bound), bool):
                out[key] = out.pop(bound)
    return out


def _loosened(schema: dict[str, Any], path: list[Any]) -> dict[str, Any]:
    """``schema`` without what the meta-schema refused at ``path``.

    In the deepest object above the refused value, the keyword holding it is
    dropped (a wrong ``type`` goes, the rest of that node stays); a refused
    property (or definition) becomes an empty schema, which accepts anything.
    What each object on the path is (a schema, or a map of names to schemas)
    is read from its place, not its key: a property may be called ``properties``.
    """
    if not path:
        return {"type": "object", "properties": {}}
    nodes: list[Any] = [schema]
    kinds = ["schema"]
    for key in path[:-1]:
        value = nodes[-1][key]
        kinds.append(_kind(kinds[-1], key, value))
        nodes.append(value)
    for depth in range(len(path) - 1, -1, -1):
        node, kind = nodes[depth], kinds[depth]
        if isinstance(node, dict) and kind in ("schema", "map"):
            key = path[depth]
            if kind == "map":
                node[key] = {}
            else:
                node.pop(key, None)
            return schema
    return {"type": "object", "properties": {}}


__all__ = ["parameters", "tool_message", "tools"]
