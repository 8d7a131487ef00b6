"""Real servers' tool schemas through every framework's own validation and its conversion for the model API.

For each of the eight frameworks and each of three real servers (server-everything, npm server-filesystem,
Playwright's MCP server: listing its tools starts no browser, and no tool of it is called here), every tool
must come through the framework's own checks and the function that turns a tool into what the model API
receives, as a JSON-serialisable object schema with the tool's name (or the framework's sanitised one), its
description, every property (with its description) and the same required names: an optional argument stays
one the model may leave out (not required, or, in a strict-mode schema where every property is required,
one that takes ``null``, which the integrations do not send). Arguments valid for the MCP schema (the
required ones alone, and all of them) must pass the framework's validation and the schema the model is shown.

Also: importing ``mcpcall`` and ``mcpcall.integrations`` imports no framework (nor pydantic), every module's
``tools()`` takes ``source``, ``timeout`` and ``on_progress`` and names its extra when the framework is
missing, and every framework tool of the demo server carries the MCP tool's description.
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from typing import Any, Callable

import pytest

import mcpcall
from mcpcall.integrations import FRAMEWORKS
from mcpcall.integrations._core import identifier
from mcpcall.registry import tool_description
from tests.conftest import ROOT
from tests.integrations.conftest import framework

jsonschema = pytest.importorskip("jsonschema")  # haystack's and dspy's dependency: checks the schemas the model is shown

SERVERS = ("everything", "filesystem", "playwright")

#: The framework's top package for each module (what ``require`` imports first).
TOP_PACKAGE = {
    "langchain": "langchain_core",
    "smolagents": "smolagents",
    "crewai": "crewai",
    "llamaindex": "llama_index",
    "haystack": "haystack",
    "dspy": "dspy",
    "openai_agents": "agents",
    "pydantic_ai": "pydantic_ai",
}

OPENAI_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


# ---------------------------------------------------------------- arguments valid for an MCP schema


def _resolve(node: Mapping[str, Any], root: Mapping[str, Any], seen: tuple[str, ...] = ()) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/") and ref not in seen:
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        return _resolve({**target, **{k: v for k, v in node.items() if k != "$ref"}}, root, (*seen, ref))
    return node


def sample(node: Any, root: Mapping[str, Any], full: bool, depth: int = 0) -> Any:
    """A value valid for ``node`` (a property schema): with ``full``, every property of an object, else the required ones."""
    if not isinstance(node, Mapping) or depth > 8:
        return "x"
    node = _resolve(node, root)
    if "const" in node:
        return node["const"]
    if isinstance(node.get("enum"), list) and node["enum"]:
        return node["enum"][0]
    if "default" in node:
        return node["default"]
    for key in ("anyOf", "oneOf"):
        branches = [b for b in node.get(key) or [] if isinstance(b, Mapping)]
        if branches:
            rest = {k: v for k, v in node.items() if k != key}
            usable = [b for b in branches if b.get("type") != "null"] or branches
            return sample({**rest, **usable[0]}, root, full, depth + 1)
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in node else "array" if "items" in node else "string"
    if kind == "string":
        if node.get("format") == "uri":
            return "https://example.com/"
        return "x" * max(1, int(node.get("minLength", 1)))
    if kind in ("number", "integer"):
        low = node.get("minimum", node.get("exclusiveMinimum", 0))
        value = max(1, math.ceil(low) + (1 if "exclusiveMinimum" in node else 0))
        return value
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    if kind == "array":
        items = node.get("items")
        return [sample(items, root, full, depth + 1)] * max(1, int(node.get("minItems", 1)))
    props = node.get("properties") if isinstance(node.get("properties"), Mapping) else {}
    required = set(node.get("required") or [])
    return {k: sample(v, root, full, depth + 1) for k, v in props.items() if full or k in required}


def mcp_arguments(tool: Any, full: bool) -> dict[str, Any]:
    """Arguments valid for the MCP tool's own inputSchema (checked here with jsonschema)."""
    schema = tool.input_schema
    values = sample(schema, schema, full)
    jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema).validate(values)
    return values


def accepts_null(node: Any, root: Mapping[str, Any]) -> bool:
    """True when a property schema (as the model is shown it) takes ``null``."""
    if not isinstance(node, Mapping):
        return False
    node = _resolve(node, root)
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind) or node.get("nullable") is True:
        return True
    return any(accepts_null(b, root) for key in ("anyOf", "oneOf") for b in node.get(key) or [])


