"""Tokens shared by processes: the store's refresh lock, and OAuth refreshing once per expiry across a fleet.

Every test runs for both stores that processes share: FileTokenStore (one machine: flock) and
RedisTokenStore (many machines; a real redis-server). The workers are separate processes
(tests/auth/shared_store_worker.py), each with its own OAuth object, against the rotating test
authorization server (tests/servers/oauth_server.py: a refresh token is good for one use; a
reused one gets invalid_grant).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import requests

from mcpcall.auth.oauth import OAuth
from mcpcall.auth.tokens import FileTokenStore, Token, TokenStore
from mcpcall.errors import RefreshAborted, RefreshTimeout
from tests.conftest import PYTHON, ROOT, child_pythonpath, wait_until
from tests.servers.grant_server import GrantServer
from tests.servers.oauth_server import OAuthServer

pytestmark = pytest.mark.timeout(240)

CLIENT, SECRET = "fleet", "fleet-secret"
REDIRECT = "http://127.0.0.1:9/callback"
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
WORKERS = 8
ROUNDS = 3
ISS = "https://as.example"
RES = "https://mcp.example/mcp"


class Worker:
    """One worker process (tests/auth/shared_store_worker.py): lines in on stdin, JSON lines out on stdout."""

    def __init__(self, store: str, url: str, timeout: float, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [PYTHON, "-m", "tests.auth.shared_store_worker", store, url, CLIENT, SECRET, str(timeout)],
            cwd=str(ROOT), env={**os.environ, "PYTHONPATH": child_pythonpath(), **(env or {})},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )
        self._buffer = b""

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()

    def read(self, timeout: float = 60.0) -> Any:
        """The next JSON line the worker prints, within ``timeout`` seconds."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(0.0, left))
            assert ready, f"worker {self.process.pid} said nothing in {timeout:g} s"
            chunk = os.read(fd, 65536)
            assert chunk, f"worker {self.process.pid} exited with {self.process.wait(10)}"
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    def kill(self) -> None:
        """SIGKILL, as the OOM killer or a lost machine would, and reap."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.send("quit")
            except OSError:
                pass
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture(params=["file", "redis"])
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """``file:<path>`` or ``redis:<url>``: what a worker is given to open the shared store."""
    if request.param == "redis":
        pytest.importorskip("redis")
        return "redis:" + str(request.getfixturevalue("redis_url"))
    return f"file:{tmp_path / 'tokens.json'}"


@contextmanager
def opened(spec: str) -> Iterator[TokenStore]:
    """The store ``spec`` names, in this process (closed after)."""
    kind, _, target = spec.partition(":")
    if kind == "redis":
        from mcpcall.auth.redis_store import RedisTokenStore

        with RedisTokenStore(target) as store:
            yield store
    else:
        yield FileTokenStore(target)


def follow(url: str) -> str:
    response = requests.get(url, allow_redirects=False, timeout=5)
    assert response.status_code == 302, response.text
    return str(response.headers["Location"])


def sign_in(srv: OAuthServer, store: TokenStore) -> Token:
    """What a person does once from a machine with a browser: authorize, with the fleet's client, into the shared store."""
    auth = OAuth(client_id=CLIENT, client_secret=SECRET, redirect_uri=REDIRECT, redirect_handler=follow,
                 token_store=store, timeout=5)
    try:
        assert requests.post(srv.mcp_url, json=PING, auth=auth, timeout=10).status_code == 200
    finally:
        auth.close()
    token = store.get(srv.base, srv.mcp_url)
    assert token is not None and token.refresh_token
    return token


def make_due(srv: OAuthServer, store: TokenStore) -> Token:
    """Time passes: the stored token is now within its refresh margin (still valid at the server)."""
    token = store.get(srv.base, srv.mcp_url)
    assert token is not None
    due = replace(token, expires_at=time.time() + 20)
    store.put(due)
    return due


@contextmanager
def workers(spec: str, url: str, count: int, timeout: float = 5.0, env: dict[str, str] | None = None) -> Iterator[list[Worker]]:
    made = [Worker(spec, url, timeout, env) for _ in range(count)]
    try:
        yield made
    finally:
        for worker in made:
            worker.close()


