"""Provider formats (mcpcall.registry.formats): tools out, tool calls in, tool messages out. Pure, no I/O."""

from __future__ import annotations

import base64
import copy
import json
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpcall.errors import InvalidRequest
from mcpcall.registry import (
    GEMINI_SCHEMA_KEYS,
    ParsedCall,
    gemini_schema,
    object_schema,
    parse_tool_call,
    result_text,
    to_anthropic_tools,
    to_gemini_tools,
    to_json_schema,
    to_openai_tools,
    tool_message,
    unknown_tool_text,
)
from mcpcall.types import CallToolResult, parse_call_result, parse_tool

QUICK = settings(max_examples=200, deadline=None)
GEMINI_TYPES = {"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"}

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "City name"}, "days": {"type": "integer"}},
    "required": ["city"],
    "additionalProperties": False,
    "$schema": "http://json-schema.org/draft-07/schema#",
}


def tool(name: str = "weather", schema: Any = None, **extra: Any) -> Any:
    wire = {"name": name, "inputSchema": copy.deepcopy(WEATHER) if schema is None else schema, **extra}
    return parse_tool(wire)


# ---------------------------------------------------------------- tools out


def test_openai_chat_shape() -> None:
    out = to_openai_tools([("mcp__w__weather", tool(description="Weather"))])
    assert out == [{"type": "function", "function": {"name": "mcp__w__weather", "description": "Weather", "parameters": WEATHER}}]
    assert "strict" not in out[0]["function"]


def test_openai_responses_shape_is_not_strict() -> None:
    out = to_openai_tools([("n", tool(description="Weather"))], api="responses")
    assert out == [{"type": "function", "name": "n", "description": "Weather", "parameters": WEATHER, "strict": False}]
    with pytest.raises(InvalidRequest):
        to_openai_tools([], api="assistants")  # type: ignore[arg-type]


def test_anthropic_and_json_schema_shapes() -> None:
    assert to_anthropic_tools([("n", tool(description="d"))]) == [{"name": "n", "description": "d", "input_schema": WEATHER}]
    raw = {"type": "string"}  # plain JSON Schema keeps even what providers refuse
    assert to_json_schema([("n", tool(schema=raw))]) == [{"name": "n", "description": "", "input_schema": raw}]


def test_description_falls_back_to_title() -> None:
    assert to_anthropic_tools([("n", tool(title="Weather now"))])[0]["description"] == "Weather now"
    assert to_anthropic_tools([("n", tool(annotations={"title": "T"}))])[0]["description"] == "T"
    assert to_anthropic_tools([("n", tool(description="D", title="T"))])[0]["description"] == "D"
    assert to_anthropic_tools([("n", tool())])[0]["description"] == ""


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (None, {"type": "object", "properties": {}}),
        ({}, {"type": "object", "properties": {}}),
        ({"type": "string"}, {"type": "object", "properties": {}}),
        ({"properties": {"a": {}}}, {"type": "object", "properties": {"a": {}}}),
        ({"type": ["object", "null"], "properties": {"a": {}}}, {"type": "object", "properties": {"a": {}}}),
    ],
)
def test_object_schema_root(schema: Any, expected: dict[str, Any]) -> None:
    assert object_schema(schema) == expected


def test_top_level_combinators_are_merged() -> None:
    schema = {
        "type": "object",
        "properties": {"mode": {"type": "string"}},
        "anyOf": [
            {"properties": {"id": {"type": "string"}}, "required": ["id", "mode"]},
            {"properties": {"path": {"type": "string"}}, "required": ["path", "mode"]},
        ],
        "allOf": [{"properties": {"x": {"type": "number"}}, "required": ["x"]}],
    }
    out = object_schema(schema)
    assert not {"anyOf", "oneOf", "allOf"} & set(out)
    assert set(out["properties"]) == {"mode", "id", "path", "x"}
    assert sorted(out["required"]) == ["mode", "x"]


