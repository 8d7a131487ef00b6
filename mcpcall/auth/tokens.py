"""OAuth tokens, where they are kept, and one refresh at a time.

- :class:`Token` parses an RFC 6749 §5.1 token response; its repr and str never show a token.
- :class:`TokenStore` is what the OAuth flow reads and writes, keyed by ``(issuer, resource)``;
  :class:`MemoryTokenStore` is the default, :class:`FileTokenStore` survives restarts.
- :class:`RefreshGate` lets one thread refresh while the others sharing a client wait for its result;
  a store's refresh lock (:func:`refresh_lock`) does the same across the processes sharing the store.

Errors (derived from :mod:`mcpcall.errors` so ``except MCPError`` catches them)::

    TokenResponseError   (ProtocolError, ValueError)   a token response we cannot use
    InsecureTokenFile    (MCPError, PermissionError)   a token file others may read
    RefreshTimeout       (MCPError, TimeoutError)      waited too long for another thread's (or process's) refresh
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import random
import stat
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Hashable, Iterator, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol, TypeVar

from mcpcall.errors import (
    Abandoned,
    InsecureTokenFile,
    RefreshAborted,
    RefreshTimeout,
    TokenResponseError,
)

from .hooks import emit  # read inside an HTTP worker's send: the record goes out on the callbacks thread

if sys.platform != "win32":
    import fcntl

__all__ = [
    "Abandoned",
    "FileTokenStore",
    "InsecureTokenFile",
    "MemoryTokenStore",
    "RefreshAborted",
    "RefreshGate",
    "RefreshTimeout",
    "Token",
    "TokenResponseError",
    "TokenStore",
    "default_token_path",
    "put_unless_replaced",
    "refresh_lock",
]

log = logging.getLogger("mcpcall.auth.tokens")

T = TypeVar("T")

_TOKEN_TYPES = {"bearer": "Bearer", "dpop": "DPoP"}


class Abortable(Protocol):
    """What can end a wait: an exchange (:class:`mcpcall.transports._exchanges.Exchange`)."""

    @property
    def aborted(self) -> threading.Event: ...

    def on_abort(self, callback: Callable[[], None]) -> Callable[[], None]: ...


def _describe(value: object) -> str:
    """A short, safe description of an unexpected value: its type, or a short string."""
    if isinstance(value, str):
        return repr(value[:32] + ("…" if len(value) > 32 else ""))
    return type(value).__name__


@dataclass(frozen=True, repr=False)
class Token:
    """An access token for one protected resource, from one authorization server.

    ``expires_at`` is epoch seconds (``time.time()``), or ``None`` when the server
    gave no ``expires_in``. ``raw`` is the response as received; it takes no part
    in equality and is never shown or written to a :class:`FileTokenStore`.
    """

    access_token: str
    token_type: str
    issuer: str
    resource: str
    expires_at: float | None = None
    refresh_token: str | None = None
    scope: tuple[str, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    lifetime: float | None = field(default=None, compare=False)  # expires_in as granted, when known
    client_id: str | None = field(default=None, compare=False)  # the client it was issued to (refresh needs the same)

    @classmethod
    def from_response(
        cls,
        body: Mapping[str, Any],
        *,
        issuer: str,
        resource: str,
        now: float | None = None,
    ) -> Token:
        """Parse a successful token response (RFC 6749 §5.1); raise :class:`TokenResponseError` if unusable.

        ``token_type`` is required and must be ``Bearer`` or ``DPoP`` in any case;
        it is stored in its canonical spelling. A missing ``scope`` gives ``()``.
        """
        if not isinstance(body, Mapping):
            raise TokenResponseError(f"a token response must be a JSON object, not {type(body).__name__}")
        access_token = body.get("access_token")
        if not isinstance(access_token, str) or not access_token:
            raise TokenResponseError("the token response has no access_token string")
        if any(ch in access_token for ch in "\r\n"):
            raise TokenResponseError("the token response's access_token contains a line break")
        if "token_type" not in body:
            raise TokenResponseError("the token response has no token_type")
        raw_type = body["token_type"]
        token_type = _TOKEN_TYPES.get(raw_type.lower()) if isinstance(raw_type, str) else None
        if token_type is None:
            raise TokenResponseError(f"unsupported token_type {_describe(raw_type)} (expected Bearer or DPoP)")
        refresh_token = body.get("refresh_token")
        if refresh_token is not None and (not isinstance(refresh_token, str) or not refresh_token):
            raise TokenResponseError("the token response's refresh_token is not a non-empty string")
        issued = time.time() if now is None else now
        expires_at = _expires_at(body.get("expires_in"), issued)
        return cls(
            access_token=access_token,
            token_type=token_type,
            issuer=issuer,
            resource=resource,
            expires_at=expires_at,
            refresh_token=refresh_token,
            scope=_scope(body.get("scope")),
            raw=dict(body),
            lifetime=None if expires_at is None else expires_at - issued,
        )

    def with_refreshed(self, body: Mapping[str, Any], *, now: float | None = None) -> Token:
        """The token a refresh response gives, for the same issuer and resource.

        RFC 6749 §6: the server may omit a new refresh token (keep the old one) and
        may omit ``scope`` when it is unchanged (keep the old scope).
        """
        new = Token.from_response(body, issuer=self.issuer, resource=self.resource, now=now)
        updates: dict[str, Any] = {}
        if new.refresh_token is None:
            updates["refresh_token"] = self.refresh_token
        if "scope" not in body:
            updates["scope"] = self.scope
        if self.client_id is not None:
            updates["client_id"] = self.client_id
        return replace(new, **updates) if updates else new

    def expires_within(self, seconds: float, now: float | None = None) -> bool:
        """Whether the token expires within ``seconds`` from ``now``; ``False`` when the expiry is unknown."""
        if self.expires_at is None:
            return False
        current = time.time() if now is None else now
        return self.expires_at - current <= seconds

    def refresh_margin(self, margin: float) -> float:
        """How long before expiry to refresh: ``margin``, but at most a quarter of the token's lifetime.

        A token that lives 20 s would otherwise be "about to expire" from the moment it is issued.
        """
        if self.lifetime is None:
            return margin
        return min(margin, self.lifetime / 4)

    def __repr__(self) -> str:
        if self.expires_at is None:
            expiry = "no expiry given"
        else:
            left = self.expires_at - time.time()
            expiry = f"expires in {left:.0f} s" if left > 0 else "expired"
        scope = " ".join(self.scope) or "-"
        refresh = "yes" if self.refresh_token else "no"
        return f"Token({self.token_type}, {expiry}, scope={scope}, refresh={refresh})"

    __str__ = __repr__

    def to_json(self) -> dict[str, Any]:
        """The fields a :class:`FileTokenStore` keeps (not ``raw``)."""
        return {
            "issuer": self.issuer,
            "resource": self.resource,
            "access_token": self.access_token,
            "token_type": self.token_type,
            "expires_at": self.expires_at,
            "refresh_token": self.refresh_token,
            "scope": list(self.scope),
            "lifetime": self.lifetime,
            "client_id": self.client_id,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Token:
        """Rebuild a token written by :meth:`to_json`; raise ``ValueError`` if malformed."""
        expires_at = data.get("expires_at")
        scope = data.get("scope", [])
        refresh = data.get("refresh_token")
        lifetime = data.get("lifetime")
        if not (isinstance(lifetime, (int, float)) and not isinstance(lifetime, bool) and math.isfinite(lifetime)):
            lifetime = None
        access_token = data.get("access_token")
        ok = (
            all(isinstance(data.get(k), str) for k in ("issuer", "resource"))
            and isinstance(access_token, str)
            and access_token != ""
            and not any(ch in access_token for ch in "\r\n")  # as from_response: it goes into a header
            and data.get("token_type") in _TOKEN_TYPES.values()
            and (expires_at is None or (isinstance(expires_at, (int, float)) and not isinstance(expires_at, bool)
                                        and math.isfinite(expires_at)))  # NaN: never due, never expired
            and (refresh is None or isinstance(refresh, str))
            and isinstance(scope, list)
            and all(isinstance(s, str) for s in scope)
        )
        if not ok:
            raise ValueError("malformed stored token")
        return cls(
            access_token=data["access_token"],
            token_type=data["token_type"],
            issuer=data["issuer"],
            resource=data["resource"],
            expires_at=None if expires_at is None else float(expires_at),
            refresh_token=refresh,
            scope=tuple(scope),
            lifetime=None if lifetime is None else float(lifetime),
            client_id=data["client_id"] if isinstance(data.get("client_id"), str) else None,
        )


def _expires_at(expires_in: object, now: float | None) -> float | None:
    if expires_in is None:
        return None
    seconds: float | None = None
    if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool):
        try:
            seconds = float(expires_in)
        except OverflowError:  # an integer past any float: no number of seconds either
            seconds = None
    elif isinstance(expires_in, str):  # some servers send "3600"
        try:
            seconds = float(expires_in)
        except ValueError:
            seconds = None
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        raise TokenResponseError(f"the token response's expires_in is not a number of seconds: {_describe(expires_in)}")
    return (time.time() if now is None else now) + seconds


def _scope(scope: object) -> tuple[str, ...]:
    if scope is None:
        return ()
    if not isinstance(scope, str):
        raise TokenResponseError(f"the token response's scope is not a string: {_describe(scope)}")
    return tuple(scope.split())


class TokenStore(Protocol):
    """Where tokens live between requests and runs, keyed by ``(issuer, resource)``.

    A store that processes share may also offer two methods (optional: mcpcall looks for them,
    and a store without them works as before, refreshes single-flight within one process only):

    - ``lock(issuer, resource, *, timeout, lease, stop=None)``: a context manager that excludes
      every other holder of the key's refresh lock, in any process sharing the store, while a
      token is refreshed or obtained. It waits at most ``timeout`` seconds
      (:class:`RefreshTimeout`), and ends the wait when ``stop`` (a ``threading.Event``: the
      request's end) is set (:class:`RefreshAborted`). A holder that dies keeps the others out
      for at most ``lease`` seconds (a store whose lock the system releases at death, as
      ``flock`` does, may ignore it).
    - ``put_if(token, expected) -> bool``: store ``token`` only while the stored token's access
      token is ``expected`` (``None``: no token is stored), as one atomic step; ``False`` when it
      was replaced meanwhile. A holder whose lease ran out then cannot overwrite the newer token
      another holder stored.

    :func:`refresh_lock` and :func:`put_unless_replaced` use them when a store has them.
    """

    def get(self, issuer: str, resource: str) -> Token | None:
        """The stored token for this key, or ``None``."""
        ...

    def put(self, token: Token) -> None:
        """Store ``token`` under ``(token.issuer, token.resource)``, replacing any other."""
        ...

    def delete(self, issuer: str, resource: str) -> None:
        """Forget the token for this key; no error if there is none."""
        ...


@contextmanager
def refresh_lock(
    store: TokenStore, issuer: str, resource: str, *, timeout: float, lease: float, stop: threading.Event | None = None
) -> Iterator[None]:
    """Hold ``store``'s refresh lock for the key, when the store has one (else nothing is held).

    Raises :class:`RefreshTimeout` after ``timeout`` seconds, :class:`RefreshAborted` when
    ``stop`` is set first. Inside, read the stored token again: another process may have
    refreshed it while this one waited.
    """
    lock = getattr(store, "lock", None)
    if not callable(lock):
        yield
        return
    with lock(issuer, resource, timeout=timeout, lease=lease, stop=stop):
        yield


def put_unless_replaced(store: TokenStore, token: Token, expected: str | None) -> bool:
    """Store ``token`` unless the stored token is no longer the one whose access token is ``expected``.

    ``False``: another holder stored a newer token meanwhile (it is kept). A store without
    ``put_if`` is written unconditionally.
    """
    put_if = getattr(store, "put_if", None)
    if callable(put_if):
        return bool(put_if(token, expected))
    store.put(token)
    return True


#: The first and the longest pause between two attempts to take a store's refresh lock (seconds).
LOCK_POLL_FIRST = 0.005
LOCK_POLL_MAX = 0.1


def wait_for_lock(attempt: Callable[[], bool], *, timeout: float, stop: threading.Event | None, what: str) -> None:
    """Call ``attempt()`` until it returns ``True``, pausing between tries with a jittered backoff.

    :class:`RefreshTimeout` after ``timeout`` seconds; :class:`RefreshAborted` as soon as
    ``stop`` is set. ``what`` names the store (no secret) in those errors.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0 or not math.isfinite(timeout):
        raise ValueError("timeout must be a finite number of seconds >= 0")
    deadline = time.monotonic() + timeout
    delay = LOCK_POLL_FIRST
    while True:
        if stop is not None and stop.is_set():
            raise RefreshAborted(f"{what}: the request ended while waiting for another refresh of its token")
        if attempt():
            return
        left = deadline - time.monotonic()
        if left <= 0:
            raise RefreshTimeout(
                f"{what}: another holder (a process or thread sharing the store) kept the token's refresh lock "
                f"over {timeout:g} s"
            )
        pause = min(left, delay * (0.5 + random.random()))
        if stop is not None:
            stop.wait(pause)
        else:
            time.sleep(pause)
        delay = min(delay * 2, LOCK_POLL_MAX)


def _key_digest(*parts: str) -> str:
    """A short, fixed-length name for a key of strings (a file name, a Redis key)."""
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:32]