def test_eight_processes_refresh_once_per_expiry_and_keep_the_rotated_token(store_spec: str) -> None:
    with OAuthServer(clients={CLIENT: SECRET}, refresh_delay=0.3) as srv, opened(store_spec) as store:
        sign_in(srv, store)
        with workers(store_spec, srv.mcp_url, WORKERS) as fleet:
            assert [w.read() for w in fleet] == [{"ready": 200}] * WORKERS
            for round_ in range(ROUNDS):
                make_due(srv, store)
                refreshes = srv.refresh_count
                at = time.time() + 1.0  # every worker sends at this moment
                for w in fleet:
                    w.send(f"go {at}")
                answers = [w.read() for w in fleet]
                newest_access, newest_refresh = srv.issued[-1]
                assert srv.refresh_count == refreshes + 1, f"round {round_}: {srv.refresh_count - refreshes} refreshes"
                assert srv.refresh_rejected == 0, "a refresh token was used twice (invalid_grant)"
                assert [(a["status"], a["history"]) for a in answers] == [(200, [])] * WORKERS
                assert {a["sent"] for a in answers} == {newest_access}, "a process did not use the newest token"
                stored = store.get(srv.base, srv.mcp_url)
                assert stored is not None
                assert (stored.access_token, stored.refresh_token) == (newest_access, newest_refresh)
                assert newest_refresh in srv.refresh_tokens  # the rotated refresh token is live, and it is the one kept


def test_a_refresher_killed_mid_refresh_holds_the_others_up_only_until_its_lease_ends(store_spec: str) -> None:
    hold = threading.Event()
    with OAuthServer(clients={CLIENT: SECRET}, refresh_hold=hold) as srv, opened(store_spec) as store:
        try:
            sign_in(srv, store)
            with workers(store_spec, srv.mcp_url, 2, timeout=3.0) as (first, second):
                assert [first.read(), second.read()] == [{"ready": 200}] * 2
                make_due(srv, store)
                first.send(f"go {time.time()}")
                assert wait_until(lambda: srv.refresh_count == 1, timeout=30)  # its refresh is at the server, held
                first.kill()  # with the store's refresh lock held
                if store_spec.startswith("redis:"):
                    lock_key = store.lock_key(srv.base, srv.mcp_url)  # type: ignore[attr-defined]
                    assert store._redis.pttl(lock_key) > 0  # type: ignore[attr-defined]  # its lease runs on
                srv.refresh_hold = None  # the next refresh is answered
                second.send(f"go {time.time()}")
                answer = second.read(60)
                newest_access, newest_refresh = srv.issued[-1]
                assert (answer["status"], answer["history"], answer["sent"]) == (200, [], newest_access)
                assert srv.refresh_count == 2 and srv.refresh_rejected == 0
                stored = store.get(srv.base, srv.mcp_url)
                assert stored is not None and (stored.access_token, stored.refresh_token) == (newest_access, newest_refresh)
        finally:
            hold.set()


def test_a_refresher_that_overran_its_lease_does_not_replace_the_newer_token(redis_url: str) -> None:
    """Redis: the first refresher's token request outlasts its (shortened) lease; the second takes the lock and
    refreshes; the first's late answer (invalid_grant: its refresh token was spent by then) must not overwrite
    the second's token, whose rotated refresh token would be lost."""
    spec = f"redis:{redis_url}"
    hold = threading.Event()
    with OAuthServer(clients={CLIENT: SECRET}, refresh_hold=hold) as srv, opened(spec) as store:
        try:
            sign_in(srv, store)
            with workers(spec, srv.mcp_url, 2, timeout=20.0, env={"MCPCALL_TEST_LEASE": "1.0"}) as (first, second):
                assert [first.read(), second.read()] == [{"ready": 200}] * 2
                make_due(srv, store)
                first.send(f"go {time.time()}")
                assert wait_until(lambda: srv.refresh_count == 1, timeout=30)  # held at the server, lock held
                lock_key = store.lock_key(srv.base, srv.mcp_url)  # type: ignore[attr-defined]
                assert wait_until(lambda: store._redis.pttl(lock_key) < 0, timeout=10)  # type: ignore[attr-defined]
                srv.refresh_hold = None
                second.send(f"go {time.time()}")  # takes the lock whose lease ran out, refreshes
                second_answer = second.read(60)
                newest_access, newest_refresh = srv.issued[-1]
                assert (second_answer["status"], second_answer["sent"]) == (200, newest_access)
                hold.set()  # the first refresh is answered now: invalid_grant, its refresh token was spent
                first_answer = first.read(60)
                assert srv.refresh_rejected == 1 and srv.refresh_count == 2
                assert (first_answer["status"], first_answer["sent"]) == (200, newest_access)  # it uses the newer token
                stored = store.get(srv.base, srv.mcp_url)
                assert stored is not None and (stored.access_token, stored.refresh_token) == (newest_access, newest_refresh)
        finally:
            hold.set()