def test_root_refs_in_combinators_are_inlined() -> None:
    schema = {
        "properties": {"a": {}},
        "allOf": [{"$ref": "#/$defs/X"}],
        "$defs": {"X": {"properties": {"b": {"$ref": "#/$defs/B"}}, "required": ["b"]}, "B": {"type": "string"}},
    }
    before = copy.deepcopy(schema)
    out = object_schema(schema)
    assert schema == before
    assert out["properties"] == {"a": {}, "b": {"$ref": "#/$defs/B"}} and out["required"] == ["b"]
    assert out["$defs"] == schema["$defs"]  # kept: the nested $ref still resolves
    assert "allOf" not in out
    out["properties"]["b"]["x"] = 1  # a copy, not shared with $defs or the input
    assert "x" not in out["$defs"]["X"]["properties"]["b"] and schema == before


def test_root_ref_chains_anyof_and_definitions() -> None:
    schema = {
        "$ref": "#/definitions/Args",
        "definitions": {
            "Args": {"type": "object", "anyOf": [{"$ref": "#/definitions/ById"}, {"$ref": "#/definitions/ByPath"}]},
            "ById": {"$ref": "#/definitions/Id", "required": ["id", "mode"]},
            "Id": {"properties": {"id": {"type": "string"}, "mode": {}}},
            "ByPath": {"properties": {"path": {}}, "required": ["path", "mode"], "allOf": [{"$ref": "#/definitions/Mode"}]},
            "Mode": {"properties": {"mode": {"enum": ["r", "w"]}}, "required": ["mode"]},
        },
    }
    out = object_schema(schema)
    assert "$ref" not in out and not {"anyOf", "oneOf", "allOf"} & set(out)
    assert set(out["properties"]) == {"id", "mode", "path"}
    assert out["required"] == ["mode"]
    assert "definitions" in out and out["type"] == "object"


def test_unknown_and_recursive_root_refs_are_left() -> None:
    schema = {
        "properties": {"a": {}},
        "required": ["a"],
        "oneOf": [{"$ref": "#/$defs/Loop"}, {"$ref": "https://example.com/s.json"}, {"$ref": "#/nope"}],
        "allOf": [{"$ref": "#"}],
        "$defs": {"Loop": {"$ref": "#/$defs/Loop", "properties": {"l": {}}}},
    }
    out = object_schema(schema)
    assert not {"anyOf", "oneOf", "allOf"} & set(out)
    assert set(out["properties"]) == {"a", "l"} and out["required"] == ["a"]
    assert object_schema({"$ref": "#/$defs/Self", "$defs": {"Self": {"$ref": "#/$defs/Self"}}})["properties"] == {}


def test_exports_never_mutate_the_tool() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": "string"}},
              "oneOf": [{"required": ["a"]}]}  # fmt: skip
    t = tool(schema=schema)
    before = copy.deepcopy(dict(t.input_schema))
    for out in (to_openai_tools([("n", t)]), to_anthropic_tools([("n", t)]), to_gemini_tools([("n", t)]),
                to_json_schema([("n", t)]), to_gemini_tools([("n", t)], json_schema=True)):  # fmt: skip
        assert out
    assert dict(t.input_schema) == before
    exported = to_json_schema([("n", t)])[0]["input_schema"]
    exported["properties"]["a"]["x"] = 1
    assert dict(t.input_schema) == before


# ---------------------------------------------------------------- Gemini


def test_gemini_declaration_shapes() -> None:
    out = to_gemini_tools([("n", tool(description="d"))])
    assert out == [{"name": "n", "description": "d", "parameters": {
        "type": "OBJECT",
        "properties": {"city": {"type": "STRING", "description": "City name"}, "days": {"type": "INTEGER"}},
        "required": ["city"],
    }}]  # fmt: skip
    wrapped = to_gemini_tools([("n", tool())], wrap=True)
    assert list(wrapped[0]) == ["function_declarations"] and wrapped[0]["function_declarations"][0]["name"] == "n"
    plain = to_gemini_tools([("n", tool())], json_schema=True)[0]
    assert plain["parameters_json_schema"] == WEATHER and "parameters" not in plain


def test_gemini_tool_without_parameters_has_no_parameters() -> None:
    assert to_gemini_tools([("n", tool(schema={"type": "object"}))]) == [{"name": "n", "description": ""}]
    assert to_gemini_tools([("n", tool(schema={"type": "object", "properties": {}}))]) == [{"name": "n", "description": ""}]


