"""The whole client surface against the official Python SDK's server, in both eras, over stdio and HTTP.

The peer is tests/servers/sdk_server.py (``MCPServer`` from PyPI ``mcp`` 2.x):
resources and a template, a prompt, completion, log messages, tools that change
the tool list and a resource, and tools that ask the client (elicitation,
sampling, roots) through the SDK's ``Resolve`` markers, which use server
requests in the legacy era and ``input_required`` rounds in the modern one.
Every test runs four times: stdio and Streamable HTTP, legacy and modern.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the official MCP SDK (PyPI mcp, Python >= 3.10) is not installed")

import mcpcall
from tests.conftest import PYTHON, SERVERS, wait_until
from tests.peers.test_peer_http import SDK_HTTP_SERVER, Peer

CASES = [("stdio", "legacy"), ("stdio", "modern"), ("http", "legacy"), ("http", "modern")]
_ids = itertools.count()


@pytest.fixture(scope="module")
def http_peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peer]:
    pytest.importorskip("uvicorn")
    peer = Peer([PYTHON, str(SDK_HTTP_SERVER)], tmp_path_factory.mktemp("sdk-surface") / "server.stderr")
    try:
        yield peer
    finally:
        peer.stop()


class Opener:
    """Connects to the SDK server the way the test's case says."""

    def __init__(self, case: tuple[str, str], http_peer: Peer | None) -> None:
        self.transport, self.era = case
        self.http_peer = http_peer
        self.opened: list[mcpcall.Client] = []

    def __call__(self, **options: Any) -> mcpcall.Client:
        options.setdefault("timeout", 30)
        if self.transport == "stdio":
            target: Any = [PYTHON, str(SERVERS / "sdk_server.py")]
        else:
            assert self.http_peer is not None
            target = f"http://127.0.0.1:{self.http_peer.port}/mcp?test={next(_ids)}"
        client = mcpcall.connect(target, protocol=self.era, **options)
        self.opened.append(client)
        assert client.era == self.era
        return client

    def close(self) -> None:
        for client in self.opened:
            client.close()


@pytest.fixture(params=CASES, ids=["-".join(c) for c in CASES])
def opener(request: pytest.FixtureRequest, http_peer: Peer) -> Iterator[Opener]:
    made = Opener(request.param, http_peer)
    try:
        yield made
    finally:
        made.close()


def unique(prefix: str) -> str:
    return f"{prefix}_{next(_ids)}_{int(time.monotonic() * 1000) % 100000}"


# -- resources, templates, prompts, completion ------------------------------------------------------


def test_resources_are_typed(opener: Opener) -> None:
    # list_resources() and read_resource() returned wire dicts; a blob stayed base64.
    client = opener()
    resources = {r.uri: r for r in client.list_resources()}
    hello = resources["test://static/hello"]
    assert (hello.name, hello.title, hello.description, hello.mime_type) == ("hello", "Hello", "A greeting", "text/plain")
    assert hello.raw["uri"] == "test://static/hello"
    read = client.read_resource("test://static/hello")
    assert read.text == "Hello, resource" and read.contents[0].mime_type == "text/plain"
    pixel = client.read_resource("test://static/pixel.png")
    assert pixel.contents[0].blob is not None and pixel.data.startswith(b"\x89PNG") and pixel.contents[0].text is None
    [template] = client.list_resource_templates()
    assert template.uri_template == "test://greeting/{name}" and template.name == "greeting"
    assert client.read_resource("test://greeting/Ann").text == "Hello, Ann"
    with pytest.raises(mcpcall.ResourceNotFound) as info:
        client.read_resource("test://no/such/thing")
    assert info.value.uri == "test://no/such/thing" and "sdk_server" in str(info.value) or "127.0.0.1" in str(info.value)


