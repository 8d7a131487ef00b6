"""PKCE, token parsing and redaction, token stores, and the refresh gate (mcpcall.auth.pkce / .tokens)."""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mcpcall.auth.pkce import PKCE, UNRESERVED, challenge_for, new_pkce, new_state
from mcpcall.auth.tokens import (
    FileTokenStore,
    InsecureTokenFile,
    MemoryTokenStore,
    RefreshGate,
    RefreshTimeout,
    Token,
    TokenResponseError,
    default_token_path,
)
from mcpcall.errors import MCPError
from tests.conftest import child_pythonpath

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sEcReT-access-4f9a"
RSECRET = "sEcReT-refresh-77c1"
ISS = "https://as.example.com"
RES = "https://mcp.example.com/mcp"


def body(**extra: Any) -> dict[str, Any]:
    b: dict[str, Any] = {"access_token": SECRET, "token_type": "Bearer", "expires_in": 3600, "refresh_token": RSECRET}
    b.update(extra)
    return {k: v for k, v in b.items() if v is not None}


def token(issuer: str = ISS, resource: str = RES, **extra: Any) -> Token:
    return Token.from_response(body(**extra), issuer=issuer, resource=resource, now=1000.0)


# --- PKCE ---------------------------------------------------------------------------------------


def test_rfc7636_appendix_b_vector() -> None:
    # RFC 7636 Appendix B: the verifier is BASE64URL of these 32 octets.
    first = [116, 24, 223, 180, 151, 153, 224, 37, 79, 250, 96, 125, 216, 173, 187, 186]
    octets = bytes(first + [22, 212, 37, 77, 105, 214, 191, 240, 91, 88, 5, 88, 83, 132, 141, 121])
    verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    assert base64.urlsafe_b64encode(octets).rstrip(b"=").decode() == verifier
    assert challenge_for(verifier) == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    pkce = PKCE.from_verifier(verifier)
    assert pkce.challenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    assert pkce.method == "S256"
    assert verifier not in repr(pkce) and verifier not in str(pkce)


@pytest.mark.parametrize("length", [43, 64, 128])
def test_new_pkce_charset_length_and_challenge(length: int) -> None:
    pkce = new_pkce(length)
    assert len(pkce.verifier) == length
    assert set(pkce.verifier) <= UNRESERVED
    assert pkce.challenge == challenge_for(pkce.verifier)
    assert "=" not in pkce.challenge and len(pkce.challenge) == 43
    assert pkce.verifier not in repr(pkce)


def test_new_pkce_default_is_random_and_bounds_checked() -> None:
    verifiers = {new_pkce().verifier for _ in range(50)}
    assert len(verifiers) == 50
    for bad in (42, 129):
        with pytest.raises(ValueError):
            new_pkce(bad)
    with pytest.raises(ValueError):
        challenge_for("short")
    with pytest.raises(ValueError):
        challenge_for("a" * 42 + " ")


def test_new_state_unique_and_url_safe() -> None:
    states = [new_state() for _ in range(200)]
    assert len(set(states)) == 200
    assert all(len(s) >= 43 and set(s) <= UNRESERVED for s in states)


# --- Token --------------------------------------------------------------------------------------


def test_from_response_parses_fields() -> None:
    t = token(scope="mcp:read  mcp:write", token_type="bearer")
    assert t.access_token == SECRET and t.refresh_token == RSECRET
    assert t.token_type == "Bearer"
    assert t.expires_at == 4600.0
    assert t.scope == ("mcp:read", "mcp:write")
    assert (t.issuer, t.resource) == (ISS, RES)
    assert t.raw["scope"] == "mcp:read  mcp:write"
    assert Token.from_response(body(token_type="DPOP"), issuer=ISS, resource=RES).token_type == "DPoP"


def test_from_response_optional_fields() -> None:
    t = Token.from_response({"access_token": SECRET, "token_type": "Bearer"}, issuer=ISS, resource=RES)
    assert t.expires_at is None and t.refresh_token is None and t.scope == ()
    assert not t.expires_within(10**9)
    assert Token.from_response(body(expires_in="60"), issuer=ISS, resource=RES, now=0.0).expires_at == 60.0


