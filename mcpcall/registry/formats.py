"""MCP tools in the shapes LLM APIs want, their tool calls parsed, tool messages built. Pure: no I/O.

Tools out (each exporter takes ``(exposed name, Tool)`` pairs and never touches the Tool's dicts):

=====================  ===============================================================================
OpenAI Chat            ``{"type": "function", "function": {"name", "description", "parameters"}}``;
                       ``strict`` left out (Chat Completions is non-strict by default)
OpenAI Responses       ``{"type": "function", "name", "description", "parameters", "strict": False}``;
                       Responses turns a tool without ``strict`` into strict mode (every property
                       required, ``additionalProperties: false``), which most MCP schemas do not meet
Anthropic              ``{"name", "description", "input_schema"}``
Gemini                 ``{"name", "description", "parameters"}`` (an OpenAPI 3.0 subset, converted as
                       below); ``wrap=True`` gives ``[{"function_declarations": [...]}]``, the ``tools``
                       entry; ``json_schema=True`` sends ``parameters_json_schema`` (plain JSON Schema) instead
plain JSON Schema      ``{"name", "description", "input_schema"}``, the schema as the server sent it
=====================  ===============================================================================

The description is the tool's description, else its title, else ``""``.

Schema adjustments, only where a provider requires them:

==================  =============================================================================
OpenAI, Anthropic   the root must be ``{"type": "object", ...}``: a missing or non-object
                    ``inputSchema`` becomes ``{"type": "object", "properties": {}}``; ``type`` is
                    added when missing, ``properties: {}`` too
Anthropic (OpenAI)  ``oneOf``/``anyOf``/``allOf`` are refused at the root ("input_schema does not
                    support oneOf, allOf, or anyOf at the top level"): their branches' properties
                    are merged into the root; ``required`` keeps what every branch (anyOf/oneOf) or
                    any branch (allOf) requires. The server still checks the real schema.
Gemini              ``parameters`` is a Schema message (proto JSON): an unknown key is an error.
                    Kept: type, format, title, description, nullable, enum, items, minItems,
                    maxItems, properties, required, minProperties, maxProperties, minLength,
                    maxLength, pattern, minimum, maximum, anyOf, default, example. Everything else is
                    dropped ($schema, $id, $defs, definitions, additionalProperties, examples,
                    const, oneOf, allOf, not, if/then/else, patternProperties, exclusive bounds,
                    multipleOf, uniqueItems, ...). And:

                    - local ``$ref`` (``#/$defs/X``, any JSON pointer) inlined; a recursive one, one
                      deeper than ``max_ref_depth`` or a non-local one becomes a free-form value;
                    - ``type`` is one upper-case name (STRING, NUMBER, INTEGER, BOOLEAN, ARRAY,
                      OBJECT); a type list with ``"null"`` gives ``nullable: true``, several other
                      types an ``anyOf`` of them; ``anyOf``/``oneOf`` branches of type null set
                      ``nullable``, a single remaining branch is merged in, several stay ``anyOf``
                      (so oneOf is read as anyOf); ``allOf`` branches are merged;
                    - ``const`` becomes a one-value ``enum``; ``enum`` is allowed on STRING only
                      ("enum: only allowed for STRING type"), so a non-string enum is dropped and its
                      values are named in the description; ``examples[0]`` becomes ``example``;
                    - ``format`` is kept only where the Developer API accepts it (STRING: enum,
                      date-time; NUMBER: float, double; INTEGER: int32, int64);
                    - ``properties``/``required`` only on OBJECT ("only allowed for OBJECT type");
                      ``required`` names only properties that exist; an OBJECT needs non-empty
                      ``properties`` ("should be non-empty for OBJECT type"), so a free-form object
                      loses its type (any value), and a tool without parameters sends no ``parameters``;
                    - an ARRAY always has ``items`` (a free-form one when the schema has none).

                    Not done: renaming properties Gemini may refuse (Vertex asks for
                    ``[A-Za-z_][A-Za-z0-9_]*``). ``json_schema=True`` avoids all of this loss.
==================  =============================================================================

Tool calls in: :func:`parse_tool_call` reads an OpenAI Chat tool call, a Responses
``function_call`` item or an Anthropic ``tool_use`` block, as dicts or SDK objects.
Arguments that are not a JSON object are reported in :attr:`ParsedCall.error`, never turned into ``{}``:
a missing or null ``arguments`` (``input``), blank text, and a JSON object naming a key twice are
errors too. Only an empty ``arguments`` string ``""`` (OpenAI Chat, Responses) reads as ``{}``: models
send it for tools without parameters (Claude on Bedrock, pydantic/pydantic-ai#1407; OpenAI-compatible
endpoints such as OpenRouter, sigoden/aichat#1217), and it is what the joined stream deltas of such a
call come to (Anthropic streams empty ``partial_json`` for them, anthropics/anthropic-sdk-go#189).
An Anthropic ``input`` must be an object.

Tool messages out: :func:`tool_message` answers a call in its own API's shape;
:func:`result_text` is what an LLM should read of a result; :func:`unknown_tool_text`
names the closest tools. The registry phrases every other failure itself
(:func:`mcpcall.registry.servers.model_text`: an error's kind, never its text).
A tool message holds at most :data:`MAX_TEXT_CHARS` characters of text (the rest is cut, and a
note says how much), and an Anthropic image block at most :data:`ANTHROPIC_IMAGE_MAX_BASE64`
characters of base64 (a larger image is described in text instead).
"""

