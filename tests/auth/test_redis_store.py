"""RedisTokenStore (mcpcall.auth.redis_store) against a real redis-server: storage, clients, errors, the lock, fork."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import requests

from mcpcall.auth.oauth import OAuth
from mcpcall.auth.tokens import MAX_CLIENTS, Token
from mcpcall.errors import RefreshAborted, RefreshTimeout, TokenStoreUnavailable
from tests.conftest import PYTHON, ROOT, child_pythonpath, free_port, stop_process, wait_until
from tests.secrets_check import assert_no_secret, shown

from .. import redis_server as servers

redis = pytest.importorskip("redis")
from mcpcall.auth.redis_store import RedisTokenStore  # noqa: E402 - after the skip: it needs redis-py

ISS = "https://as.example"
RES = "https://mcp.example/mcp"
PASSWORD = "hunter2-not-shown"
LATER = time.time() + 3600


def token(access: str = "at-1", **extra: object) -> Token:
    fields: dict[str, object] = {"expires_at": LATER, "refresh_token": "rt-1", "scope": ("read",), "lifetime": 3600.0}
    fields.update(extra)
    return Token(access, "Bearer", ISS, RES, **fields)  # type: ignore[arg-type]


@pytest.fixture
def raw(redis_url: str) -> Iterator[redis.Redis]:
    """A plain client on the same server, to look at what the store wrote."""
    client = redis.Redis.from_url(redis_url, socket_timeout=5, socket_connect_timeout=5, decode_responses=True)
    try:
        yield client
    finally:
        client.close()
        client.connection_pool.disconnect()


@pytest.fixture
def store(redis_url: str) -> Iterator[RedisTokenStore]:
    with RedisTokenStore(redis_url) as made:
        yield made


def test_round_trip_keyed_by_issuer_and_resource(store: RedisTokenStore) -> None:
    assert store.get(ISS, RES) is None
    first = token()
    store.put(first)
    assert store.get(ISS, RES) == first
    assert store.get(ISS, RES + "/other") is None and store.get("https://other.example", RES) is None
    other = replace(first, resource=RES + "/other", access_token="at-2")
    store.put(other)
    assert store.get(ISS, RES + "/other") == other and store.get(ISS, RES) == first
    store.delete(ISS, RES)
    store.delete(ISS, RES)  # no error when there is none
    assert store.get(ISS, RES) is None and store.get(ISS, RES + "/other") == other


def test_tokens_at_rest_are_token_json_never_the_raw_response(store: RedisTokenStore, raw: redis.Redis) -> None:
    body = {"access_token": "at-1", "token_type": "bearer", "expires_in": 60, "refresh_token": "rt-1", "id_token": "private"}
    got = Token.from_response(body, issuer=ISS, resource=RES)
    store.put(got)
    keys = raw.keys("*")
    assert keys == [store.token_key(ISS, RES)] and keys[0].startswith("mcpcall:token:")
    stored = json.loads(raw.get(keys[0]))
    assert stored == json.loads(json.dumps(got.to_json()))
    assert "id_token" not in raw.get(keys[0]) and "raw" not in stored
    assert store.get(ISS, RES) == got


def test_prefixes_keep_fleets_apart(redis_url: str) -> None:
    with RedisTokenStore(redis_url, prefix="fleet-a:") as a, RedisTokenStore(redis_url, prefix="fleet-b:") as b:
        a.put(token("at-a"))
        assert b.get(ISS, RES) is None
        b.put(token("at-b"))
        assert a.get(ISS, RES).access_token == "at-a"  # type: ignore[union-attr]
        assert a.token_key(ISS, RES).startswith("fleet-a:token:")


def test_a_client_of_your_own_is_used_and_left_open(raw: redis.Redis) -> None:
    with RedisTokenStore(raw) as store:
        store.put(token())
        assert store.get(ISS, RES) == token()
        assert repr(store).startswith("<RedisTokenStore redis://127.0.0.1:") and "prefix='mcpcall:'" in repr(store)
    assert raw.ping()  # closing the store did not close the caller's client


def test_malformed_entry_is_none_with_a_warning_that_shows_nothing_of_it(
    store: RedisTokenStore, raw: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    raw.set(store.token_key(ISS, RES), '{"access_token": "secret-looking-value", "token_type": "weird"}')
    with caplog.at_level(logging.WARNING, logger="mcpcall.auth.redis_store"):
        assert store.get(ISS, RES) is None
    assert "not a valid token" in caplog.text and "secret-looking-value" not in caplog.text
    raw.set(store.token_key(ISS, RES), "not json")
    assert store.get(ISS, RES) is None
    store.put(token())  # the next write replaces it
    assert store.get(ISS, RES) == token()


def test_an_entry_nested_past_the_parser_is_none_not_a_recursion_error(
    store: RedisTokenStore, raw: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """A value another writer of the Redis put there (corrupt or hostile): JSON nested deeper than the parser goes."""
    deep = "[" * 200_000
    raw.set(store.token_key(ISS, RES), deep)
    raw.set(store.clients_key(ISS), deep)
    with caplog.at_level(logging.WARNING, logger="mcpcall.auth.redis_store"):
        assert store.get(ISS, RES) is None
    assert "not a valid token" in caplog.text
    assert store.get_clients(ISS) == []
    assert store.put_if(token("at-1"), None) is True  # an entry that is no token counts as none, and is replaced
    store.put_client(ISS, {"client_id": "c1"})
    assert store.get(ISS, RES) == token("at-1") and store.get_clients(ISS) == [{"client_id": "c1"}]


def test_a_stored_token_with_a_line_break_or_an_expiry_that_is_no_time_is_not_a_token(
    store: RedisTokenStore, raw: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """What a token response may not carry is not taken from the store either: a line break in the access token (header
    injection; http.client's refusal would show the whole header in its message), an expiry that is NaN (never due,
    never expired) or infinite."""
    bad = [{"access_token": "at-1\r\nX-Injected: 1"}, {"access_token": "at-1\n"}, {"access_token": ""},
           {"expires_at": float("nan")}, {"expires_at": float("inf")}]
    for fields in bad:
        raw.set(store.token_key(ISS, RES), json.dumps({**token().to_json(), **fields}))
        with caplog.at_level(logging.WARNING, logger="mcpcall.auth.redis_store"):
            assert store.get(ISS, RES) is None
        assert "not a valid token" in caplog.text and "X-Injected" not in caplog.text


def test_put_if_stores_only_over_the_token_it_replaces(store: RedisTokenStore) -> None:
    assert store.put_if(token("at-1"), None) is True  # nothing stored: expected None
    assert store.put_if(token("at-x"), None) is False  # one is stored now
    assert store.put_if(token("at-2"), "at-0") is False  # not the stored one
    assert store.get(ISS, RES).access_token == "at-1"  # type: ignore[union-attr]
    assert store.put_if(token("at-2"), "at-1") is True
    assert store.get(ISS, RES).access_token == "at-2"  # type: ignore[union-attr]


def test_put_if_under_contention_lets_exactly_one_writer_replace_a_token(redis_url: str) -> None:
    with RedisTokenStore(redis_url) as store:
        store.put(token("at-0"))
    stores = [RedisTokenStore(redis_url) for _ in range(8)]
    barrier = threading.Barrier(len(stores))
    won: list[str] = []

    def writer(i: int) -> None:
        barrier.wait(10)
        if stores[i].put_if(token(f"at-{i + 1}"), "at-0"):
            won.append(f"at-{i + 1}")

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(len(stores))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(won) == 1
        assert stores[0].get(ISS, RES).access_token == won[0]  # type: ignore[union-attr]
    finally:
        for s in stores:
            s.close()


def test_registered_clients_newest_last_replaced_by_id_and_bounded(store: RedisTokenStore) -> None:
    assert store.get_clients(ISS) == []
    store.put_client(ISS, {"client_id": "c1", "client_secret": "s1", "ignored": 5})  # type: ignore[dict-item]
    store.put_client(ISS, {"client_id": "c2", "redirect_uri": "http://127.0.0.1:9/cb"})
    store.put_client(ISS, {"client_id": "c1", "client_secret": "s1-new"})
    assert store.get_clients(ISS) == [
        {"client_id": "c2", "redirect_uri": "http://127.0.0.1:9/cb"},
        {"client_id": "c1", "client_secret": "s1-new"},
    ]
    assert store.get_clients("https://other.example") == []
    for i in range(MAX_CLIENTS + 3):
        store.put_client(ISS, {"client_id": f"n{i}"})
    ids = [c["client_id"] for c in store.get_clients(ISS)]
    assert ids == [f"n{i}" for i in range(3, MAX_CLIENTS + 3)]
    with pytest.raises(ValueError):
        store.put_client(ISS, {"client_secret": "no id"})


def test_dynamically_registered_client_is_shared_for_refresh(redis_url: str) -> None:
    """A second process (a new OAuth object) refreshes with the client the first one registered."""
    from tests.auth.test_auth_oauth import REDIRECT, follow
    from tests.servers.oauth_server import OAuthServer

    with OAuthServer() as srv, RedisTokenStore(redis_url) as first_store, RedisTokenStore(redis_url) as second_store:
        first = OAuth(redirect_uri=REDIRECT, redirect_handler=follow, token_store=first_store, timeout=5)
        try:
            assert requests.post(srv.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, auth=first, timeout=10).ok
        finally:
            first.close()
        assert len(srv.registrations) == 1
        stored = second_store.get(srv.base, srv.mcp_url)
        assert stored is not None
        second_store.put(replace(stored, expires_at=time.time() - 1))  # expired: the next request refreshes
        second = OAuth(token_store=second_store, interactive=False, timeout=5)
        try:
            response = requests.post(srv.mcp_url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, auth=second, timeout=10)
        finally:
            second.close()
        assert response.status_code == 200
        assert srv.refresh_count == 1 and srv.refresh_rejected == 0 and len(srv.registrations) == 1
        assert second_store.get(srv.base, srv.mcp_url).refresh_token == srv.issued[-1][1]  # type: ignore[union-attr]


def test_repr_and_errors_never_show_the_password(redis_server: str) -> None:
    port = free_port()  # nothing listens there
    with RedisTokenStore(f"redis://user:{PASSWORD}@127.0.0.1:{port}/0", timeout=2) as store:
        assert PASSWORD not in repr(store) and f"127.0.0.1:{port}" in repr(store)
        with pytest.raises(TokenStoreUnavailable) as caught:
            store.get(ISS, RES)
    message = str(caught.value)
    assert PASSWORD not in message and "user" not in message
    assert f"redis://127.0.0.1:{port}/0" in message and "reading a token" in message and "refused" in message.lower()
    # A wrong password on a server that answers: the error says so, without it.
    base = redis_server.replace("redis://", f"redis://someone:{PASSWORD}@")
    with RedisTokenStore(base + "/0", timeout=2) as store, pytest.raises(TokenStoreUnavailable) as caught:
        store.put(token())
    assert PASSWORD not in str(caught.value) and "AuthenticationError" in str(caught.value)
    assert PASSWORD not in repr(caught.value)


def test_a_refused_write_keeps_no_token_in_the_error_or_its_chain(tmp_path: Path) -> None:
    """redis-py writes a failed pipeline command into its error, arguments and all: the token being stored. That
    error must not ride along as the context of TokenStoreUnavailable (suppressed contexts are still read: by
    error trackers, by ``traceback.TracebackException`` walkers)."""
    process, port = servers.start(tmp_path / "redis")
    word = "".join(["s3c", "r3t"])  # never whole in this file's source, which a traceback quotes
    secret = token("at-" + word * 3, refresh_token="rt-" + word * 3)  # short opaque tokens fit in its 100 characters
    client = {"client_id": "c1", "client_secret": "cs-" + word * 8}
    try:
        with RedisTokenStore(f"redis://127.0.0.1:{port}/0", timeout=5) as store:
            store.put(token("at-1"))
            store._redis.config_set("maxmemory", "1")  # every write now: OOM command not allowed
            for write in (lambda: store.put_if(secret, "at-1"), lambda: store.put(secret),
                          lambda: store.put_client(ISS, client)):
                with pytest.raises(TokenStoreUnavailable) as caught:
                    write()
                assert_no_secret(caught.value, [word])
    finally:
        stop_process(process)


@pytest.mark.parametrize("url", [
    f"redis://:123/{PASSWORD}@127.0.0.1/0",  # a base64 password with a "/", not percent-encoded: parsed as a path
    f"redis://:ab/{PASSWORD}+x=@127.0.0.1:6379/0",
    f"redis://:{PASSWORD}#x@127.0.0.1:6379/0",
])
def test_a_password_that_is_not_percent_encoded_is_never_shown(url: str) -> None:
    """The URL is the user's text, which redact_url can misread when a password is not percent-encoded: the store
    names itself from what redis-py parsed (host, port, db) instead, and a URL it cannot parse is not shown."""

    def shows_password(exc: BaseException) -> bool:
        return any(PASSWORD in text for text in shown(exc))

    try:
        store = RedisTokenStore(url, timeout=1)
    except ValueError as exc:
        assert "not a Redis URL" in str(exc) and not shows_password(exc)
        return
    with store:
        assert PASSWORD not in repr(store)
        with pytest.raises(TokenStoreUnavailable) as caught:
            store.get(ISS, RES)
        assert not shows_password(caught.value)


def test_not_a_store_argument_is_refused() -> None:
    with pytest.raises(TypeError, match="redis.Redis client or a redis:// URL"):
        RedisTokenStore(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a Redis URL"):
        RedisTokenStore(f"http://user:{PASSWORD}@127.0.0.1/")
    with pytest.raises(ValueError):
        RedisTokenStore("redis://127.0.0.1:1/0", timeout=0)


def test_a_store_that_does_not_answer_fails_within_its_timeout(silent_port: int) -> None:
    with RedisTokenStore(f"redis://127.0.0.1:{silent_port}/0", timeout=0.5) as store:
        started = time.monotonic()
        with pytest.raises(TokenStoreUnavailable, match="TimeoutError"):
            store.get(ISS, RES)
        assert time.monotonic() - started < 10  # bounded by the timeout (a hang would be caught here)


def test_a_request_with_the_store_down_fails_promptly_naming_the_store(tmp_path: Path) -> None:
    """Redis stops while a worker has a token: its next request fails with TokenStoreUnavailable, not a hang or a 401 loop."""
    from tests.auth.test_auth_oauth import REDIRECT, follow
    from tests.servers.oauth_server import OAuthServer

    process, port = servers.start(tmp_path / "redis")
    try:
        with OAuthServer() as srv, RedisTokenStore(f"redis://127.0.0.1:{port}/0", timeout=2) as store:
            auth = OAuth(redirect_uri=REDIRECT, redirect_handler=follow, token_store=store, timeout=5)
            try:
                ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
                assert requests.post(srv.mcp_url, json=ping, auth=auth, timeout=10).status_code == 200
                stop_process(process)
                started = time.monotonic()
                with pytest.raises(TokenStoreUnavailable) as caught:
                    requests.post(srv.mcp_url, json=ping, auth=auth, timeout=10)
                assert time.monotonic() - started < 10
                assert f"redis://127.0.0.1:{port}/0" in str(caught.value)
                assert srv.mcp_ok == 1  # nothing went out without its token
            finally:
                auth.close()
    finally:
        stop_process(process)


def test_a_registry_whose_token_store_is_down_says_so_at_once() -> None:
    import mcpcall
    from tests.cli.test_cli_login import _MCPHandler
    from tests.servers.oauth_server import OAuthServer

    srv = OAuthServer(clients={"fleet": "s3cret"})
    srv.httpd.RequestHandlerClass = _MCPHandler
    port = free_port()
    with srv, RedisTokenStore(f"redis://:{PASSWORD}@127.0.0.1:{port}/0", timeout=2) as store:
        entry = {"url": srv.mcp_url, "oauth": {"clientId": "fleet", "clientSecret": "s3cret"}}
        with mcpcall.ToolRegistry({"remote": entry}, connect_options={"token_store": store}) as registry:
            started = time.monotonic()
            message = registry.execute({"id": "c1", "type": "function",
                                        "function": {"name": "mcp__remote__whoami", "arguments": "{}"}}, timeout=30)
            assert time.monotonic() - started < 20  # not the 30 s timeout: the store's refusal ends it
    assert message["content"].startswith("Error") and "store of its OAuth tokens did not answer" in message["content"]
    assert PASSWORD not in message["content"] and srv.mcp_ok == 0


# -- the lock --------------------------------------------------------------------------------------------


def test_lock_excludes_a_second_holder_until_released(redis_url: str) -> None:
    with RedisTokenStore(redis_url) as one, RedisTokenStore(redis_url) as two:
        with one.lock(ISS, RES, timeout=1, lease=30):
            with pytest.raises(RefreshTimeout) as caught:
                with two.lock(ISS, RES, timeout=0.3, lease=30):
                    pytest.fail("two holders at once")
            assert "refresh lock" in str(caught.value) and "redis://127.0.0.1:" in str(caught.value)
            with two.lock(ISS, RES + "/other", timeout=0.3, lease=30):
                pass  # another key is not waited for
        with two.lock(ISS, RES, timeout=0.3, lease=30):
            pass


def test_lock_wait_ends_when_the_request_ends(redis_url: str) -> None:
    with RedisTokenStore(redis_url) as one, RedisTokenStore(redis_url) as two:
        stop = threading.Event()
        with one.lock(ISS, RES, timeout=1, lease=30):
            timer = threading.Timer(0.2, stop.set)
            timer.start()
            started = time.monotonic()
            try:
                with pytest.raises(RefreshAborted):
                    with two.lock(ISS, RES, timeout=30, lease=30, stop=stop):
                        pytest.fail("two holders at once")
            finally:
                timer.join(5)
            assert time.monotonic() - started < 10  # not the 30 s timeout


def test_a_lock_whose_lease_ran_out_is_taken_and_its_late_release_leaves_the_new_one(
    redis_url: str, raw: redis.Redis
) -> None:
    """A holder that overran its lease: the next one gets the lock; the first one's release does not free it, nor
    does its late write replace the newer token."""
    with RedisTokenStore(redis_url) as slow, RedisTokenStore(redis_url) as fast:
        slow.put(token("at-1"))
        with slow.lock(ISS, RES, timeout=1, lease=1.0):
            read = slow.get(ISS, RES)
            assert raw.pttl(slow.lock_key(ISS, RES)) > 0
            with fast.lock(ISS, RES, timeout=10, lease=30):  # after the 1 s lease
                assert fast.put_if(token("at-2", refresh_token="rt-2"), "at-1")
                held_by_fast = raw.get(fast.lock_key(ISS, RES))
                assert held_by_fast is not None
                assert not slow.put_if(token("at-late", refresh_token="rt-late"), read.access_token)  # type: ignore[union-attr]
            assert raw.get(fast.lock_key(ISS, RES)) is None
            fast_again = fast.lock(ISS, RES, timeout=1, lease=30)
            fast_again.__enter__()
        # slow's release ran now, while fast holds the lock again: it must not delete fast's lock.
        try:
            assert raw.get(fast.lock_key(ISS, RES)) is not None
        finally:
            fast_again.__exit__(None, None, None)
        assert fast.get(ISS, RES).access_token == "at-2"  # type: ignore[union-attr]


def test_lock_of_a_killed_holder_ends_with_its_lease(redis_url: str, raw: redis.Redis) -> None:
    from tests.auth.test_shared_tokens import Worker

    holder = Worker(f"redis:{redis_url}", "-", 5.0)
    try:
        assert holder.read() == {"ready": 0}
        holder.send(f"hold {ISS} {RES} 5.0")
        assert holder.read() == {"held": True}
        holder.kill()
        with RedisTokenStore(redis_url) as store:
            assert raw.pttl(store.lock_key(ISS, RES)) > 0  # the dead holder's lock lives on until its lease ends
            with pytest.raises(RefreshTimeout):
                with store.lock(ISS, RES, timeout=0, lease=30):
                    pytest.fail("took a lock whose lease had not run out")
            with store.lock(ISS, RES, timeout=30, lease=30):
                pass  # within the lease and a little: not the 30 s
    finally:
        holder.close()


# -- fork and import -------------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("own_client", [False, True], ids=["from-url", "your-client"])
def test_a_forked_child_uses_connections_of_its_own(redis_url: str, own_client: bool) -> None:
    given = redis.Redis.from_url(redis_url, socket_timeout=5) if own_client else None
    store = RedisTokenStore(given if given is not None else redis_url)
    try:
        store.put(token("at-parent"))
        parent_id = store._redis.client_id()
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report, and leave without running anything of the parent's
            code = 1
            try:
                os.close(read_end)
                store.put(token("at-child"))
                os.write(write_end, json.dumps({"id": store._redis.client_id(), "got": store.get(ISS, RES).access_token}).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as reader:
            report = json.loads(reader.read() or b"{}")
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert report["got"] == "at-child" and report["id"] != parent_id  # not the parent's connection
        assert store._redis.client_id() == parent_id  # the parent's connection is untouched and still works
        assert store.get(ISS, RES).access_token == "at-child"  # type: ignore[union-attr]
    finally:
        store.close()
        if given is not None:
            given.close()
            given.connection_pool.disconnect()


def test_without_redis_py_the_import_works_and_the_store_names_the_extra() -> None:
    script = textwrap.dedent("""
        import sys
        sys.modules["redis"] = None  # as if redis-py were not installed
        import mcpcall, mcpcall.auth
        from mcpcall import RedisTokenStore
        assert RedisTokenStore is mcpcall.auth.RedisTokenStore
        try:
            RedisTokenStore("redis://127.0.0.1:1/0")
        except ImportError as exc:
            print(exc)
    """)
    done = subprocess.run([PYTHON, "-c", script], cwd=str(ROOT), env={**os.environ, "PYTHONPATH": child_pythonpath()},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "pip install 'mcpcall[redis]'" in done.stdout
    assert sys.modules.get("redis") is not None  # this process is unchanged


# -- the store failing between a refresh and its write -----------------------------------------------------


def test_writes_that_time_out_fail_within_the_timeout_and_are_never_taken_for_a_newer_token(
    redis_url: str, raw: redis.Redis
) -> None:
    """redis-py reports a timeout inside a watched transaction as a WatchError, the error of a key written
    meanwhile: put_if must not try again sixteen times (each a full timeout) and then answer "replaced"."""
    with RedisTokenStore(redis_url, timeout=0.5) as store:
        store.put(token("at-1"))
        raw.execute_command("CLIENT", "PAUSE", "20000", "WRITE")  # Redis answers reads, holds every write
        try:
            for write in (lambda: store.put_if(token("at-2"), "at-1"), lambda: store.put_client(ISS, {"client_id": "c1"})):
                started = time.monotonic()
                with pytest.raises(TokenStoreUnavailable, match="TimeoutError"):
                    write()
                assert time.monotonic() - started < 5  # one timeout (0.5 s), not sixteen: a bound, not a speed
        finally:
            raw.execute_command("CLIENT", "UNPAUSE")
        assert store.get(ISS, RES).access_token == "at-1"  # type: ignore[union-attr]


def test_a_rotated_refresh_token_the_store_could_not_take_is_kept_and_stored_when_it_answers(
    redis_url: str, raw: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis stops taking writes while a refresh is at the token endpoint: the refresh spent the stored refresh
    token, so the rotated one in its answer is the only live one. The request goes on with the new token, and the
    next request, once Redis takes writes again, stores it: the fleet is not left holding a spent refresh token."""
    from tests.auth.test_shared_tokens import CLIENT, SECRET, make_due, sign_in
    from tests.servers.oauth_server import OAuthServer

    hold = threading.Event()
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    with OAuthServer(clients={CLIENT: SECRET}, refresh_hold=hold) as srv, RedisTokenStore(redis_url, timeout=1) as store:
        sign_in(srv, store)
        auth = OAuth(client_id=CLIENT, client_secret=SECRET, token_store=store, interactive=False, timeout=5)

        def pause_writes_then_answer() -> None:  # the refresh is at the server: Redis now refuses writes for a while
            assert wait_until(lambda: srv.refresh_count == 1, timeout=30)
            raw.execute_command("CLIENT", "PAUSE", "30000", "WRITE")
            hold.set()

        pauser = threading.Thread(target=pause_writes_then_answer)
        try:
            assert requests.post(srv.mcp_url, json=ping, auth=auth, timeout=10).status_code == 200  # learns the server
            due = make_due(srv, store)
            pauser.start()
            with caplog.at_level(logging.WARNING, logger="mcpcall.auth.oauth"):
                response = requests.post(srv.mcp_url, json=ping, auth=auth, timeout=30)
            pauser.join(30)
            newest_access, newest_refresh = srv.issued[-1]
            assert srv.refresh_count == 1 and due.refresh_token not in srv.refresh_tokens  # spent at the server
            assert response.status_code == 200 and response.history == []
            assert response.request.headers["Authorization"] == f"Bearer {newest_access}"
            assert "keeps the refreshed token" in caplog.text and newest_refresh not in caplog.text
            raw.execute_command("CLIENT", "UNPAUSE")
            assert requests.post(srv.mcp_url, json=ping, auth=auth, timeout=10).status_code == 200
            stored = store.get(srv.base, srv.mcp_url)
            assert stored is not None and (stored.access_token, stored.refresh_token) == (newest_access, newest_refresh)
            assert newest_refresh in srv.refresh_tokens  # live: the next refresh of any process works
            assert srv.refresh_count == 1
        finally:
            hold.set()
            raw.execute_command("CLIENT", "UNPAUSE")
            if pauser.ident is not None:
                pauser.join(30)
            auth.close()
