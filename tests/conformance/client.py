"""The conformance-suite client: one program, many scenarios, mcpcall's public API only.

The suite runs ``python tests/conformance/client.py <server url>`` with
``MCP_CONFORMANCE_SCENARIO`` (what to do), ``MCP_CONFORMANCE_PROTOCOL_VERSION``
(the revision under test) and, for some scenarios, ``MCP_CONFORMANCE_CONTEXT``
(JSON) in the environment. It checks the traffic, not what this prints; the exit
status says whether the client itself got through.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable

try:
    import mcpcall
except ImportError:  # run from a checkout without installing
    sys.path.append(str(Path(__file__).resolve().parents[2]))
    import mcpcall

log = logging.getLogger("conformance-client")

try:  # the grants beyond the authorization code flow (client credentials, JWT bearer, enterprise)
    from auth_extensions import auth_for as extension_auth  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - only while that module is being written
    extension_auth = None


def accept_elicitation(params: dict[str, Any]) -> dict[str, Any]:
    """Accept every elicitation without filling anything in (mcpcall adds the schema's defaults)."""
    return {"action": "accept", "content": {}}


def confirm_elicitation(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"confirmed": True}}


def placeholder(schema: Any) -> Any:
    """A value of the schema's type, for tools whose arguments do not matter."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    return {"string": "x", "integer": 1, "number": 1.5, "boolean": True, "array": [], "object": {}}.get(kind, "x")


def arguments_for(tool: mcpcall.Tool) -> dict[str, Any]:
    props = tool.input_schema.get("properties") or {}
    required = tool.input_schema.get("required") or []
    return {name: placeholder(props.get(name)) for name in required}


def exercise_everything(client: mcpcall.Client) -> None:
    """List and use tools, resources and prompts once each."""
    tools = client.list_tools()
    if tools:
        client.call_tool(tools[0].name, arguments_for(tools[0]))
    if "resources" in client.capabilities:
        resources = client.list_resources()
        if resources:
            client.read_resource(resources[0].uri)
    if "prompts" in client.capabilities:
        prompts = client.list_prompts()
        if prompts:
            client.get_prompt(prompts[0])


def tools_call(client: mcpcall.Client, context: dict[str, Any]) -> None:
    names = [tool.name for tool in client.list_tools()]
    if "add_numbers" in names:
        client.call_tool("add_numbers", {"a": 5, "b": 3}).raise_for_error()
    else:
        exercise_everything(client)


def custom_headers(client: mcpcall.Client, context: dict[str, Any]) -> None:
    client.list_tools()
    for call in context.get("toolCalls", []):
        client.call_tool(call["name"], call.get("arguments") or {})


def invalid_tool_headers(client: mcpcall.Client, context: dict[str, Any]) -> None:
    for tool in client.list_tools():  # tools with invalid x-mcp-header are already left out
        client.call_tool(tool.name, arguments_for(tool))


def request_state(client: mcpcall.Client, context: dict[str, Any]) -> None:
    names = [tool.name for tool in client.list_tools()]
    for name in names:
        client.call_tool(name, {})


def schema_preservation(client: mcpcall.Client, context: dict[str, Any]) -> None:
    tools = client.list_tools()
    focal = next((t for t in tools if t.name == "json_schema_2020_12_tool"), None)
    echo = next((t for t in tools if t is not focal), None)
    if focal is None or echo is None:
        raise SystemExit(f"expected the 2020-12 tool and an echo tool, got {[t.name for t in tools]}")
    client.call_tool(echo.name, {"schema": dict(focal.raw["inputSchema"])})


def elicitation_defaults(client: mcpcall.Client, context: dict[str, Any]) -> None:
    for tool in client.list_tools():
        client.call_tool(tool.name, {})


def list_only(client: mcpcall.Client, context: dict[str, Any]) -> None:
    client.list_tools()


def default(client: mcpcall.Client, context: dict[str, Any]) -> None:
    exercise_everything(client)


SCENARIOS: dict[str, Callable[[mcpcall.Client, dict[str, Any]], None]] = {
    "tools_call": tools_call,
    "initialize": list_only,
    "http-custom-headers": custom_headers,
    "http-invalid-tool-headers": invalid_tool_headers,
    "http-standard-headers": default,
    "request-metadata": default,
    "sep-2322-client-request-state": request_state,
    "json-schema-ref-no-deref": list_only,
    "json-schema-2020-12-preservation": schema_preservation,
    "elicitation-sep1034-client-defaults": elicitation_defaults,
    "sse-retry": default,
}

HANDLERS: dict[str, dict[str, mcpcall.Handler]] = {
    "elicitation-sep1034-client-defaults": {"elicitation/create": accept_elicitation},
    "sep-2322-client-request-state": {"elicitation/create": confirm_elicitation},
}


def follow_redirect(authorize_url: str) -> str:
    """The browser step, headless: the suite's authorization server approves at once and redirects back."""
    import requests

    response = requests.get(authorize_url, allow_redirects=False, timeout=30)
    location = response.headers.get("Location")
    if response.status_code not in (301, 302, 303, 307, 308) or not location:
        raise SystemExit(f"the authorization endpoint answered HTTP {response.status_code} without a redirect")
    return location


def auth_for(scenario: str, context: dict[str, Any], url: str) -> Any:
    """The auth object a scenario needs: an extension grant, else the authorization code flow."""
    if not scenario.startswith("auth/"):
        return None
    if extension_auth is not None:
        auth = extension_auth(scenario, context, url)
        if auth is not None:
            return auth
    return mcpcall.OAuth(
        client_id=context.get("client_id"),
        client_secret=context.get("client_secret"),
        client_name="mcpcall-conformance",
        client_metadata_url=CIMD_URL,
        redirect_uri="http://localhost:3000/callback",
        redirect_handler=follow_redirect,
        dpop=True,  # used only where the authorization server advertises DPoP
        fallback_endpoints=scenario == "auth/2025-03-26-oauth-endpoint-fallback",
        timeout=30,
    )


def authorized(client: mcpcall.Client, context: dict[str, Any]) -> None:
    """After authorizing: what the suite's reference client does (list the tools, call test-tool)."""
    tools = client.list_tools()
    for tool in tools:
        client.call_tool(tool.name, arguments_for(tool)).raise_for_error()


#: The Client ID Metadata Document URL the suite's scenarios accept as a client_id.
CIMD_URL = "https://conformance-test.local/client-metadata.json"


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    revision = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION") or "auto"
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    run = SCENARIOS.get(scenario, authorized if scenario.startswith("auth/") else default)
    log.info("scenario %s, revision %s, server %s", scenario or "(none)", revision, url)
    auth = auth_for(scenario, context, url)
    with mcpcall.connect(url, protocol=revision, timeout=30, handlers=HANDLERS.get(scenario), auth=auth) as client:
        run(client, context)
    return 0


if __name__ == "__main__":
    sys.exit(main())
