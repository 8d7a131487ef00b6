"""``RedisTokenStore``: OAuth tokens shared by every process on every machine that reaches one Redis.

    store = RedisTokenStore("redis://:password@redis.internal:6379/0")    # or RedisTokenStore(redis.Redis(...))
    auth = mcpcall.OAuth(client_id="...", token_store=store, interactive=False)

What it keeps, under keys that start with ``prefix`` (``mcpcall:`` by default):

- ``<prefix>token:<digest of issuer and resource>``: a token as JSON (:meth:`Token.to_json
  <mcpcall.auth.tokens.Token.to_json>`: never the raw token response), with no expiry of its
  own (its refresh token outlives its access token);
- ``<prefix>clients:<digest of issuer>``: the clients registered there (Dynamic Client
  Registration), newest last, at most :data:`~mcpcall.auth.tokens.MAX_CLIENTS`;
- ``<prefix>lock:<digest of issuer and resource>``: the refresh lock while one is held.

The refresh lock (:meth:`RedisTokenStore.lock`) is ``SET key <random> NX PX <lease>``: one holder
per key in the whole fleet; it is released by a script that deletes the key only if it still holds
the holder's random value, so a holder whose lease ran out never releases the next holder's lock.
Waiters try again with a jittered backoff (5 ms, doubling, at most 100 ms) until their deadline. A
holder that dies keeps the others out until its lease ends. :meth:`RedisTokenStore.put_if` stores a
token only if the stored one was not replaced meanwhile (``WATCH``/``MULTI``), so a holder that
overran its lease cannot overwrite the newer token of the one that came after it.

When Redis does not answer (refused, unreachable, a timeout, a wrong password), every method
raises :class:`~mcpcall.errors.TokenStoreUnavailable`, naming the store (never its password) and
the cause, within the client's socket timeouts (``timeout`` seconds for a store made from a URL).
A request that needs a token then fails with that error, promptly, rather than going out
without a token or with one that another process may have replaced: nothing is cached in the
process, and a request never waits longer than its own deadline. One exception: a token that
:class:`~mcpcall.auth.oauth.OAuth` refreshed but could not store (its rotated refresh token may
be the only live one) is kept by that object, used, and stored by its next request that finds
Redis answering.

Each request reads its token from Redis once (one ``GET``, a fraction of a millisecond on a local
network); a refresh costs a few round trips more.

Fork safety: in a child forked from the process that made the store (Celery prefork, gunicorn
``--preload``), a store made from a URL gets a client and connection pool of its own; a client you
passed has its pool reset (the child's connections are its own; the parent's are left to the
parent, never used or closed). Needs ``pip install 'mcpcall[redis]'`` (redis-py).
"""

from __future__ import annotations

import json
import logging
import math
import secrets
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ..errors import TokenStoreUnavailable
from ..urls import redact_url
from .hooks import emit
from .tokens import MAX_CLIENTS, Token, _key_digest, fresh_locks_in_child, wait_for_lock

if TYPE_CHECKING:
    import redis

__all__ = ["RedisTokenStore"]

log = logging.getLogger("mcpcall.auth.redis_store")

T = TypeVar("T")

#: Deletes the lock only while it holds this holder's random value (KEYS[1]: the lock, ARGV[1]: the value).
RELEASE_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""

#: How many times a read-compare-write is tried again when another process wrote the key in between.
WATCH_ATTEMPTS = 16


def _redis_module() -> Any:
    try:
        import redis
    except ImportError:
        raise ImportError("RedisTokenStore needs redis-py: pip install 'mcpcall[redis]'") from None
    return redis


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