def test_gemini_refs_are_inlined_and_recursion_stops() -> None:
    schema = {
        "type": "object",
        "$defs": {"Node": {"type": "object", "description": "a node",
                           "properties": {"name": {"type": "string"}, "child": {"$ref": "#/$defs/Node"}}}},
        "definitions": {"Color": {"enum": ["red", "green"]}},
        "properties": {"root": {"$ref": "#/$defs/Node"}, "color": {"$ref": "#/definitions/Color"},
                       "far": {"$ref": "https://example.com/x.json"}, "bad": {"$ref": "#/$defs/Missing"}},
    }  # fmt: skip
    out = gemini_schema(schema)
    root = out["properties"]["root"]
    assert root["type"] == "OBJECT" and root["description"] == "a node"
    assert root["properties"]["child"] == {}  # the recursive one: any value (an OBJECT needs properties)
    assert out["properties"]["color"] == {"type": "STRING", "enum": ["red", "green"]}
    assert out["properties"]["far"] == {} and out["properties"]["bad"] == {}


def test_gemini_ref_depth_limit() -> None:
    defs = {f"D{i}": {"type": "object", "properties": {"next": {"$ref": f"#/$defs/D{i + 1}"}}} for i in range(20)}
    defs["D20"] = {"type": "string"}
    schema = {"type": "object", "$defs": defs, "properties": {"start": {"$ref": "#/$defs/D0"}}}
    out = gemini_schema(schema, max_ref_depth=3)
    node = out["properties"]["start"]
    for _ in range(2):
        node = node["properties"]["next"]
    assert node["properties"]["next"] == {}


def test_gemini_nullable_const_enum_format() -> None:
    schema = {"type": "object", "properties": {
        "a": {"type": ["string", "null"], "format": "uri"},
        "b": {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "maybe", "default": None},
        "c": {"const": "fixed"},
        "d": {"type": "integer", "enum": [1, 2], "description": "Size"},
        "e": {"enum": ["x", None]},
        "f": {"type": "string", "format": "date-time"},
        "g": {"type": "number", "format": "double", "exclusiveMinimum": 0, "multipleOf": 0.5},
        "h": {"type": ["string", "integer"]},
        "i": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {"q": {"type": "boolean"}}}]},
        "j": {"type": "null"},
        "k": {"enum": [1, 2]},
    }}  # fmt: skip
    p = gemini_schema(schema)["properties"]
    assert p["a"] == {"type": "STRING", "nullable": True}
    assert p["b"] == {"type": "INTEGER", "description": "maybe", "nullable": True}
    assert p["c"] == {"type": "STRING", "enum": ["fixed"]}
    assert p["d"] == {"type": "INTEGER", "description": "Size (one of: 1, 2)"}
    assert p["e"] == {"type": "STRING", "enum": ["x"], "nullable": True}
    assert p["f"] == {"type": "STRING", "format": "date-time"}
    assert p["g"] == {"type": "NUMBER", "format": "double", "minimum": 0}
    assert p["h"] == {"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]}
    assert p["i"] == {"anyOf": [{"type": "STRING"}, {"type": "OBJECT", "properties": {"q": {"type": "BOOLEAN"}}}]}
    assert p["j"] == {"nullable": True}
    assert p["k"] == {"type": "INTEGER", "description": "One of: 1, 2."}


def test_gemini_objects_arrays_required_allof() -> None:
    schema = {"type": "object", "required": ["a", "missing", "a"], "properties": {
        "a": {"type": "object", "additionalProperties": {"type": "string"}},
        "b": {"type": "array"},
        "c": {"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": True},
        "d": {"type": "string", "properties": {"x": {}}, "required": ["x"], "minLength": 2},
        "e": {"allOf": [{"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
                        {"properties": {"y": {"type": "number"}}, "required": ["y"]}]},
        "f": {"type": "object", "properties": {"x": {"type": "string"}}, "anyOf": [{"required": ["x"]}]},
    }}  # fmt: skip
    out = gemini_schema(schema)
    p = out["properties"]
    assert out["required"] == ["a"]
    assert p["a"] == {"description": "A JSON object."}
    assert p["b"] == {"type": "ARRAY", "items": {}}
    assert p["c"] == {"type": "ARRAY", "items": {"type": "STRING"}, "minItems": 1}
    assert p["d"] == {"type": "STRING", "minLength": 2}
    assert p["e"] == {"type": "OBJECT", "properties": {"x": {"type": "STRING"}, "y": {"type": "NUMBER"}}, "required": ["x", "y"]}
    assert p["f"] == {"type": "OBJECT", "properties": {"x": {"type": "STRING"}}}


def walk_gemini(node: Any, path: str = "$") -> None:
    """Assert ``node`` is a Schema Gemini accepts (as far as its documented rules and errors go)."""
    assert isinstance(node, dict), path
    assert set(node) <= GEMINI_SCHEMA_KEYS, (path, set(node) - GEMINI_SCHEMA_KEYS)
    kind = node.get("type")
    assert kind is None or kind in GEMINI_TYPES, (path, kind)
    if "enum" in node:
        assert kind == "STRING" and node["enum"] and all(isinstance(v, str) for v in node["enum"]), path
    if "properties" in node or "required" in node:
        assert kind == "OBJECT", path
    if kind == "OBJECT":
        assert node.get("properties"), path
        assert set(node.get("required", ())) <= set(node["properties"]), path
    if kind == "ARRAY":
        assert "items" in node, path
    if "format" in node:
        assert (kind, node["format"]) in {("STRING", "enum"), ("STRING", "date-time"), ("NUMBER", "float"),
                                          ("NUMBER", "double"), ("INTEGER", "int32"), ("INTEGER", "int64")}, path  # fmt: skip
    for name, sub in node.get("properties", {}).items():
        walk_gemini(sub, f"{path}.{name}")
    if "items" in node:
        walk_gemini(node["items"], f"{path}[]")
    for i, sub in enumerate(node.get("anyOf", ())):
        walk_gemini(sub, f"{path}|{i}")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
# The properties of gemini_schema and object_schema over any schema are in tests/fuzz/test_fuzz_registry.py.


# ---------------------------------------------------------------- tool calls in


def test_parse_openai_chat_dict() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "mcp__w__weather", "arguments": '{"city": "Oslo"}'}}
    assert parse_tool_call(call) == ParsedCall("openai", "call_1", "mcp__w__weather", {"city": "Oslo"}, None)