class MemoryTokenStore:
    """Tokens in a dict for the life of the process; safe to share between threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens: dict[tuple[str, str], Token] = {}

    def get(self, issuer: str, resource: str) -> Token | None:
        """The stored token for this key, or ``None``."""
        with self._lock:
            return self._tokens.get((issuer, resource))

    def put(self, token: Token) -> None:
        """Store ``token`` under its issuer and resource."""
        with self._lock:
            self._tokens[(token.issuer, token.resource)] = token

    def delete(self, issuer: str, resource: str) -> None:
        """Forget the token for this key."""
        with self._lock:
            self._tokens.pop((issuer, resource), None)

    def put_if(self, token: Token, expected: str | None) -> bool:
        """Store ``token`` only while the stored token's access token is ``expected`` (``None``: none stored)."""
        key = (token.issuer, token.resource)
        with self._lock:
            current = self._tokens.get(key)
            if (current.access_token if current is not None else None) != expected:
                return False
            self._tokens[key] = token
            return True

    def __repr__(self) -> str:
        with self._lock:
            return f"<MemoryTokenStore {len(self._tokens)} token(s)>"


#: The most dynamically registered clients a :class:`FileTokenStore` keeps per authorization server.
MAX_CLIENTS = 8


def default_token_path() -> str:
    """``$XDG_CACHE_HOME/mcpcall/tokens.json``, else ``~/.cache/mcpcall/tokens.json``.

    A relative ``XDG_CACHE_HOME`` is ignored, as the XDG spec says.
    """
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mcpcall", "tokens.json")