class RedisTokenStore:
    """Tokens and registered clients in Redis, shared by processes and machines; thread-safe.

    ``client`` is a ``redis.Redis`` client (yours: :meth:`close` leaves it open) or a
    ``redis://``/``rediss://``/``unix://`` URL, for which the store makes a client with
    ``timeout`` seconds to connect and to wait for each answer (closed by :meth:`close`).
    Give a client of your own a ``socket_timeout`` too: a command waits as long as it allows,
    and as many times as its ``retry`` tries again (a ``redis.Redis(...)`` of redis-py 6 and later
    tries a command that timed out three more times, with pauses of up to seconds: 9 s in all
    for a 0.5 s timeout; ``retry=Retry(NoBackoff(), 0)`` makes a failure prompt).
    ``prefix`` starts every key (one Redis may serve several fleets with different prefixes).

    Implements the :class:`~mcpcall.auth.tokens.TokenStore` protocol with its optional
    refresh lock (:meth:`lock`) and compare-and-put (:meth:`put_if`); see the module
    docstring for the keys, the lock and what a request does when Redis is down. The repr
    and every message show the server without its password.
    """

    def __init__(self, client: redis.Redis | str, *, prefix: str = "mcpcall:", timeout: float = 5.0) -> None:
        if not isinstance(prefix, str):
            raise TypeError("prefix must be a string")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (math.isfinite(timeout) and timeout > 0):
            raise ValueError("timeout must be a positive number of seconds")
        module = _redis_module()
        self.prefix = prefix
        self.timeout = float(timeout)
        self._url: str | None = None
        if isinstance(client, str):
            self._url = client
            self._redis = self._from_url()
            # Named from what redis-py parsed, not from the URL's text: a password that is not percent-encoded
            # (a "/" or "#" of base64) can be read as a path or a fragment, and shown.
            self._where = _describe_client(self._redis)
            self._owned = True
        elif isinstance(client, module.Redis):
            self._redis = client
            self._where = _describe_client(client)
            self._owned = False
        else:
            raise TypeError(f"RedisTokenStore takes a redis.Redis client or a redis:// URL, not {type(client).__name__}")
        self._release = self._redis.register_script(RELEASE_SCRIPT)
        self._inherited: list[Any] = []  # a forked child's copies of its parents' clients: never used nor closed
        fresh_locks_in_child(self)

    def _from_url(self) -> redis.Redis:
        module = _redis_module()
        assert self._url is not None
        try:
            return module.Redis.from_url(  # type: ignore[no-any-return]
                self._url, socket_timeout=self.timeout, socket_connect_timeout=self.timeout
            )
        except ValueError:
            pass
        # Neither the URL nor redis-py's error (its context, were this raised above) is shown: a password in the
        # URL that is not percent-encoded is what such an error quotes (as a port, say).
        scheme = self._url.partition("://")[0] if "://" in self._url else ""
        named = f" ({scheme}://…)" if scheme.isalnum() and len(scheme) <= 16 else ""
        raise ValueError(
            f"the token store's URL{named} is not a Redis URL it can read: redis://, rediss:// or unix://, "
            "with any special character of the password percent-encoded"
        )

    def _after_fork(self) -> None:
        """In a forked child (the hook runs before any user code): a connection pool of its own."""
        if self._owned:
            self._inherited.append(self._redis)
            self._redis = self._from_url()
        else:
            reset = getattr(self._redis.connection_pool, "reset", None)
            if callable(reset):
                reset()  # what redis-py does on a pid change: drop the parent's connections, never close them

    def __repr__(self) -> str:
        return f"<RedisTokenStore {self._where} prefix={self.prefix!r}>"

    def close(self) -> None:
        """Close the client this store made from a URL (a client you passed stays open); idempotent."""
        if self._owned:
            self._redis.close()
            self._redis.connection_pool.disconnect()

    def __enter__(self) -> RedisTokenStore:  # noqa: PYI034 - no typing_extensions for Self on 3.9/3.10
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- keys --------------------------------------------------------------------------------------

    def token_key(self, issuer: str, resource: str) -> str:
        """The Redis key of the token for ``(issuer, resource)``."""
        return f"{self.prefix}token:{_key_digest(issuer, resource)}"

    def lock_key(self, issuer: str, resource: str) -> str:
        """The Redis key of the refresh lock for ``(issuer, resource)``."""
        return f"{self.prefix}lock:{_key_digest(issuer, resource)}"

    def clients_key(self, issuer: str) -> str:
        """The Redis key of the clients registered at ``issuer``."""
        return f"{self.prefix}clients:{_key_digest(issuer)}"

    # -- calls -------------------------------------------------------------------------------------

    def _call(self, what: str, fn: Callable[[redis.Redis], T]) -> T:
        """``fn(client)``, a Redis error raised as :class:`TokenStoreUnavailable` naming the store and the cause."""
        module = _redis_module()
        try:
            return fn(self._redis)
        except module.RedisError as exc:
            failure = f"token store {self._where}: {what} failed: {_cause(exc, module)}"
        # Raised here, past the except clause, so that redis-py's error is not its context: the error of a failed
        # pipeline command quotes the command with its arguments (the token being stored).
        raise TokenStoreUnavailable(failure)

    # -- tokens ------------------------------------------------------------------------------------

    def get(self, issuer: str, resource: str) -> Token | None:
        """The stored token for this key, or ``None`` (also for an entry that is not a valid token, with a warning)."""
        raw = self._call("reading a token", lambda r: r.get(self.token_key(issuer, resource)))
        return self._token(raw, issuer, resource)

    def put(self, token: Token) -> None:
        """Store ``token`` under its issuer and resource, replacing any other."""
        payload = json.dumps(token.to_json(), sort_keys=True)
        self._call("storing a token", lambda r: r.set(self.token_key(token.issuer, token.resource), payload))

    def delete(self, issuer: str, resource: str) -> None:
        """Forget the token for this key; no error if there is none."""
        self._call("deleting a token", lambda r: r.delete(self.token_key(issuer, resource)))

    def put_if(self, token: Token, expected: str | None) -> bool:
        """Store ``token`` only while the stored token's access token is ``expected`` (``None``: none stored).

        Atomic (``WATCH``/``MULTI``): ``False``, and nothing written, when another holder stored
        a different token first. :class:`~mcpcall.errors.TokenStoreUnavailable` when Redis did not
        answer in time (the token may or may not have been written: read it again).
        """
        key = self.token_key(token.issuer, token.resource)
        payload = json.dumps(token.to_json(), sort_keys=True)

        def current_is_expected(raw: Any) -> bool:
            current = self._token(raw, token.issuer, token.resource)
            return (current.access_token if current is not None else None) == expected

        return self._call("storing a refreshed token", lambda r: _compare_and_set(r, key, current_is_expected, payload))

    def _token(self, raw: Any, issuer: str, resource: str) -> Token | None:
        text = _text(raw)
        if text is None:
            return None
        try:
            token = Token.from_json(json.loads(text))
        except (ValueError, TypeError, AttributeError, RecursionError):  # RecursionError: nested past the parser
            emit(log, logging.WARNING, "token store %s: the entry for %s is not a valid token; ignoring it",
                 self._where, redact_url(resource))
            return None
        if (token.issuer, token.resource) != (issuer, resource):
            return None  # another key's token under this digest: never in practice, never used
        return token

    # -- dynamically registered clients -----------------------------------------------------------

    def get_clients(self, issuer: str) -> list[dict[str, str]]:
        """The clients registered at ``issuer`` by earlier runs (``client_id``, ``client_secret``, …), newest last."""
        raw = self._call("reading registered clients", lambda r: r.get(self.clients_key(issuer)))
        return _clients(raw)

    def put_client(self, issuer: str, client: Mapping[str, Any]) -> None:
        """Keep the registration of a client at ``issuer`` (string values only), replacing one with its client_id.

        At most :data:`~mcpcall.auth.tokens.MAX_CLIENTS` are kept per issuer (the oldest go first).
        """
        entry = {k: v for k, v in client.items() if isinstance(k, str) and isinstance(v, str)}
        if not entry.get("client_id"):
            raise ValueError("a client entry needs a client_id")
        key = self.clients_key(issuer)

        def update(r: redis.Redis) -> None:
            for _attempt in range(WATCH_ATTEMPTS):
                with r.pipeline() as pipe:
                    try:
                        watch: Callable[[str], object] = pipe.watch  # untyped in redis-py
                        watch(key)
                        kept = [e for e in _clients(pipe.get(key)) if e.get("client_id") != entry["client_id"]]
                        pipe.multi()
                        pipe.set(key, json.dumps([*kept, entry][-MAX_CLIENTS:], sort_keys=True))
                        pipe.execute()
                        return
                    except _redis_module().WatchError as exc:
                        _raise_failure(exc, _redis_module())
                        continue  # another process registered one meanwhile: read again
            raise _redis_module().WatchError("the clients key kept changing")

        self._call("storing a registered client", update)

    # -- the refresh lock --------------------------------------------------------------------------

    @contextmanager
    def lock(
        self, issuer: str, resource: str, *, timeout: float, lease: float, stop: threading.Event | None = None
    ) -> Iterator[None]:
        """Hold the refresh lock of ``(issuer, resource)`` for every process using this Redis and prefix.

        Waits at most ``timeout`` seconds (:class:`~mcpcall.errors.RefreshTimeout`), less when
        ``stop`` is set first (:class:`~mcpcall.errors.RefreshAborted`). The lock ends by itself
        ``lease`` seconds after it was taken, should its holder die; a holder that is still
        working then no longer excludes anyone (store with :meth:`put_if`, not :meth:`put`).
        """
        if isinstance(lease, bool) or not isinstance(lease, (int, float)) or not (math.isfinite(lease) and lease > 0):
            raise ValueError("lease must be a positive number of seconds")
        key = self.lock_key(issuer, resource)
        mine = secrets.token_hex(16)
        milliseconds = max(1, math.ceil(lease * 1000))

        def attempt() -> bool:
            return bool(self._call("taking the refresh lock", lambda r: r.set(key, mine, nx=True, px=milliseconds)))

        wait_for_lock(attempt, timeout=timeout, stop=stop, what=f"token store {self._where}")
        try:
            yield
        finally:
            try:
                self._call("releasing the refresh lock", lambda r: self._release(keys=[key], args=[mine], client=r))
            except TokenStoreUnavailable as exc:
                emit(log, logging.WARNING, "%s; it ends by itself within %g s", str(exc), lease)