def test_parse_responses_and_anthropic_dicts() -> None:
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_2", "name": "n", "arguments": "{}"}
    assert parse_tool_call(call) == ParsedCall("responses", "call_2", "n", {}, None)
    block = {"type": "tool_use", "id": "toolu_1", "name": "n", "input": {"a": [1]}}
    assert parse_tool_call(block) == ParsedCall("anthropic", "toolu_1", "n", {"a": [1]}, None)


def test_parse_objects_by_attribute_and_model_dump() -> None:
    chat = SimpleNamespace(id="c", type="function", function=SimpleNamespace(name="n", arguments='{"x": 1}'))
    assert parse_tool_call(chat).arguments == {"x": 1}
    anthropic_like = SimpleNamespace(type="tool_use", id="t", name="n", input={"y": 2})
    assert parse_tool_call(anthropic_like) == ParsedCall("anthropic", "t", "n", {"y": 2}, None)

    class Dumps:
        def model_dump(self) -> dict[str, Any]:
            return {"type": "function_call", "call_id": "r", "name": "n", "arguments": '{"z": 3}'}

    assert parse_tool_call(Dumps()) == ParsedCall("responses", "r", "n", {"z": 3}, None)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ("", {}),
        ("{}", {}),
        (" {} ", {}),
        ('{"a": null}', {"a": None}),
        ({"already": "parsed"}, {"already": "parsed"}),
        ('{"a": {"b": 1}, "b": {"b": 2}}', {"a": {"b": 1}, "b": {"b": 2}}),
    ],
)
def test_empty_or_ready_arguments(arguments: Any, expected: dict[str, Any]) -> None:
    call = {"id": "c", "type": "function", "function": {"name": "n", "arguments": arguments}}
    parsed = parse_tool_call(call)
    assert parsed.arguments == expected and parsed.error is None and parsed.ok


