"""A server's tool schemas through each framework's own conversion: the tool it builds, and what it shows a model.

The schemas are tests/fuzz/strategies.py's (hostile values, $ref fan-outs, nesting at the limits). Each
framework must build its tool from any schema a server may send, show it (its own JSON schema, its
inputs), and take arguments, without raising; what needs no framework is fuzzed in
tests/fuzz/test_fuzz_models.py. Each case runs where its framework is installed (``make test-integrations``).
"""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest
from hypothesis import example, given

from mcpcall.integrations._core import MCPTool
from mcpcall.types import parse_tool
from mcpcall.types.tools import NestedTooDeep
from tests.fuzz.cost import steps
from tests.fuzz.profiles import fuzz
from tests.fuzz.strategies import fan_out, schemas

from .conftest import framework


def mcp_tool(schema: Any) -> MCPTool | None:
    try:
        return MCPTool(None, "t", "s", parse_tool({"name": "t", "inputSchema": schema}), None)  # type: ignore[arg-type]
    except NestedTooDeep:
        return None


def _langchain(module: Any, tool: MCPTool) -> None:
    made = module._tool(tool, False)
    made.tool_call_schema if isinstance(made.args_schema, dict) else made.get_input_schema().model_json_schema()


def _crewai(module: Any, tool: MCPTool) -> None:
    made = module.make_tool(tool)
    made.args_schema.model_json_schema()


def _dspy(module: Any, tool: MCPTool) -> None:
    module.arguments(tool.schema)
    module._tool(tool, False)


def _smolagents(module: Any, tool: MCPTool) -> None:
    module.inputs_for(tool)
    module.make_tool(tool)


def _haystack(module: Any, tool: MCPTool) -> None:
    module.parameters(tool.schema)
    module._tool(tool, None)


def _llamaindex(module: Any, tool: MCPTool) -> None:
    made = module._tool(tool, "t")
    made.metadata.get_parameters_dict()


def _openai_agents(module: Any, tool: MCPTool) -> None:
    made = module._function_tool(tool, "t", {})
    json.dumps(made.params_json_schema, default=repr)


def _pydantic_ai(module: Any, tool: MCPTool) -> None:
    import pydantic_ai

    pydantic_ai.Tool.from_schema(module._function(tool, "failed"), name="t", description=tool.description,
                                 json_schema=tool.schema, takes_ctx=True)


FRAMEWORKS: dict[str, tuple[str, Callable[[Any, MCPTool], None]]] = {
    "langchain": ("langchain_core", _langchain),
    "crewai": ("crewai", _crewai),
    "dspy": ("dspy", _dspy),
    "smolagents": ("smolagents", _smolagents),
    "haystack": ("haystack", _haystack),
    "llamaindex": ("llama_index.core", _llamaindex),
    "openai_agents": ("agents", _openai_agents),
    "pydantic_ai": ("pydantic_ai", _pydantic_ai),
}
#: Steps one framework tool may take to build, whatever the schema: each conversion has a node budget.
STEP_LIMIT = 8_000_000


@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
def test_each_framework_builds_its_tool_from_any_schema(name: str) -> None:
    package, build = FRAMEWORKS[name]
    framework(package)
    import importlib

    module = importlib.import_module(f"mcpcall.integrations.{name}")

    @fuzz(60, deadline=None)
    @given(schemas)
    @example(fan_out(8, 6))
    @example({"items": {"type": "string", "$ref": "#", "pattern": "(unclosed"}})  # a pattern no regex (a CI run)
    @example({"type": "object", "properties": {"a": {"type": "string", "pattern": "a{99999999999999999999}"},
                                             "b": {"type": "string", "pattern": "(" * 3000 + "a" + ")" * 3000}}})
    @example({"type": "object", "properties": {"a": {"$ref": "#/enum/\u00b2"}}, "enum": [1]})
    @example({"type": "object", "properties": {"self": {"type": {}}, "a": {"enum": [float("nan"), 10**400]}}})
    def check(schema: Any) -> None:
        tool = mcp_tool(schema)
        if tool is None:
            return
        build(module, tool)
        spent = steps(build, module, mcp_tool(schema), limit=STEP_LIMIT)
        assert spent <= STEP_LIMIT, f"{name}: more than {STEP_LIMIT} steps to build a tool of {json.dumps(schema)[:100]}"

    check()