def _compare_and_set(r: redis.Redis, key: str, ok: Callable[[Any], bool], payload: str) -> bool:
    """Set ``key`` to ``payload`` if ``ok(its value)``, with nothing written in between; ``False`` otherwise."""
    module = _redis_module()
    for _attempt in range(WATCH_ATTEMPTS):
        with r.pipeline() as pipe:
            try:
                watch: Callable[[str], object] = pipe.watch  # untyped in redis-py
                watch(key)
                if not ok(pipe.get(key)):
                    return False
                pipe.multi()
                pipe.set(key, payload)
                pipe.execute()
                return True
            except module.WatchError as exc:
                _raise_failure(exc, module)
                continue  # written meanwhile: compare again
    raise module.WatchError("the key kept changing")  # not known to be replaced: the caller must not drop its token


def _raise_failure(exc: BaseException, module: Any) -> None:
    """Raise the connection failure behind a ``WatchError`` (redis-py reports a timeout or a lost connection
    during a watched transaction as one); return for a real conflict (the key was written meanwhile)."""
    cause = exc.__context__
    if isinstance(cause, (module.ConnectionError, module.TimeoutError)):
        raise cause
    if isinstance(cause, OSError):
        raise (module.TimeoutError if isinstance(cause, TimeoutError) else module.ConnectionError)(str(cause))