class FileTokenStore:
    """Tokens in one JSON file, readable by its owner only, shared by threads and processes.

    - The file and its directory are created owner-only (file ``0600``, directory ``0700``).
      An existing file that other users may read or write is **refused**
      (:class:`InsecureTokenFile`), not silently fixed: its tokens may already have been
      read, so the user should learn of it (and revoke them) rather than have it hidden.
    - Every write goes to an owner-only temporary file in the same directory, is fsynced, and
      replaces the file with ``os.replace``: a reader sees the old file or the new one, never half.
    - A lock serialises threads of one process; on POSIX ``fcntl.flock`` on the sidecar
      ``<path>.lock`` serialises processes (advisory: only mcpcall honours it; on Windows
      only the thread lock applies).
    - A file that is not valid JSON (or has malformed entries) is treated as empty, with a
      warning that names the path but shows nothing of its contents; the next write replaces it.
    - :meth:`lock` is the refresh lock of one key for every process of this machine (POSIX):
      ``fcntl.flock`` on a sidecar file of that key (``<path>.<digest>.lock``), tried without
      blocking until the caller's deadline. The kernel releases it when its holder dies, so no
      lease is needed; a process forked while a thread held it lets go of its copy at once.
      :meth:`put_if` stores a token only if the stored one was not replaced meanwhile.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = os.fspath(path) if path is not None else default_token_path()
        self._lock_path = self.path + ".lock"
        self._lock = threading.Lock()
        self._held: set[int] = set()  # descriptors of lock files open now (a forked child closes its copies)
        fresh_locks_in_child(self)

    def _after_fork(self) -> None:
        """In a forked child: close the copies of lock files a parent's thread held (its flock stays the parent's)."""
        held, self._held = self._held, set()
        for fd in held:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __repr__(self) -> str:
        return f"<FileTokenStore {self.path!r}>"

    def get(self, issuer: str, resource: str) -> Token | None:
        """The stored token for this key, or ``None``."""
        with self._locked(shared=True):
            return self._read().get((issuer, resource))

    def put(self, token: Token) -> None:
        """Store ``token`` under its issuer and resource (read, change, atomically replace)."""
        with self._locked(shared=False):
            tokens = self._read()
            tokens[(token.issuer, token.resource)] = token
            self._write(tokens)

    def delete(self, issuer: str, resource: str) -> None:
        """Forget the token for this key; the file is rewritten only if it held one."""
        with self._locked(shared=False):
            tokens = self._read()
            if tokens.pop((issuer, resource), None) is not None:
                self._write(tokens)

    # A dynamically registered client is kept beside its tokens: a later run needs it to
    # refresh them (a refresh token is bound to the client it was issued to).

    def get_clients(self, issuer: str) -> list[dict[str, str]]:
        """The clients registered at ``issuer`` by earlier runs (``client_id``, ``client_secret``, …), newest last."""
        with self._locked(shared=True):
            return [dict(entry) for entry in self._read_clients().get(issuer, [])]

    def put_client(self, issuer: str, client: Mapping[str, Any]) -> None:
        """Keep the registration of a client at ``issuer`` (string values only), replacing one with its client_id.

        At most :data:`MAX_CLIENTS` are kept per issuer (the oldest go first): tokens issued
        to a client forgotten that way are authorized afresh when they expire.
        """
        entry = {k: v for k, v in client.items() if isinstance(k, str) and isinstance(v, str)}
        if not entry.get("client_id"):
            raise ValueError("a client entry needs a client_id")
        with self._locked(shared=False):
            tokens = self._read()
            clients = self._read_clients()
            kept = [e for e in clients.get(issuer, []) if e.get("client_id") != entry["client_id"]]
            clients[issuer] = [*kept, entry][-MAX_CLIENTS:]
            self._write(tokens, clients)

    def put_if(self, token: Token, expected: str | None) -> bool:
        """Store ``token`` only while the stored token's access token is ``expected`` (``None``: none stored).

        One exclusive read-compare-write; ``False`` (nothing written) when another process replaced it.
        """
        with self._locked(shared=False):
            tokens = self._read()
            current = tokens.get((token.issuer, token.resource))
            if (current.access_token if current is not None else None) != expected:
                return False
            tokens[(token.issuer, token.resource)] = token
            self._write(tokens)
            return True

    def refresh_lock_path(self, issuer: str, resource: str) -> str:
        """The sidecar file whose ``flock`` is the refresh lock of this key."""
        return f"{self.path}.{_key_digest(issuer, resource)[:16]}.lock"

    @contextmanager
    def lock(
        self, issuer: str, resource: str, *, timeout: float, lease: float | None = None, stop: threading.Event | None = None
    ) -> Iterator[None]:
        """Hold the refresh lock of ``(issuer, resource)`` for every process of this machine sharing the file.

        Waits at most ``timeout`` seconds (:class:`RefreshTimeout`), less when ``stop`` is set
        first (:class:`RefreshAborted`). ``lease`` is not needed: the lock ends with its holder.
        Threads of one process exclude each other too. On Windows nothing is locked.
        """
        if sys.platform == "win32":
            wait_for_lock(lambda: True, timeout=timeout, stop=stop, what=f"token store {self.path!r}")
            yield
            return
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd = self._open_lock_file(self.refresh_lock_path(issuer, resource))
        try:

            def attempt() -> bool:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return False
                return True

            wait_for_lock(attempt, timeout=timeout, stop=stop, what=f"token store {self.path!r}")
            yield
        finally:
            self._close_lock_file(fd)  # closing the descriptor releases the flock

    def _open_lock_file(self, path: str) -> int:
        # O_NOFOLLOW: a symbolic link planted at the name must not make this create or lock a file elsewhere.
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        with _LOCK_FILES:  # no fork between the open and the record: a child closes every copy it gets
            fd = os.open(path, flags, 0o600)
            self._held.add(fd)
        return fd

    def _close_lock_file(self, fd: int) -> None:
        with _LOCK_FILES:  # no fork between forgetting it and closing it
            self._held.discard(fd)
            os.close(fd)

    @contextmanager
    def _locked(self, *, shared: bool) -> Iterator[None]:
        with self._lock:
            directory = os.path.dirname(os.path.abspath(self.path))
            os.makedirs(directory, mode=0o700, exist_ok=True)
            fd = self._open_lock_file(self._lock_path)
            try:
                if sys.platform != "win32":
                    fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
                yield
            finally:
                self._close_lock_file(fd)  # closing the descriptor releases the flock

    def _bytes(self) -> bytes | None:
        """The file's contents (after checking it is a private regular file), or ``None`` when there is none."""
        # O_NONBLOCK: a FIFO (or a device) at the path must not block the open; fstat then refuses it.
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(self.path, flags)
        except FileNotFoundError:
            return None
        try:
            self._check_safe(os.fstat(fd))  # before fdopen, which refuses a directory (and would leave fd open)
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "rb") as f:
            return f.read()

    def _read(self) -> dict[tuple[str, str], Token]:
        data = self._bytes()
        if data is None:
            return {}
        try:
            document = json.loads(data.decode("utf-8"))
            entries = document["tokens"]
            if not isinstance(entries, list):
                raise TypeError
        except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: nested past the parser
            emit(log, logging.WARNING, "token store %s is not a valid token file; treating it as empty", self.path)
            return {}
        tokens: dict[tuple[str, str], Token] = {}
        skipped = 0
        for entry in entries:
            try:
                token = Token.from_json(entry)
            except (ValueError, TypeError, AttributeError):
                skipped += 1
                continue
            tokens[(token.issuer, token.resource)] = token
        if skipped:
            emit(log, logging.WARNING, "token store %s: ignored %d malformed entr(y/ies)", self.path, skipped)
        return tokens

    def _read_clients(self) -> dict[str, list[dict[str, str]]]:
        data = self._bytes()
        if data is None:
            return {}
        try:
            entries = json.loads(data.decode("utf-8")).get("clients") or {}
        except (ValueError, AttributeError, RecursionError):
            return {}
        if not isinstance(entries, dict):
            return {}
        clients: dict[str, list[dict[str, str]]] = {}
        for issuer, listed in entries.items():
            if not isinstance(issuer, str) or not isinstance(listed, list):
                continue
            clients[issuer] = [
                {k: v for k, v in entry.items() if isinstance(v, str)}
                for entry in listed
                if isinstance(entry, dict) and isinstance(entry.get("client_id"), str)
            ]
        return clients

    def _check_safe(self, st: os.stat_result) -> None:
        if not stat.S_ISREG(st.st_mode):
            raise InsecureTokenFile(f"token store {self.path!r} is not a regular file")
        if sys.platform != "win32" and st.st_mode & 0o077:
            raise InsecureTokenFile(
                f"token store {self.path!r} has mode {st.st_mode & 0o777:o}, open to other users; "
                f"revoke its tokens if others may have read them, then chmod 600 it or delete it"
            )

    def _write(
        self, tokens: Mapping[tuple[str, str], Token], clients: Mapping[str, list[dict[str, str]]] | None = None
    ) -> None:
        directory = os.path.dirname(os.path.abspath(self.path))
        if clients is None:
            clients = self._read_clients()
        document: dict[str, Any] = {"version": 1, "tokens": [token.to_json() for token in tokens.values()]}
        if clients:
            document["clients"] = {issuer: [dict(e) for e in entries] for issuer, entries in clients.items() if entries}
        payload = json.dumps(document, indent=1, sort_keys=True).encode("utf-8")
        # mkstemp creates the file with O_EXCL and mode 0600.
        fd, tmp = tempfile.mkstemp(prefix=".tokens-", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        _fsync_dir(directory)


def _fsync_dir(directory: str) -> None:
    """Make the rename durable where the platform allows it (best effort)."""
    if sys.platform == "win32":
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


#: Held while a lock file's descriptor is opened and recorded in ``FileTokenStore._held``, or forgotten and
#: closed, and taken around ``os.fork()``: a child then inherits exactly the descriptors recorded there, and
#: closes them all. (A copy it kept would keep the parent's flock held for as long as the child lives.)
_LOCK_FILES = threading.RLock()  # reentrant: a fork from inside a section (a signal handler) does not deadlock


def _lock_files_before_fork() -> None:
    _LOCK_FILES.acquire()


def _lock_files_after_fork() -> None:
    _LOCK_FILES.release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_lock_files_before_fork, after_in_parent=_lock_files_after_fork, after_in_child=_lock_files_after_fork
    )


