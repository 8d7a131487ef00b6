"""The client surface against the npm reference server ``@modelcontextprotocol/server-everything``, over stdio.

Resources (static, template instances, blobs), prompts and completion, every
content block its tools return, logging, sampling, elicitation, roots,
resource subscriptions and 2025-11-25 tasks. server-everything lists its
sampling, elicitation, roots and task tools only to a client that declares
those capabilities, which ``sampling=``, ``elicitation=`` and ``roots=`` do.

Installed by ``make peers`` into .npm-peers; skipped when missing (failed under
``make test``).
"""

from __future__ import annotations

import base64
import gzip
import json
import logging
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import CancelledError
from pathlib import Path
from typing import Any

import pytest

import mcpcall
from tests.conftest import everything_argv, wait_until

TEXT_TEMPLATE = "demo://resource/dynamic/text/{resourceId}"
BLOB_TEMPLATE = "demo://resource/dynamic/blob/{resourceId}"
FEATURES = "demo://resource/static/document/features.md"
STATIC_DOCS = ("architecture", "extension", "features", "how-it-works", "instructions", "startup", "structure")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "forty-two"}, "model": "fake-model",
           "stopReason": "endTurn"}


def on_callbacks_thread(name: str) -> bool:
    return name.startswith("mcpcall-callbacks-")