@pytest.mark.parametrize(
    ("call", "words"),
    [
        ({"id": "c", "type": "function", "function": {"name": "n", "arguments": None}}, ["'arguments' is null"]),
        ({"id": "c", "function": {"name": "n"}}, ["has no 'arguments'"]),
        ({"type": "function_call", "call_id": "c", "name": "n"}, ["has no 'arguments'"]),
        ({"type": "function_call", "call_id": "c", "name": "n", "arguments": None}, ["is null"]),
        ({"type": "function_call", "call_id": "c", "name": "n", "arguments": "   "}, ["blank"]),
        ({"type": "function_call", "call_id": "c", "name": "n", "arguments": "\n\t"}, ["blank"]),
        ({"type": "tool_use", "id": "t", "name": "n"}, ["has no 'input'"]),
        ({"type": "tool_use", "id": "t", "name": "n", "input": None}, ["'input' is null"]),
        ({"type": "tool_use", "id": "t", "name": "n", "input": ""}, ["str, not a JSON object"]),
        (SimpleNamespace(type="tool_use", id="t", name="n"), ["has no 'input'"]),
    ],
)
def test_missing_null_or_blank_arguments_are_errors(call: Any, words: list[str]) -> None:
    parsed = parse_tool_call(call)
    assert parsed.arguments is None and not parsed.ok and parsed.error is not None
    for word in words:
        assert word in parsed.error
    if "str" not in words[0]:
        assert "send {} for a tool without arguments" in parsed.error


@pytest.mark.parametrize(
    ("arguments", "key"),
    [('{"a": 1, "a": 2}', "'a'"), ('{"x": {"deep": 1, "deep": 1}}', "'deep'"), ('[{"k": 1, "k": 2}]', "'k'")],
)
def test_duplicate_keys_are_errors(arguments: str, key: str) -> None:
    for call in ({"id": "c", "type": "function", "function": {"name": "n", "arguments": arguments}},
                 {"type": "function_call", "call_id": "c", "name": "n", "arguments": arguments}):  # fmt: skip
        parsed = parse_tool_call(call)
        assert parsed.arguments is None and parsed.error is not None
        assert "twice" in parsed.error and key in parsed.error


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ('{"city": "Oslo",', ["not valid JSON", "line 1 column", '"Oslo"']),
        ("[1, 2]", ["JSON object", "list", "[1, 2]"]),
        ('"text"', ["JSON object", "str"]),
        ("42", ["JSON object", "int"]),
        ('{"x": NaN}', ["not valid JSON", "NaN"]),
        ("{'single': 1}", ["not valid JSON", "column 2"]),
    ],
)
def test_bad_arguments_are_reported_not_emptied(arguments: str, words: list[str]) -> None:
    for call in ({"id": "c", "type": "function", "function": {"name": "n", "arguments": arguments}},
                 {"type": "function_call", "call_id": "c", "name": "n", "arguments": arguments}):  # fmt: skip
        parsed = parse_tool_call(call)
        assert parsed.arguments is None and not parsed.ok
        assert parsed.error is not None
        for word in words:
            assert word in parsed.error


def test_anthropic_input_that_is_not_an_object() -> None:
    parsed = parse_tool_call({"type": "tool_use", "id": "t", "name": "n", "input": "oops"})
    assert parsed.arguments is None and "str" in (parsed.error or "")


def test_long_bad_arguments_are_excerpted() -> None:
    parsed = parse_tool_call({"type": "function_call", "call_id": "c", "name": "n", "arguments": '{"a": "' + "x" * 5000})
    assert parsed.error is not None and len(parsed.error) < 200


@pytest.mark.parametrize(
    "call",
    [
        42,
        None,
        {},
        {"type": "text", "text": "hi"},
        {"type": "function_call", "name": "n", "arguments": "{}"},  # no call_id
        {"type": "tool_use", "id": 5, "name": "n", "input": {}},
        {"id": "c", "type": "function", "function": {"arguments": "{}"}},  # no name
        {"id": "c", "type": "custom", "function": {"name": "n", "arguments": "{}"}},
        SimpleNamespace(text="hello"),
    ],
)
def test_not_a_tool_call(call: Any) -> None:
    with pytest.raises(InvalidRequest) as info:
        parse_tool_call(call)
    assert isinstance(info.value, TypeError)


