"""A config file is read as data: loading one starts no program and opens no connection.

The config names a stdio server that would write a marker file the moment it ran, and HTTP servers
(Streamable HTTP, HTTP+SSE, one with OAuth settings) on a recorder on 127.0.0.1 that notes every TCP
connection it is offered and every request line. Everything that reads a config without being asked
to connect (``load_config``, ``ServerConfig``, ``ToolRegistry.from_config`` and ``ToolRegistry`` with
``lazy=True``, ``mcpcall servers``) must leave the marker unwritten, the recorder unheard, the OAuth
settings' token file and callback port untouched, and no thread or child process behind. The test
ends by connecting two of the entries, which writes the marker and reaches the recorder: the checks
are not vacuous.
"""

from __future__ import annotations

import io
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import mcpcall
from mcpcall.cli import main
from tests.conftest import PYTHON, _children, free_port
from tests.loadcheck import mcpcall_threads


class Recorder:
    """An HTTP server on 127.0.0.1 that notes every connection offered to it and every request, answering 404."""

    def __init__(self) -> None:
        self.heard: list[str] = []
        self._lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                recorder._note(f"request {self.requestline}")
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_DELETE = _answer

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def verify_request(self, request: Any, client_address: Any) -> bool:
                recorder._note(f"connection from {client_address}")
                return True

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="config-loading-recorder", daemon=True)
        self._thread.start()

    def _note(self, what: str) -> None:
        with self._lock:
            self.heard.append(what)

    def everything_heard(self) -> list[str]:
        """What it heard, a connection still waiting in the listen backlog (offered, never accepted) included."""
        listener = self._server.socket
        listener.setblocking(False)
        try:
            while True:
                try:
                    conn, address = listener.accept()
                except (BlockingIOError, InterruptedError):
                    break
                conn.close()
                self._note(f"connection from {address} (in the backlog)")
        finally:
            listener.setblocking(True)
        with self._lock:
            return list(self.heard)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    made = Recorder()
    try:
        yield made
    finally:
        made.stop()


def _nothing_listens_on(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_loading_a_config_starts_nothing_and_connects_nowhere(tmp_path: Path, recorder: Recorder,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "the-server-ran"
    token_file = tmp_path / "oauth" / "tokens.json"
    callback_port = free_port()
    (tmp_path / "server.env").write_text("FROM_FILE=1\n")
    monkeypatch.setenv("MCPCALL_T_KEY", "k3y-value")
    entries: dict[str, Any] = {
        "local": {"command": PYTHON, "args": ["-c", f"open({str(marker)!r}, 'w').write('ran')"], "cwd": str(tmp_path),
                  "env": {"KEY": "${MCPCALL_T_KEY}"}, "envFile": str(tmp_path / "server.env")},
        "remote": {"url": recorder.url + "/mcp", "headers": {"Authorization": "Bearer ${MCPCALL_T_KEY}"}},
        "legacy": {"url": recorder.url + "/sse", "type": "sse"},
        "signed": {"url": recorder.url + "/signed/mcp",
                   "oauth": {"clientId": "c", "tokenFile": str(token_file), "callbackPort": callback_port}},
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": entries}))
    threads_before, children_before = set(mcpcall_threads()), _children()

    configs = mcpcall.load_config(str(path))
    assert {name: config.kind for name, config in configs.items()} == \
        {"local": "stdio", "remote": "http", "legacy": "http", "signed": "http"}
    assert configs["local"].spec["env"] == {"KEY": "k3y-value", "FROM_FILE": "1"}  # read: values, files
    assert configs["signed"].oauth is not None
    shown = [repr(config) for config in configs.values()]
    with mcpcall.ToolRegistry.from_config(str(path), lazy=True) as from_file, \
            mcpcall.ToolRegistry(dict(configs), lazy=True) as from_configs, \
            mcpcall.ToolRegistry(entries, lazy=True) as from_entries:
        for registry in (from_file, from_configs, from_entries):
            assert registry.servers == list(entries)
            shown.append(repr(registry))
        assert set(mcpcall_threads()) == threads_before, "a registry that was not asked to connect started threads"
        assert _children() == children_before, "a registry that was not asked to connect started a process"
        assert _nothing_listens_on(callback_port), "the OAuth callback listener was started"
    assert main(["--config", str(path), "servers"], out=io.StringIO()) == 0  # lists them, connects none
    capsys.readouterr()

    assert all("k3y-value" not in text for text in shown)
    assert not marker.exists(), "the stdio server ran"
    assert recorder.everything_heard() == [], "loading the config reached the HTTP servers"
    assert not token_file.exists() and not token_file.parent.exists(), "the OAuth token file was made"
    assert set(mcpcall_threads()) == threads_before and _children() == children_before

    # Connecting is what runs and reaches them: the same checks see it.
    with pytest.raises(mcpcall.ConnectionClosed):  # the program writes the marker and exits: no MCP server
        configs["local"].connect(timeout=20, close_timeout=1.0)
    assert marker.exists()
    with pytest.raises(mcpcall.MCPError):
        configs["remote"].connect(timeout=5, transport="streamable-http", protocol="legacy")
    assert any(line.startswith("request POST /mcp") for line in recorder.everything_heard())
