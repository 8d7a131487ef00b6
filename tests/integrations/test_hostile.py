"""What a server controls, through every framework module: names, argument names, schemas built to cost.

No timed assertion: the costs are counted (schema nodes made, checks run), not clocked.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

import pytest

from mcpcall.integrations._core import RESERVED, MCPTool, Unique, identifier
from mcpcall.types import TextContent
from mcpcall.types.tools import CallToolResult, parse_tool

from tests.fuzz.cost import assert_linear, steps

from .conftest import framework


def mcp_tool(schema: Any, name: str = "t") -> MCPTool:
    return MCPTool(None, name, "s", parse_tool({"name": name, "inputSchema": schema}), None)  # type: ignore[arg-type]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The arguments every MCPTool.call is made with (answered "ok", no server)."""
    calls: list[Any] = []

    def call(self: MCPTool, arguments: Any = None, **options: Any) -> CallToolResult:
        calls.append(arguments)
        return CallToolResult(content=(TextContent(text="ok"),))

    monkeypatch.setattr(MCPTool, "call", call)
    return calls


# Each framework's own way of calling a tool with keyword arguments, as its agents do.
CALLS: dict[str, Callable[[Any, MCPTool], Any]] = {
    "langchain": lambda m, t: m._tool(t, False).invoke({"self_": "v", "x": "y"}),
    "crewai": lambda m, t: m.make_tool(t).run(self_="v", x="y"),
    "dspy": lambda m, t: m._tool(t, False)(self_="v", x="y"),
    "smolagents": lambda m, t: m.make_tool(t)(self_="v", x="y"),
    "haystack": lambda m, t: m._tool(t, None).invoke(self_="v", x="y"),
    "llamaindex": lambda m, t: m._tool(t, "t").call(self_="v", x="y"),
}
PACKAGES = {"langchain": "langchain_core", "crewai": "crewai", "dspy": "dspy", "smolagents": "smolagents",
            "haystack": "haystack", "llamaindex": "llama_index.core"}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_an_argument_named_self_gets_through(name: str, sent: list[Any]) -> None:
    framework(PACKAGES[name])
    module = importlib.import_module(f"mcpcall.integrations.{name}")
    tool = mcp_tool({"type": "object", "properties": {"self": {"type": "string"}, "x": {"type": "string"}},
                     "required": ["self"]})
    assert "self" not in tool.properties and tool.required == ["self_"]
    CALLS[name](module, tool)
    assert sent == [{"self": "v", "x": "y"}]


def test_reserved_names_and_a_taken_rename() -> None:
    assert RESERVED == {"self"}
    tool = mcp_tool({"type": "object", "properties": {"self": {}, "self_": {}}})
    assert sorted(tool.properties) == ["self_", "self__2"]
    assert tool.arguments({"self__2": 1, "self_": 2}) == {"self": 1, "self_": 2}


def test_names_all_wanting_one_are_made_unique() -> None:
    unique = Unique(max_length=64)
    names = [unique("a" * 70) for _ in range(3000)]
    assert len(set(names)) == 3000 and all(len(n) <= 64 for n in names)
    taken = Unique()
    dashes = [identifier("a" + "".join("-_"[(i >> bit) & 1] for bit in range(12)), taken) for i in range(3000)]
    assert len(set(dashes)) == 3000 and all(name.isidentifier() for name in dashes)


def _laughs(levels: int, fan: int) -> dict[str, Any]:
    """Each definition names the next ``fan`` times: inlined naively, 2^levels copies."""
    defs = {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}] * fan} for i in range(levels)}
    defs[f"d{levels}"] = {"type": "string"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs}


