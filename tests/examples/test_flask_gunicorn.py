"""examples/flask_app.py under real gunicorn (``--preload -w 2 --threads 4``) and through Flask's test client.

The gunicorn test proves the per-worker registry: the app's registry is made
at import in the master (``--preload``), each worker starts its own demo
server on first use and shares it among its threads, the master's server (when
the master connected before forking) is left alone, and stopping gunicorn
leaves no demo server behind. Demo servers started by a test are told apart
from every other process by an env var with a value unique to that test,
given to them through the config file ``MCPCALL_CONFIG`` names.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ..conftest import ROOT, free_port, wait_until

flask = pytest.importorskip("flask")
requests = pytest.importorskip("requests")

pytestmark = pytest.mark.timeout(120)

EXAMPLE = ROOT / "examples" / "flask_app.py"
MARKER = "MCPCALL_EXAMPLE_MARKER"


def _gunicorn() -> Path | None:
    for candidate in (ROOT / ".venv" / "bin" / "gunicorn", Path(sys.executable).parent / "gunicorn"):
        if candidate.exists():
            return candidate
    return None


def _write_config(path: Path, token: str) -> Path:
    config = {"mcpServers": {"demo": {"command": sys.executable, "args": ["-m", "mcpcall.demo_server"],
                                      "env": {MARKER: token}}}}
    path.write_text(json.dumps(config))
    return path


# -- /proc ------------------------------------------------------------------------------------


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of ``pid``, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[1])


def _pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _demo_servers(token: str) -> dict[int, int]:
    """{pid: ppid} of the live (not zombie) demo servers carrying this test's marker."""
    needle = f"{MARKER}={token}".encode()
    found = {}
    for pid in _pids():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            if b"mcpcall.demo_server" not in cmdline:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().split(b"\0")
        except OSError:
            continue
        stat = _stat(pid)
        if needle in environ and stat is not None and stat[0] != "Z":
            found[pid] = stat[1]
    return found


def _children(parent: int) -> set[int]:
    found = set()
    for pid in _pids():
        stat = _stat(pid)
        if stat is not None and stat[1] == parent and stat[0] != "Z":
            found.add(pid)
    return found


def _kill_leftovers(token: str) -> None:
    for pid in _demo_servers(token):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# -- the gunicorn test ------------------------------------------------------------------------


class Gunicorn:
    """gunicorn serving examples.flask_app:app on 127.0.0.1:<free port>, its output in a file."""

    def __init__(self, tmp_path: Path, token: str, connect_at_import: bool) -> None:
        gunicorn = _gunicorn()
        if gunicorn is None:
            pytest.skip("gunicorn is not installed")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp_path / "gunicorn.log"
        env = dict(os.environ, MCPCALL_CONFIG=str(_write_config(tmp_path / "mcp.json", token)), PYTHONUNBUFFERED="1")
        env.pop("MCPCALL_CONNECT_AT_IMPORT", None)
        if connect_at_import:
            env["MCPCALL_CONNECT_AT_IMPORT"] = "1"
        argv = [str(gunicorn), "--preload", "-w", "2", "--threads", "4", "-b", f"127.0.0.1:{self.port}",
                "--no-control-socket", "--graceful-timeout", "10", "-c", "examples/gunicorn_conf.py",
                "examples.flask_app:app"]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, cwd=str(ROOT), env=env, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"gunicorn exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if requests.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        pytest.fail(f"gunicorn did not answer within {timeout} s:\n{self.log()}")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then wait (bounded); SIGKILL if it did not stop. Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            pytest.fail(f"gunicorn did not stop within {timeout} s of SIGTERM:\n{self.log()}")
        return -1  # not reached

    def workers(self) -> set[int]:
        """The master's children that are not demo servers: its workers."""
        return {pid for pid in _children(self.proc.pid) if not _is_demo(pid)}


