"""ToolRegistry over real servers of three kinds at once: the demo server over stdio, the official SDK's
server over Streamable HTTP, and server-everything over stdio; plus servers that hang, crash or never start.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

import mcpcall
from mcpcall import ConfigError, InvalidRequest, ToolRegistry
from mcpcall.registry import GEMINI_SCHEMA_KEYS, NAME_PATTERN
from tests.conftest import PYTHON, SERVERS, _children, demo_argv, everything_argv, fault_argv, wait_until
from tests.peers.test_peer_http import SDK_HTTP_SERVER, Peer

pytestmark = pytest.mark.timeout(120)

PROVIDER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def openai_call(name: str, arguments: Any, call_id: str = "call_1") -> Dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def responses_call(name: str, arguments: Any, call_id: str = "fc_1") -> Dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": json.dumps(arguments)}


def anthropic_call(name: str, arguments: Any, call_id: str = "toolu_1") -> Dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


@pytest.fixture(scope="module")
def sdk_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("mcp", reason="the official MCP SDK (PyPI mcp, Python >= 3.10) is not installed")
    pytest.importorskip("uvicorn")
    peer = Peer([PYTHON, str(SDK_HTTP_SERVER)], tmp_path_factory.mktemp("registry-sdk") / "server.stderr")
    try:
        yield f"http://127.0.0.1:{peer.port}/mcp"
    finally:
        peer.stop()


@pytest.fixture
def three(sdk_url: str) -> Iterator[ToolRegistry]:
    """The demo server (stdio), the SDK server (Streamable HTTP) and server-everything (stdio)."""
    registry = ToolRegistry({"demo": demo_argv(), "sdk": {"url": sdk_url}, "everything": everything_argv("stdio")},
                            timeout=30)
    try:
        yield registry
    finally:
        registry.close()


def test_three_kinds_listed_and_exported_in_every_format(three: ToolRegistry) -> None:
    tools = three.tools()
    by_server: Dict[str, List[str]] = {}
    for tool in tools:
        by_server.setdefault(tool.server, []).append(tool.tool.name)
        assert PROVIDER_NAME.match(tool.name) and NAME_PATTERN.match(tool.name)
        assert three.resolve(tool.name) == (tool.server, tool.tool.name)
    assert set(by_server) == {"demo", "sdk", "everything"}
    assert {"echo", "add"} <= set(by_server["demo"]) and "echo" in by_server["sdk"] and "echo" in by_server["everything"]
    assert "mcp__demo__echo" in {t.name for t in tools}
    assert three.errors == {}

    names = [t.name for t in tools]
    chat = three.to_openai_tools()
    assert [t["function"]["name"] for t in chat] == names
    assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object" for t in chat)
    responses = three.to_openai_tools(api="responses")
    assert [t["name"] for t in responses] == names and all(t["type"] == "function" for t in responses)
    anthropic = three.to_anthropic_tools()
    assert [t["name"] for t in anthropic] == names and all(t["input_schema"]["type"] == "object" for t in anthropic)
    plain = three.to_json_schema()
    demo_echo = next(t for t in tools if t.name == "mcp__demo__echo")
    assert next(t for t in plain if t["name"] == "mcp__demo__echo")["input_schema"] == demo_echo.tool.input_schema

    def keywords(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                yield key
                if key == "properties" and isinstance(value, dict):
                    for sub in value.values():
                        yield from keywords(sub)
                elif key != "enum":
                    yield from keywords(value)
        elif isinstance(node, list):
            for item in node:
                yield from keywords(item)

    gemini = three.to_gemini_tools()
    assert [t["name"] for t in gemini] == names
    for declaration in gemini:
        assert set(keywords(declaration.get("parameters", {}))) <= set(GEMINI_SCHEMA_KEYS), declaration


def test_execute_in_each_format_on_each_server(three: ToolRegistry) -> None:
    three.tools()
    for server in ("demo", "sdk", "everything"):
        name = f"mcp__{server}__echo"
        assert three.execute(openai_call(name, {"message": f"hi {server}"}, "c1")) == \
            {"role": "tool", "tool_call_id": "c1", "content": f"hi {server}" if server != "everything" else f"Echo: hi {server}"}
        out = three.execute(responses_call(name, {"message": "r"}, "fc9"))
        assert out["type"] == "function_call_output" and out["call_id"] == "fc9" and out["output"].endswith("r")
        block = three.execute(anthropic_call(name, {"message": "a"}, "toolu_9"))
        assert block["type"] == "tool_result" and block["tool_use_id"] == "toolu_9" and not block.get("is_error")
        assert block["content"][0]["type"] == "text" and block["content"][0]["text"].endswith("a")


def test_an_image_result_becomes_an_anthropic_image_block(three: ToolRegistry) -> None:
    names = {t.tool.name: t.name for t in three.tools() if t.server == "everything"}
    image_tool = next(n for n in names if "image" in n.lower())
    block = three.execute(anthropic_call(names[image_tool], {}))
    kinds = [b["type"] for b in block["content"]]
    assert "image" in kinds, block
    image = next(b for b in block["content"] if b["type"] == "image")
    assert image["source"]["type"] == "base64" and image["source"]["media_type"].startswith("image/")
    chat = three.execute(openai_call(names[image_tool], {}))
    assert "image/" in chat["content"]  # described in text: a Chat tool message carries text


def test_execute_many_with_one_server_hanging_returns_the_others_in_time(three: ToolRegistry) -> None:
    three.tools()
    calls = [
        openai_call("mcp__demo__slow", {"seconds": 60}, "slow"),
        openai_call("mcp__sdk__echo", {"message": "one"}, "sdk"),
        openai_call("mcp__everything__echo", {"message": "two"}, "every"),
        openai_call("mcp__demo__add", {"a": 2, "b": 3}, "add"),
    ]
    started = time.monotonic()
    out = three.execute_many(calls, timeout=3)
    elapsed = time.monotonic() - started
    assert [m["tool_call_id"] for m in out] == ["slow", "sdk", "every", "add"]
    assert re.fullmatch(r"Error: tool 'slow' of server 'demo' did not answer in 3(\.\d+)? s; the call was cancelled",
                        out[0]["content"]), out[0]["content"]
    assert out[1]["content"] == "one" and out[2]["content"].endswith("two") and out[3]["content"] == "5"
    assert elapsed < 15  # the deadline ends the hanging call; generous for a loaded machine
    stats = three.stats()
    assert stats["mcp__demo__slow"].timeouts == 1 and stats["mcp__demo__slow"].errors == 1
    assert stats["mcp__sdk__echo"].errors == 0
    # The others' latency is their own, not the time spent waiting for the hanging call.
    p50 = stats["mcp__demo__add"].p50_ms
    assert p50 is not None and p50 < stats["mcp__demo__slow"].p50_ms  # type: ignore[operator]
    # The demo server is still usable: a timeout ends the call, not the server.
    assert three.execute(openai_call("mcp__demo__echo", {"message": "after"}))["content"] == "after"


def test_a_crashed_stdio_server_is_restarted_on_the_next_call(three: ToolRegistry) -> None:
    three.tools()
    first = three.client("demo")
    pid = first.transport.process.pid  # type: ignore[attr-defined]
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: not first.alive, 10)
    out = three.execute(openai_call("mcp__demo__echo", {"message": "back"}))
    assert out["content"] == "back", out
    second = three.client("demo")
    assert second is not first and second.transport.process.pid != pid  # type: ignore[attr-defined]
    assert first.closed


def test_a_server_that_dies_mid_call_gives_an_error_message_then_comes_back() -> None:
    with ToolRegistry({"crashy": fault_argv("crash-on-call"), "demo": demo_argv()}, timeout=20) as registry:
        out = registry.execute(openai_call("mcp__crashy__echo", {"message": "x"}))
        assert "went away" in out["content"] and "restarted" in out["content"], out
        assert "Error" in out["content"]
        # Restarted on the next call (and it crashes again: this server always does).
        out = registry.execute(openai_call("mcp__crashy__echo", {"message": "x"}))
        assert "went away" in out["content"]
        assert registry.execute(openai_call("mcp__demo__echo", {"message": "fine"}))["content"] == "fine"


def test_bad_input_from_the_model_becomes_error_messages_never_exceptions() -> None:
    with ToolRegistry({"demo": demo_argv()}) as registry:
        bad_json = registry.execute(openai_call("mcp__demo__echo", '{"message": "unterminated'))
        assert "not valid JSON" in bad_json["content"] and "mcp__demo__echo" in bad_json["content"]
        not_object = registry.execute(openai_call("mcp__demo__echo", "[1, 2]"))
        assert "JSON object" in not_object["content"]
        unknown = registry.execute(openai_call("mcp__demo__ecko", {"message": "x"}))
        assert "mcp__demo__ecko" in unknown["content"] and "mcp__demo__echo" in unknown["content"]
        failed = registry.execute(anthropic_call("mcp__demo__fail", {"message": "it broke"}))
        assert failed["is_error"] is True and failed["content"][0]["text"] == "it broke"
        rpc = registry.execute(openai_call("mcp__demo__boom", {}))
        assert "-32603" in rpc["content"] and "boom" in rpc["content"]
        with pytest.raises(InvalidRequest):
            registry.execute({"role": "user", "content": "not a tool call"})
        stats = registry.stats()
        assert stats["mcp__demo__fail"].errors == 1 and stats["mcp__demo__boom"].errors == 1
        assert "mcp__demo__ecko" not in stats  # only tools that exist are counted


def test_servers_that_fail_to_connect_are_reported_never_fatal(tmp_path: Path) -> None:
    config = {"mcpServers": {
        "demo": {"command": PYTHON, "args": ["-m", "mcpcall.demo_server"]},
        "missing": {"command": str(tmp_path / "no-such-program")},
        "closed": {"url": "http://127.0.0.1:9/mcp"},
        "off": {"command": "whatever", "disabled": True},
    }}
    with ToolRegistry.from_config(config, timeout=10) as registry:
        assert registry.servers == ["demo", "missing", "closed"]
        errors = registry.connect_all()
        assert set(errors) == {"missing", "closed"}
        assert "no-such-program" in str(errors["missing"]) and "missing" in str(errors["missing"])
        assert {t.server for t in registry.tools()} == {"demo"}
        out = registry.execute(openai_call("mcp__missing__anything", {}))
        assert "missing" in out["content"] and "not available" in out["content"], out
        assert registry.execute(openai_call("mcp__demo__echo", {"message": "ok"}))["content"] == "ok"


def test_a_server_that_never_finishes_connecting_costs_only_its_own_calls() -> None:
    servers = {"stuck": fault_argv("slow-init", extra=("--delay", "60")), "demo": demo_argv()}
    with ToolRegistry(servers, timeout=30) as registry:
        started = time.monotonic()
        out = registry.execute_many([openai_call("mcp__stuck__echo", {"message": "x"}, "a"),
                                     openai_call("mcp__demo__echo", {"message": "y"}, "b")], timeout=3)
        assert time.monotonic() - started < 15
        assert out[1]["content"] == "y"
        assert "stuck" in out[0]["content"] and out[0]["content"].startswith("Error"), out


def test_lazy_until_first_use_then_from_a_config_file(tmp_path: Path) -> None:
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": {"demo": {"command": PYTHON, "args": ["-m", "mcpcall.demo_server"]}}}))
    before = _children()
    registry = ToolRegistry.from_config(str(path))
    try:
        assert _children() == before  # nothing started yet: no process, no thread
        assert not [t for t in threading.enumerate() if t.name.endswith("-demo") and t.name.startswith("mcpcall-")]
        assert registry.execute(openai_call("mcp__demo__add", {"a": 1, "b": 2}))["content"] == "3"
    finally:
        registry.close()
    registry.close()  # idempotent
    out = registry.execute(openai_call("mcp__demo__add", {"a": 1, "b": 2}))
    assert "closed" in out["content"]


def test_names_that_collide_get_suffixes_and_each_still_routes_back() -> None:
    with ToolRegistry({"a.b": demo_argv(), "a_b": demo_argv()}) as registry:
        tools = registry.tools()
        echo = [t for t in tools if t.tool.name == "echo"]
        assert len(echo) == 2 and echo[0].name != echo[1].name
        assert all(PROVIDER_NAME.match(t.name) for t in tools)
        assert any(name.startswith("mcp__a_b__echo") for name, _ in registry.collisions)
        for tool in echo:
            out = registry.execute(openai_call(tool.name, {"message": tool.server}))
            assert out["content"] == tool.server
            assert registry.stats()[tool.name].server == tool.server


def test_allow_and_deny_filters_per_server() -> None:
    with ToolRegistry({"one": demo_argv(), "two": demo_argv()}, allow={"one": ["e*", "add"]},
                      deny={"*": ["echo"]}, prefix="", separator="-") as registry:
        names = sorted(t.name for t in registry.tools())
        assert names == sorted(["one-add"] + [f"two-{t}" for t in ("add", "slow", "weather", "fail", "boom", "confirm")])
        out = registry.execute(openai_call("one-echo", {"message": "x"}))
        assert "no tool named" in out["content"].lower() or "unknown" in out["content"].lower()
    with pytest.raises(ConfigError):
        ToolRegistry({}, separator="::")
    with pytest.raises(ConfigError):
        ToolRegistry({}, allow={"one": "echo"})  # a string, not a list of patterns


def test_the_tool_list_is_refreshed_after_the_server_says_it_changed() -> None:
    pytest.importorskip("mcp", reason="the official MCP SDK (PyPI mcp, Python >= 3.10) is not installed")
    with ToolRegistry({"sdk": [PYTHON, str(SERVERS / "sdk_server.py")]}, timeout=30) as registry:
        before = {t.name for t in registry.tools()}
        assert "mcp__sdk__late_tool" not in before
        out = registry.execute(openai_call("mcp__sdk__add_tool", {"name": "late_tool"}))
        assert not out["content"].startswith("Error"), out
        assert wait_until(lambda: "mcp__sdk__late_tool" in {t.name for t in registry.tools()}, 10)
        out = registry.execute(openai_call("mcp__sdk__late_tool", {}))
        assert not out["content"].startswith("Error"), out


def test_one_registry_shared_by_many_threads() -> None:
    with ToolRegistry({"one": demo_argv(), "two": demo_argv()}) as registry:
        errors: List[BaseException] = []
        wrong: List[Any] = []

        def worker(k: int) -> None:
            try:
                for i in range(25):
                    server = "one" if (i + k) % 2 else "two"
                    out = registry.execute(openai_call(f"mcp__{server}__echo", {"message": f"{k}-{i}"}, f"{k}-{i}"))
                    if out != {"role": "tool", "tool_call_id": f"{k}-{i}", "content": f"{k}-{i}"}:
                        wrong.append(out)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors and not wrong, (errors[:2], wrong[:2])
        stats = registry.stats()
        assert stats["mcp__one__echo"].calls + stats["mcp__two__echo"].calls == 200
        # Both servers were connected once each, however many threads asked at once.
        assert len(registry.servers) == 2 and registry.errors == {}


def test_from_clients_and_call_raise_like_a_client() -> None:
    client = mcpcall.connect(demo_argv(), name="mine")
    with ToolRegistry.from_clients([client]) as registry:
        assert registry.call("mcp__mine__add", {"a": 2, "b": 2}).text == "4"
        with pytest.raises(mcpcall.RPCError):
            registry.call("mcp__mine__boom", {})
        with pytest.raises(InvalidRequest, match="mcp__mine__ad"):
            registry.call("mcp__mine__ad", {})
    assert client.closed  # owned by the registry


def test_stats_count_and_percentiles() -> None:
    with ToolRegistry({"demo": demo_argv()}) as registry:
        for i in range(20):
            registry.execute(openai_call("mcp__demo__echo", {"message": str(i)}))
        registry.execute(openai_call("mcp__demo__fail", {"message": "no"}))
        stats = registry.stats()
        echo = stats["mcp__demo__echo"]
        assert (echo.calls, echo.errors, echo.server, echo.tool) == (20, 0, "demo", "echo")
        assert echo.p50_ms is not None and echo.p95_ms is not None and 0 < echo.p50_ms <= echo.p95_ms
        assert stats["mcp__demo__fail"].errors == 1 and stats["mcp__demo__fail"].last_error == "isError"


def test_a_non_serializable_argument_from_code_is_an_error_message() -> None:
    with ToolRegistry({"demo": demo_argv()}) as registry:
        out = registry.execute(anthropic_call("mcp__demo__echo", {"message": object()}))
        assert out["is_error"] is True and "echo" in out["content"][0]["text"]


@pytest.mark.parametrize("argv", [[sys.executable, "-c", "import sys; sys.exit(7)"]])
def test_restart_backoff_is_bounded(argv: List[str]) -> None:
    with ToolRegistry({"dead": argv}, timeout=5, max_restarts=2) as registry:
        first = registry.execute(openai_call("mcp__dead__x", {}))
        assert "dead" in first["content"] and "not available" in first["content"]
        started = time.monotonic()
        second = registry.execute(openai_call("mcp__dead__x", {}))  # within the backoff: no new process
        assert "next attempt" in second["content"], second
        assert time.monotonic() - started < 2


def test_a_registry_connected_before_a_fork_reconnects_in_the_child() -> None:
    # gunicorn --preload and Celery prefork: the registry is built (even connected) in the parent.
    with ToolRegistry({"demo": demo_argv()}) as registry:
        assert registry.execute(openai_call("mcp__demo__echo", {"message": "parent"}))["content"] == "parent"
        parent_pid = registry.client("demo").transport.process.pid  # type: ignore[attr-defined]
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            code = 1
            try:
                out = registry.execute(openai_call("mcp__demo__echo", {"message": "child"}))
                pid = registry.client("demo").transport.process.pid  # type: ignore[attr-defined]
                os.write(write, json.dumps([out["content"], pid]).encode())
                registry.close()
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            answer = json.loads(pipe.read() or b"null")
        _, status = os.waitpid(child, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        assert answer[0] == "child" and answer[1] != parent_pid
        # The parent's server was left alone by the child.
        assert registry.execute(openai_call("mcp__demo__echo", {"message": "still"}))["content"] == "still"
        assert registry.client("demo").transport.process.pid == parent_pid  # type: ignore[attr-defined]


def test_a_name_shown_to_the_model_survives_a_tool_added_later() -> None:
    pytest.importorskip("mcp", reason="the official MCP SDK (PyPI mcp, Python >= 3.10) is not installed")
    with ToolRegistry({"sdk": [PYTHON, str(SERVERS / "sdk_server.py")]}, timeout=30) as registry:
        assert registry.execute(openai_call("mcp__sdk__add_tool", {"name": "late.tool"}))["content"].startswith("Error") is False
        assert wait_until(lambda: any(t.tool.name == "late.tool" for t in registry.tools()), 10)
        first = next(t.name for t in registry.tools() if t.tool.name == "late.tool")
        assert first == "mcp__sdk__late_tool"
        # A second tool whose name sanitises the same way: the first keeps its name, the newcomer is suffixed.
        registry.execute(openai_call("mcp__sdk__add_tool", {"name": "late_tool"}))
        assert wait_until(lambda: any(t.tool.name == "late_tool" for t in registry.tools()), 10)
        names = {t.tool.name: t.name for t in registry.tools()}
        assert names["late.tool"] == "mcp__sdk__late_tool" and names["late_tool"].startswith("mcp__sdk__late_tool_")
        assert registry.resolve("mcp__sdk__late_tool") == ("sdk", "late.tool")


def test_close_ends_a_connect_under_way_and_frees_its_caller() -> None:
    registry = ToolRegistry({"stuck": fault_argv("slow-init", extra=("--delay", "20"))}, timeout=30)
    out: List[Dict[str, Any]] = []
    caller = threading.Thread(target=lambda: out.append(registry.execute(openai_call("mcp__stuck__echo", {"message": "x"}))))
    caller.start()
    assert wait_until(lambda: bool(_children()), 10)  # the server is starting
    time.sleep(0.5)
    started = time.monotonic()
    registry.close()
    caller.join(10)
    assert not caller.is_alive() and time.monotonic() - started < 8
    assert "closed" in out[0]["content"], out


def test_one_deadline_for_call_and_the_clients_own_timeout_kept() -> None:
    with ToolRegistry({"demo": demo_argv()}, timeout=45) as registry:
        started = time.monotonic()
        with pytest.raises(mcpcall.RequestTimeout):
            registry.call("mcp__demo__slow", {"seconds": 30}, timeout=3)
        assert time.monotonic() - started < 8  # the connect and the call share the 3 s
        assert registry.client("demo").timeout == 45.0  # not what was left of the first caller's deadline


def test_a_client_its_user_closed_is_no_crash_and_gets_no_backoff() -> None:
    with ToolRegistry({"demo": demo_argv()}) as registry:
        for _ in range(4):
            with registry.client("demo") as client:  # closed by its user each time: reconnected at once
                client.ping()
        assert registry.execute(openai_call("mcp__demo__echo", {"message": "ok"}))["content"] == "ok"