def test_expires_within() -> None:
    t = token()  # expires at 4600
    assert not t.expires_within(60, now=4000.0)
    assert t.expires_within(60, now=4550.0)
    assert t.expires_within(0, now=5000.0)
    live = Token.from_response(body(expires_in=3600), issuer=ISS, resource=RES)
    assert not live.expires_within(60) and live.expires_within(3601)


@pytest.mark.parametrize(
    ("response", "fragment"),
    [
        ({"token_type": "Bearer"}, "access_token"),
        ({"access_token": "", "token_type": "Bearer"}, "access_token"),
        ({"access_token": SECRET}, "no token_type"),
        ({"access_token": SECRET, "token_type": "mac"}, "'mac'"),
        ({"access_token": SECRET, "token_type": 5}, "int"),
        ({"access_token": SECRET, "token_type": "Bearer", "expires_in": "soon"}, "expires_in"),
        ({"access_token": SECRET, "token_type": "Bearer", "expires_in": -1}, "expires_in"),
        ({"access_token": SECRET, "token_type": "Bearer", "expires_in": True}, "expires_in"),
        ({"access_token": SECRET, "token_type": "Bearer", "scope": ["a"]}, "scope"),
        ({"access_token": SECRET, "token_type": "Bearer", "refresh_token": 7}, "refresh_token"),
        ({"access_token": SECRET + "\r\nX: y", "token_type": "Bearer"}, "line break"),
    ],
)
def test_from_response_errors_name_the_problem_not_the_token(response: dict[str, Any], fragment: str) -> None:
    with pytest.raises(TokenResponseError) as info:
        Token.from_response(response, issuer=ISS, resource=RES)
    message = str(info.value)
    assert fragment in message
    assert SECRET not in message and SECRET not in repr(info.value)
    assert isinstance(info.value, MCPError) and isinstance(info.value, ValueError)


def test_from_response_rejects_non_object() -> None:
    with pytest.raises(TokenResponseError, match="list"):
        Token.from_response([SECRET], issuer=ISS, resource=RES)  # type: ignore[arg-type]


def test_repr_and_str_show_no_token_values() -> None:
    t = Token.from_response(body(scope="a b"), issuer=ISS, resource=RES)
    for text in (repr(t), str(t), f"{t}", repr([t]), repr({"t": t})):
        assert SECRET not in text and RSECRET not in text
    assert repr(t).startswith("Token(Bearer, expires in 3")
    assert "scope=a b" in repr(t) and "refresh=yes" in repr(t)
    assert "refresh=no" in repr(Token.from_response(body(refresh_token=None), issuer=ISS, resource=RES))
    assert "expired" in repr(Token.from_response(body(expires_in=0), issuer=ISS, resource=RES, now=0.0))


def test_with_refreshed_keeps_old_refresh_token_and_scope_when_omitted() -> None:
    old = token(scope="a b")
    new = old.with_refreshed({"access_token": "new-access", "token_type": "Bearer", "expires_in": 10}, now=2000.0)
    assert new.access_token == "new-access"
    assert new.refresh_token == RSECRET
    assert new.scope == ("a", "b")
    assert new.expires_at == 2010.0
    assert (new.issuer, new.resource) == (ISS, RES)
    rotated = old.with_refreshed({"access_token": "n2", "token_type": "DPoP", "refresh_token": "r2", "scope": "a"})
    assert rotated.refresh_token == "r2" and rotated.scope == ("a",) and rotated.token_type == "DPoP"


def test_token_equality_ignores_raw_and_json_round_trip() -> None:
    t = token(scope="x", extra_field="ignored")
    assert Token.from_json(t.to_json()) == t
    assert hash(Token.from_json(t.to_json())) == hash(t)
    assert "extra_field" not in json.dumps(t.to_json())
    with pytest.raises(ValueError):
        Token.from_json({"issuer": ISS})


# --- MemoryTokenStore ---------------------------------------------------------------------------


def test_memory_store_keyed_by_issuer_and_resource() -> None:
    store = MemoryTokenStore()
    a, b = token(), token(resource="https://other.example.com/mcp")
    assert store.get(ISS, RES) is None
    store.put(a)
    store.put(b)
    assert store.get(ISS, RES) is a
    assert store.get(ISS, b.resource) is b
    assert store.get("https://elsewhere", RES) is None
    store.delete(ISS, RES)
    store.delete(ISS, RES)  # no error the second time
    assert store.get(ISS, RES) is None and store.get(ISS, b.resource) is b
    assert SECRET not in repr(store)


