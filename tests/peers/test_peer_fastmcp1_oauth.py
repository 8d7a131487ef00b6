"""mcpcall's OAuth 2.1 client against a real third-party authorization server: FastMCP 1.x's own.

The peer is tests/servers/fastmcp1_oauth_server.py, run by the Python of the
``.venv-mcp1`` venv (``mcp==1.x``, named by ``MCPCALL_MCP1_PYTHON``): a FastMCP
server over streamable HTTP that is its own authorization server through the
SDK's ``auth_server_provider`` support (its metadata, ``/authorize``, ``/token``,
``/register`` and bearer middleware; only the in-memory provider is ours, and it
approves every authorization at once). So "the browser" is one GET of the
authorization URL whose ``Location`` is the redirect carrying code and state.

The server counts registrations, authorizations, code exchanges and refreshes by
client_id (``GET /test-stats``), and ``POST /test-expire?client_id=X`` makes a
client's access tokens expired on the server's clock.

Servers, each started once for the module (and only if a test needs it):

- ``server``: tokens good for an hour, scope ``mcp:read`` required, given by
  default to clients that register without a scope (as the SDK's README does);
- ``short_server``: the first token lives 2 s, refreshed ones 20 s;
- ``no_default_scope_server``: DCR without ``scope`` gets no scopes;
- ``no_prm_server``: ``resource_server_url=None``, so no protected resource
  metadata (the 2025-03-26 way FastMCP 1.x still allows).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
import requests

import mcpcall
from tests.conftest import SERVERS, require_peer
from tests.fake_browser import browser_env

SERVER = SERVERS / "fastmcp1_oauth_server.py"
PORT_LINE = re.compile(r"mcpcall-test-port=(\d+)")
REDIRECT_URI = "http://127.0.0.1:9/callback"  # never contacted: the redirect handler reads the Location
WHOAMI = re.compile(r"client_id=(\S+) scopes=(.*)")



def mcp1_python() -> str:
    """The python of the venv with mcp 1.x (``make test`` makes it and sets MCPCALL_MCP1_PYTHON)."""
    python = os.environ.get("MCPCALL_MCP1_PYTHON")
    if not python or not os.access(python, os.X_OK):
        require_peer("the MCP Python SDK 1.x venv (.venv-mcp1, named by MCPCALL_MCP1_PYTHON)")
    assert python is not None
    return python


# -- the server ---------------------------------------------------------------------


class Peer:
    """The FastMCP 1.x OAuth server, in its own process group, stdout and stderr to a file."""

    def __init__(self, stderr_path: Path, *options: str) -> None:
        self.stderr_path = stderr_path
        self.options = options
        self.port = 0
        with open(stderr_path, "wb") as err:
            self.process = subprocess.Popen(
                [mcp1_python(), str(SERVER), *options], stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                start_new_session=True,
            )

    def wait_for_port(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = PORT_LINE.search(self.stderr())
            if match:
                self.port = int(match.group(1))
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError(f"the FastMCP 1.x OAuth server {self.options} reported no port; stderr:\n{self.stderr()}")

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stats(self) -> dict[str, Any]:
        with requests.get(f"{self.base}/test-stats", timeout=10) as response:
            response.raise_for_status()
            return response.json()  # type: ignore[no-any-return]

    def count(self, what: str, client_id: str) -> int:
        return int(self.stats()[what].get(client_id, 0))

    def expire(self, client_id: str) -> int:
        with requests.post(f"{self.base}/test-expire", params={"client_id": client_id}, timeout=10) as response:
            response.raise_for_status()
            return int(response.json()["expired"])

    def stop(self) -> None:
        for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 10.0)):
            if self.process.poll() is not None:
                break
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(wait)
            except subprocess.TimeoutExpired:
                pass
        self.process.wait(10)


def _peer(tmp_path_factory: pytest.TempPathFactory, name: str, *options: str) -> Iterator[Peer]:
    mcp1_python()
    peer = Peer(tmp_path_factory.mktemp("fastmcp1-oauth") / f"{name}.stderr", *options)
    try:
        peer.wait_for_port()
        yield peer
    finally:
        peer.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peer]:
    yield from _peer(tmp_path_factory, "default")


@pytest.fixture(scope="module")
def short_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peer]:
    yield from _peer(tmp_path_factory, "short", "--expires-in", "2", "--refreshed-expires-in", "20")


@pytest.fixture(scope="module")
def no_default_scope_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peer]:
    yield from _peer(tmp_path_factory, "no-default-scope", "--no-default-scopes")


@pytest.fixture(scope="module")
def no_prm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peer]:
    yield from _peer(tmp_path_factory, "no-prm", "--no-resource-metadata")


# -- the client side ----------------------------------------------------------------


class Follow:
    """The redirect handler: GET the authorization URL and return where FastMCP's AS redirects at once."""

    def __init__(self) -> None:
        self.urls: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, url: str) -> str:
        with self.lock:
            self.urls.append(url)
        with requests.get(url, allow_redirects=False, timeout=10) as response:
            assert response.status_code in (302, 303, 307), (response.status_code, response.text)
            return response.headers["Location"]