from __future__ import annotations

import base64
import copy
import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any, Literal

from ..errors import InvalidRequest
from ..types import AudioContent, CallToolResult, EmbeddedResource, ImageContent, ResourceLink, TextContent, Tool
from ..types._record import record
from .failures import one_line
from .gemini import GEMINI_SCHEMA_KEYS, gemini_schema, resolve_pointer

__all__ = [
    "ANTHROPIC_IMAGE_MAX_BASE64",
    "ANTHROPIC_IMAGE_TYPES",
    "GEMINI_SCHEMA_KEYS",
    "MAX_TEXT_CHARS",
    "ParsedCall",
    "anthropic_blocks",
    "gemini_schema",
    "object_schema",
    "parse_tool_call",
    "result_text",
    "to_anthropic_tools",
    "to_gemini_tools",
    "to_json_schema",
    "to_openai_tools",
    "tool_description",
    "tool_message",
    "unknown_tool_text",
]

Entry = tuple[str, Tool]

ANTHROPIC_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""The image media types an Anthropic ``image`` block accepts."""

ANTHROPIC_IMAGE_MAX_BASE64 = 5 * 1024 * 1024
"""The largest image, in base64 characters, put in an Anthropic block (the API refuses images over 5 MB)."""

MAX_TEXT_CHARS = 100_000
"""The most characters of text a tool message carries (one LLM turn should not swallow a 50 MB result)."""

_EXCERPT = 40
_MAX_REF_DEPTH = 8  # $refs followed in a row (and combinators nested) at the root of an object schema
_MAX_MERGE_WORK = 10_000  # per branch merged: 4, and its keys, properties and required names


# ---------------------------------------------------------------- tools out


def tool_description(tool: Tool) -> str:
    """The tool's description, else its title, else ``""``."""
    title = tool.title or tool.annotations.get("title")
    return tool.description or (title if isinstance(title, str) else "") or ""


def object_schema(schema: Any) -> dict[str, Any]:
    r"""A deep copy of ``schema`` fit for OpenAI and Anthropic: an object schema, no combinator at the root.

    A local ``$ref`` at the root, or as a root ``allOf``/``anyOf``/``oneOf``
    branch, is inlined before the branches are merged (a recursive, unknown or
    non-local one is left as it is, and adds nothing); ``$defs`` and
    ``definitions`` stay, so the ``$ref``\ s inside the merged properties still resolve.
    """
    if not isinstance(schema, Mapping):
        return {"type": "object", "properties": {}}
    out, refs = _inlined(schema, schema, ())
    kind = out.get("type", "object")
    if kind != "object" and not (isinstance(kind, list) and "object" in kind):
        return {"type": "object", "properties": {}}
    out["type"] = "object"
    _flatten(out, schema, refs, 0, [_MAX_MERGE_WORK])  # on shallow copies, sharing the rest with schema
    properties = out.pop("properties", None)
    out = copy.deepcopy(out)  # copied once, at the end; each property on its own (none shares a dict with another)
    out["properties"] = {name: copy.deepcopy(sub) for name, sub in properties.items()} if isinstance(properties, dict) else {}
    return out