def _schemas(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(_schemas(v) for v in value.values())
    if isinstance(value, list):
        return sum(_schemas(v) for v in value)
    return 0


def _nodes(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(_nodes(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(_nodes(v) for v in value)
    return 1


def test_dspy_inlining_is_bounded() -> None:
    framework("dspy")
    from mcpcall.integrations import dspy as mcp_dspy

    args = mcp_dspy.arguments(mcp_tool(_laughs(24, 4)).schema)  # 4^24 copies, inlined naively
    assert _schemas(args["x"]) <= mcp_dspy._MAX_NODES + 1 and _nodes(args["x"]) <= mcp_dspy._MAX_VALUES + 1
    fat = _laughs(24, 4)
    fat["$defs"]["d24"] = {"enum": list(range(5_000))}  # every copy an enum of 5,000
    args = mcp_dspy.arguments(mcp_tool(fat).schema)
    assert _nodes(args["x"]) <= mcp_dspy._MAX_VALUES + 1
    big = {"type": "object", "properties": {"zone": {"type": "string", "enum": [f"z{i}" for i in range(5_000)]}}}
    assert mcp_dspy.arguments(big)["zone"]["enum"] == big["properties"]["zone"]["enum"]  # values are not schemas
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(60):
        deep = {"type": "array", "items": deep}
    chain = {f"d{i}": {"type": "array", "items": {"$ref": f"#/$defs/d{i + 1}"}} for i in range(20)}
    chain["d20"] = deep
    args = mcp_dspy.arguments({"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": chain})
    assert isinstance(args["x"], dict)  # no RecursionError: cut at a depth DSPy's check can take


def test_dspy_inlining_is_bounded_for_the_whole_tool() -> None:
    # every argument naming the same fan-out: the copies (each checked against the meta-schema) are bounded per
    # tool, not per argument; the arguments past the budget keep their descriptions
    framework("dspy")
    from mcpcall.integrations import dspy as mcp_dspy

    schema = _laughs(24, 4)
    schema["properties"] = {f"a{i}": {"$ref": "#/$defs/d0", "description": f"arg {i}"} for i in range(300)}
    args = mcp_dspy.arguments(mcp_tool(schema).schema)
    assert list(args) == [f"a{i}" for i in range(300)]
    assert all(args[f"a{i}"]["description"] == f"arg {i}" for i in range(300))
    assert sum(_schemas(arg) for arg in args.values()) <= mcp_dspy._MAX_TOOL_NODES + 300
    assert _schemas(args["a0"]) > mcp_dspy._MAX_NODES // 2  # the first ones inlined as far as one argument's budget goes


def test_dspy_leaves_patterns_to_the_server_but_keeps_a_property_called_pattern() -> None:
    framework("dspy")
    from mcpcall.integrations import dspy as mcp_dspy

    args = mcp_dspy.arguments({"type": "object", "properties": {
        "word": {"type": "string", "pattern": "^(a|a)*$", "format": "email"},
        "query": {"type": "object", "properties": {"pattern": {"type": "string"}, "format": {"type": "string"}}}}})
    assert args["word"] == {"type": "string", "default": None}
    assert sorted(args["query"]["properties"]) == ["format", "pattern"]


def test_haystack_repairs_every_bad_node_in_few_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    framework("haystack")
    from mcpcall.integrations import haystack as mcp_haystack

    checks: list[int] = []
    meta = mcp_haystack._META

    class Counting:
        def iter_errors(self, schema: Any) -> Any:
            checks.append(1)
            return meta.iter_errors(schema)

    class CountingChecks:
        @staticmethod
        def check_schema(schema: Any) -> None:
            checks.append(1)
            meta.check_schema(schema)

    monkeypatch.setattr(mcp_haystack, "_META", Counting())
    monkeypatch.setattr(mcp_haystack, "Draft202012Validator", CountingChecks)
    schema = {"type": "object", "properties": {f"p{i}": ({"type": 5} if i % 7 == 0 else {"type": "string"})
                                                for i in range(300)}}
    out = mcp_haystack.parameters(schema)
    assert out["properties"]["p0"] == {} and out["properties"]["p1"] == {"type": "string"}
    assert len(checks) <= 4  # whole-schema checks: one finds all 43 bad nodes (not one check per node)


def _mixed(n: int) -> list[Any]:
    """Strings and numbers: a list jsonschema's uniqueItems cannot sort, so compares pair by pair."""
    return [i if i % 2 else str(i) for i in range(n)]


def test_haystack_repair_costs_grow_linearly() -> None:
    framework("haystack")
    from mcpcall.integrations import haystack as mcp_haystack

    def unique(n: int) -> float:  # required and type lists the meta-schema's uniqueItems checks
        return steps(mcp_haystack.parameters, {"type": "object", "required": _mixed(n), "properties": {
            "a": {"type": ["string"] + _mixed(n)}, "b": {"type": "object", "dependentRequired": {"x": _mixed(n)}}}})

    def refused(n: int) -> float:  # n nodes refused at once: which to repair, found without comparing them pairwise
        return steps(mcp_haystack.parameters, {"type": "object", "properties": {f"p{i}": 1 for i in range(n)}})

    assert_linear(unique, 100, "haystack.parameters of mixed required/type lists")
    assert_linear(refused, 20, "haystack.parameters of many refused properties")
    out = mcp_haystack.parameters({"type": "object", "required": ["a", 1, "a", "b"], "properties": {
        "a": {"type": ["string", "string", 5]}, "b": {"enum": [["x", "x"]], "const": {"required": [1, 1]}}}})
    assert out["required"] == ["a", "b"] and out["properties"]["a"] == {"type": ["string"]}
    assert out["properties"]["b"] == {"enum": [["x", "x"]], "const": {"required": [1, 1]}}  # values stay as they are


def test_haystack_drops_patterns_re_would_compile_at_the_servers_cost() -> None:
    framework("haystack")
    from haystack.tools import Tool
    from mcpcall.integrations import haystack as mcp_haystack

    long = "(?:" + "a" * 100_000 + "|" + "a" * 100_000 + ")"  # re: quadratic in the shared prefix
    schema = {"type": "object", "properties": {
        "long": {"type": "string", "pattern": long},
        "wide": {"type": "string", "pattern": "(?i)" + "[\x00-\uffff]" * 40},
        "deep": {"type": "string", "pattern": "(" * 60 + "a" + ")" * 60},
        "fair": {"type": "string", "pattern": "(" * 40 + "a" + ")" * 40},
        "escaped": {"type": "string", "pattern": "\\(" * 60 + "a"},
        "names": {"type": "object", "patternProperties": {"(" * 60 + "a" + ")" * 60: {}}},
    }}
    out = mcp_haystack.parameters(schema)
    props = out["properties"]
    assert props["long"] == props["wide"] == props["deep"] == {"type": "string"}
    assert props["fair"] == schema["properties"]["fair"] and props["escaped"] == schema["properties"]["escaped"]
    assert props["names"] == {"type": "object"}
    Tool(name="t", description="d", parameters=out, function=lambda **kw: kw)


def test_haystack_reads_a_nodes_place_not_its_key() -> None:
    framework("haystack")
    from mcpcall.integrations import haystack as mcp_haystack

    out = mcp_haystack.parameters({"type": "object", "properties": {
        "properties": {"type": "strin", "description": "kept"}, "y": {"type": "string"},
        "items": {"type": "object", "properties": {"$defs": {"type": 5}}}}})
    assert out == {"type": "object", "properties": {
        "properties": {"description": "kept"}, "y": {"type": "string"},
        "items": {"type": "object", "properties": {"$defs": {}}}}}


def test_haystack_tool_is_made_when_haystacks_own_check_runs_out_of_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    # Haystack checks the schema again, deeper in the stack than ours: a RecursionError there makes a tool that
    # takes any arguments, not a listing that fails
    framework("haystack")
    from mcpcall.integrations import haystack as mcp_haystack

    real = mcp_haystack.Tool
    seen: list[Any] = []

    def tool(**kwargs: Any) -> Any:
        seen.append(kwargs["parameters"])
        if len(seen) == 1:
            raise RecursionError("maximum recursion depth exceeded")
        return real(**kwargs)

    monkeypatch.setattr(mcp_haystack, "Tool", tool)
    made = mcp_haystack._tool(mcp_tool({"type": "object", "properties": {"a": {"type": "string"}}}), None)
    assert seen[0]["properties"] == {"a": {"type": "string"}} and made.parameters == {"type": "object", "properties": {}}


def test_dspy_arguments_check_at_a_linear_cost_and_stay_valid_for_dspys_own_check(sent: list[Any]) -> None:
    framework("dspy")
    from jsonschema import Draft202012Validator, validators
    from mcpcall.integrations import dspy as mcp_dspy

    def unique(n: int) -> float:
        return steps(mcp_dspy.arguments, {"type": "object", "properties": {
            "a": {"type": "object", "required": _mixed(n)}, "b": {"type": ["string"] + _mixed(n)}}})

    assert_linear(unique, 100, "dspy.arguments of mixed required/type lists")
    schema = {"type": "object", "$defs": {"A": {"type": "string"}}, "properties": {
        "old": {"$schema": "http://json-schema.org/draft-04/schema#", "type": "number", "exclusiveMinimum": 0},
        "dyn": {"$dynamicRef": "#meta", "$id": "urn:x", "type": "string"},
        "data": {"const": {"pattern": "x", "$ref": "#/$defs/A"}, "enum": [{"$schema": 1}]},
        "req": {"type": "object", "required": ["a", 1, "a"]}}}
    args = mcp_dspy.arguments(schema)
    assert args["old"] == {"type": "number", "exclusiveMinimum": 0, "default": None}
    assert args["dyn"] == {"type": "string", "default": None}
    assert args["data"]["const"] == {"pattern": "x", "$ref": "#/$defs/A"} and args["data"]["enum"] == [{"$schema": 1}]
    assert args["req"]["required"] == ["a"]
    for name, arg in args.items():  # what DSPy's call runs: the validator its $schema names
        validators.validator_for(arg, default=Draft202012Validator).check_schema(arg)
    tool = mcp_dspy._tool(mcp_tool(schema), False)
    tool(old=1, dyn="x", data={"pattern": "x", "$ref": "#/$defs/A"}, req={"a": 1})
    assert sent == [{"old": 1, "dyn": "x", "data": {"pattern": "x", "$ref": "#/$defs/A"}, "req": {"a": 1}}]


def test_dspy_text_is_within_the_budget_however_often_a_definition_is_named() -> None:
    framework("dspy")
    from mcpcall.integrations import dspy as mcp_dspy

    schema = _laughs(8, 4)
    schema["$defs"]["d8"] = {"type": "string", "description": "x" * 10_000}
    schema["properties"] = {f"a{i}": {"$ref": "#/$defs/d0"} for i in range(10)}
    text = len(repr(mcp_dspy.arguments(mcp_tool(schema).schema)))
    assert text <= mcp_dspy._MAX_TOOL_VALUES * mcp_dspy._TEXT_UNIT * 1.2  # 4^8 copies of 10 KB, inlined naively
