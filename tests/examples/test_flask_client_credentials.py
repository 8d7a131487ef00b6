"""examples/flask_client_credentials.py through Flask's test client, against tests/servers/grant_server.py.

Eight request threads hit the app at once: they share one MCP client and one
ClientCredentials object, and the authorization server sees one token request.
"""

from __future__ import annotations

import gc
import importlib.util
import threading
import uuid
from types import ModuleType
from typing import Any

import pytest

from ..conftest import ROOT

flask = pytest.importorskip("flask")
pytest.importorskip("jwt")

from tests.servers.grant_server import GrantServer

pytestmark = pytest.mark.timeout(60)

EXAMPLE = ROOT / "examples" / "flask_client_credentials.py"
SECRET = "flask-worker-secret"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"flask_cc_{uuid.uuid4().hex[:8]}", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_worker_threads_share_one_client_and_one_token() -> None:
    example = load_example()
    with GrantServer(secrets_={"flask-worker": SECRET}, scopes_supported=["mcp:tools"]) as srv:
        app = example.create_app(srv.mcp_url, client_id="flask-worker", client_secret=SECRET, protocol="2025-11-25")
        try:
            barrier = threading.Barrier(8)
            answers: list[Any] = []
            errors: list[BaseException] = []

            def worker(i: int) -> None:
                try:
                    with app.test_client() as http:
                        barrier.wait(5)
                        reply = http.post("/call", json={"name": "echo", "arguments": {"text": f"hello {i}"}})
                        answers.append((reply.status_code, reply.get_json()))
                except BaseException as exc:  # noqa: BLE001
                    errors.append(exc)

            threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            assert not errors
            assert sorted(body["text"] for _, body in answers) == [f"hello {i}" for i in range(8)]
            assert {status for status, _ in answers} == {200}
            assert len(srv.token_requests) == 1
            [token_request] = srv.token_requests
            assert token_request["form"]["grant_type"] == "client_credentials"
            assert token_request["form"]["scope"] == "mcp:tools"

            with app.test_client() as http:
                assert http.get("/tools").get_json() == [{"name": "echo", "description": ""}]
                health = http.get("/health").get_json()
                assert SECRET not in health["auth"] and "flask-worker" in health["auth"]
                assert http.post("/call", json={"nope": 1}).status_code == 400
            assert len(srv.token_requests) == 1
        finally:
            example.close_mcp(app)
            example.close_mcp(app)  # idempotent


def test_auth_failure_is_a_502_without_the_secret() -> None:
    example = load_example()
    with GrantServer(secrets_={"flask-worker": "a-different-secret"}) as srv:
        app = example.create_app(srv.mcp_url, client_id="flask-worker", client_secret=SECRET, protocol="2025-11-25")
        try:
            with app.test_client() as http:
                reply = http.post("/call", json={"name": "echo", "arguments": {}})
            assert reply.status_code == 502
            text = reply.get_json()["error"]
            assert "invalid_client" in text and SECRET not in text
        finally:
            example.close_mcp(app)
            del app
            gc.collect()  # the AuthError's traceback holds the 401 response (and its socket) in a cycle