class Peer:
    """Records what server-everything asks of the client, and on which thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sampling: list[tuple[dict, str]] = []
        self.elicitation: list[tuple[dict, str]] = []
        self.logs: list[tuple[str, str | None, Any, str]] = []
        self.elicit_answer: dict = {"action": "decline"}

    def sample(self, params: dict) -> dict:
        with self.lock:
            self.sampling.append((params, threading.current_thread().name))
        return SAMPLED

    def elicit(self, params: dict) -> dict:
        with self.lock:
            self.elicitation.append((params, threading.current_thread().name))
        return self.elicit_answer

    def log(self, level: str, logger: str | None, data: Any) -> None:
        with self.lock:
            self.logs.append((level, logger, data, threading.current_thread().name))

    def logged(self, needle: str) -> list[tuple[str, str | None, Any, str]]:
        with self.lock:
            return [entry for entry in self.logs if needle in str(entry[2])]


@pytest.fixture
def argv() -> list[str]:
    return everything_argv("stdio")


@pytest.fixture
def peer() -> Peer:
    return Peer()


@pytest.fixture
def client(argv: list[str], peer: Peer, tmp_path: Path) -> Iterator[mcpcall.Client]:
    with mcpcall.connect(argv, sampling=peer.sample, elicitation=peer.elicit, roots=[tmp_path],
                         on_log=peer.log, timeout=30) as c:
        yield c


@pytest.fixture
def plain(argv: list[str]) -> Iterator[mcpcall.Client]:
    with mcpcall.connect(argv, timeout=30) as c:
        yield c


def drain(client: mcpcall.Client) -> None:
    """Wait until everything queued on the callbacks thread so far has run."""
    done = threading.Event()
    assert client.callbacks.submit(done.set)
    assert done.wait(10), "the callbacks thread did not catch up"


def assert_raw(block: Any) -> None:
    assert block.raw["type"] == block.type


# -- capabilities decide the tool list ------------------------------------------------------------


def test_capability_tools_follow_declared_capabilities(client: mcpcall.Client, plain: mcpcall.Client) -> None:
    # Guards that sampling=/elicitation=/roots= declare the capabilities a real server looks for.
    conditional = {"trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"}
    offered = {tool.name for tool in client.list_tools(timeout=10)}
    assert conditional <= offered, sorted(offered)
    assert "simulate-research-query" in offered
    bare = {tool.name for tool in plain.list_tools(timeout=10)}
    assert not conditional & bare, sorted(bare)
    assert {"echo", "get-tiny-image", "get-structured-content"} <= bare
    assert client.capabilities["resources"] == {"subscribe": True, "listChanged": True}
    assert "call" in client.capabilities["tasks"]["requests"]["tools"]


# -- resources ---------------------------------------------------------------------------------------


def test_static_resources_listed_and_read(plain: mcpcall.Client) -> None:
    # Guards list_resources() -> Resource and read_resource() of a static text resource.
    resources = {r.uri: r for r in plain.list_resources(timeout=10)}
    expected = {f"demo://resource/static/document/{doc}.md" for doc in STATIC_DOCS}
    assert expected <= set(resources), sorted(resources)
    features = resources[FEATURES]
    assert (features.name, features.mime_type) == ("features.md", "text/markdown")
    assert features.description and "features.md" in features.description
    read = plain.read_resource(FEATURES, timeout=10)
    assert len(read.contents) == 1
    contents = read.contents[0]
    assert (contents.uri, contents.mime_type, contents.blob) == (FEATURES, "text/markdown", None)
    assert contents.text is not None and contents.text.startswith("# Everything Server - Features")
    assert read.text == contents.text
    assert read.data == contents.text.encode("utf-8")


def test_resource_templates_listed(plain: mcpcall.Client) -> None:
    # Guards list_resource_templates() -> ResourceTemplate with uri_template and mime type.
    templates = {t.uri_template: t for t in plain.list_resource_templates(timeout=10)}
    assert set(templates) == {TEXT_TEMPLATE, BLOB_TEMPLATE}
    assert (templates[TEXT_TEMPLATE].name, templates[TEXT_TEMPLATE].mime_type) == ("Dynamic Text Resource", "text/plain")
    assert templates[BLOB_TEMPLATE].mime_type == "application/octet-stream"
    assert templates[BLOB_TEMPLATE].raw["uriTemplate"] == BLOB_TEMPLATE


def test_template_instances_text_and_blob(plain: mcpcall.Client) -> None:
    # Guards reading template instances: text stays text, a base64 blob is decoded to bytes.
    text = plain.read_resource("demo://resource/dynamic/text/7", timeout=10)
    (contents,) = text.contents
    assert (contents.uri, contents.mime_type, contents.blob) == ("demo://resource/dynamic/text/7", "text/plain", None)
    assert contents.text is not None and contents.text.startswith("Resource 7: This is a plaintext resource created at ")
    blob = plain.read_resource("demo://resource/dynamic/blob/7", timeout=10)
    (contents,) = blob.contents
    assert (contents.uri, contents.text) == ("demo://resource/dynamic/blob/7", None)
    assert isinstance(contents.blob, bytes)
    assert contents.blob.startswith(b"Resource 7: This is a base64 blob created at ")
    assert contents.blob == base64.b64decode(contents.raw["blob"])
    assert blob.data == contents.blob
    assert blob.text == ""


def test_unknown_resource_is_resource_not_found(plain: mcpcall.Client) -> None:
    # Guards ResourceNotFound for both ways the server refuses (-32603 from its handler, -32602 from the SDK).
    for uri, code in (("demo://resource/dynamic/text/0", -32603), ("demo://no/such/thing", -32602)):
        with pytest.raises(mcpcall.ResourceNotFound) as info:
            plain.read_resource(uri, timeout=10)
        assert info.value.uri == uri
        assert info.value.code == code
        assert uri in info.value.message
    assert plain.read_resource("demo://resource/dynamic/text/1", timeout=10).text.startswith("Resource 1:")


# -- prompts and completion -------------------------------------------------------------------------


def test_prompts_listed_with_arguments(plain: mcpcall.Client) -> None:
    # Guards list_prompts() -> Prompt with typed PromptArgument (required flag included).
    prompts = {p.name: p for p in plain.list_prompts(timeout=10)}
    assert set(prompts) >= {"simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"}
    assert prompts["simple-prompt"].arguments == ()
    assert prompts["simple-prompt"].title == "Simple Prompt"
    args = {a.name: a for a in prompts["args-prompt"].arguments}
    assert (args["city"].required, args["state"].required) == (True, False)
    assert args["city"].description == "Name of the city"
    assert [a.name for a in prompts["resource-prompt"].arguments] == ["resourceType", "resourceId"]
    assert all(a.required for a in prompts["completable-prompt"].arguments)


def test_prompts_without_and_with_arguments(plain: mcpcall.Client) -> None:
    # Guards get_prompt() by name and by Prompt, with no, required and optional arguments.
    simple = plain.get_prompt("simple-prompt", timeout=10)
    (message,) = simple.messages
    assert message.role == "user"
    assert isinstance(message.content, mcpcall.TextContent)
    assert message.content.text == "This is a simple prompt without arguments."
    assert simple.text == message.content.text
    args_prompt = next(p for p in plain.list_prompts(timeout=10) if p.name == "args-prompt")
    assert plain.get_prompt(args_prompt, {"city": "Paris"}, timeout=10).text == "What's weather in Paris?"
    assert plain.get_prompt(args_prompt, {"city": "Austin", "state": "TX"}, timeout=10).text == "What's weather in Austin, TX?"
    with pytest.raises(mcpcall.InvalidRequest):
        plain.get_prompt("resource-prompt", {"resourceType": "Text", "resourceId": 1}, timeout=10)  # type: ignore[dict-item]


def test_resource_prompt_embeds_resource(plain: mcpcall.Client) -> None:
    # Guards an EmbeddedResource inside a prompt message, text and blob (decoded).
    text = plain.get_prompt("resource-prompt", {"resourceType": "Text", "resourceId": "2"}, timeout=10)
    intro, embedded = text.messages
    assert intro.content.text == "This prompt includes the Text resource with id: 2. Please analyze the following resource:"
    assert isinstance(embedded.content, mcpcall.EmbeddedResource)
    assert_raw(embedded.content)
    resource = embedded.content.resource
    assert (resource.uri, resource.mime_type) == ("demo://resource/dynamic/text/2", "text/plain")
    assert resource.text is not None and resource.text.startswith("Resource 2: This is a plaintext resource")
    blob = plain.get_prompt("resource-prompt", {"resourceType": "Blob", "resourceId": "3"}, timeout=10)
    resource = blob.messages[1].content.resource  # type: ignore[union-attr]
    assert resource.uri == "demo://resource/dynamic/blob/3"
    assert resource.text is None and resource.blob is not None
    assert resource.blob.startswith(b"Resource 3: This is a base64 blob")
    assert blob.text == blob.messages[0].content.text  # type: ignore[union-attr]


def test_completion_of_prompt_arguments(plain: mcpcall.Client) -> None:
    # Guards complete() with a Prompt, with context of an earlier argument, and with a wire ref dict.
    prompt = next(p for p in plain.list_prompts(timeout=10) if p.name == "completable-prompt")
    department = plain.complete(prompt, "department", "E", timeout=10)
    assert (department.values, department.total, department.has_more) == (("Engineering",), 1, False)
    everyone = plain.complete(prompt, "department", "", timeout=10)
    assert everyone.values == ("Engineering", "Sales", "Marketing", "Support")
    names = plain.complete(prompt, "name", "", context={"department": "Engineering"}, timeout=10)
    assert names.values == ("Alice", "Bob", "Charlie")
    assert plain.complete(prompt, "name", "", context={"department": "Sales"}, timeout=10).values == ("David", "Eve", "Frank")
    assert plain.complete(prompt, "name", "", timeout=10).values == ()  # no context: nothing to narrow by
    kinds = plain.complete({"type": "ref/prompt", "name": "resource-prompt"}, "resourceType", "B", timeout=10)
    assert kinds.values == ("Blob",)
    assert kinds.raw["completion"]["values"] == ["Blob"]


def test_completion_of_template_variable(plain: mcpcall.Client) -> None:
    # Guards complete() with a ResourceTemplate (sent as ref/resource with the template URI).
    template = next(t for t in plain.list_resource_templates(timeout=10) if t.uri_template == TEXT_TEMPLATE)
    assert plain.complete(template, "resourceId", "12", timeout=10).values == ("12",)
    assert plain.complete(template, "resourceId", "x", timeout=10).values == ()
    by_dict = plain.complete({"type": "ref/resource", "uri": BLOB_TEMPLATE}, "resourceId", "5", timeout=10)
    assert by_dict.values == ("5",)


# -- content blocks -------------------------------------------------------------------------------


def test_tiny_image_block(plain: mcpcall.Client) -> None:
    # Guards ImageContent: base64 decoded to PNG bytes, mime type, between text blocks.
    result = plain.call_tool("get-tiny-image", timeout=10)
    assert not result.is_error
    before, image, after = result.content
    assert isinstance(before, mcpcall.TextContent) and isinstance(after, mcpcall.TextContent)
    assert isinstance(image, mcpcall.ImageContent)
    assert image.type == "image" and image.mime_type == "image/png"
    assert image.data.startswith(PNG_SIGNATURE)
    assert image.data == base64.b64decode(image.raw["data"])
    for block in result.content:
        assert_raw(block)
    assert result.text == "Here's the image you requested:\nThe image above is the MCP logo."


def test_resource_links_are_readable(plain: mcpcall.Client) -> None:
    # Guards ResourceLink blocks and that read_resource(link.uri) works for each (blob ids odd, text even).
    result = plain.call_tool("get-resource-links", {"count": 4}, timeout=10)
    intro, *links = result.content
    assert isinstance(intro, mcpcall.TextContent) and intro.text.startswith("Here are 4 resource links")
    assert [type(link) for link in links] == [mcpcall.ResourceLink] * 4
    assert [link.uri for link in links] == [  # type: ignore[union-attr]
        "demo://resource/dynamic/blob/1", "demo://resource/dynamic/text/2",
        "demo://resource/dynamic/blob/3", "demo://resource/dynamic/text/4",
    ]
    for i, link in enumerate(links, start=1):
        assert isinstance(link, mcpcall.ResourceLink)
        assert_raw(link)
        assert link.name == f"{'Text' if i % 2 == 0 else 'Blob'} Resource {i}"
        assert link.mime_type == "text/plain"
        (contents,) = plain.read_resource(link.uri, timeout=10).contents
        if i % 2:
            assert contents.text is None and contents.blob is not None
        else:
            assert contents.blob is None and contents.text is not None
        assert contents.data.startswith(f"Resource {i}: ".encode())


def test_resource_reference_is_embedded(plain: mcpcall.Client) -> None:
    # Guards EmbeddedResource in a tool result: text contents and blob contents decoded.
    for kind, rid in (("Text", 1), ("Blob", 2)):
        result = plain.call_tool("get-resource-reference", {"resourceType": kind, "resourceId": rid}, timeout=10)
        first, embedded, last = result.content
        assert isinstance(embedded, mcpcall.EmbeddedResource) and embedded.type == "resource"
        assert_raw(embedded)
        uri = f"demo://resource/dynamic/{kind.lower()}/{rid}"
        assert embedded.resource.uri == uri
        assert last.text == f"You can access this resource using the URI: {uri}"  # type: ignore[union-attr]
        if kind == "Text":
            assert embedded.resource.text is not None and embedded.resource.text.startswith("Resource 1: This is a plaintext")
        else:
            assert embedded.resource.blob is not None and embedded.resource.blob.startswith(b"Resource 2: This is a base64 blob")
        assert result.text == f"{first.text}\n{last.text}"  # type: ignore[union-attr]


def test_annotated_message_blocks(plain: mcpcall.Client) -> None:
    # Guards that block annotations (priority, audience) are lifted onto text and image blocks.
    result = plain.call_tool("get-annotated-message", {"messageType": "error", "includeImage": True}, timeout=10)
    text, image = result.content
    assert isinstance(text, mcpcall.TextContent) and text.text == "Error: Operation failed"
    assert text.annotations == {"priority": 1, "audience": ["user", "assistant"]}
    assert isinstance(image, mcpcall.ImageContent) and image.data.startswith(PNG_SIGNATURE)
    assert image.annotations == {"priority": 0.5, "audience": ["user"]}
    debug = plain.call_tool("get-annotated-message", {"messageType": "debug"}, timeout=10)
    (only,) = debug.content
    assert only.annotations == {"priority": 0.3, "audience": ["assistant"]}  # type: ignore[union-attr]


def test_structured_content_with_output_schema(plain: mcpcall.Client) -> None:
    # Guards structured_content alongside its text block, checked against the tool's outputSchema.
    tool = next(t for t in plain.list_tools(timeout=10) if t.name == "get-structured-content")
    assert tool.output_schema is not None
    assert set(tool.output_schema["properties"]) == {"temperature", "conditions", "humidity"}
    assert plain.validate_output
    result = plain.call_tool("get-structured-content", {"location": "Chicago"}, timeout=10)
    assert not result.is_error
    assert result.structured_content == {"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}
    (block,) = result.content
    assert json.loads(block.text) == result.structured_content  # type: ignore[union-attr]


def test_gzip_resource_embedded_and_linked(plain: mcpcall.Client) -> None:
    # Guards a gzip blob embedded and linked, the resource-list change it causes, and reading the new resource.
    events: list[tuple[mcpcall.ChangeEvent, str]] = []
    with plain.subscribe(resources_list=True, on_change=lambda e: events.append((e, threading.current_thread().name)),
                         timeout=10) as sub:
        assert sub.acknowledged == {"resourcesListChanged": True}
        result = plain.call_tool("gzip-file-as-resource", {"name": "hello.gz", "data": "data:text/plain;base64,aGVsbG8=",
                                                          "outputType": "resource"}, timeout=20)
        (embedded,) = result.content
        assert isinstance(embedded, mcpcall.EmbeddedResource)
        assert (embedded.resource.uri, embedded.resource.mime_type) == ("demo://resource/session/hello.gz", "application/gzip")
        assert embedded.resource.blob is not None and gzip.decompress(embedded.resource.blob) == b"hello"
        linked = plain.call_tool("gzip-file-as-resource", {"name": "hi.gz", "data": "data:text/plain,hi",
                                                          "outputType": "resourceLink"}, timeout=20)
        (link,) = linked.content
        assert isinstance(link, mcpcall.ResourceLink)
        assert (link.uri, link.name, link.mime_type) == ("demo://resource/session/hi.gz", "hi.gz", "application/gzip")
        assert gzip.decompress(plain.read_resource(link.uri, timeout=10).data) == b"hi"
        assert wait_until(lambda: len(events) >= 2, 10), events  # one list change per registered resource
        assert all(event.kind == "resources" and event.uri is None for event, _ in events)
        assert all(on_callbacks_thread(name) for _, name in events), events
    uris = {r.uri for r in plain.list_resources(timeout=10)}
    assert {"demo://resource/session/hello.gz", "demo://resource/session/hi.gz"} <= uris


# -- what the server asks of the client ---------------------------------------------------------------


def test_sampling_request_answered_on_callbacks_thread(client: mcpcall.Client, peer: Peer) -> None:
    # Guards the sampling= handler: the server's params reach it, its answer reaches the tool, on the callbacks thread.
    result = client.call_tool("trigger-sampling-request", {"prompt": "what is six times seven?", "maxTokens": 7}, timeout=20)
    assert not result.is_error
    ((params, thread),) = peer.sampling
    assert on_callbacks_thread(thread), thread
    assert params["maxTokens"] == 7
    assert params["systemPrompt"] == "You are a helpful test server."
    (message,) = params["messages"]
    assert message == {"role": "user", "content": {"type": "text",
                                                  "text": "Resource trigger-sampling-request context: what is six times seven?"}}
    echoed = json.loads(result.text.split("\n", 1)[1])
    assert echoed == SAMPLED


def test_elicitation_accept_fills_schema_defaults(client: mcpcall.Client, peer: Peer) -> None:
    # Guards an accepted form elicitation: the content reaches the server, with the schema's defaults for fields left out.
    peer.elicit_answer = {"action": "accept", "content": {"name": "Ada", "check": True}}
    result = client.call_tool("trigger-elicitation-request", timeout=20)
    ((params, thread),) = peer.elicitation
    assert on_callbacks_thread(thread), thread
    assert params["message"] == "Please provide inputs for the following fields:"
    assert params["requestedSchema"]["required"] == ["name"]
    text = result.text
    assert "User provided the requested information" in text
    assert "- Name: Ada" in text and "- Agreed to terms: true" in text
    raw = json.loads(text.split("Raw result: ", 1)[1])
    assert raw["action"] == "accept"
    assert raw["content"]["name"] == "Ada"
    assert raw["content"]["integer"] == 42  # the schema's default
    assert raw["content"]["untitledMultipleSelectEnum"] == ["Guitar"]


def test_elicitation_decline(client: mcpcall.Client, peer: Peer) -> None:
    # Guards a declined elicitation: no content is invented for it.
    peer.elicit_answer = {"action": "decline"}
    result = client.call_tool("trigger-elicitation-request", timeout=20)
    assert "User declined to provide the requested information" in result.text
    raw = json.loads(result.text.split("Raw result: ", 1)[1])
    assert raw == {"action": "decline"}
    assert len(peer.elicitation) == 1


def test_roots_listed_and_replaced(client: mcpcall.Client, peer: Peer, tmp_path: Path) -> None:
    # Guards roots=: paths become file:// URIs; set_roots() tells the server, which lists the new ones.
    assert wait_until(lambda: peer.logged("Roots updated"), 10), peer.logs  # the server syncs 350 ms after initialize
    text = client.call_tool("get-roots-list", timeout=20).text
    assert "Current MCP Roots (1 total)" in text
    assert f"1. {tmp_path.name}\n   URI: {tmp_path.resolve().as_uri()}" in text
    threads: list[str] = []
    other = tmp_path / "other"
    other.mkdir()

    def roots() -> list[Any]:
        threads.append(threading.current_thread().name)
        return [other, {"uri": "file:///srv/data", "name": "data"}]

    client.set_roots(roots, timeout=10)
    assert wait_until(lambda: len(peer.logged("Roots updated")) >= 2, 10), peer.logs
    level, logger, data, _ = peer.logged("Roots updated")[-1]
    assert (level, logger, data) == ("info", "everything-server", "Roots updated: 2 root(s) received from client")
    assert threads and all(on_callbacks_thread(name) for name in threads), threads
    text = client.call_tool("get-roots-list", timeout=20).text
    assert "Current MCP Roots (2 total)" in text
    assert f"1. other\n   URI: {other.resolve().as_uri()}" in text
    assert "2. data\n   URI: file:///srv/data" in text


def test_non_file_root_refused(argv: list[str], client: mcpcall.Client, peer: Peer, tmp_path: Path) -> None:
    # Guards that a root which is not a file:// URI is refused up front (server-everything, like the spec,
    # takes only file:// roots and would drop the whole list), at connect() and at set_roots().
    with pytest.raises(mcpcall.ConfigError, match="file://"):
        mcpcall.connect(argv, roots=[tmp_path, "https://example.com/repo"], timeout=30)
    with pytest.raises(mcpcall.ConfigError, match="file://"):
        client.set_roots([{"uri": "https://example.com/repo", "name": "web"}], timeout=10)
    assert wait_until(lambda: peer.logged("Roots updated"), 10), peer.logs
    text = client.call_tool("get-roots-list", timeout=20).text
    assert "Current MCP Roots (1 total)" in text and tmp_path.resolve().as_uri() in text  # the old roots stand


# -- logging ------------------------------------------------------------------------------------------


def test_simulated_logging_reaches_on_log_and_logger(client: mcpcall.Client, peer: Peer) -> None:
    # Guards server log messages reaching on_log and the mcpcall.server.<name> logger, on the callbacks thread.
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    server_logger = logging.getLogger(f"mcpcall.server.{client.name}")
    handler = Keep(logging.DEBUG)
    server_logger.addHandler(handler)
    old_level = server_logger.level
    server_logger.setLevel(logging.DEBUG)
    try:
        client.set_logging_level("debug", timeout=10)
        assert client.log_level == "debug"
        assert wait_until(lambda: peer.logged("Roots updated"), 10)  # the startup message, out of the way
        assert "Started simulated" in client.call_tool("toggle-simulated-logging", timeout=10).text
        try:
            # The first simulated message is sent at once, at a random level: all pass at "debug".
            assert wait_until(lambda: peer.logged("level message") or peer.logged("level-message"), 10), peer.logs
        finally:
            assert "Stopped simulated" in client.call_tool("toggle-simulated-logging", timeout=10).text
        level, logger, data, thread = (peer.logged("level message") + peer.logged("level-message"))[0]
        assert level in mcpcall.LOG_LEVELS and level in data.lower()
        assert logger is None
        assert on_callbacks_thread(thread), thread
        assert wait_until(lambda: any(str(r.msg) == "%s" and data in r.getMessage() for r in records), 5), records
        record = next(r for r in records if data in r.getMessage())
        assert on_callbacks_thread(record.threadName), record.threadName
        startup = next(r for r in records if "Roots updated" in r.getMessage())
        assert startup.getMessage().startswith("[everything-server] ")
        assert startup.levelno == logging.INFO
    finally:
        server_logger.removeHandler(handler)
        server_logger.setLevel(old_level)


def test_log_level_filters_at_server_and_client(client: mcpcall.Client, peer: Peer) -> None:
    # Guards set_logging_level(): the server is told (logging/setLevel) and mcpcall drops lower messages itself too.
    raw: list[dict] = []
    client.on_notification("notifications/message", raw.append)
    assert wait_until(lambda: peer.logged("Roots updated"), 10)
    drain(client)
    peer.logs.clear()
    raw.clear()
    uri = "demo://resource/dynamic/text/1"
    client.set_logging_level("warning", timeout=10)
    with client.subscribe(resources=[uri], timeout=10):  # the server logs each (un)subscribe at info
        pass
    drain(client)
    assert raw == [] and peer.logs == []  # the server filtered them out
    client.set_logging_level("info", timeout=10)
    with client.subscribe(resources=[uri], timeout=10):
        drain(client)
        assert [entry[:3] for entry in peer.logs] == [("info", None, f"Received Subscribe Resource request for URI: {uri} ")]
    drain(client)
    peer.logs.clear()
    raw.clear()
    client.set_logging_level("error", timeout=10)
    client.request("logging/setLevel", {"level": "debug"}, timeout=10).result(15)  # the server alone back to debug
    with client.subscribe(resources=[uri], timeout=10):
        pass
    drain(client)
    assert [params["level"] for params in raw] == ["info", "info"]  # the server sent them...
    assert peer.logs == []  # ...and mcpcall dropped them, below "error"


# -- subscriptions --------------------------------------------------------------------------------------


def test_resource_subscription_updates(client: mcpcall.Client) -> None:
    # Guards legacy resources/subscribe per URI, routing of updates to the subscriptions that want them,
    # and that closing one subscription keeps the URI subscribed for another.
    uri = "demo://resource/dynamic/text/1"
    first: list[mcpcall.ChangeEvent] = []
    second: list[tuple[mcpcall.ChangeEvent, str]] = []
    sub = client.subscribe(resources=[uri], tools=True, prompts=True, resources_list=True,
                           on_change=first.append, timeout=10)
    assert sub.acknowledged == {"toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True,
                                "resourceSubscriptions": [uri]}
    other = client.subscribe(resources=[uri], on_change=lambda e: second.append((e, threading.current_thread().name)),
                             timeout=10)
    try:
        assert "Started simulated resource updated" in client.call_tool("toggle-subscriber-updates", timeout=10).text
        try:
            # One update is sent at once.
            assert wait_until(lambda: any(e.kind == "resource" for e in first) and second, 10), (first, second)
            sub.close(timeout=10)
            assert sub.closed
            seen, at_close = len(second), len(first)
            # Updates come every 5 s while on: the next one reaches only the open subscription.
            assert wait_until(lambda: len(second) > seen, 20), second
        finally:
            assert "Stopped" in client.call_tool("toggle-subscriber-updates", timeout=10).text
        drain(client)
        assert len(first) == at_close  # nothing after close()
        # (a tools list change from the server's start-up registrations may come too)
        assert {(e.kind, e.uri) for e in first if e.kind != "tools"} == {("resource", uri)}
        assert {(e.kind, e.uri) for e, _ in second} == {("resource", uri)}
        assert all(on_callbacks_thread(name) for _, name in second), second
        assert second[0][0].raw == {"uri": uri}
    finally:
        other.close(timeout=10)
        sub.close(timeout=10)


# -- tasks ---------------------------------------------------------------------------------------------------


def test_task_result_status_and_cancel(client: mcpcall.Client) -> None:
    # Guards a task-augmented call (2025-11-25): Task handle, status, result; cancelling another leaves it alone.
    task = client.call_tool("simulate-research-query", {"topic": "quantum tunnelling"}, task=True, timeout=10)
    assert isinstance(task, mcpcall.Task)
    other = client.call_tool("simulate-research-query", {"topic": "to be cancelled"}, task=True, timeout=10)
    assert task.task_id and other.task_id and task.task_id != other.task_id
    status = task.status()
    assert isinstance(status, mcpcall.TaskStatus)
    assert status.task_id == task.task_id
    assert status.status in ("working", "completed")
    assert status.poll_interval_ms == 1000 and status.ttl_ms == 300000
    assert other.cancel(timeout=10) is True
    assert other.done()
    with pytest.raises(CancelledError):
        other.result(timeout=5)
    assert other.future().cancelled()
    assert other.status().status == "cancelled"  # type: ignore[union-attr]
    assert other.cancel(timeout=10) is False  # already ended
    server_side = client.request("tasks/get", {"taskId": other.task_id}, timeout=10).result(15)
    assert server_side["status"] == "cancelled"
    result = task.result(timeout=30)
    assert isinstance(result, mcpcall.CallToolResult) and not result.is_error
    assert result.text.startswith("# Research Report: quantum tunnelling\n")
    assert "Stage 4: Generating report" in result.text
    assert task.future().result(timeout=1) is result
    assert task.status().status == "completed"  # type: ignore[union-attr]
    assert task.status().done  # type: ignore[union-attr]


def test_cancelled_task_status_is_cancelled(client: mcpcall.Client) -> None:
    # Guards that a cancelled task's status() shows what the server said (as a completed one shows 'completed').
    task = client.call_tool("simulate-research-query", {"topic": "stale"}, task=True, timeout=10)
    assert task.cancel(timeout=10) is True
    assert task.done()
    assert client.request("tasks/get", {"taskId": task.task_id}, timeout=10).result(15)["status"] == "cancelled"
    status = task.status()
    assert status is not None
    assert status.status == "cancelled", status
    assert status.done


def test_task_input_required_answered_by_elicitation(client: mcpcall.Client, peer: Peer) -> None:
    # Guards a task that needs input: the server's elicitation (sent while tasks/result waits) is answered by the handler.
    peer.elicit_answer = {"action": "accept", "content": {"interpretation": "snake"}}
    task = client.call_tool("simulate-research-query", {"topic": "python", "ambiguous": True}, task=True, timeout=10)
    result = task.result(timeout=40)
    assert result.text.startswith("# Research Report: python (snake)\n")
    assert "- **Clarification**: snake" in result.text
    ((params, thread),) = peer.elicitation
    assert on_callbacks_thread(thread), thread
    assert params["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task.task_id}
    options = params["requestedSchema"]["properties"]["interpretation"]["oneOf"]
    assert {"const": "snake", "title": "Python snake species"} in options


# A stdio relay in front of server-everything that makes one legal ordering certain: every tasks/result
# reaches the server after the first tasks/cancel, and the answer to tasks/cancel is passed on after the
# answer to that tasks/result. The same ordering happens unforced: server-everything answers a waiting
# (or late) tasks/result with an error as soon as the task is cancelled, often before cancel() has
# taken in the answer to its tasks/cancel (about 1 cancel in 10 before the fix).
RELAY = r"""
import json, subprocess, sys, threading
server = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
lock = threading.Lock()
cancel_ids, result_ids, held_results, held_answers = set(), set(), [], []
seen_cancel = [False]