def _is_demo(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"mcpcall.demo_server" in f.read()
    except OSError:
        return False


def _post_call(url: str, i: int, token: str, slow: bool) -> tuple[int, dict[str, Any], int]:
    """One POST /call (both body forms in turn); (i, the tool message, the worker's pid)."""
    if slow:
        name, arguments = "mcp__demo__slow", {"seconds": 0.1 + 0.05 * (i % 4), "steps": 2}
    else:
        name, arguments = "mcp__demo__echo", {"message": f"message {i} of {token}"}
    if i % 2:
        body: dict[str, Any] = {"id": f"call_{i}", "type": "function",
                                "function": {"name": name, "arguments": json.dumps(arguments)}}
    else:
        body = {"id": f"call_{i}", "name": name, "arguments": arguments}
    response = requests.post(f"{url}/call", json=body, timeout=30)
    assert response.status_code == 200, response.text
    return i, response.json(), int(response.headers["X-Worker-Pid"])


def _expected(i: int, token: str, slow: bool) -> str:
    return f"done after {0.1 + 0.05 * (i % 4):g} s" if slow else f"message {i} of {token}"


@pytest.mark.parametrize("connect_at_import", [False, True], ids=["lazy", "master-connected"])
def test_gunicorn_preload_two_workers(tmp_path: Path, connect_at_import: bool) -> None:
    token = uuid.uuid4().hex
    server = Gunicorn(tmp_path, token, connect_at_import)
    try:
        server.wait_ready()
        master = server.proc.pid
        assert wait_until(lambda: len(server.workers()) == 2, 10), server.log()
        workers = server.workers()

        # Before any call: the master owns a demo server only if it connected at import; no worker has one.
        before = _demo_servers(token)
        assert sorted(before.values()) == ([master] if connect_at_import else []), (before, master, workers)
        master_demo = set(before)

        # 80 concurrent calls (8 of them slow), then more rounds until both workers answered some.
        slow_ids = set(range(0, 80, 10))
        answers: dict[int, tuple[dict[str, Any], int]] = {}
        total = 0
        for _ in range(10):
            ids = range(total, total + (80 if total == 0 else 16))
            total += len(ids)
            with ThreadPoolExecutor(max_workers=16) as pool:
                for i, message, pid in pool.map(lambda i: _post_call(server.url, i, token, i in slow_ids), ids):
                    answers[i] = (message, pid)
            if {pid for _, pid in answers.values()} == workers:
                break
        for i, (message, _pid) in answers.items():
            assert message == {"role": "tool", "tool_call_id": f"call_{i}",
                               "content": _expected(i, token, i in slow_ids)}, i
        served = Counter(pid for _, pid in answers.values())
        assert set(served) == workers, (served, workers)

        # /health answers from both workers too.
        seen_health: set[int] = set()
        for _ in range(200):
            seen_health.add(requests.get(f"{server.url}/health", timeout=10).json()["pid"])
            if seen_health == workers:
                break
        assert seen_health == workers

        # Each worker started exactly one demo server (shared by its threads); the master's is untouched.
        demos = _demo_servers(token)
        by_parent = Counter(demos.values())
        assert by_parent == Counter({**{w: 1 for w in workers}, **({master: 1} if connect_at_import else {})}), \
            (demos, master, workers)
        assert {pid for pid, parent in demos.items() if parent == master} == master_demo

        # /stats of each worker: its counts are the calls it answered, and they add up to all the calls.
        stats: dict[int, dict[str, Any]] = {}
        for _ in range(200):
            body = requests.get(f"{server.url}/stats", timeout=10).json()
            stats[body["pid"]] = body["tools"]
            if set(stats) == workers:
                break
        assert set(stats) == workers
        for pid in workers:
            tools = stats[pid]
            assert sum(t["calls"] for t in tools.values()) == served[pid], (pid, tools, served)
            assert all(t["errors"] == 0 for t in tools.values()), tools
        n_slow = len(slow_ids)
        assert sum(s.get("mcp__demo__slow", {}).get("calls", 0) for s in stats.values()) == n_slow
        assert sum(s.get("mcp__demo__echo", {}).get("calls", 0) for s in stats.values()) == total - n_slow

        # A bad body is a 400, not a crash.
        assert requests.post(f"{server.url}/call", json={"nonsense": 1}, timeout=10).status_code == 400

        assert server.stop() == 0, server.log()
        # Every demo server is gone: each worker closed its own at exit, the master its own.
        assert wait_until(lambda: not _demo_servers(token), 10), (_demo_servers(token), server.log())
        log = server.log()
        assert log.count("mcpcall registry closed (worker") == 2, log
        assert "Traceback" not in log, log
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait(10)
        _kill_leftovers(token)


# -- Flask's test client ----------------------------------------------------------------------


@pytest.fixture
def flask_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """examples/flask_app.py imported afresh (its own registry, the test's config), closed afterwards."""
    token = uuid.uuid4().hex
    monkeypatch.setenv("MCPCALL_CONFIG", str(_write_config(tmp_path / "mcp.json", token)))
    monkeypatch.delenv("MCPCALL_CONNECT_AT_IMPORT", raising=False)
    spec = importlib.util.spec_from_file_location(f"flask_app_{token}", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        yield module
    finally:
        module.registry.close()
        assert wait_until(lambda: not _demo_servers(token), 5)


def test_flask_test_client(flask_example: ModuleType) -> None:
    client = flask_example.app.test_client()
    tools = client.get("/tools").get_json()
    names = {tool["function"]["name"] for tool in tools}
    assert {"mcp__demo__echo", "mcp__demo__add", "mcp__demo__fail"} <= names
    assert all(tool["type"] == "function" for tool in tools)

    answer = client.post("/call", json={"id": "c1", "name": "mcp__demo__add", "arguments": {"a": 2, "b": 40}})
    assert answer.status_code == 200
    assert answer.get_json() == {"role": "tool", "tool_call_id": "c1", "content": "42"}
    assert answer.headers["X-Worker-Pid"] == str(os.getpid())

    call = {"id": "c2", "type": "function", "function": {"name": "mcp__demo__echo", "arguments": '{"message": "hi"}'}}
    assert client.post("/call", json=call).get_json() == {"role": "tool", "tool_call_id": "c2", "content": "hi"}

    failed = client.post("/call", json={"id": "c3", "name": "mcp__demo__fail", "arguments": {"message": "nope"}})
    assert failed.status_code == 200
    assert failed.get_json()["content"] == "Error: nope"
    boom = client.post("/call", json={"id": "c4", "name": "mcp__demo__boom"}).get_json()
    assert boom["content"].startswith("Error:") and "boom" in boom["content"]
    unknown = client.post("/call", json={"id": "c5", "name": "mcp__demo__nope"}).get_json()
    assert unknown["content"].startswith("Error:")
    assert client.post("/call", json=[1, 2]).status_code == 400
    assert client.post("/call", data="not json").status_code == 400

    # Threads of one process share its registry.
    def echo(i: int) -> dict[str, Any]:
        body = {"id": f"t{i}", "name": "mcp__demo__echo", "arguments": {"message": f"m{i}"}}
        return flask_example.app.test_client().post("/call", json=body).get_json()

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(echo, range(32)))
    assert results == [{"role": "tool", "tool_call_id": f"t{i}", "content": f"m{i}"} for i in range(32)]

    stats = client.get("/stats").get_json()
    assert stats["pid"] == os.getpid()
    assert stats["tools"]["mcp__demo__echo"]["calls"] == 33
    assert stats["tools"]["mcp__demo__fail"]["errors"] == 1
    assert stats["tools"]["mcp__demo__boom"]["errors"] == 1
    assert client.get("/health").get_json() == {"pid": os.getpid(), "servers": ["demo"], "closed": False}
