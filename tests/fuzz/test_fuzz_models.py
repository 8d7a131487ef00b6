"""A server's tool schemas through what every integration shares: pydantic models (``_models``) and ``_core``.

Properties: ``model_for`` makes a model of any schema (its docstring: the loosest type instead of
dropping the tool), one whose JSON schema pydantic can write and that takes what the schema calls
valid; ``MCPTool`` takes any schema and maps any arguments; names made unique stay valid. Costs: counted
steps grow linearly with the schema, and a schema built to multiply work costs about what a plain one
of its size does. The conversions that need a framework are fuzzed in tests/integrations/test_fuzz_frameworks.py.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mcpcall.integrations._core import MCPTool, Unique, identifier, model_name, takes_null
from mcpcall.types import parse_tool
from mcpcall.types.tools import NestedTooDeep

from .cost import assert_comparable, assert_linear, steps
from .profiles import fuzz
from .strategies import fan_out, json_values, schema_nodes, schemas, texts

pydantic = pytest.importorskip("pydantic")
from mcpcall.integrations._models import dump, model_for  # noqa: E402  - needs pydantic

#: Steps one model may take per byte of its schema, and a fixed allowance (its budget of MAX_NODES nodes).
STEPS_PER_BYTE = 400
STEPS_FIXED = 2_000_000


def mcp_tool(schema: Any) -> MCPTool | None:
    try:
        return MCPTool(None, "t", "s", parse_tool({"name": "t", "inputSchema": schema}), None)  # type: ignore[arg-type]
    except NestedTooDeep:
        return None


@fuzz(120, deadline=None)
@given(schemas, texts)
@example(fan_out(8, 6), "t")
@example({"type": "object", "properties": {"a": {"enum": [float("nan"), 10**400]}}}, "x")
def test_a_model_is_made_of_any_schema(schema: Any, name: str) -> None:
    tool = mcp_tool(schema)
    if tool is None:
        return
    model = model_for(name, tool.schema)
    assert issubclass(model, pydantic.BaseModel)
    model.model_json_schema()  # what a framework shows the model
    try:
        instance = model.model_validate({})
    except pydantic.ValidationError:
        return  # required fields
    json.dumps(dump(instance), default=repr)


@fuzz(150)
@given(schemas, st.dictionaries(st.one_of(st.sampled_from(["a", "b", "self_", "x"]), texts), json_values, max_size=5),
       st.booleans())
def test_any_schema_makes_a_tool_that_maps_any_arguments(schema: Any, values: dict[str, Any], drop: bool) -> None:
    tool = mcp_tool(schema)
    if tool is None:
        return
    before = copy.deepcopy(tool.tool.raw)
    out = tool.arguments(values, drop_unknown=drop)
    assert isinstance(out, dict) and len(out) <= len(values)
    for sub in tool.properties.values():
        takes_null(sub, tool.schema)
    assert tool.tool.raw == before or "NaN" in json.dumps(before)


@fuzz(60, deadline=None)
@given(schemas)
@example(fan_out(8, 6))
@example(fan_out(6, 20))  # 20**6 paths within MAX_DEPTH: what the node budget (MAX_NODES) is for
def test_making_a_model_costs_at_most_its_budget(schema: Any) -> None:
    tool = mcp_tool(schema)
    if tool is None:
        return
    bound = STEPS_PER_BYTE * len(json.dumps(schema)) + STEPS_FIXED
    spent = steps(model_for, "t", tool.schema, limit=bound)
    assert spent <= bound, f"{spent} steps for a schema of {len(json.dumps(schema))} bytes"


def _grown(where: str, unit: Any, n: int) -> dict[str, Any]:
    if where == "properties":
        return {"type": "object", "properties": {f"p{i}": copy.deepcopy(unit) for i in range(n)}}
    if where == "refs":
        return {"type": "object", "properties": {f"p{i}": {"$ref": "#/$defs/u"} for i in range(n)}, "$defs": {"u": unit}}
    if where == "any-of":
        return {"type": "object", "properties": {"a": {"anyOf": [copy.deepcopy(unit) for _ in range(n)]}}}
    if where == "keys":  # one node with n keys of its own, then branches that copy it
        return {"type": "object", "properties": {"a": {**{f"k{i}": i for i in range(n)}, "anyOf": [unit] * 32}}}
    if where == "enum":
        return {"type": "object", "properties": {"e": {"enum": [f"v{i}" for i in range(n)]}}, "required": ["e"] * n}
    raise AssertionError(where)


@fuzz(20, deadline=None)
@given(st.sampled_from(["properties", "refs", "any-of", "keys", "enum"]), schema_nodes)
@example("keys", {"type": "string"})
def test_making_a_model_costs_linear_steps(where: str, unit: Any) -> None:
    def cost(n: int) -> int:
        tool = mcp_tool(_grown(where, unit, n))
        return 0 if tool is None else steps(model_for, "t", tool.schema)

    assert_linear(cost, 8, f"a model of a schema growing in its {where}")


def test_a_schema_built_to_multiply_work_costs_about_what_a_plain_one_does() -> None:
    big = {f"k{i}": i for i in range(3000)}
    pathological = [
        {"type": "object", "properties": {"a": {**big, "anyOf": [{"anyOf": [{}] * 32}] * 32}}},  # each branch copied the node
        {"type": "object", "properties": {f"p{i}": {"$ref": "#/$defs/big"} for i in range(300)},
         "$defs": {"big": {**big, "type": "string"}}},  # the target copied for every reference
        fan_out(8, 6),
        fan_out(6, 20),
    ]
    for schema in pathological:
        size = len(json.dumps(schema))
        normal = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "d"} for i in range(size // 40)}}
        tool, plain = mcp_tool(schema), mcp_tool(normal)
        assert tool is not None and plain is not None
        assert_comparable(lambda t: steps(model_for, "t", t.schema, limit=20_000_000), plain, tool,
                          f"a model of {json.dumps(schema)[:60]}", limit=10, fixed=STEPS_FIXED)


# -- names ----------------------------------------------------------------------------------------------


@fuzz(150)
@given(st.lists(st.one_of(texts, st.sampled_from(["a" * 70, "a" * 64 + "_2", "x-y", "self", "_2", "a_2"])), max_size=40))
def test_names_made_unique_stay_valid(names: list[str]) -> None:
    taken = Unique(max_length=64)
    made = [model_name(name, taken) for name in names]
    assert len(set(made)) == len(made) and all(0 < len(m) <= 64 for m in made)
    python = Unique()
    made = [identifier(name, python) for name in names]
    assert len(set(made)) == len(made) and all(m.isidentifier() for m in made)


@fuzz(10, deadline=None)
@given(st.text(st.sampled_from("ab_-."), min_size=1, max_size=4))
def test_making_names_unique_is_linear(stem: str) -> None:
    def cost(n: int) -> int:
        names = [stem * 30 + "x" * 40 + str(i % 50) for i in range(n)]  # long names sharing their first 64 characters
        taken = Unique(max_length=64)
        return steps(lambda: [taken(name) for name in names])

    assert_linear(cost, 64, f"unique names from {stem!r}")