def oauth(follow: Follow | None = None, **options: Any) -> mcpcall.OAuth:
    if follow is not None:
        options.setdefault("redirect_handler", follow)
        options.setdefault("redirect_uri", REDIRECT_URI)
    return mcpcall.OAuth(**options)


def whoami(client: mcpcall.Client) -> tuple[str, str]:
    text = client.call_tool("whoami", {}).text
    match = WHOAMI.fullmatch(text)
    assert match, text
    return match.group(1), match.group(2)


def burst(client: mcpcall.Client, threads: int = 8, calls: int = 1) -> list[str]:
    """``threads`` threads released at once, each making ``calls`` whoami calls; every answer."""
    barrier = threading.Barrier(threads)
    answers: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker() -> None:
        try:
            barrier.wait(30)
            for _ in range(calls):
                text = client.call_tool("whoami", {}).text
                with lock:
                    answers.append(text)
        except BaseException as exc:  # noqa: BLE001 - reported below
            with lock:
                errors.append(exc)

    pool = [threading.Thread(target=worker, name=f"burst-{k}") for k in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(120)
    assert not errors, errors
    assert len(answers) == threads * calls
    return answers


# -- the whole flow -------------------------------------------------------------------


def test_discovery_registration_pkce_token_then_tools(server: Peer) -> None:
    follow = Follow()
    with oauth(follow) as auth, mcpcall.connect(server.url, auth=auth, timeout=30) as client:
        assert client.server_info.name == "mcpcall-fastmcp1-oauth-test-server"
        assert sorted(tool.name for tool in client.list_tools()) == ["echo", "whoami"]
        client_id, scopes = whoami(client)
        assert scopes == "mcp:read"
        assert client.call_tool("echo", {"message": "hi there"}).text == "hi there"
    assert client_id in server.stats()["registrations"]
    assert server.count("authorizations", client_id) == 1
    assert server.count("exchanges", client_id) == 1
    assert server.count("refreshes", client_id) == 0
    assert len(follow.urls) == 1
    query = dict(parse_qsl(urlsplit(follow.urls[0]).query))  # what went to FastMCP's /authorize
    assert query["client_id"] == client_id and query["response_type"] == "code"
    assert query["code_challenge_method"] == "S256" and query["code_challenge"]
    assert query["resource"] == server.url and query["scope"] == "mcp:read"
    assert query["redirect_uri"] == REDIRECT_URI and query["state"]
    assert f"register client_id={client_id} auth_method=none" in server.stderr()


@pytest.mark.parametrize("expiry", ["client-clock", "server-clock"])
def test_eight_threads_after_expiry_refresh_once(server: Peer, expiry: str) -> None:
    """One client shared by 8 threads; the token expires; exactly one refresh, every call answered.

    ``client-clock``: the stored token's expiry is put in the past, as if its
    lifetime had run out (mcpcall refreshes before sending). ``server-clock``:
    the server expires it while mcpcall still thinks it good (every thread gets a
    401, and one of them refreshes).
    """
    store = mcpcall.MemoryTokenStore()
    with oauth(Follow(), token_store=store) as auth, mcpcall.connect(server.url, auth=auth, timeout=30) as client:
        client_id, _ = whoami(client)
        old = auth.token_for(server.url)
        assert old is not None and old.refresh_token
        assert server.expire(client_id) >= 1
        if expiry == "client-clock":
            store.put(replace(old, expires_at=time.time() - 1))
        answers = burst(client, threads=8)
        assert set(answers) == {f"client_id={client_id} scopes=mcp:read"}
        assert server.count("refreshes", client_id) == 1
        assert server.count("rejected_refreshes", client_id) == 0
        assert server.count("authorizations", client_id) == 1  # no new authorization, no browser
        new = auth.token_for(server.url)
        assert new is not None and new.access_token != old.access_token and new.refresh_token != old.refresh_token
        burst(client, threads=8, calls=2)  # the new token is good: no more refreshes
        assert server.count("refreshes", client_id) == 1
    assert server.stats()["registrations"].count(client_id) == 1


def test_tokens_shorter_than_the_refresh_margin_are_not_refreshed_on_every_request(short_server: Peer) -> None:
    store = mcpcall.MemoryTokenStore()
    with oauth(Follow(), token_store=store) as auth, mcpcall.connect(short_server.url, auth=auth, timeout=30) as client:
        client_id, _ = whoami(client)
        # Let the token in hand (2 s, or 20 s if already refreshed) run out on both clocks.
        short_server.expire(client_id)
        token = auth.token_for(short_server.url)
        assert token is not None
        store.put(replace(token, expires_at=time.time() - 1))
        before = short_server.count("refreshes", client_id)
        burst(client, threads=8, calls=2)  # each thread's 2nd call comes after the refresh, with a 20 s token
        assert short_server.count("refreshes", client_id) - before == 1


# -- a token store shared with a later run ---------------------------------------------


def test_file_token_store_reused_by_a_later_run_without_a_browser(server: Peer, tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    with oauth(Follow(), token_store=mcpcall.FileTokenStore(path)) as auth, \
            mcpcall.connect(server.url, auth=auth, timeout=30) as client:
        client_id, _ = whoami(client)
    registrations = server.stats()["registrations"]
    assert json.loads(path.read_text())["tokens"][0]["resource"] == server.url

    later = oauth(token_store=mcpcall.FileTokenStore(path), interactive=False)  # no redirect handler
    with later, mcpcall.connect(server.url, auth=later, timeout=30) as client:
        assert whoami(client)[0] == client_id
        assert [tool.name for tool in client.list_tools()] == ["whoami", "echo"]
    assert server.stats()["registrations"] == registrations
    assert server.count("authorizations", client_id) == 1 and server.count("refreshes", client_id) == 0


def test_later_run_refreshes_an_expired_stored_token_with_the_stored_client(server: Peer, tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    with oauth(Follow(), token_store=mcpcall.FileTokenStore(path)) as auth, \
            mcpcall.connect(server.url, auth=auth, timeout=30) as client:
        client_id, _ = whoami(client)
        stored = auth.token_for(server.url)
    assert stored is not None
    server.expire(client_id)
    store = mcpcall.FileTokenStore(path)
    store.put(replace(stored, expires_at=time.time() - 1))  # its lifetime ran out between the runs

    later = oauth(token_store=mcpcall.FileTokenStore(path), interactive=False)
    with later, mcpcall.connect(server.url, auth=later, timeout=30) as client:
        assert whoami(client)[0] == client_id
    assert server.count("refreshes", client_id) == 1
    assert server.count("authorizations", client_id) == 1
    assert server.stats()["registrations"].count(client_id) == 1


def test_later_run_with_a_token_the_server_expired_early(server: Peer, tmp_path: Path) -> None:
    """The stored token looks good to the client but the server no longer takes it: refresh, not fail."""
    path = tmp_path / "tokens.json"
    with oauth(Follow(), token_store=mcpcall.FileTokenStore(path)) as auth, \
            mcpcall.connect(server.url, auth=auth, timeout=30) as client:
        client_id, _ = whoami(client)
    server.expire(client_id)
    later = oauth(token_store=mcpcall.FileTokenStore(path), interactive=False)
    with later, mcpcall.connect(server.url, auth=later, timeout=30) as client:
        assert whoami(client)[0] == client_id
    assert server.count("refreshes", client_id) == 1
    assert server.count("authorizations", client_id) == 1


def test_later_run_without_a_token_is_told_to_log_in(server: Peer, tmp_path: Path) -> None:
    registrations = server.stats()["registrations"]
    auth = oauth(token_store=mcpcall.FileTokenStore(tmp_path / "empty.json"), interactive=False)
    with auth, pytest.raises(mcpcall.AuthError, match="not interactive"):
        mcpcall.connect(server.url, auth=auth, timeout=30)
    assert server.stats()["registrations"] == registrations


# -- login ahead of time -----------------------------------------------------------------


def test_login_before_connect(server: Peer) -> None:
    follow = Follow()
    with oauth(follow) as auth:
        token = auth.login(server.url)
        assert token is not None and token.refresh_token and token.resource == server.url
        assert token.scope == ("mcp:read",)
        assert len(follow.urls) == 1
        assert auth.login(server.url) == token  # still good: nothing to do
        with mcpcall.connect(server.url, auth=auth, timeout=30) as client:
            client_id, _ = whoami(client)
        assert len(follow.urls) == 1
    assert server.count("authorizations", client_id) == 1
    assert server.count("exchanges", client_id) == 1


def test_cli_login_then_tools_and_call(server: Peer, tmp_path: Path) -> None:
    env = browser_env(tmp_path)
    log = tmp_path / "browser.log"
    tokens = tmp_path / "tokens.json"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "mcpcall", *args, "--token-file", str(tokens)], env=env,
                              capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=90, check=False)

    registrations = len(server.stats()["registrations"])
    done = cli("login", server.url)
    assert done.returncode == 0, done.stderr
    assert "Logged in to" in done.stdout
    assert len(log.read_text().splitlines()) == 1
    stored = json.loads(tokens.read_text())["tokens"]
    assert len(stored) == 1 and stored[0]["resource"] == server.url

    done = cli("tools", server.url)
    assert done.returncode == 0, done.stderr
    assert "whoami" in done.stdout and "echo" in done.stdout
    done = cli("call", server.url, "whoami")
    assert done.returncode == 0, done.stderr
    match = WHOAMI.search(done.stdout)
    assert match and match.group(2).strip() == "mcp:read", done.stdout
    assert len(log.read_text().splitlines()) == 1  # no browser again
    assert len(server.stats()["registrations"]) == registrations + 1
    assert server.count("authorizations", match.group(1)) == 1


# -- FastMCP configurations mcpcall does not get through ---------------------------------


def test_registration_without_default_scopes(no_default_scope_server: Peer) -> None:
    with oauth(Follow()) as auth, mcpcall.connect(no_default_scope_server.url, auth=auth, timeout=30) as client:
        assert whoami(client)[1] == "mcp:read"


def test_server_without_protected_resource_metadata(no_prm_server: Peer) -> None:
    with oauth(Follow()) as auth, mcpcall.connect(no_prm_server.url, auth=auth, timeout=30) as client:
        assert whoami(client)[1] == "mcp:read"