def texts_of(node: Any) -> str:
    """Every description (and title) in a schema, joined: a property's description may move into a branch."""
    if isinstance(node, Mapping):
        own = " ".join(str(node[k]) for k in ("description", "title") if isinstance(node.get(k), str))
        return " ".join([own, *(texts_of(v) for v in node.values())])
    if isinstance(node, list):
        return " ".join(texts_of(v) for v in node)
    return ""


# ---------------------------------------------------------------- what each framework shows the model


class Spec:
    """One tool as a model API receives it: ``name``, ``description``, ``parameters`` (an object schema).

    ``expected`` is the name it should have when the framework renames tools on the way (CrewAI);
    ``prompt`` marks a schema shown in a prompt's text, whose required names are not checked (see CrewAI).
    """

    def __init__(self, where: str, name: Any, description: Any, parameters: Any, *, expected: str | None = None,
                 prompt: bool = False) -> None:
        self.where = where
        self.name = name
        self.description = description
        self.parameters = parameters
        self.expected = expected
        self.prompt = prompt


def _function(where: str, spec: Mapping[str, Any], **options: Any) -> Spec:
    function = spec["function"] if "function" in spec else spec
    return Spec(where, function.get("name"), function.get("description"), function.get("parameters"), **options)


def langchain_specs(tools: list[Any], listed: list[Any]) -> list[list[Spec]]:
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.prebuilt import ToolNode

    ToolNode(tools)  # the node checks its tools
    out = []
    for tool, mcp in zip(tools, listed):
        assert tool.name == mcp.name
        for values in (mcp_arguments(mcp, False), mcp_arguments(mcp, True)):
            assert tool._parse_input(values, None) == values  # LangChain's own input parsing
        out.append([_function("convert_to_openai_tool", convert_to_openai_tool(tool)),
                     Spec("tool_call_schema", tool.name, tool.description, tool.tool_call_schema)])
    return out


def smolagents_specs(tools: list[Any], listed: list[Any]) -> list[list[Spec]]:
    from smolagents.models import get_tool_json_schema
    from smolagents.tools import validate_tool_arguments

    out = []
    taken: set[str] = set()
    for tool, mcp in zip(tools, listed):
        expected = identifier(mcp.name, taken)
        taken.add(expected)
        assert tool.name == expected
        tool.validate_arguments()  # smolagents' own check of a tool
        for values in (mcp_arguments(mcp, False), mcp_arguments(mcp, True)):
            validate_tool_arguments(tool, values)  # what its agents check a model's call with
        code = tool.to_code_prompt()  # what a CodeAgent shows the model
        assert code.startswith(f"def {tool.name}(") and tool.description in code
        compile(code + "\n    pass\n", tool.name, "exec")
        assert tool.description in tool.to_tool_calling_prompt()
        out.append([_function("get_tool_json_schema", get_tool_json_schema(tool))])
    return out


def crewai_specs(tools: list[Any], listed: list[Any]) -> list[list[Spec]]:
    from crewai.llms.providers.openai.completion import OpenAICompletion
    from crewai.utilities.agent_utils import convert_tools_to_openai_schema, render_text_description_and_args
    from crewai.utilities.string_utils import sanitize_tool_name

    native, _, _ = convert_tools_to_openai_schema(tools)  # CrewAI's native function calling
    sent = OpenAICompletion._convert_tools_for_interference(None, native)  # as its OpenAI provider sends them
    rendered = render_text_description_and_args(tools)  # the ReAct prompt's tool list
    out = []
    for tool, mcp, spec, openai in zip(tools, listed, native, sent):
        assert tool.name == mcp.name
        structured = tool.to_structured_tool()
        for values in (mcp_arguments(mcp, False), mcp_arguments(mcp, True)):
            tool.args_schema.model_validate(values)  # what CrewAI validates a call with
            tool._validate_kwargs(dict(values))
            structured._parse_args(dict(values))
        text = tool.formatted_description
        assert f"Tool Name: {sanitize_tool_name(mcp.name)}\n" in text and text in rendered
        assert text.endswith(f"Tool Description: {tool.description}")
        arguments = json.loads(text.split("Tool Arguments: ", 1)[1].split("\nTool Description: ", 1)[0])
        # CrewAI renders every tool's arguments in its ReAct prompt as all required, with no null (its
        # generate_model_description), whatever the model says; the model may still leave one out (validated above).
        sanitized = sanitize_tool_name(mcp.name)
        out.append([
            Spec("args_schema.model_json_schema", tool.name, tool.description, tool.args_schema.model_json_schema()),
            Spec("formatted_description", sanitized, tool.description, arguments, expected=sanitized, prompt=True),
            _function("convert_tools_to_openai_schema", spec, expected=sanitized),
            _function("OpenAICompletion (strict)", openai, expected=sanitized),
        ])
    return out