def _clients(raw: Any) -> list[dict[str, str]]:
    text = _text(raw)
    if text is None:
        return []
    try:
        listed = json.loads(text)
    except (ValueError, RecursionError):
        return []
    if not isinstance(listed, list):
        return []
    return [
        {k: v for k, v in entry.items() if isinstance(k, str) and isinstance(v, str)}
        for entry in listed
        if isinstance(entry, dict) and isinstance(entry.get("client_id"), str)
    ]


def _cause(exc: BaseException, module: Any) -> str:
    """What went wrong, for a message: the error's kind, and its text for connection troubles (no command, no value)."""
    name = type(exc).__name__
    if isinstance(exc, (module.ConnectionError, module.TimeoutError)):
        text = redact_url(str(exc))[:200]
        return f"{name}: {text}" if text else name
    return name


def _describe_client(client: Any) -> str:
    """``redis://host:port/db`` (or ``unix://path``) of a client, from its pool's settings: never the password."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None) or {}
    db = kwargs.get("db", 0)
    if kwargs.get("path"):
        return f"unix://{kwargs['path']}?db={db}"
    connection_class = getattr(getattr(client, "connection_pool", None), "connection_class", None)
    scheme = "rediss" if getattr(connection_class, "__name__", "") == "SSLConnection" else "redis"
    host = str(kwargs.get("host") or "localhost")
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{kwargs.get('port') or 6379}/{db}"