def test_memory_store_threads() -> None:
    store = MemoryTokenStore()

    def work(i: int) -> None:
        for j in range(50):
            store.put(token(resource=f"r{i}-{j}"))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert all(store.get(ISS, f"r{i}-{j}") is not None for i in range(8) for j in range(50))


# --- FileTokenStore -----------------------------------------------------------------------------


def test_file_store_creates_owner_only_file_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "tokens.json"
    store = FileTokenStore(path)
    assert store.get(ISS, RES) is None
    assert not path.exists()
    t = token(scope="a b")
    store.put(t)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(str(path) + ".lock").st_mode & 0o777 == 0o600
    assert os.stat(path.parent).st_mode & 0o777 == 0o700
    assert FileTokenStore(path).get(ISS, RES) == t
    assert SECRET not in repr(store)
    store.delete(ISS, RES)
    assert FileTokenStore(path).get(ISS, RES) is None


def test_file_store_is_atomic_leaves_no_temp_files(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    store = FileTokenStore(path)
    for i in range(5):
        store.put(token(resource=f"r{i}"))
    store.delete(ISS, "r0")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokens.json", "tokens.json.lock"]
    document = json.loads(path.read_text())
    assert document["version"] == 1 and len(document["tokens"]) == 4


def test_file_store_refuses_group_or_world_readable_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    FileTokenStore(path).put(token())
    os.chmod(path, 0o644)
    with pytest.raises(InsecureTokenFile) as info:
        FileTokenStore(path).get(ISS, RES)
    assert "644" in str(info.value) and SECRET not in str(info.value)
    assert isinstance(info.value, PermissionError)
    with pytest.raises(InsecureTokenFile):
        FileTokenStore(path).put(token())
    assert os.stat(path).st_mode & 0o777 == 0o644  # left for the user to inspect, not silently changed


def test_file_store_refuses_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    FileTokenStore(real).put(token())
    link = tmp_path / "link.json"
    link.symlink_to(real)
    with pytest.raises(OSError):
        FileTokenStore(link).get(ISS, RES)


def test_file_store_corrupt_file_is_empty_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "tokens.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b'{"tokens": [{"access_token": "' + SECRET.encode() + b'", broken')
    os.close(fd)
    store = FileTokenStore(path)
    with caplog.at_level(logging.WARNING, logger="mcpcall.auth.tokens"):
        assert store.get(ISS, RES) is None
    assert "not a valid token file" in caplog.text and SECRET not in caplog.text
    store.put(token())
    assert store.get(ISS, RES) == token()


def test_file_store_nested_past_the_parser_is_empty_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "tokens.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b"[" * 200_000)
    os.close(fd)
    store = FileTokenStore(path)
    with caplog.at_level(logging.WARNING, logger="mcpcall.auth.tokens"):
        assert store.get(ISS, RES) is None
    assert "not a valid token file" in caplog.text
    store.put(token())
    assert store.get(ISS, RES) == token()


def test_file_store_skips_malformed_entries(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "tokens.json"
    good = token().to_json()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, json.dumps({"version": 1, "tokens": [good, {"access_token": SECRET}, "x"]}).encode())
    os.close(fd)
    with caplog.at_level(logging.WARNING, logger="mcpcall.auth.tokens"):
        assert FileTokenStore(path).get(ISS, RES) == token()
    assert "2 malformed" in caplog.text and SECRET not in caplog.text


def test_file_store_threads(tmp_path: Path) -> None:
    store = FileTokenStore(tmp_path / "tokens.json")

    def work(i: int) -> None:
        for j in range(10):
            store.put(token(resource=f"r{i}-{j}"))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    fresh = FileTokenStore(tmp_path / "tokens.json")
    assert all(fresh.get(ISS, f"r{i}-{j}") is not None for i in range(4) for j in range(10))


@pytest.mark.skipif(sys.platform == "win32", reason="flock is POSIX")
def test_file_store_two_processes_both_persist(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    script = textwrap.dedent(
        """
        import sys
        from mcpcall.auth.tokens import FileTokenStore, Token
        store = FileTokenStore(sys.argv[1])
        for j in range(25):
            store.put(Token(access_token="a", token_type="Bearer", issuer="iss", resource=f"{sys.argv[2]}-{j}"))
        """
    )
    env = dict(os.environ, PYTHONPATH=child_pythonpath())
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path), name], env=env) for name in ("p", "q")]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    store = FileTokenStore(path)
    missing = [f"{n}-{j}" for n in ("p", "q") for j in range(25) if store.get("iss", f"{n}-{j}") is None]
    assert missing == []