def test_prompts_and_completion(opener: Opener) -> None:
    # get_prompt() returned a dict; complete() did not exist.
    client = opener()
    [prompt] = client.list_prompts()
    assert (prompt.name, prompt.title) == ("review", "Code review")
    assert [(a.name, a.required) for a in prompt.arguments] == [("code", True), ("language", False)]
    result = client.get_prompt(prompt, {"code": "x = 1", "language": "perl"})
    [message] = result.messages
    assert message.role == "user" and isinstance(message.content, mcpcall.TextContent)
    assert result.text == "Please review this perl code:\nx = 1"
    assert client.get_prompt("review", {"code": "y"}).text.startswith("Please review this python code")
    with pytest.raises(mcpcall.InvalidRequest, match="must be strings"):
        client.get_prompt("review", {"code": 3})  # type: ignore[dict-item]
    completion = client.complete(prompt, "language", "p")
    assert completion.values == ("python", "perl", "php") and completion.total == 3 and completion.has_more is False
    [template] = client.list_resource_templates()
    by_template = client.complete(template, "name", "an")
    assert by_template.values == ("ann", "anna") and by_template.has_more is True
    assert client.complete({"type": "ref/prompt", "name": "review"}, "language", "ru").values == ("rust", "ruby")


# -- what the server asks of the client ----------------------------------------------------------------


def test_elicitation_sampling_and_roots_in_either_era(opener: Opener, tmp_path: Any) -> None:
    # Only handlers={...} existed; sampling=, elicitation= and roots= declare their capability and answer
    # both server requests (legacy) and input_required rounds (modern), on the callbacks thread.
    seen: dict[str, Any] = {}
    threads: set[str] = set()

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        threads.add(threading.current_thread().name)
        seen["elicit"] = params
        return {"action": "accept", "content": {"name": "Ann"}}  # age left out: the schema's default fills it

    def sample(params: dict[str, Any]) -> dict[str, Any]:
        threads.add(threading.current_thread().name)
        seen["sample"] = params
        return {"role": "assistant", "content": {"type": "text", "text": "forty-two"}, "model": "test-model"}

    client = opener(elicitation=elicit, sampling=sample, roots=[tmp_path, "file:///srv/data"])
    assert client.call_tool("greet_user").text == "Hello, Ann (0)"
    assert seen["elicit"]["message"] == "Who are you?" and "properties" in seen["elicit"]["requestedSchema"]
    assert client.call_tool("ask_llm", {"question": "the answer?"}).text == "the model said: forty-two"
    assert seen["sample"]["messages"][0]["content"]["text"] == "the answer?"
    assert client.call_tool("list_client_roots").text == f"{tmp_path.resolve().as_uri()},file:///srv/data"
    client.set_roots(["file:///elsewhere"])
    assert client.call_tool("list_client_roots").text == "file:///elsewhere"
    assert threads and all(name.startswith("mcpcall-callbacks-") for name in threads), threads


def test_declining_an_elicitation_is_the_tools_business(opener: Opener) -> None:
    # A declined elicitation reaches the tool as a decline (here the SDK aborts the call): not a client error.
    client = opener(elicitation=lambda params: {"action": "decline"})
    result = client.call_tool("greet_user")
    assert result.is_error, result.raw


# -- logging ------------------------------------------------------------------------------------------


def test_log_messages_reach_on_log_and_the_servers_logger_above_the_level(opener: Opener, caplog: pytest.LogCaptureFixture) -> None:
    # notifications/message went to logging on the reader thread; no on_log, no level.
    got: list[tuple[str, Any, Any, str]] = []
    client = opener(on_log=lambda level, logger, data: got.append((level, logger, data, threading.current_thread().name)))
    caplog.set_level(logging.DEBUG, logger=f"mcpcall.server.{client.name}")
    client.set_logging_level("warning")
    assert client.log_level == "warning"
    assert client.call_tool("log_messages").text == "logged"
    assert wait_until(lambda: len(got) >= 2)
    time.sleep(0.1)  # anything below the level would have arrived by now
    assert [(level, logger, data) for level, logger, data, _ in got] == [("warning", "tests", {"careful": True}),
                                                                         ("error", None, "an error line")]
    assert all(thread.startswith("mcpcall-callbacks-") for *_, thread in got)
    # The same messages on the server's logger (beside its stderr lines, which are logged at INFO there too).
    logged = [(r.levelno, r.getMessage(), r.threadName) for r in caplog.records if r.name == f"mcpcall.server.{client.name}"]
    assert (logging.WARNING, "[tests] {'careful': True}") in [(level, text) for level, text, _ in logged], logged
    assert (logging.ERROR, "an error line") in [(level, text) for level, text, _ in logged], logged
    assert not [text for _, text, _ in logged if text in ("[tests] an info line", "[tests] a debug line")]
    with pytest.raises(mcpcall.ConfigError, match="level must be one of"):
        client.set_logging_level("loud")


