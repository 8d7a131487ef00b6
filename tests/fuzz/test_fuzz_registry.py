"""A server's tool schemas through every export of the registry: OpenAI, Anthropic, Gemini, plain JSON Schema.

Properties: no export raises, whatever the schema; none changes the tool; each gives what its API takes
(an object schema at the root; Gemini's Schema keys only); names stay valid and unique. Costs: counted
steps grow linearly with the schema, and a schema built to multiply work ($ref fan-out, repeated types)
costs about what a plain one of its size does.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Callable

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mcpcall.errors import NestedTooDeep
from mcpcall.registry import (
    NAME_PATTERN,
    build_names,
    gemini_schema,
    object_schema,
    to_anthropic_tools,
    to_gemini_tools,
    to_json_schema,
    to_openai_tools,
)
from mcpcall.types import Tool, parse_tool
from tests.registry.test_registry_formats import walk_gemini

from .cost import assert_comparable, assert_linear, assert_linear_time, steps
from .profiles import fuzz
from .strategies import deep_values, fan_out, materialize, schema_nodes, schemas, texts, very_deep_values

EXPORTS: dict[str, Callable[[list[tuple[str, Tool]]], list[dict[str, Any]]]] = {
    "openai-chat": lambda e: to_openai_tools(e),
    "openai-responses": lambda e: to_openai_tools(e, api="responses"),
    "anthropic": to_anthropic_tools,
    "gemini": to_gemini_tools,
    "gemini-wrapped": lambda e: to_gemini_tools(e, wrap=True),
    "gemini-json-schema": lambda e: to_gemini_tools(e, json_schema=True),
    "json-schema": to_json_schema,
}
#: Steps one export may take per byte of the schema's JSON, plus a fixed allowance: Gemini's conversion may write
#: up to 2000 nodes whatever the schema (inlined $refs multiply): at most about 312,000 steps (8 ms) on fan-outs.
STEPS_PER_BYTE = 60
STEPS_FIXED = 400_000


def tool_of(schema: Any) -> Tool | None:
    try:
        return parse_tool({"name": "t", "inputSchema": schema})
    except NestedTooDeep:
        return None  # left out of the listing: no export sees it


def size(value: Any) -> int:
    return len(json.dumps(value, default=repr))


def all_exports(entries: list[tuple[str, Tool]]) -> None:
    for export in EXPORTS.values():
        export(entries)


def _check_object_schema(out: Any) -> None:
    assert out["type"] == "object" and isinstance(out["properties"], dict)
    assert not {"anyOf", "oneOf", "allOf"} & set(out)


@fuzz(200)
@given(schemas)
@example({"$ref": "#/enum/\u00b2", "enum": [1]})  # "²".isdigit(): int() raised ValueError
@example({"$ref": "#/enum/" + "1" * 5000, "enum": [1]})  # more digits than int() reads
@example({"type": "object", "anyOf": [{"$ref": "#/x/\u00b2"}], "x": [{}]})
@example(fan_out(8, 6))  # 6**8 branch copies
def test_every_export_takes_any_schema(schema: Any) -> None:
    tool = tool_of(schema)
    if tool is None:
        return
    before = copy.deepcopy(tool.raw)
    entries = [("mcp__s__t", tool)]
    openai = to_openai_tools(entries)[0]["function"]
    _check_object_schema(openai["parameters"])
    _check_object_schema(to_anthropic_tools(entries)[0]["input_schema"])
    _check_object_schema(to_openai_tools(entries, api="responses")[0]["parameters"])
    declaration = to_gemini_tools(entries)[0]
    if "parameters" in declaration:
        walk_gemini(declaration["parameters"])
    _check_object_schema(to_gemini_tools(entries, json_schema=True)[0]["parameters_json_schema"])
    to_gemini_tools(entries, wrap=True)
    assert to_json_schema(entries)[0]["input_schema"] == tool.input_schema
    assert tool.raw == before or _has_nan(before)  # never changed (NaN != NaN)
    json.dumps([openai, declaration])  # plain JSON (NaN as Python writes it)


def _has_nan(value: Any) -> bool:
    return "NaN" in json.dumps(value, default=repr)


@fuzz(100)
@given(st.one_of(deep_values, very_deep_values, schema_nodes))
@example({"type": {}})  # an unhashable type: TypeError
@example({"properties": {"a": {"type": ["string", ["x"]]}}})
def test_gemini_schema_and_object_schema_take_any_value(schema: Any) -> None:
    # Both are public and take Python values: nesting deeper than JSON gives, and anything else.
    schema = materialize(schema)
    before = copy.deepcopy(schema) if _depth(schema) < 900 else None
    out = gemini_schema(schema)
    assert out["type"] == "OBJECT"
    if out["properties"]:
        walk_gemini(out)
    else:  # no parameters: to_gemini_tools leaves ``parameters`` out
        assert set(out) <= {"type", "properties", "title", "description"}
    json.dumps(out)  # plain JSON
    try:
        _check_object_schema(object_schema(schema))
    except RecursionError:
        assert _depth(schema) > 900  # a deep copy of a Python value as deep as JSON goes (a Tool's schema is at most 64)
    assert before is None or schema == before or _has_nan(before)  # never changed


def _depth(value: Any) -> int:
    depth = 0
    while isinstance(value, (dict, list)) and value:
        value = next(iter(value.values())) if isinstance(value, dict) else value[0]
        depth += 1
    return depth


@fuzz(60, deadline=None)
@given(schemas)
@example(fan_out(8, 6))
@example({"type": ["object"] * 300, "properties": {f"p{i}": {"type": "string"} for i in range(300)}})
def test_export_cost_is_bounded_by_the_schemas_size(schema: Any) -> None:
    tool = tool_of(schema)
    if tool is None:
        return
    bound = STEPS_PER_BYTE * size(schema) + STEPS_FIXED
    for name, export in EXPORTS.items():
        spent = steps(export, [("t", tool)], limit=bound)
        assert spent <= bound, f"{name}: {spent} steps for a schema of {size(schema)} bytes"


# One growing dimension of a schema: n copies of a unit (drawn by Hypothesis) in one place.
def _grown(where: str, unit: Any, n: int) -> dict[str, Any]:
    if where == "properties":
        return {"type": "object", "properties": {f"p{i}": copy.deepcopy(unit) for i in range(n)}}
    if where == "type-list":
        return {"type": ["object"] * n + ["string"], "properties": {f"p{i}": copy.deepcopy(unit) for i in range(n)}}
    if where == "any-of":
        return {"type": "object", "anyOf": [copy.deepcopy(unit) for _ in range(n)], "properties": {"a": unit}}
    if where == "refs":
        return {"type": "object", "properties": {f"p{i}": {"$ref": "#/$defs/u"} for i in range(n)}, "$defs": {"u": unit}}
    if where == "enum":
        return {"type": "object", "properties": {"e": {"enum": [unit] * n}, "r": {"type": "string"}}, "required": ["e"] * n}
    if where == "all-of":
        return {"type": "object", "allOf": [{"$ref": "#/$defs/u"}] * n, "$defs": {"u": unit}}
    raise AssertionError(where)


@fuzz(25, deadline=None)
@given(st.sampled_from(["properties", "type-list", "any-of", "refs", "enum", "all-of"]), schema_nodes,
       st.sampled_from(sorted(EXPORTS)))
@example("type-list", {"type": "object", "properties": {"a": {"type": "string"}}}, "gemini")
def test_export_cost_grows_linearly(where: str, unit: Any, export_name: str) -> None:
    export = EXPORTS[export_name]

    def cost(n: int) -> int:
        tool = tool_of(_grown(where, unit, n))
        return 0 if tool is None else steps(export, [("t", tool)])

    assert_linear(cost, 16, f"{export_name} of a schema growing in its {where}")


@pytest.mark.parametrize("where", ["properties", "type-list", "any-of", "refs", "enum", "all-of"])
def test_export_time_grows_linearly_past_the_budgets(where: str) -> None:
    # The node budgets flatten the counted cost of a large schema; what is done past them must stay linear too
    # (a type list of 2000 entries converted every property again for each: 1.6 s, 4 times the size 20 times the time).
    unit = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"$ref": "#/$defs/u"}}, "required": ["a"]}
    for name, export in EXPORTS.items():
        def run(n: int, export: Callable[[list[tuple[str, Tool]]], Any] = export) -> None:
            export([("t", _big_tool(where, unit, n))])

        assert_linear_time(lambda n: run(n), lambda n: n, 150, f"{name} of a schema growing in its {where}")


_big_tools: dict[tuple[str, int], Tool] = {}


def _big_tool(where: str, unit: Any, n: int) -> Tool:
    key = (where, n)
    if key not in _big_tools:
        tool = parse_tool({"name": "t", "inputSchema": {**_grown(where, unit, n), "$defs": {"u": unit}}})
        _big_tools.clear()
        _big_tools[key] = tool
    return _big_tools[key]


def _plain(count: int) -> dict[str, Any]:
    return {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "d"} for i in range(count)}}


def test_a_schema_built_to_multiply_work_costs_about_what_a_plain_one_does() -> None:
    pathological = [
        fan_out(8, 6),  # every definition names the next six times
        fan_out(6, 6, "allOf"),
        {"type": ["object"] * 400, "properties": _plain(400)["properties"]},  # each type converted the properties again
        {"type": "object", "anyOf": [{"$ref": "#/$defs/big"}] * 200, "$defs": {"big": _plain(40)}},
    ]
    for schema in pathological:
        normal = _plain(max(1, size(schema) // 40))
        for name, export in EXPORTS.items():
            tool, plain = tool_of(schema), tool_of(normal)
            assert tool is not None and plain is not None
            assert_comparable(lambda t, export=export: steps(export, [("t", t)], limit=5_000_000), plain, tool,
                              f"{name} of {json.dumps(schema)[:80]}", limit=10, fixed=STEPS_FIXED)


# -- names ----------------------------------------------------------------------------------------------

tool_names = st.one_of(texts, st.sampled_from(["a.b", "a_b", "a-b", "a b", "a__b", "", "x" * 200, "é" * 80]))


@fuzz(150)
@given(st.lists(st.tuples(st.sampled_from(["s", "s.1", "s_1", "", "é" * 70]), tool_names), max_size=30),
       st.sampled_from([("mcp", "__", 64), ("", "_", 64), ("p", "--", 10)]), st.randoms(use_true_random=False))
def test_exposed_names_are_valid_unique_and_reversible(pairs: list[tuple[str, str]], options: tuple[str, str, int],
                                                       rnd: Any) -> None:
    prefix, separator, max_length = options
    table = build_names(pairs, prefix=prefix, separator=separator, max_length=max_length)
    unique = list(dict.fromkeys(pairs))
    assert len(set(table.names)) == len(table.names) == len(unique)
    for pair in unique:
        name = table.name_of(*pair)
        assert NAME_PATTERN.fullmatch(name) and len(name) <= max_length
        assert table.lookup(name) == pair
    shuffled = list(unique)
    rnd.shuffle(shuffled)
    again = build_names(shuffled, prefix=prefix, separator=separator, max_length=max_length)
    assert again.by_pair == table.by_pair  # the order of the pairs does not matter
    assert build_names(unique, prefix=prefix, separator=separator, max_length=max_length, keep=table.by_pair).by_pair == \
        table.by_pair


@fuzz(20, deadline=None)
@given(tool_names, st.sampled_from(["same", "suffixed", "long"]))
def test_naming_cost_grows_linearly(name: str, how: str) -> None:
    def pairs(n: int) -> list[tuple[str, str]]:
        if how == "same":  # every tool's base name the same (a separator or a character replaced)
            return [("s", name + "." * i) for i in range(n)]
        if how == "suffixed":
            return [("s", f"{name}_{i}") for i in range(n)] + [("s", f"{name}.{i}") for i in range(n)]
        return [("s", "x" * 100 + name + str(i)) for i in range(n)]  # all cut to the same 64 characters

    assert_linear(lambda n: steps(build_names, pairs(n)), 8, f"build_names of {how} names like {name[:20]!r}")