def llamaindex_specs(tools: list[Any], listed: list[Any]) -> list[list[Spec]]:
    out = []
    for tool, mcp in zip(tools, listed):
        metadata = tool.metadata
        for values in (mcp_arguments(mcp, False), mcp_arguments(mcp, True)):
            metadata.fn_schema.model_validate(values)
        json.loads(metadata.fn_schema_str)  # what a ReActAgent's prompt shows
        out.append([_function("to_openai_tool", metadata.to_openai_tool())])
    return out


def haystack_specs(tools: list[Any], listed: list[Any]) -> list[list[Spec]]:
    from haystack.components.generators.chat.openai import OpenAIChatGenerator
    from haystack.components.generators.chat.openai_responses import OpenAIResponsesChatGenerator
    from haystack.dataclasses import ChatMessage
    from haystack.tools import Tool
    from haystack.utils import Secret

    messages = [ChatMessage.from_user("hi")]
    key = Secret.from_token("not-a-key")
    chat = OpenAIChatGenerator(api_key=key)._prepare_api_call(messages=messages, tools=tools)["tools"]
    responses = OpenAIResponsesChatGenerator(api_key=key)._prepare_api_call(messages=messages, tools=tools)["tools"]
    out = []
    for tool, mcp, one, two in zip(tools, listed, chat, responses):
        assert tool.name == mcp.name
        Tool(name=tool.name, description=tool.description, parameters=tool.parameters, function=tool.function)  # its check
        out.append([Spec("tool_spec", **tool.tool_spec), _function("OpenAIChatGenerator", one),
                    _function("OpenAIResponsesChatGenerator", two)])
    return out


def dspy_specs(tools: list[Any], listed: list[Any]) -> list[list[Spec]]:
    from jsonschema import Draft202012Validator

    out = []
    for tool, mcp in zip(tools, listed):
        assert tool.name == mcp.name
        for arg in tool.args.values():
            Draft202012Validator.check_schema(arg)
        for values in (mcp_arguments(mcp, False), mcp_arguments(mcp, True)):
            tool._validate_and_parse_args(**values)  # DSPy's own check of a call's arguments
        assert str(tool).startswith(tool.name) and tool.desc in str(tool)  # what ReAct's instructions list
        out.append([_function("format_as_litellm_function_call", tool.format_as_litellm_function_call())])
    return out


def openai_agents_specs(tools: list[Any], listed: list[Any]) -> list[list[Spec]]:
    import agents
    from agents.models.chatcmpl_converter import Converter as ChatConverter
    from agents.models.openai_responses import Converter as ResponsesConverter

    agents.Agent(name="check", tools=tools)
    responses = ResponsesConverter.convert_tools(tools, []).tools
    out = []
    for tool, responses_tool in zip(tools, responses):
        out.append([_function("Responses Converter.convert_tools", responses_tool),
                    _function("ChatCmplConverter.tool_to_openai", ChatConverter.tool_to_openai(tool))])
    return out


def pydantic_ai_specs(tools: list[Any], listed: list[Any]) -> list[list[Spec]]:
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
    from pydantic_ai.profiles.google import GoogleJsonSchemaTransformer
    from pydantic_ai.providers.anthropic import AnthropicProvider
    from pydantic_ai.providers.openai import OpenAIProvider

    openai = OpenAIProvider(api_key="not-a-key")
    chat = OpenAIChatModel("gpt-4o", provider=openai)
    responses = OpenAIResponsesModel("gpt-4o", provider=openai)
    anthropic = AnthropicModel("claude-sonnet-4-5", provider=AnthropicProvider(api_key="not-a-key"))

    def customized(model: Any, tool_def: Any) -> Any:
        (one,) = model.customize_request_parameters(ModelRequestParameters(function_tools=[tool_def])).function_tools
        return one

    out = []
    for tool, mcp in zip(tools, listed):
        tool_def = tool.tool_def
        for values in (mcp_arguments(mcp, False), mcp_arguments(mcp, True)):
            tool.function_schema.validator.validate_python(values)
        a = chat._map_tool_definition(customized(chat, tool_def), {})
        b = responses._map_tool_definition(customized(responses, tool_def), visibility="visible")
        c = anthropic._map_tool_definition(customized(anthropic, tool_def), {}, visibility="visible")
        google = GoogleJsonSchemaTransformer(tool_def.parameters_json_schema).walk()
        out.append([
            Spec("tool_def", tool_def.name, tool_def.description, tool_def.parameters_json_schema),
            _function("OpenAIChatModel", a),
            _function("OpenAIResponsesModel", b),
            Spec("AnthropicModel", c["name"], c["description"], c["input_schema"]),
            Spec("GoogleJsonSchemaTransformer", tool_def.name, tool_def.description, google),
        ])
    return out