def upstream():
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method = message.get("method")
        with lock:
            lines = [line]
            if method == "tasks/result":
                result_ids.add(message["id"])
                if not seen_cancel[0]:
                    held_results.append(line)
                    continue
            elif method == "tasks/cancel":
                seen_cancel[0] = True
                cancel_ids.add(message["id"])
                lines += held_results
                held_results.clear()
        for item in lines:
            server.stdin.write(item)
        server.stdin.flush()
    server.stdin.close()

threading.Thread(target=upstream, daemon=True).start()
out = sys.stdout.buffer
for line in server.stdout:
    message = json.loads(line)
    answer = "method" not in message
    with lock:
        if answer and message.get("id") in cancel_ids:
            held_answers.append(line)
            continue
        out.write(line)
        if answer and message.get("id") in result_ids:
            out.writelines(held_answers)
            held_answers.clear()
    out.flush()
server.wait()
"""


def test_cancel_racing_tasks_result(argv: list[str], tmp_path: Path) -> None:
    # Guards that cancel() of a running task ends it cancelled whatever order the server's answers come in.
    relay = tmp_path / "relay.py"
    relay.write_text(RELAY)
    with mcpcall.connect([sys.executable, str(relay), *argv], timeout=30) as c:
        task = c.call_tool("simulate-research-query", {"topic": "raced"}, task=True, timeout=10)
        cancelled = task.cancel(timeout=10)
        assert c.request("tasks/get", {"taskId": task.task_id}, timeout=10).result(15)["status"] == "cancelled"
        try:
            task.result(timeout=10)
            outcome = "completed"
        except CancelledError:
            outcome = "cancelled"
        except mcpcall.RPCError as exc:
            outcome = f"RPCError: {exc.message}"
        assert (cancelled, outcome) == (True, "cancelled")
