"""examples/django_app.py through Django's test client, against the real demo server.

Django's settings can be configured once per process, and pytest runs every
test file in one: the example configures them only if nothing did, and these
tests point ``ROOT_URLCONF`` at it with ``override_settings`` either way. The
example's registry is per process and lazy; each test starts without one and
closes it at the end. The demo servers a test starts carry an env var with a
value unique to the test (through ``MCPCALL_CONFIG``), so they can be found in /proc.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ..conftest import wait_until

pytest.importorskip("django")

pytestmark = pytest.mark.timeout(120)

MARKER = "MCPCALL_EXAMPLE_MARKER"


def _demo_servers(token: str) -> dict[int, int]:
    """{pid: ppid} of the live demo servers carrying ``token``."""
    needle = f"{MARKER}={token}".encode()
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if b"mcpcall.demo_server" not in f.read():
                    continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if fields[0] != b"Z":
            found[int(entry)] = int(fields[1])
    return found


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ModuleType, str]]:
    """The Django example with no registry yet, its servers from a config marked with a fresh token."""
    from django.test import override_settings

    token = uuid.uuid4().hex
    config = {"mcpServers": {"demo": {"command": sys.executable, "args": ["-m", "mcpcall.demo_server"],
                                      "env": {MARKER: token}}}}
    (tmp_path / "mcp.json").write_text(json.dumps(config))
    monkeypatch.setenv("MCPCALL_CONFIG", str(tmp_path / "mcp.json"))
    module = importlib.import_module("examples.django_app")
    module.close_registry()
    try:
        with override_settings(ROOT_URLCONF=module.__name__):
            yield module, token
    finally:
        module.close_registry()
        assert wait_until(lambda: not _demo_servers(token), 5), _demo_servers(token)


def _post(client: Any, body: Any) -> Any:
    return client.post("/call", json.dumps(body), content_type="application/json")


def test_tools_call_stats_health(example: tuple[ModuleType, str]) -> None:
    from django.test import Client

    module, token = example
    client = Client()
    tools = client.get("/tools").json()
    names = [tool["function"]["name"] for tool in tools]
    assert {"mcp__demo__echo", "mcp__demo__add", "mcp__demo__slow", "mcp__demo__fail"} <= set(names)
    echo = next(t for t in tools if t["function"]["name"] == "mcp__demo__echo")
    assert echo["type"] == "function" and "message" in echo["function"]["parameters"]["properties"]

    answer = _post(client, {"id": "c1", "name": "mcp__demo__add", "arguments": {"a": 2, "b": 40}})
    assert answer.status_code == 200
    assert answer.json() == {"role": "tool", "tool_call_id": "c1", "content": "42"}
    openai = {"id": "c2", "type": "function", "function": {"name": "mcp__demo__echo", "arguments": '{"message": "hi"}'}}
    assert _post(client, openai).json() == {"role": "tool", "tool_call_id": "c2", "content": "hi"}
    generated = _post(client, {"name": "mcp__demo__echo", "arguments": {"message": "x"}}).json()
    assert generated["tool_call_id"].startswith("call_") and generated["content"] == "x"

    stats = client.get("/stats").json()
    assert stats["pid"] == os.getpid()
    assert stats["tools"]["mcp__demo__add"]["calls"] == 1
    assert stats["tools"]["mcp__demo__echo"]["calls"] == 2
    assert client.get("/health").json() == {"pid": os.getpid(), "servers": ["demo"], "closed": False}
    assert client.get("/call").status_code == 405
    assert client.post("/tools").status_code == 405

    # One registry, one demo server, a child of this process.
    assert module.get_registry() is module.get_registry()
    assert list(_demo_servers(token).values()) == [os.getpid()]


def test_concurrent_requests_share_one_registry(example: tuple[ModuleType, str]) -> None:
    """16 threads, each with its own test client, all start before the registry exists."""
    from django.test import Client

    module, token = example
    threads, per_thread = 16, 5
    barrier = threading.Barrier(threads)
    answers: dict[str, Any] = {}
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            client = Client()
            barrier.wait(10)
            for j in range(per_thread):
                call_id = f"t{k}-{j}"
                if j == 0 and k % 4 == 0:
                    body = {"id": call_id, "name": "mcp__demo__slow", "arguments": {"seconds": 0.2, "steps": 2}}
                else:
                    body = {"id": call_id, "name": "mcp__demo__echo", "arguments": {"message": f"m {call_id}"}}
                response = _post(client, body)
                answers[call_id] = (response.status_code, response.json())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(60)
    assert not errors, errors[:3]
    expected = {}
    for k in range(threads):
        for j in range(per_thread):
            call_id = f"t{k}-{j}"
            content = "done after 0.2 s" if (j == 0 and k % 4 == 0) else f"m {call_id}"
            expected[call_id] = (200, {"role": "tool", "tool_call_id": call_id, "content": content})
    assert answers == expected

    assert list(_demo_servers(token).values()) == [os.getpid()]  # made once, under the lock
    stats = module.get_registry().stats()
    assert stats["mcp__demo__slow"].calls == 4
    assert stats["mcp__demo__echo"].calls == threads * per_thread - 4
    assert all(s.errors == 0 for s in stats.values())


def test_tool_errors_are_error_messages(example: tuple[ModuleType, str]) -> None:
    from django.test import Client

    module, _token = example
    client = Client()
    failed = _post(client, {"id": "e1", "name": "mcp__demo__fail", "arguments": {"message": "nope"}})
    assert failed.status_code == 200
    assert failed.json() == {"role": "tool", "tool_call_id": "e1", "content": "Error: nope"}

    boom = _post(client, {"id": "e2", "name": "mcp__demo__boom"})
    assert boom.status_code == 200
    assert boom.json()["content"].startswith("Error:") and "boom" in boom.json()["content"]

    unknown = _post(client, {"id": "e3", "name": "mcp__demo__nope"}).json()
    assert unknown["tool_call_id"] == "e3"
    assert unknown["content"].startswith("Error:") and "mcp__demo__echo" in unknown["content"]  # lists real tools

    bad_args = _post(client, {"id": "e4", "type": "function",
                              "function": {"name": "mcp__demo__echo", "arguments": "{not json"}}).json()
    assert bad_args["content"].startswith("Error:") and "JSON" in bad_args["content"]

    # Not a tool call at all: the caller's mistake, HTTP 400.
    not_json = client.post("/call", "{oops", content_type="application/json")
    assert not_json.status_code == 400
    assert _post(client, [1, 2]).status_code == 400
    assert _post(client, {"nothing": "here"}).status_code == 400

    stats = module.get_registry().stats()
    assert stats["mcp__demo__fail"].errors == 1
    assert stats["mcp__demo__boom"].errors == 1


def test_registry_closed_and_made_again(example: tuple[ModuleType, str]) -> None:
    from django.test import Client

    module, token = example
    client = Client()
    assert _post(client, {"id": "a", "name": "mcp__demo__echo", "arguments": {"message": "one"}}).json()["content"] == "one"
    first = module.get_registry()
    (first_server,) = _demo_servers(token)

    module.close_registry()
    assert first.closed
    assert wait_until(lambda: not _demo_servers(token), 5)
    # A call on the closed registry (a request that still held it) is an error message, not an exception.
    closed = first.execute({"id": "b", "type": "function", "function": {"name": "mcp__demo__echo", "arguments": "{}"}})
    assert closed["content"].startswith("Error:") and "closed" in closed["content"]

    # The next request makes a new registry, with a new server.
    assert _post(client, {"id": "c", "name": "mcp__demo__echo", "arguments": {"message": "two"}}).json()["content"] == "two"
    assert module.get_registry() is not first
    servers = _demo_servers(token)
    assert len(servers) == 1 and first_server not in servers