SPECS: dict[str, Callable[[list[Any], list[Any]], list[list[Spec]]]] = {
    "langchain": langchain_specs,
    "smolagents": smolagents_specs,
    "crewai": crewai_specs,
    "llamaindex": llamaindex_specs,
    "haystack": haystack_specs,
    "dspy": dspy_specs,
    "openai_agents": openai_agents_specs,
    "pydantic_ai": pydantic_ai_specs,
}


def expected_names(fw: str, listed: list[Any]) -> list[str]:
    """The name each framework's tool should carry (the MCP name, or the framework's sanitised form of it)."""
    names = [t.name for t in listed]
    if fw == "smolagents":
        taken: set[str] = set()
        out = []
        for name in names:
            out.append(identifier(name, taken))
            taken.add(out[-1])
        return out
    if fw in ("llamaindex", "openai_agents", "pydantic_ai"):
        return [re.sub(r"[^A-Za-z0-9_-]", "_", n)[:64] for n in names]
    return names


def with_nulls(values: Any, schema: Any, root: Mapping[str, Any]) -> Any:
    """``values`` with ``null`` for every property ``schema`` requires that they leave out, at every level.

    What a model sends for an argument it leaves out when a strict-mode schema requires every property.
    """
    if not isinstance(schema, Mapping):
        return values
    schema = _resolve(schema, root)
    if isinstance(values, dict):
        branches = [b for key in ("anyOf", "oneOf") for b in schema.get(key) or [] if isinstance(b, Mapping)]
        if "properties" not in schema and branches:
            schema = next((b for b in branches if "properties" in _resolve(b, root)), schema)
            schema = _resolve(schema, root)
        props = schema.get("properties") if isinstance(schema.get("properties"), Mapping) else {}
        out = {**{k: None for k in schema.get("required") or [] if k not in values}, **values}
        return {k: with_nulls(v, props.get(k), root) for k, v in out.items()}
    if isinstance(values, list) and isinstance(schema.get("items"), Mapping):
        return [with_nulls(v, schema["items"], root) for v in values]
    return values


def problems_of(spec: Spec, mcp: Any, expected_name: str) -> list[str]:
    """What ``spec`` (one tool as the model API receives it) lost of the MCP tool."""
    found: list[str] = []
    try:
        json.loads(json.dumps({"name": spec.name, "description": spec.description, "parameters": spec.parameters}))
    except (TypeError, ValueError) as exc:
        return [f"not JSON-serialisable: {exc}"]
    expected_name = spec.expected or expected_name
    if spec.name != expected_name:
        found.append(f"name {spec.name!r}, expected {expected_name!r}")
    if not isinstance(spec.name, str) or not OPENAI_NAME.match(spec.name):
        found.append(f"name {spec.name!r} is no name a model API takes")
    description = tool_description(mcp)
    if not isinstance(spec.description, str) or description.strip() not in spec.description:
        found.append(f"description {str(spec.description)[:60]!r} lost the MCP description {description[:60]!r}")
    params = spec.parameters
    if not isinstance(params, Mapping) or params.get("type") != "object":
        return [*found, f"parameters are no object schema: {str(params)[:120]}"]
    schema = mcp.input_schema
    mcp_props = dict(schema.get("properties") or {})
    mcp_required = set(schema.get("required") or [])
    props = params.get("properties") or {}
    required = set(params.get("required") or [])
    if set(props) != set(mcp_props):
        found.append(f"properties {sorted(props)} != the MCP tool's {sorted(mcp_props)}")
    for name, sub in mcp_props.items():
        text = sub.get("description") if isinstance(sub, Mapping) else None
        if isinstance(text, str) and name in props and text.strip() not in texts_of(props[name]):
            found.append(f"property {name!r} lost its description {text[:50]!r}")
    if spec.prompt:
        return found
    if not mcp_required <= required:
        found.append(f"required {sorted(mcp_required - required)} (required by the MCP tool) are optional")
    for name in sorted(required - mcp_required):
        if name in props and not accepts_null(props[name], params):
            found.append(f"optional {name!r} is required (and takes no null): the model cannot leave it out")
    for full in (False, True):  # a call valid for the MCP tool is valid for the schema the model is shown
        values = with_nulls(mcp_arguments(mcp, full), params, params)
        try:
            jsonschema.Draft202012Validator(_without_schema_uri(params)).validate(values)
        except jsonschema.ValidationError as exc:
            found.append(f"{'all the' if full else 'the required'} arguments {values} refused: {exc.message[:150]}")
        except jsonschema.SchemaError as exc:
            found.append(f"parameters are no valid JSON Schema: {exc.message[:150]}")
            break
    return found