def test_error_names_what_was_expected() -> None:
    with pytest.raises(InvalidRequest, match="tool_use.*dict with keys"):
        parse_tool_call({"type": "text", "text": "secret-ish"})
    with pytest.raises(InvalidRequest) as info:
        parse_tool_call({"type": "text", "text": "s3cr3t"})
    assert "s3cr3t" not in str(info.value)


def test_sdk_objects() -> None:
    chat_types = pytest.importorskip("openai.types.chat")
    responses_types = pytest.importorskip("openai.types.responses")
    anthropic_types = pytest.importorskip("anthropic.types")
    chat_call = chat_types.ChatCompletionMessageToolCall(
        id="call_9", type="function", function={"name": "mcp__w__weather", "arguments": '{"city": "Oslo"}'}
    )
    assert parse_tool_call(chat_call) == ParsedCall("openai", "call_9", "mcp__w__weather", {"city": "Oslo"}, None)
    bad = chat_types.ChatCompletionMessageToolCall(id="call_8", type="function", function={"name": "n", "arguments": "{"})
    assert parse_tool_call(bad).arguments is None
    item = responses_types.ResponseFunctionToolCall(type="function_call", call_id="call_7", name="n", arguments="{}")
    assert parse_tool_call(item) == ParsedCall("responses", "call_7", "n", {}, None)
    block = anthropic_types.ToolUseBlock(type="tool_use", id="toolu_5", name="n", input={"q": 1})
    assert parse_tool_call(block) == ParsedCall("anthropic", "toolu_5", "n", {"q": 1}, None)


# ---------------------------------------------------------------- tool messages out

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


def result(*blocks: dict[str, Any], structured: Any = None, is_error: bool = False) -> CallToolResult:
    wire: dict[str, Any] = {"content": list(blocks), "isError": is_error}
    if structured is not None:
        wire["structuredContent"] = structured
    return parse_call_result(wire, tool="t", server="s")


def image(mime: str = "image/png", data: bytes = PNG) -> dict[str, Any]:
    return {"type": "image", "mimeType": mime, "data": base64.b64encode(data).decode()}


def test_openai_messages() -> None:
    chat = ParsedCall("openai", "call_1", "n", {}, None)
    assert tool_message(chat, text="sunny", is_error=False) == {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}
    assert tool_message(chat, text="boom", is_error=True)["content"] == "Error: boom"
    responses = ParsedCall("responses", "call_2", "n", {}, None)
    assert tool_message(responses, text="", is_error=False) == {
        "type": "function_call_output", "call_id": "call_2", "output": "(no content)"}  # fmt: skip


def test_anthropic_messages() -> None:
    use = ParsedCall("anthropic", "toolu_1", "n", {}, None)
    assert tool_message(use, text="sunny", is_error=False) == {
        "type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}], "is_error": False}  # fmt: skip
    r = result({"type": "text", "text": "look:"}, image(), image("image/bmp"), {"type": "text", "text": ""})
    message = tool_message(use, text=result_text(r), is_error=True, result=r)
    assert message["is_error"] is True
    assert message["content"] == [
        {"type": "text", "text": "look:"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()}},
        {"type": "text", "text": f"[image/bmp, {len(PNG)} bytes]"},
    ]
    empty = tool_message(use, text="", is_error=False, result=result())
    assert empty["content"] == [{"type": "text", "text": "(no content)"}]
    structured = tool_message(use, text="", is_error=False, result=result(structured={"t": 21.5}))
    assert structured["content"] == [{"type": "text", "text": '{"t":21.5}'}]