def fresh_locks_in_child(owner: Any) -> None:
    """In a child forked from this process, give ``owner`` a new ``_lock`` and ``_gate`` (when it has them).

    A parent's thread may have held them at the fork; in the child that thread does not
    exist, and the lock would stay held for ever. What ``owner`` knew (its tokens) stays.
    """
    from ..forking import on_fork_in_child

    ref = weakref.ref(owner)

    def fresh() -> None:
        target = ref()
        if target is None:
            return
        if hasattr(target, "_lock"):
            target._lock = threading.Lock()
        if hasattr(target, "_gate"):
            target._gate = RefreshGate()
        reset = getattr(target, "_after_fork", None)
        if callable(reset):
            reset()

    on_fork_in_child(owner, fresh)


class RefreshGate:
    """Single flight: one call of ``fn`` per key at a time; concurrent callers share its outcome.

    The first caller for a key (the leader) runs ``fn()`` in its own thread; callers
    arriving while it runs wait up to ``timeout`` seconds and then get the same return
    value or the same exception. Once the leader finishes, the next caller starts a
    new run (nothing is cached). Different keys never wait for each other. The leader
    is bounded by ``fn``'s own timeouts (its HTTP request), not by ``timeout``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inflight: dict[Hashable, tuple[Future[Any], int]] = {}

    def run(self, key: Hashable, fn: Callable[[], T], timeout: float = 30.0, *, stop: Abortable | None = None) -> T:
        """Run ``fn`` for ``key`` unless another thread already is; then wait for its outcome.

        A follower waits at most ``timeout`` seconds, and no longer than ``stop`` (its own
        request) lasts: :class:`RefreshAborted` when that ends first. A leader's
        :class:`Abandoned` is not shared: its followers run ``fn`` themselves.
        """
        if timeout is None or not timeout >= 0:
            raise ValueError("timeout must be a number of seconds >= 0")
        me = threading.get_ident()
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                entry = self._inflight.get(key)
                if entry is None:
                    future: Future[Any] = Future()
                    self._inflight[key] = (future, me)
                elif entry[1] == me:
                    raise RuntimeError("RefreshGate.run called again for the same key from inside its own fn")
            if entry is None:
                break
            try:
                result: T = _follow(entry[0], max(0.0, deadline - time.monotonic()), stop)
            except Abandoned:
                continue  # the leader's own request ended: this thread tries (its stop still bounds it)
            return result
        try:
            value = fn()
        except BaseException as exc:
            self._finish(key)
            future.set_exception(exc)
            raise
        self._finish(key)
        future.set_result(value)
        return value

    def _finish(self, key: Hashable) -> None:
        with self._lock:
            self._inflight.pop(key, None)


def _follow(future: Future[Any], timeout: float, stop: Abortable | None) -> Any:
    """``future``'s outcome within ``timeout`` seconds, unless ``stop`` is aborted first."""
    if stop is None:
        try:
            return future.result(timeout)
        except FutureTimeout:
            raise RefreshTimeout(f"no refresh result within {timeout:g} s") from None
    woken = threading.Event()
    future.add_done_callback(lambda _: woken.set())
    undo = stop.on_abort(woken.set)
    try:
        woken.wait(timeout)
    finally:
        undo()
    if future.done():
        return future.result()
    if stop.aborted.is_set():
        raise RefreshAborted("the request ended while another thread was getting its token")
    raise RefreshTimeout(f"no refresh result within {timeout:g} s")