def _without_schema_uri(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k != "$schema"}


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_every_tool_of_a_real_server_reaches_the_model_api(fw: str, server: str, request: pytest.FixtureRequest) -> None:
    framework(TOP_PACKAGE[fw])
    client: mcpcall.Client = request.getfixturevalue(server)
    module = importlib.import_module(f"mcpcall.integrations.{fw}")
    listed = client.list_tools()
    tools = module.tools(client, timeout=30)
    assert len(tools) == len(listed), f"{fw} dropped tools of {server}"
    names = expected_names(fw, listed)
    specs = SPECS[fw](tools, listed)
    assert len(specs) == len(listed)
    report = []
    for mcp, name, per_tool in zip(listed, names, specs):
        for spec in per_tool:
            report += [f"{fw} / {server} / {mcp.name} / {spec.where}: {p}" for p in problems_of(spec, mcp, name)]
    assert not report, "\n" + "\n".join(report)


def test_a_null_the_schema_takes_is_sent_not_dropped(playwright: mcpcall.Client) -> None:
    """Playwright's ``browser_emulate_media``: "Omitted parameters are left unchanged; null clears an override".

    ``MCPTool.arguments`` drops ``None`` for every optional argument (frameworks fill left-out fields with it),
    also where the schema takes ``null`` and it means something else than leaving the argument out: a model
    cannot clear an override. (Listing only: no tool of Playwright's is called.)
    """
    from mcpcall.integrations._core import mcp_tools

    tool = next(t for t in mcp_tools(playwright, 30) if t.name == "browser_emulate_media")
    assert accepts_null(tool.properties["colorScheme"], tool.schema)
    assert "null clears" in tool.description
    assert tool.arguments({"colorScheme": None, "media": "print"}) == {"colorScheme": None, "media": "print"}


# ---------------------------------------------------------------- imports


def test_importing_mcpcall_and_its_integrations_imports_no_framework() -> None:
    heavy = ["langchain_core", "smolagents", "crewai", "llama_index", "haystack", "dspy", "agents", "pydantic_ai",
             "pydantic", "pydantic_core", "litellm", "openai", "anthropic", "jsonschema"]
    code = ("import json, sys\nimport mcpcall, mcpcall.integrations\n"
            f"print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_tools_takes_source_timeout_and_on_progress(fw: str) -> None:
    framework(TOP_PACKAGE[fw])
    module = importlib.import_module(f"mcpcall.integrations.{fw}")
    parameters = inspect.signature(module.tools).parameters
    assert list(parameters)[:2] == ["source", "timeout"]
    assert parameters["timeout"].default is None
    assert "on_progress" in parameters
    assert parameters["on_progress"].kind is inspect.Parameter.KEYWORD_ONLY and parameters["on_progress"].default is None


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_without_its_framework_a_module_names_its_extra(fw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    framework(TOP_PACKAGE[fw])  # installed here: hidden below
    for name in [m for m in sys.modules if m == TOP_PACKAGE[fw] or m.startswith(TOP_PACKAGE[fw] + ".")]:
        monkeypatch.delitem(sys.modules, name)  # restored afterwards
    monkeypatch.setitem(sys.modules, TOP_PACKAGE[fw], None)
    monkeypatch.delitem(sys.modules, f"mcpcall.integrations.{fw}", raising=False)
    with pytest.raises(ImportError, match=re.escape(f"pip install 'mcpcall[{fw}]'")):
        importlib.import_module(f"mcpcall.integrations.{fw}")


# ---------------------------------------------------------------- descriptions


def _description_of(fw: str, tool: Any) -> str:
    if fw == "llamaindex":
        return str(tool.metadata.description)
    if fw == "dspy":
        return str(tool.desc)
    if fw == "pydantic_ai":
        return str(tool.tool_def.description)
    return str(tool.description)


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_every_tool_of_the_demo_server_carries_its_mcp_description(fw: str, demo: mcpcall.Client) -> None:
    framework(TOP_PACKAGE[fw])
    module = importlib.import_module(f"mcpcall.integrations.{fw}")
    listed = demo.list_tools()
    tools = module.tools(demo, timeout=20)
    assert len(tools) == len(listed)
    for tool, mcp in zip(tools, listed):
        assert mcp.description, mcp.name  # the demo server describes every tool
        assert _description_of(fw, tool) == mcp.description, (fw, mcp.name)