def test_result_text() -> None:
    assert result_text(result({"type": "text", "text": "a"}, {"type": "text", "text": "b"})) == "a\nb"
    assert result_text(result(structured={"ok": True, "n": [1, 2]})) == '{"ok":true,"n":[1,2]}'
    assert result_text(result({"type": "text", "text": "hi"}, structured={"x": 1})) == "hi"
    assert result_text(result()) == "(no content)"
    assert result_text(result(image())) == f"[image/png, {len(PNG)} bytes]"
    audio = {"type": "audio", "mimeType": "audio/wav", "data": base64.b64encode(b"RIFF").decode()}
    assert result_text(result(audio)) == "[audio/wav, 4 bytes]"
    link = {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt", "description": "notes"}
    assert result_text(result(link)) == "[resource link 'a.txt' file:///a.txt: notes]"
    embedded = {"type": "resource", "resource": {"uri": "mem://x", "text": "inside"}}
    assert result_text(result(embedded)) == "[resource mem://x]\ninside"
    blob = {"type": "resource", "resource": {"uri": "mem://b", "mimeType": "application/pdf", "blob": "AAEC"}}
    assert result_text(result(blob)) == "[resource mem://b, application/pdf, 3 bytes]"
    assert result_text(result({"type": "hologram", "x": 1})) == "[hologram content]"
    assert result_text(result(image(), structured=[1])) == f"[1]\n[image/png, {len(PNG)} bytes]"


def test_long_results_are_cut() -> None:
    from mcpcall.registry.formats import ANTHROPIC_IMAGE_MAX_BASE64, MAX_TEXT_CHARS

    huge = "x" * (MAX_TEXT_CHARS + 5000)
    r = result({"type": "text", "text": huge})
    text = result_text(r)
    assert text.startswith("x" * MAX_TEXT_CHARS) and text.endswith("[… 5000 more characters cut]")
    assert len(text) < MAX_TEXT_CHARS + 100
    assert result_text(r, max_chars=10) == "x" * 10 + f"\n[… {len(huge) - 10} more characters cut]"
    for parsed in (ParsedCall("openai", "c", "n", {}, None), ParsedCall("responses", "c", "n", {}, None)):
        message = tool_message(parsed, text=huge, is_error=True)
        body = str(message.get("content", message.get("output")))
        assert len(body) < MAX_TEXT_CHARS + 100 and body.endswith("5000 more characters cut]")
    use = ParsedCall("anthropic", "t", "n", {}, None)
    many = result(*({"type": "text", "text": "y" * 40_000} for _ in range(4)), image())
    content = tool_message(use, text=result_text(many), is_error=False, result=many)["content"]
    texts = [b["text"] for b in content if b["type"] == "text"]
    assert sum(len(t) for t in texts[:-1]) == MAX_TEXT_CHARS
    assert texts[-1] == f"[… {160_000 - MAX_TEXT_CHARS} more characters cut]"
    assert [b["type"] for b in content].count("image") == 1
    plain = tool_message(use, text=huge, is_error=False)["content"]
    assert len(plain) == 1 and len(plain[0]["text"]) < MAX_TEXT_CHARS + 100
    big = b"\x89PNG" + b"\0" * (ANTHROPIC_IMAGE_MAX_BASE64 // 4 * 3)
    content = tool_message(use, text="", is_error=False, result=result(image(data=big)))["content"]
    assert content == [{"type": "text", "text": f"[image/png, {len(big)} bytes]"}]


# ---------------------------------------------------------------- failure texts


def test_unknown_tool_text_suggests_close_names() -> None:
    known = ["mcp__github__create_issue", "mcp__github__list_issues", "mcp__fs__read_file"]
    text = unknown_tool_text("mcp__github__create_isue", known)
    assert "'mcp__github__create_isue'" in text and "'mcp__github__create_issue'" in text and "read_file" not in text
    assert "Did you mean" not in unknown_tool_text("zzz", known)
    assert "'mcp__github__create_issue'" in unknown_tool_text("create_issue", known)
    assert "\n" not in unknown_tool_text("a\nb", known)


@QUICK
@given(st.one_of(st.text(max_size=30), st.from_regex(r"\{.{0,20}\}", fullmatch=True), json_values.map(json.dumps)))
def test_any_argument_text_parses_or_is_reported(arguments: str) -> None:
    parsed = parse_tool_call({"type": "function_call", "call_id": "c", "name": "n", "arguments": arguments})
    assert (parsed.arguments is None) == (parsed.error is not None)
    assert parsed.arguments is None or isinstance(parsed.arguments, dict)
    if parsed.error is not None:
        assert "\n" not in parsed.error or "\n" in arguments


def test_gemini_ref_blowup_is_bounded() -> None:
    # every level refers to the root twice: 2**depth nodes without a budget
    schema = {"type": "object", "properties": {"a": {"$ref": "#"}, "b": {"$ref": "#"}, "c": {"$ref": "#"}}}
    out = gemini_schema(schema, max_ref_depth=30)
    assert len(json.dumps(out)) < 200_000
    walk_gemini(out)