def _inlined(node: Mapping[str, Any], root: Mapping[str, Any], refs: tuple[str, ...]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``node`` with its ``$ref`` chain inlined (the target, the node's own keywords over it), and the refs followed.

    Stops, leaving ``$ref`` in place, at a reference that is recursive, unknown,
    non-local or deeper than :data:`_MAX_REF_DEPTH`. Shares values with ``root``: copy before changing them.
    """
    out = dict(node)
    while "$ref" in out and len(refs) < _MAX_REF_DEPTH:
        ref = out["$ref"]
        target = resolve_pointer(root, ref)
        if target is None or ref in refs:
            break
        refs = (*refs, ref)
        out = {**target, **{key: value for key, value in out.items() if key != "$ref"}}
    return out, refs


def _flatten(out: dict[str, Any], root: Mapping[str, Any], refs: tuple[str, ...], depth: int, budget: list[int]) -> None:
    r"""Merge ``out``'s ``allOf``/``anyOf``/``oneOf`` branches into it (``$ref``\ s inlined, nested combinators too).

    ``out`` and each branch are shallow copies (what is changed is never the schema's own). Each branch
    spends its keys, properties and required names from ``budget``: once it is spent, the branches left are
    not merged (and add nothing to ``required``), so ``$ref``\ s naming each other several times over (``fan **
    depth`` paths) cost no more than a schema of their size.
    """
    for key in ("allOf", "anyOf", "oneOf"):
        branches = out.pop(key, None)
        if not isinstance(branches, list):
            continue
        merged = []
        complete = True
        for branch in branches:
            if not isinstance(branch, Mapping):
                continue
            if budget[0] <= 0:
                complete = False
                break
            plain, followed = _inlined(branch, root, refs)
            budget[0] -= 4 + len(plain) + _count(plain.get("properties")) + _count(plain.get("required"))
            if depth < _MAX_REF_DEPTH:
                _flatten(plain, root, followed, depth + 1, budget)
            merged.append(plain)
        _merge_branches(out, merged, every=key != "allOf", required=complete)


def _count(value: Any) -> int:
    return len(value) if isinstance(value, (Mapping, list)) else 0


def _merge_branches(out: dict[str, Any], branches: Sequence[Mapping[str, Any]], *, every: bool,
                    required: bool = True) -> None:
    """Merge ``branches``' properties into ``out``; required: in every branch (``every``) or in any
    (none of theirs when ``required`` is false: not every branch was read)."""
    properties = out.get("properties")
    properties = dict(properties) if isinstance(properties, Mapping) else {}
    names_required = out.get("required")
    required_names = [name for name in names_required if isinstance(name, str)] if isinstance(names_required, list) else []
    sets = []
    for branch in branches:
        props = branch.get("properties")
        for name, sub in props.items() if isinstance(props, Mapping) else ():
            properties.setdefault(name, sub)
        names = branch.get("required")
        sets.append({name for name in names if isinstance(name, str)} if isinstance(names, list) else set())
    extra = set.intersection(*sets) if every and sets else set().union(*sets) if sets else set()
    if required:
        required_names += sorted(extra - set(required_names))
    out["properties"] = properties
    if required_names:
        out["required"] = required_names


def to_openai_tools(entries: Sequence[Entry], api: Literal["chat", "responses"] = "chat") -> list[dict[str, Any]]:
    """OpenAI function tools: Chat Completions (``api="chat"``) or Responses (``api="responses"``, ``strict: False``)."""
    if api == "chat":
        return [{"type": "function", "function": {"name": name, "description": tool_description(tool),
                                                  "parameters": object_schema(tool.input_schema)}}
                for name, tool in entries]  # fmt: skip
    if api == "responses":
        return [{"type": "function", "name": name, "description": tool_description(tool),
                 "parameters": object_schema(tool.input_schema), "strict": False}
                for name, tool in entries]  # fmt: skip
    raise InvalidRequest(f"api must be 'chat' or 'responses', not {api!r}")


def to_anthropic_tools(entries: Sequence[Entry]) -> list[dict[str, Any]]:
    """Anthropic Messages API tools: ``{"name", "description", "input_schema"}``."""
    return [{"name": name, "description": tool_description(tool), "input_schema": object_schema(tool.input_schema)}
            for name, tool in entries]  # fmt: skip


def to_json_schema(entries: Sequence[Entry]) -> list[dict[str, Any]]:
    """``{"name", "description", "input_schema"}`` with the schema exactly as the server sent it (a deep copy)."""
    return [{"name": name, "description": tool_description(tool), "input_schema": copy.deepcopy(dict(tool.input_schema))}
            for name, tool in entries]  # fmt: skip


def to_gemini_tools(
    entries: Sequence[Entry], *, wrap: bool = False, json_schema: bool = False, max_ref_depth: int = 8
) -> list[dict[str, Any]]:
    """Gemini function declarations ``{"name", "description", "parameters"}``.

    ``wrap=True`` returns ``[{"function_declarations": [...]}]``, ready to be the
    request's ``tools`` (else the caller wraps the list). ``json_schema=True``
    sends the object schema unconverted as ``parameters_json_schema`` (which
    Gemini reads as JSON Schema) instead of ``parameters``.
    """
    declarations = []
    for name, tool in entries:
        declaration: dict[str, Any] = {"name": name, "description": tool_description(tool)}
        if json_schema:
            declaration["parameters_json_schema"] = object_schema(tool.input_schema)
        else:
            parameters = gemini_schema(tool.input_schema, max_ref_depth=max_ref_depth)
            if parameters.get("properties"):  # no parameters: leave the field unset, as Gemini asks
                declaration["parameters"] = parameters
        declarations.append(declaration)
    return [{"function_declarations": declarations}] if wrap else declarations


# ---------------------------------------------------------------- tool calls in


@record
class ParsedCall:
    """One tool call an LLM made: which API it came from, its id, the exposed name, the arguments.

    ``arguments`` is None when they were not a JSON object; ``error`` then says
    what was wrong (the registry answers the call with an error message).
    """

    kind: Literal["openai", "responses", "anthropic"]
    call_id: str
    name: str
    arguments: dict[str, Any] | None = field(default=None, hash=False)
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the arguments were read (``arguments`` is a dict)."""
        return self.arguments is not None


_EXPECTED = (
    "an OpenAI Chat tool call ({'id', 'type': 'function', 'function': {'name', 'arguments'}}), "
    "a Responses function call ({'type': 'function_call', 'call_id', 'name', 'arguments'}) "
    "or an Anthropic tool_use block ({'type': 'tool_use', 'id', 'name', 'input'})"
)
_FIELDS = ("type", "id", "call_id", "name", "arguments", "input", "function")


def _fields(value: Any) -> dict[str, Any] | None:
    """A dict, an SDK model (``model_dump()``) or an object's attributes, as a dict."""
    if isinstance(value, Mapping):
        return dict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            dumped = dump()
        except Exception:  # noqa: BLE001 - a foreign object: fall back to its attributes
            dumped = None
        if isinstance(dumped, Mapping):
            return dict(dumped)
    found = {key: getattr(value, key) for key in _FIELDS if hasattr(value, key)}
    return found or None


def _describe(value: Any, fields: Mapping[str, Any] | None) -> str:
    if fields is None:
        return type(value).__name__
    return f"{type(value).__name__} with keys {sorted(map(str, fields))[:10]}"


def parse_tool_call(call: Any) -> ParsedCall:
    """Read a tool call of any of the three APIs (dict or SDK object).

    Raises :class:`~mcpcall.errors.InvalidRequest` (a TypeError) for something
    that is none of them; bad arguments are reported in the result instead.
    """
    fields = _fields(call)
    kind = fields.get("type") if fields is not None else None
    if fields is not None and kind == "tool_use":
        return _parsed(call, fields, "anthropic", "id", fields.get("input", _MISSING), from_json=False)
    if fields is not None and kind == "function_call":
        return _parsed(call, fields, "responses", "call_id", fields.get("arguments", _MISSING), from_json=True)
    function = _fields(fields.get("function")) if fields is not None and kind in ("function", None) else None
    if fields is not None and function is not None:
        merged = {**fields, "name": function.get("name")}
        return _parsed(call, merged, "openai", "id", function.get("arguments", _MISSING), from_json=True)
    raise InvalidRequest(f"expected {_EXPECTED}; got {_describe(call, fields)}")


def _parsed(
    call: Any, fields: Mapping[str, Any], kind: Literal["openai", "responses", "anthropic"], id_key: str,
    arguments: Any, *, from_json: bool,
) -> ParsedCall:  # fmt: skip
    call_id, name = fields.get(id_key), fields.get("name")
    if not isinstance(call_id, str) or not isinstance(name, str):
        missing = id_key if not isinstance(call_id, str) else "name"
        raise InvalidRequest(f"a {kind} tool call needs a string {missing!r}; got {_describe(call, fields)}")
    parsed, error = _arguments(arguments, from_json)
    return ParsedCall(kind, call_id, name, parsed, error)


_MISSING: Any = object()
_NO_ARGUMENTS = "send {} for a tool without arguments"


class _DuplicateKey(ValueError):
    pass


def _reject_constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(f"the arguments name the key {one_line(key, 60)!r} twice (JSON keys must be unique)")
        out[key] = value
    return out


def _arguments(value: Any, from_json: bool) -> tuple[dict[str, Any] | None, str | None]:
    field_name = "arguments" if from_json else "input"
    if value is _MISSING:
        return None, f"no arguments were given (the tool call has no {field_name!r}); {_NO_ARGUMENTS}"
    if value is None:
        return None, f"no arguments were given ({field_name!r} is null); {_NO_ARGUMENTS}"
    if isinstance(value, Mapping):
        return dict(value), None
    if not isinstance(value, str) or not from_json:
        return None, f"the arguments are {type(value).__name__}, not a JSON object"
    if value == "":  # a tool call without arguments, as some providers send it (see the module docstring)
        return {}, None
    if not value.strip():
        return None, f"the arguments are blank; {_NO_ARGUMENTS}"
    try:
        parsed = json.loads(value, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        return None, str(exc)
    except json.JSONDecodeError as exc:
        start = max(0, exc.pos - _EXCERPT // 2)
        excerpt = value[start : start + _EXCERPT]
        return None, (f"the arguments are not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
                      f" (near {excerpt!r})")  # fmt: skip
    except ValueError as exc:
        return None, f"the arguments are not valid JSON: {exc}"
    if not isinstance(parsed, dict):
        return None, f"the arguments must be a JSON object, not {type(parsed).__name__} ({value.strip()[:_EXCERPT]!r})"
    return parsed, None


# ---------------------------------------------------------------- tool messages out


def tool_message(parsed: ParsedCall, *, text: str, is_error: bool, result: CallToolResult | None = None) -> dict[str, Any]:
    """The message (OpenAI Chat), input item (Responses) or content block (Anthropic) answering ``parsed``.

    OpenAI's formats carry no error flag, so ``"Error: "`` is put before ``text``
    when ``is_error``. Anthropic's ``tool_result`` always has ``is_error``; with
    ``result``, its content blocks are the result's (text, images Anthropic
    takes, everything else described in text), else one text block of ``text``.
    Text past :data:`MAX_TEXT_CHARS` characters is cut, with a note saying how much.
    """
    if parsed.kind in ("openai", "responses"):
        body = _cut(text or "(no content)", MAX_TEXT_CHARS)
        if is_error and not body.startswith("Error"):
            body = "Error: " + body
        if parsed.kind == "openai":
            return {"role": "tool", "tool_call_id": parsed.call_id, "content": body}
        return {"type": "function_call_output", "call_id": parsed.call_id, "output": body}
    blocks = anthropic_blocks(result) if result is not None else []
    if not blocks:  # Anthropic refuses empty text blocks
        blocks = [{"type": "text", "text": _cut(text or "(no content)", MAX_TEXT_CHARS)}]
    return {"type": "tool_result", "tool_use_id": parsed.call_id, "content": blocks, "is_error": bool(is_error)}


def anthropic_blocks(result: CallToolResult, *, max_chars: int = MAX_TEXT_CHARS) -> list[dict[str, Any]]:
    """A result's content as Anthropic ``tool_result`` content blocks (no empty text block).

    At most ``max_chars`` characters of text in all: the text past it is cut and
    a last text block says how many characters were. An image over
    :data:`ANTHROPIC_IMAGE_MAX_BASE64` base64 characters is described in text instead.
    """
    texts: list[str | dict[str, Any]] = []
    if not any(isinstance(b, TextContent) and b.text for b in result.content) and result.structured_content is not None:
        texts.append(_compact(result.structured_content))
    for block in result.content:
        if (isinstance(block, ImageContent) and block.mime_type in ANTHROPIC_IMAGE_TYPES
                and _base64_length(len(block.data)) <= ANTHROPIC_IMAGE_MAX_BASE64):  # fmt: skip
            data = base64.b64encode(block.data).decode("ascii")
            texts.append({"type": "image", "source": {"type": "base64", "media_type": block.mime_type, "data": data}})
            continue
        text = _block_text(block)
        if text:
            texts.append(text)
    blocks: list[dict[str, Any]] = []
    budget, cut = max_chars, 0
    for item in texts:
        if not isinstance(item, str):
            blocks.append(item)
        elif budget <= 0:
            cut += len(item)
        else:
            if len(item) > budget:
                item, cut = item[:budget], cut + len(item) - budget
            blocks.append({"type": "text", "text": item})
            budget -= len(item)
    if cut:
        blocks.append({"type": "text", "text": _cut_note(cut)})
    return blocks


def _base64_length(size: int) -> int:
    return (size + 2) // 3 * 4


def _cut_note(count: int) -> str:
    return f"[… {count} more characters cut]"


def _cut(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and a note saying how many more were cut."""
    return text if len(text) <= limit else text[:limit] + "\n" + _cut_note(len(text) - limit)


def _compact(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except RecursionError:  # a server's value nested deeper than Python recurses
        return "(nested too deeply to show)"


def _block_text(block: Any) -> str:
    """What an LLM reads of one content block."""
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, (ImageContent, AudioContent)):
        kind = block.type
        label = block.mime_type if block.mime_type.startswith(kind + "/") else f"{kind} {block.mime_type}"
        return f"[{label}, {len(block.data)} bytes]"
    if isinstance(block, ResourceLink):
        label = block.title or block.name
        about = f": {block.description}" if block.description else ""
        return f"[resource link {label!r} {block.uri}{about}]"
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if resource.text is not None:
            return f"[resource {resource.uri}]\n{resource.text}"
        mime = f", {resource.mime_type}" if resource.mime_type else ""
        return f"[resource {resource.uri}{mime}, {len(resource.data)} bytes]"
    return f"[{getattr(block, 'type', 'unknown')} content]"


def result_text(result: CallToolResult, *, max_chars: int = MAX_TEXT_CHARS) -> str:
    """What an LLM should read of a result: text blocks, structured content as JSON when there is no text,
    other blocks described (``[image/png, 1234 bytes]``); never empty. At most ``max_chars`` characters
    (then a note ``[… N more characters cut]``)."""
    parts = [text for text in (_block_text(block) for block in result.content) if text]
    has_text = any(isinstance(block, TextContent) and block.text for block in result.content)
    if not has_text and result.structured_content is not None:
        parts.insert(0, _compact(result.structured_content))
    return _cut("\n".join(parts) or "(no content)", max_chars)


# ---------------------------------------------------------------- failures, in one line


def unknown_tool_text(name: str, known: Sequence[str]) -> str:
    """No tool is called ``name``: say so, with up to three close names."""
    scored = []
    for candidate in known:
        score = difflib.SequenceMatcher(None, name, candidate).ratio()
        if candidate.endswith(name) and len(name) >= 3:  # the bare tool name, without prefix and server
            score = max(score, 0.9)
        if score >= 0.75:
            scored.append((-score, candidate))
    close = [candidate for _, candidate in sorted(scored)[:3]]
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return f"There is no tool named {one_line(name, 100)!r}.{hint}"