def test_default_token_path_respects_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_token_path() == str(tmp_path / "mcpcall" / "tokens.json")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_token_path() == str(tmp_path / "home" / ".cache" / "mcpcall" / "tokens.json")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_token_path() == str(tmp_path / "home" / ".cache" / "mcpcall" / "tokens.json")
    assert FileTokenStore().path == default_token_path()


# --- RefreshGate --------------------------------------------------------------------------------


def _run_many(gate: RefreshGate, key: str, fn: Any, n: int = 8, timeout: float = 5.0) -> list[Any]:
    """Start ``n`` threads on ``gate.run`` at once; return each one's result or exception."""
    barrier = threading.Barrier(n)
    outcomes: list[Any] = [None] * n

    def caller(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = gate.run(key, fn, timeout=timeout)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcomes[i] = exc

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(10)
        assert not th.is_alive()
    return outcomes


def test_gate_runs_fn_once_for_concurrent_callers() -> None:
    gate = RefreshGate()
    calls: list[int] = []
    result = object()

    def fn() -> object:
        calls.append(1)
        time.sleep(0.3)  # long enough for the other seven to arrive and wait
        return result

    outcomes = _run_many(gate, "k", fn)
    assert len(calls) == 1
    assert all(o is result for o in outcomes)
    # nothing is cached: the next call runs fn again
    assert gate.run("k", fn, timeout=5) is result and len(calls) == 2


def test_gate_exception_reaches_every_caller() -> None:
    gate = RefreshGate()
    calls: list[int] = []
    error = TokenResponseError("refresh rejected")

    def fn() -> None:
        calls.append(1)
        time.sleep(0.3)
        raise error

    outcomes = _run_many(gate, "k", fn)
    assert len(calls) == 1
    assert all(o is error for o in outcomes)
    assert gate.run("k", lambda: 5, timeout=1) == 5  # the failed run does not linger


def test_gate_waiter_timeout_is_bounded() -> None:
    gate = RefreshGate()
    started, release = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        release.wait(10)
        return "late"

    leader = threading.Thread(target=lambda: gate.run("k", slow, timeout=10))
    leader.start()
    assert started.wait(5)
    t0 = time.monotonic()
    with pytest.raises(RefreshTimeout) as info:
        gate.run("k", slow, timeout=0.2)
    elapsed = time.monotonic() - t0
    assert 0.15 <= elapsed < 2.0
    assert isinstance(info.value, TimeoutError)
    release.set()
    leader.join(5)
    assert not leader.is_alive()


def test_gate_different_keys_run_concurrently() -> None:
    gate = RefreshGate()
    barrier = threading.Barrier(2, timeout=5)  # both fns must be inside at the same time
    results: dict[str, str] = {}

    def fn_for(key: str) -> Any:
        def fn() -> str:
            barrier.wait()
            return key

        return fn

    threads = [threading.Thread(target=lambda k=k: results.__setitem__(k, gate.run(k, fn_for(k), timeout=5))) for k in "ab"]
    for th in threads:
        th.start()
    for th in threads:
        th.join(10)
    assert results == {"a": "a", "b": "b"}


def test_gate_rejects_reentry_and_bad_timeout() -> None:
    gate = RefreshGate()
    with pytest.raises(RuntimeError, match="inside its own fn"):
        gate.run("k", lambda: gate.run("k", lambda: 1, timeout=1), timeout=1)
    assert gate.run("k", lambda: 2, timeout=1) == 2
    with pytest.raises(ValueError):
        gate.run("k", lambda: 1, timeout=-1)
    with pytest.raises(ValueError):
        gate.run("k", lambda: 1, timeout=float("nan"))
