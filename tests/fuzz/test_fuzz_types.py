"""Typed results of every method from a hostile server: the parsers, what reads their records, a whole client.

Properties: each parser gives its record or raises :class:`ProtocolError` (``mcpcall.types``' docstring),
for any value a transport can deliver (nested as deep as ``json`` reads, integers of 4000 digits, NaN,
lone surrogates); what shows or hands on a record (``text``, Jupyter's HTML, the registry's tool messages)
never raises; and a client whose server answers every request with such values raises nothing but
:class:`MCPError` from any method, and never waits for an answer that came (a timeout here is a lost answer).
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mcpcall import Client, MCPError, RequestTimeout
from mcpcall.errors import ProtocolError
from mcpcall.protocol import TASKS_EXTENSION
from mcpcall.registry import ParsedCall, anthropic_blocks, result_text, tool_message
from mcpcall.session.cache import ResultCache
from mcpcall.session.tasks import parse_task_status
from mcpcall.transports.memory import MemoryTransport
from mcpcall.types import (
    ToolList,
    parse_call_result,
    parse_completion,
    parse_content,
    parse_prompt,
    parse_prompt_result,
    parse_read_result,
    parse_resource,
    parse_resource_contents,
    parse_template,
    parse_tool,
)

from .profiles import fuzz
from .strategies import BIG_INTS, deep_marker, deep_values, field_values, json_values, keys, materialize, numbers, shaped, texts

# -- what a server puts in results ------------------------------------------------------------------------

base64_texts = st.one_of(st.sampled_from(["aGVsbG8=", "aGVs\nbG8=", "", "!!", "a", "=" * 8, "aGVsbG8"]), texts)
annotations = st.one_of(shaped({"audience": st.lists(texts), "priority": numbers}), json_values)
blocks = st.one_of(
    shaped({"type": st.just("text"), "text": texts, "annotations": annotations}),
    shaped({"type": st.sampled_from(["image", "audio"]), "data": base64_texts,
            "mimeType": st.sampled_from(["image/png", "image/svg+xml", "audio/wav", " IMAGE/PNG ", ""])}),
    shaped({"type": st.just("resource_link"), "uri": texts, "name": texts, "size": numbers, "title": texts}),
    shaped({"type": st.just("resource"), "resource": shaped({"uri": texts, "text": texts, "blob": base64_texts})}),
    shaped({"type": st.one_of(texts, numbers)}),
    deep_values,
)
contents = shaped({"uri": texts, "text": texts, "blob": base64_texts, "mimeType": texts})
tools = shaped({"name": texts, "description": texts, "inputSchema": json_values, "outputSchema": json_values,
                "title": texts, "annotations": json_values})
call_results = shaped({"content": st.lists(blocks, max_size=4), "structuredContent": st.one_of(json_values, deep_values),
                       "isError": st.one_of(st.booleans(), leaves := st.one_of(st.none(), numbers, texts))})
prompts = shaped({"name": texts, "title": texts, "description": texts,
                  "arguments": st.lists(shaped({"name": texts, "required": leaves, "description": texts}), max_size=3)})
messages = shaped({"role": st.sampled_from(["user", "assistant", "system"]), "content": blocks})
task_statuses = shaped({"taskId": texts, "status": st.sampled_from(["working", "completed", "failed", "cancelled",
                                                                     "input_required", "x"]),
                        "pollIntervalMs": st.one_of(numbers, st.sampled_from(BIG_INTS)), "ttlMs": numbers,
                        "pollInterval": numbers, "ttl": numbers, "statusMessage": texts, "result": call_results,
                        "error": json_values, "inputRequests": json_values})

RESULTS: dict[str, st.SearchStrategy[Any]] = {
    "tools/list": shaped({"tools": st.lists(tools, max_size=3), "nextCursor": texts, "ttlMs": numbers}),
    "tools/call": call_results,
    "resources/list": shaped({"resources": st.lists(shaped({"uri": texts, "name": texts, "size": numbers, "mimeType": texts}),
                                                    max_size=3), "ttlMs": numbers}),
    "resources/templates/list": shaped({"resourceTemplates": st.lists(shaped({"uriTemplate": texts, "name": texts}),
                                                                      max_size=3)}),
    "resources/read": shaped({"contents": st.lists(contents, max_size=3), "ttlMs": numbers}),
    "prompts/list": shaped({"prompts": st.lists(prompts, max_size=3)}),
    "prompts/get": shaped({"messages": st.lists(messages, max_size=3), "description": texts}),
    "completion/complete": shaped({"completion": shaped({"values": st.lists(texts), "total": numbers, "hasMore": leaves})}),
    "task": task_statuses,
}

PARSERS: dict[str, Callable[[Any], Any]] = {
    "parse_content": lambda x: parse_content(x, "s"),
    "parse_resource_contents": lambda x: parse_resource_contents(x, "s"),
    "parse_call_result": lambda x: parse_call_result(x, "t", "s"),
    "parse_prompt_result": lambda x: parse_prompt_result(x, "p", "s"),
    "parse_read_result": lambda x: parse_read_result(x, "u", "s"),
    "parse_completion": lambda x: parse_completion(x, "s"),
    "parse_tool": lambda x: parse_tool(x, "s"),
    "parse_prompt": lambda x: parse_prompt(x, "s"),
    "parse_resource": lambda x: parse_resource(x, "s"),
    "parse_template": lambda x: parse_template(x, "s"),
    "parse_task_status": lambda x: parse_task_status(x, "s"),
}
INPUTS = {
    "parse_content": blocks, "parse_resource_contents": contents, "parse_call_result": call_results,
    "parse_prompt_result": RESULTS["prompts/get"], "parse_read_result": RESULTS["resources/read"],
    "parse_completion": RESULTS["completion/complete"], "parse_tool": tools, "parse_prompt": prompts,
    "parse_resource": RESULTS["resources/list"].map(lambda r: (r.get("resources") or [{}])[0] if isinstance(
        r.get("resources"), list) else r), "parse_template": shaped({"uriTemplate": texts, "name": texts}),
    "parse_task_status": task_statuses,
}


def _show(record: Any) -> None:
    """Everything that reads a record to show it or hand it on."""
    for name in ("text", "data"):
        if hasattr(record, name):
            getattr(record, name)
    if hasattr(record, "_repr_html_"):
        record._repr_html_()
    for attr in ("content", "messages", "contents", "arguments"):
        for item in getattr(record, attr, ()) or ():
            if hasattr(item, "_repr_html_"):
                item._repr_html_()


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_each_parser_gives_its_record_or_a_protocol_error(name: str) -> None:
    # parse_call_result let AttributeError out for non-objects; a block nested as deep as json reads made the
    # excerpt of the error (str() of the whole value) raise RecursionError; any server JSON gives a record or a
    # ProtocolError, and what reads the record never raises.
    parse = PARSERS[name]

    @fuzz(150)
    @given(st.one_of(INPUTS[name], field_values(), st.dictionaries(keys, json_values, max_size=6)))
    @example(deep_marker(-30, "list"))
    @example({"content": [deep_marker(-30, "list")]})
    @example({"messages": [{"role": "user", "content": deep_marker(-30, "mixed")}]})
    @example({"content": None, "isError": "\ue000deep:"})  # text that starts like a marker (a random run)
    def check(data: Any) -> None:
        data = materialize(data)
        try:
            record = parse(data)
        except ProtocolError as exc:
            assert len(str(exc)) < 2_000  # an excerpt, not the value
            return
        _show(record)
        if name == "parse_call_result":
            result_text(record)
            anthropic_blocks(record)
            for kind in ("openai", "responses", "anthropic"):
                tool_message(ParsedCall(kind, "c", "n", {}), text=result_text(record), is_error=record.is_error,
                             result=record)
        if name == "parse_tool":
            ToolList([record])._repr_html_()

    check()


@fuzz(100)
@given(st.sampled_from(sorted(RESULTS)), st.data())
@example("tools/list", None)
def test_the_result_cache_keeps_any_result_or_none(method: str, data: Any) -> None:
    result = {"ttlMs": 10**400, "tools": []} if data is None else data.draw(RESULTS[method])
    if not isinstance(result, dict):
        return
    cache = ResultCache()
    cache.put(method, {"cursor": "x"}, materialize(result))  # a ttlMs past any float: OverflowError
    cache.get(method, {"cursor": "x"})


# -- a whole client ---------------------------------------------------------------------------------------

errors = shaped({"code": st.one_of(st.sampled_from([-32601, -32602, -32002, -32022, -32603, 0]), numbers),
                 "message": texts, "data": json_values})


class Hostile:
    """A modern server that answers every request with what the current example says."""

    def __init__(self) -> None:
        self.answers: dict[str, Any] = {}

    def serve(self, message: dict[str, Any], reply: Callable[[dict[str, Any]], None]) -> None:
        if "id" not in message or "method" not in message:
            return
        method = message["method"]
        if method == "server/discover":
            result: Any = {"supportedVersions": ["2026-07-28"], "resultType": "complete", "capabilities": {
                "tools": {}, "resources": {}, "prompts": {}, "completions": {}, "extensions": {TASKS_EXTENSION: {}}}}
            reply({"jsonrpc": "2.0", "id": message["id"], "result": result})
            return
        task_call = method == "tools/call" and TASKS_EXTENSION in str(message.get("params", {}).get("_meta"))
        answer = self.answers.get("task" if task_call or method.startswith("tasks/") else method, {})
        if isinstance(answer, tuple):  # an error answer
            reply({"jsonrpc": "2.0", "id": message["id"], "error": answer[1]})
            return
        if task_call and isinstance(answer, dict):
            answer = {**answer, "resultType": "task"}
        reply({"jsonrpc": "2.0", "id": message["id"], "result": materialize(answer)})


CALLS: dict[str, Callable[[Client], Any]] = {
    "tools/list": lambda c: c.list_tools(cache=False),
    "tools/call": lambda c: c.call_tool("t", {}),
    "resources/list": lambda c: c.list_resources(cache=False),
    "resources/templates/list": lambda c: c.list_resource_templates(cache=False),
    "resources/read": lambda c: c.read_resource("file:///x", cache=False),
    "prompts/list": lambda c: c.list_prompts(cache=False),
    "prompts/get": lambda c: c.get_prompt("p", {"a": "b"}),
    "completion/complete": lambda c: c.complete({"type": "ref/prompt", "name": "p"}, "a", "b"),
    "task": lambda c: c.call_tool("t", {}, task=True),
}
answers = st.fixed_dictionaries({method: st.one_of(strategy, strategy, errors.map(lambda e: ("error", e)), json_values)
                                 for method, strategy in RESULTS.items()})


def test_a_client_of_a_hostile_server_raises_only_mcp_errors() -> None:
    server = Hostile()
    with Client(MemoryTransport(server.serve, name="hostile"), timeout=5).connect() as client:

        @fuzz(60)
        @given(answers)
        @example({"task": {"taskId": "t1", "status": "working", "pollIntervalMs": 10**400}})  # OverflowError: poll delay
        @example({"tools/call": {"content": [deep_marker(-30, "list")]}})  # RecursionError in an error's excerpt
        @example({"tools/list": {"tools": [], "ttlMs": 10**400}})
        def check(example_answers: dict[str, Any]) -> None:
            server.answers = example_answers
            for method, call in CALLS.items():
                try:
                    got = call(client)
                except RequestTimeout as exc:  # the server answered at once: an answer was lost on the way
                    raise AssertionError(f"{method}: an answer the server sent never completed the call") from exc
                except MCPError:
                    continue
                _show(got)
                for item in got if isinstance(got, list) else ():
                    _show(item)
                if method == "task":
                    got.status()
                    got.cancel(timeout=5)

        check()
        assert client.alive
    assert not [t for t in threading.enumerate() if t.name.endswith("-hostile")]
