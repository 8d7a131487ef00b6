"""MCP tools as DSPy tools (``dspy.Tool``), for ``dspy.ReAct``, ``tool(**kw)`` and ``await tool.acall(**kw)``.

:func:`tools` returns one ``dspy.Tool`` per MCP tool (a subclass of it): its
``name`` (the server's, or the registry's ``mcp__server__tool``), the MCP
description as ``desc``, and as ``args`` one JSON Schema per argument, the
tool's own with local ``$ref``\\ s inlined (DSPy validates each argument alone,
where a ``$ref`` to the tool's ``$defs`` would not resolve). ``arg_types`` are
``Any``: the values are sent as the model gave them, and the server (and the
client's ``validate_arguments``) check them.

DSPy takes an argument without a ``default`` as required, whatever the
schema's ``required`` says: every optional argument's schema gets
``"default": None`` (unless it has a default of its own), a required one
none, so DSPy's ``required`` is the schema's. An optional argument the model
leaves out, or gives as ``null``, is not sent: the server's default applies.

``tool(**kw)`` (the sync path, which ``ReAct.forward`` takes) calls the tool on
the calling thread; no event loop is made. DSPy's own ``acall`` would run a
sync function inline, blocking the loop: this tool's ``acall`` (what
``ReAct.aforward`` awaits) awaits the call instead, so the loop keeps running
during a slow tool.

A call returns the text a model should read (text blocks, structured content
as JSON when there is no text, an image or audio block described as
``[image/png, N bytes]``: DSPy has no place for a tool's images in a
trajectory); with ``structured=True``, a result's structured content itself
when it has some. A failing tool (``isError``, a timeout, a server that is
gone, arguments refused) raises :class:`mcpcall.ToolCallFailed` with text the
model may read; ``ReAct`` records it as the step's observation
(``Execution error in <tool>: ...``) and goes on. An argument DSPy's own check
refuses raises its ``ValueError``, which ReAct records the same way.

DSPy has no progress callback for tools: ``on_progress`` given to
:func:`tools` receives every call's progress (``on_progress(tool_name, progress, total, message)``,
on the client's callbacks thread).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..registry import result_text
from ..registry.gemini import resolve_pointer
from ..types import CallToolResult
from ._core import MCPTool, ToolProgress, mcp_tools, require, unique_strings

_dspy = require("dspy", "dspy", "DSPy")
_DSPyTool: Any = _dspy.Tool
_with_callbacks: Any = require("dspy.utils.callback", "dspy", "DSPy").with_callbacks

from jsonschema import Draft202012Validator  # what DSPy validates an argument's schema with (its latest draft)
from jsonschema.exceptions import SchemaError

_MAX_REF_DEPTH = 16  # nested $refs inlined in one argument's schema; deeper (or recursive) ones accept anything
# What is copied into the arguments' schemas, in schemas (objects) and in values (every object, list and scalar,
# an enum's items too): each copied schema costs a check against the meta-schema (some 2,000-4,000 Python steps),
# and a server's arguments may each name the same fanned-out definition. Past a budget, what is left accepts anything.
_MAX_NODES = 500  # schemas copied into one argument
_MAX_TOOL_NODES = 2_000  # schemas copied into all of one tool's arguments
_MAX_VALUES = 20_000  # values copied into one argument
_MAX_TOOL_VALUES = 50_000  # values copied into all of one tool's arguments
_MAX_NESTING = 32  # levels of one argument's schema kept; deeper ones accept anything
# Keywords DSPy's own per-call jsonschema check would run at a cost the server chooses (a pattern is a
# regular expression of its): left to the server, and to validate_arguments, which bounds them.
_UNCHECKED = frozenset({"pattern", "patternProperties", "format"})


class _Call:
    """The function of one MCP tool: called (the sync path) or awaited through :meth:`acall`."""

    def __init__(self, mcp: MCPTool, structured: bool) -> None:
        self.mcp = mcp
        self.structured = structured
        self.__name__ = mcp.name
        self.__doc__ = mcp.description

    def __call__(self, /, **kwargs: Any) -> Any:
        return self._output(self.mcp.call(self.mcp.arguments(kwargs)))

    async def acall(self, /, **kwargs: Any) -> Any:
        return self._output(await self.mcp.acall(self.mcp.arguments(kwargs)))

    def _output(self, result: CallToolResult) -> Any:
        if self.structured and result.structured_content is not None:
            return result.structured_content
        return result_text(result)


class Tool(_DSPyTool):  # type: ignore[misc]  # DSPy is untyped
    """A ``dspy.Tool`` whose ``acall`` awaits the MCP call, and which leaves out an optional argument given as None."""

    def _validate_and_parse_args(self, /, **kwargs: Any) -> Any:
        required = set(self.func.mcp.required)
        kept = {k: v for k, v in kwargs.items() if v is not None or k in required}
        return super()._validate_and_parse_args(**kept)

    async def _acall(self, /, **kwargs: Any) -> Any:
        parsed = self._validate_and_parse_args(**kwargs)
        return await self.func.acall(**parsed)

    acall = _with_callbacks(_acall)  # DSPy's callbacks see it as they see dspy.Tool.acall


def tools(source: Any, timeout: float | None = None, *, on_progress: ToolProgress | None = None,
          structured: bool = False) -> list[Any]:
    """Every tool of ``source`` (an :class:`mcpcall.Client` or :class:`mcpcall.ToolRegistry`) as a ``dspy.Tool``.

    ``timeout`` bounds the listing and is every call's default; ``on_progress``
    gets every call's progress; with ``structured``, a result with structured
    content returns it instead of the text.
    """
    return [_tool(mcp, structured) for mcp in mcp_tools(source, timeout, on_progress=on_progress)]


def _tool(mcp: MCPTool, structured: bool) -> Any:
    args = arguments(mcp.schema)
    descriptions = {name: sub["description"] for name, sub in args.items() if isinstance(sub.get("description"), str)}
    return Tool(_Call(mcp, structured), name=mcp.name, desc=mcp.description, args=args,
                arg_types=dict.fromkeys(args, Any), arg_desc=descriptions)


# ---------------------------------------------------------------- arguments


def arguments(schema: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The per-argument JSON Schemas of an object ``schema``, as ``dspy.Tool``'s ``args``.

    Local ``$ref``\\ s are inlined (at most :data:`_MAX_NODES` schemas and
    :data:`_MAX_VALUES` values in one argument, :data:`_MAX_TOOL_NODES` and
    :data:`_MAX_TOOL_VALUES` in all of them: past that, what is left accepts
    anything); an optional argument gets ``"default": None``
    unless it has a default (a required one loses its default: DSPy would take
    it as optional); a schema the JSON Schema meta-schema refuses (an older
    draft's form) is replaced by one that accepts anything, keeping its
    description, so DSPy's check of the argument cannot fail on the schema itself.
    """
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    required = schema.get("required")
    required = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    out: dict[str, dict[str, Any]] = {}
    left = [_MAX_TOOL_NODES, _MAX_TOOL_VALUES]
    targets: dict[str, Any] = {}
    for name, sub in props.items():
        if not isinstance(name, str):
            continue
        if not isinstance(sub, Mapping):
            arg: Any = {}
        elif left[0] > 0 and left[1] > 0:
            given = [min(_MAX_NODES, left[0]), min(_MAX_VALUES, left[1])]
            budget = list(given)
            arg = _inlined(sub, schema, (), budget, 0, targets)
            left = [left[0] - given[0] + max(budget[0], 0), left[1] - given[1] + max(budget[1], 0)]
        else:  # the tool's budget is spent: the argument accepts anything, its description kept
            description = sub.get("description")
            arg = {"description": description} if isinstance(description, str) else {}
        arg = arg if isinstance(arg, dict) else {}
        if not _valid(arg):
            arg = {k: arg[k] for k in ("description", "default") if k in arg}
        if name in required:
            arg.pop("default", None)
        else:
            arg.setdefault("default", None)
        out[name] = arg
    return out