def test_eight_processes_get_one_client_credentials_token_and_renew_it_once(store_spec: str) -> None:
    with GrantServer(secrets_={CLIENT: SECRET}, token_delay=0.3) as srv, opened(store_spec) as store:
        grant = {"MCPCALL_TEST_GRANT": "client_credentials"}
        with workers(store_spec, srv.mcp_url, WORKERS, env=grant) as fleet:
            assert [w.read() for w in fleet] == [{"ready": 0}] * WORKERS
            for round_ in range(2):  # the first token (after a 401 each), then its renewal before expiry
                if round_:
                    token = store.get(srv.base, srv.mcp_url)
                    assert token is not None
                    store.put(replace(token, expires_at=time.time() + 20))
                at = time.time() + 1.0
                for w in fleet:
                    w.send(f"go {at}")
                answers = [w.read() for w in fleet]
                assert len(srv.token_requests) == round_ + 1, f"round {round_}: {len(srv.token_requests)} token requests"
                stored = store.get(srv.base, srv.mcp_url)
                assert stored is not None
                assert {a["sent"] for a in answers} == {stored.access_token}
                assert all(a["status"] == 200 for a in answers)


# -- the lock of each store ------------------------------------------------------------------------------


def test_lock_excludes_another_process_and_its_death_releases_it_within_the_lease(store_spec: str) -> None:
    with opened(store_spec) as store, workers(store_spec, "-", 1) as (holder,):
        assert holder.read() == {"ready": 0}
        holder.send(f"hold {ISS} {RES} 5.0")
        assert holder.read() == {"held": True}
        with pytest.raises(RefreshTimeout) as caught:
            with store.lock(ISS, RES, timeout=0.3, lease=30):  # type: ignore[attr-defined]
                pytest.fail("two holders at once")
        assert "refresh lock" in str(caught.value)
        holder.kill()
        with store.lock(ISS, RES, timeout=30, lease=30):  # type: ignore[attr-defined]
            pass  # flock: at once; Redis: when the 5 s lease ends


def test_lock_wait_ends_when_the_request_ends(store_spec: str) -> None:
    with opened(store_spec) as store, opened(store_spec) as other:
        stop = threading.Event()
        with store.lock(ISS, RES, timeout=1, lease=30):  # type: ignore[attr-defined]
            timer = threading.Timer(0.2, stop.set)
            timer.start()
            started = time.monotonic()
            try:
                with pytest.raises(RefreshAborted):
                    with other.lock(ISS, RES, timeout=30, lease=30, stop=stop):  # type: ignore[attr-defined]
                        pytest.fail("two holders at once")
            finally:
                timer.join(5)
            assert time.monotonic() - started < 10  # the stop ended it, not the 30 s timeout