# -- subscriptions and caching --------------------------------------------------------------------------


def test_one_subscribe_call_in_either_era(opener: Opener) -> None:
    # Legacy list_changed/resources/updated and modern subscriptions/listen behind one API.
    events: list[mcpcall.ChangeEvent] = []
    threads: set[str] = set()

    def on_change(event: mcpcall.ChangeEvent) -> None:
        threads.add(threading.current_thread().name)
        events.append(event)

    client = opener()
    before = {t.name for t in client.list_tools()}
    name = unique("runtime_tool")
    with client.subscribe(tools=True, resources=["test://static/hello"], on_change=on_change, timeout=15) as sub:
        if client.era == "modern":
            assert sub.acknowledged == {"toolsListChanged": True, "resourceSubscriptions": ["test://static/hello"]}
        client.call_tool("add_tool", {"name": name})
        client.call_tool("touch", {"uri": "test://static/hello"})
        client.call_tool("touch", {"uri": "test://static/other"})  # not asked for
        assert wait_until(lambda: {e.kind for e in events} >= {"tools", "resource"}, 10), events
        # The listing was cached (modern: ttlMs of a minute); the change invalidated it.
        assert name in {t.name for t in client.list_tools()} - before
    assert [e.uri for e in events if e.kind == "resource"] == ["test://static/hello"]
    assert threads and all(t.startswith("mcpcall-callbacks-") for t in threads)
    count = len(events)
    client.call_tool("touch", {"uri": "test://static/hello"})
    time.sleep(0.3)
    assert len(events) == count, "a closed subscription still delivered"


def test_fresh_results_come_from_the_cache_in_the_modern_era(opener: Opener) -> None:
    # ttlMs was ignored: every list and read went to the server.
    client = opener()
    first = client.read_resource("test://counter").text
    second = client.read_resource("test://counter").text
    fresh = client.read_resource("test://counter", cache=False).text
    if client.era == "modern":
        assert second == first, "a fresh cached read went to the server"
        assert int(fresh) == int(first) + 1
    else:
        assert int(second) == int(first) + 1 and int(fresh) == int(second) + 1  # legacy results carry no ttl
    uncached = opener(cache=False)
    a, b = uncached.read_resource("test://counter").text, uncached.read_resource("test://counter").text
    assert int(b) == int(a) + 1
    assert client.list_tools() == client.list_tools()


def test_arguments_are_checked_against_the_input_schema_when_asked(opener: Opener) -> None:
    # validate_arguments did not exist: a bad argument went to the server.
    client = opener()
    with pytest.raises(mcpcall.SchemaValidationError) as info:
        client.call_tool("add", {"a": "two", "b": 3}, validate_arguments=True)
    assert info.value.path == "$.a" and "'two' is not of type 'number'" in info.value.reason
    assert isinstance(info.value, ValueError) and isinstance(info.value, mcpcall.ProtocolError)
    assert client.call_tool("add", {"a": 2, "b": 3}, validate_arguments=True).structured_content == {"result": 5}
    strict = opener(validate_arguments=True)
    with pytest.raises(mcpcall.SchemaValidationError, match=r"inputSchema at \$: 'b' is a required property"):
        strict.call_tool("add", {"a": 1})