_NAME_MAPS = frozenset({"properties", "$defs", "definitions", "dependentSchemas"})  # name -> schema, not keywords
_DATA = frozenset({"enum", "const", "default", "examples"})  # values, copied as they are
# Keywords of schema identity that would send DSPy's check elsewhere: a $schema another draft's meta-schema
# (a schema valid here refused there), $id a new base for $refs already inlined, $dynamicRef one unresolvable.
_DROPPED = frozenset({"$schema", "$id", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor",
                      "$vocabulary"})
_TEXT_UNIT = 16  # characters of a string that count as one value against the budget


def _inlined(node: Any, root: Mapping[str, Any], refs: tuple[str, ...], budget: list[int], depth: int,
             targets: dict[str, Any]) -> Any:
    r"""``node`` (a copy) with every local ``$ref`` replaced by its target; a recursive or unknown one by ``{}``.

    ``budget`` (the schemas, then the values, left for the whole argument; a
    string counts a value per :data:`_TEXT_UNIT` characters) bounds what is
    copied: a server's ``$ref``\ s that fan out (each definition naming the
    next twice) would otherwise be copied 2^depth times. Past it, or past
    :data:`_MAX_NESTING` levels, a node accepts anything. The keywords of
    :data:`_UNCHECKED` and :data:`_DROPPED` are left out of every schema (a
    property may still be called ``format``); a ``required`` or ``type`` list
    keeps each of its strings once, nothing else (the meta-schema's
    ``uniqueItems`` compares a mixed list pair by pair). ``targets`` keeps what each ``$ref`` named.
    """
    if not isinstance(node, Mapping):
        return _data(node, budget, depth)
    budget[0] -= 1
    budget[1] -= 1
    if budget[0] < 0 or budget[1] < 0 or depth > _MAX_NESTING:
        return {}
    rest: dict[str, Any] = {}
    for key, value in node.items():
        if not isinstance(key, str) or key == "$ref" or key in _UNCHECKED or key in _DROPPED:
            continue
        if key in _NAME_MAPS and isinstance(value, Mapping):
            rest[key] = {name: _inlined(sub, root, refs, budget, depth + 1, targets) for name, sub in value.items()}
        elif key in _DATA:
            rest[key] = _data(value, budget, depth + 1)
        elif key in ("required", "type") and isinstance(value, list):
            rest[key] = _data(unique_strings(value), budget, depth + 1)
        elif key == "dependentRequired" and isinstance(value, Mapping):
            rest[key] = {name: _data(unique_strings(names) if isinstance(names, list) else names, budget, depth + 1)
                         for name, names in value.items()}
        elif isinstance(value, list):
            rest[key] = [_inlined(item, root, refs, budget, depth + 1, targets) for item in value]
        else:
            rest[key] = _inlined(value, root, refs, budget, depth + 1, targets)
    ref = node.get("$ref")
    if isinstance(ref, str):
        if ref not in targets:
            targets[ref] = resolve_pointer(root, ref)
        target = targets[ref]
        if target is None or not isinstance(target, Mapping) or ref in refs or len(refs) >= _MAX_REF_DEPTH:
            return rest  # accepts anything but what its other keywords say
        inlined = _inlined(target, root, (*refs, ref), budget, depth + 1, targets)
        return {**inlined, **rest} if isinstance(inlined, dict) else rest
    return rest


def _data(value: Any, budget: list[int], depth: int) -> Any:
    """``value`` copied as a value (JSON only), within the budget and :data:`_MAX_NESTING`: past them, None."""
    budget[1] -= 1 + (len(value) // _TEXT_UNIT if isinstance(value, str) else 0)
    if budget[1] < 0 or depth > _MAX_NESTING:
        return None
    if isinstance(value, Mapping):
        return {key: _data(item, budget, depth + 1) for key, item in value.items() if isinstance(key, str)}
    if isinstance(value, list):
        return [_data(item, budget, depth + 1) for item in value]
    return value if value is None or isinstance(value, (str, int, float, bool)) else None


def _valid(schema: Any) -> bool:
    try:
        Draft202012Validator.check_schema(schema)
    except (SchemaError, RecursionError):  # a schema deeper than the check recurses is none DSPy can use either
        return False
    return True


__all__ = ["Tool", "arguments", "tools"]