def test_put_if_keeps_the_newer_token(store_spec: str) -> None:
    with opened(store_spec) as store:
        old = Token("at-1", "Bearer", ISS, RES, refresh_token="rt-1")
        assert store.put_if(old, None)  # type: ignore[attr-defined]
        assert store.put_if(replace(old, access_token="at-2", refresh_token="rt-2"), "at-1")  # type: ignore[attr-defined]
        assert not store.put_if(replace(old, access_token="at-late", refresh_token="rt-late"), "at-1")  # type: ignore[attr-defined]
        assert store.get(ISS, RES).refresh_token == "rt-2"  # type: ignore[union-attr]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_file_lock_held_at_a_fork_is_not_kept_by_the_child(tmp_path: Path) -> None:
    """flock belongs to the open file, which a forked child shares: the child must let go of its copy at once."""
    store = FileTokenStore(tmp_path / "tokens.json")
    other = FileTokenStore(tmp_path / "tokens.json")
    read_end, write_end = os.pipe()
    with store.lock(ISS, RES, timeout=1):
        pid = os.fork()
        if pid == 0:  # the child: wait until the parent is done, holding nothing
            try:
                os.close(write_end)
                os.read(read_end, 1)
            finally:
                os._exit(0)
    os.close(read_end)
    try:
        with other.lock(ISS, RES, timeout=2):  # the parent let go; the child, still alive, must not hold it
            pass
    finally:
        os.close(write_end)  # the child ends
        os.waitpid(pid, 0)


FORK_CHURN = r"""
import contextlib, json, os, sys, threading
from mcpcall.auth.tokens import FileTokenStore, RefreshTimeout

path, forks = sys.argv[1], int(sys.argv[2])
issuer, resources = "https://as.example", [f"https://mcp.example/mcp/{i}" for i in range(3)]
store = FileTokenStore(path)
sidecars = {store.refresh_lock_path(issuer, resource) for resource in resources}
stop = threading.Event()

locked_out = []  # keys whose lock this process itself could no longer take

def churn(resource):
    while not stop.is_set():
        try:
            with store.lock(issuer, resource, timeout=10):
                pass
        except RefreshTimeout:
            locked_out.append(resource)
            return

def copies():  # in a child: how many of its descriptors are a lock file
    held = 0
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            held += os.readlink(f"/proc/self/fd/{name}") in sidecars
    return held

churners = [threading.Thread(target=churn, args=(resource,)) for resource in resources]
for churner in churners:
    churner.start()
keepers = []  # (pid, the write end that lets it go) of children that kept a copy
for _ in range(forks):
    report_r, report_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(report_w, bytes([copies()]))
            os.read(go_r, 1)
        finally:
            os._exit(0)
    os.close(report_w)
    os.close(go_r)
    with os.fdopen(report_r, "rb") as report:
        kept = report.read(1)[0]
    if kept:
        keepers.append((pid, go_w))
    else:
        os.write(go_w, b"x")  # a byte, not EOF: later children hold copies of this write end
        os.close(go_w)
        os.waitpid(pid, 0)
stop.set()
for churner in churners:
    churner.join()
blocked = False  # while the keepers live: can another process take every lock?
other = FileTokenStore(path)
for resource in resources:
    try:
        with other.lock(issuer, resource, timeout=1):
            pass
    except RefreshTimeout:
        blocked = True
for pid, go_w in keepers:
    os.write(go_w, b"x")
    os.close(go_w)
    os.waitpid(pid, 0)
print(json.dumps({"kept": len(keepers), "blocked": blocked, "locked_out": len(locked_out)}))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd") or not hasattr(os, "fork"), reason="needs fork and /proc")
def test_no_fork_lands_between_opening_a_lock_file_and_recording_it(tmp_path: Path) -> None:
    """Threads take and release their keys' locks over and over while the main thread forks (in a small process of
    its own, where forks are cheap): a child must never keep a copy of a lock file (one the parent had opened but
    not yet recorded among those a child closes, or forgotten but not yet closed), for that copy keeps the
    parent's flock held as long as the child lives: every other process, and the parent itself, is locked out."""
    done = subprocess.run([PYTHON, "-c", FORK_CHURN, str(tmp_path / "tokens.json"), "300"], cwd=str(ROOT),
                          env={**os.environ, "PYTHONPATH": child_pythonpath()}, capture_output=True, text=True,
                          timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome == {"kept": 0, "blocked": False, "locked_out": 0}, f"of 300 children: {outcome}"
