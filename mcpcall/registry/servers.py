"""The servers behind a :class:`~mcpcall.registry.ToolRegistry`: connecting, listing, restarting.

A :class:`ServerPool` keeps one :class:`ServerState` per server: its config, its
client (None until first needed), its tools and how its last connects went.
Connects run on the caller's thread, or in parallel on short-lived
``mcpcall-connect-<server>`` threads (one per server being connected, each
bounded by the caller's deadline); nothing else runs on them. One lock guards
the pool's table and is never held while connecting; each server's own lock
serialises its connects and restarts.
"""

from __future__ import annotations

import logging
import shlex
import threading
import weakref
from collections.abc import Mapping, Sequence
from time import monotonic
from typing import Any, Callable

from ..client import Client
from ..config import ServerConfig, is_url
from ..config.entries import _bare_entry
from ..errors import (
    ConfigError,
    ConnectionClosed,
    ForkedClient,
    MCPError,
    RequestTimeout,
    SignInRequired,
)
from ..forking import on_fork_in_child
from ..notebook import release
from ..types import Tool
from .failures import model_text, unreachable

__all__ = ["ServerPool", "ServerState", "short"]

log = logging.getLogger("mcpcall.registry")

_FIRST_BACKOFF = 0.5  # seconds before the second restart attempt; doubled each time
_COOLDOWN = 60.0  # after max_restarts failed attempts in a row, one more try at most this often
_QUICK_DEATH = 10.0  # a server that dies sooner than this after starting counts as a failed start
_JOIN_GRACE = 1.0  # seconds past a connect's own deadline that its caller waits for the connecting thread


class ServerState:
    """One server: ``lock`` serialises its connects (held while connecting, never with the pool's lock)."""

    def __init__(self, name: str, config: ServerConfig | None, client: Client | None) -> None:
        self.name = name
        self.config = config
        self.client = client
        self.lock = threading.Lock()
        self.tools: list[Tool] | None = None
        self.stale = False  # the server said its tools changed
        self.failures = 0  # connect attempts that failed, and quick deaths, in a row (a call that works resets it)
        self.connected_at = 0.0
        self.retry_at = 0.0
        self.error: BaseException | None = None
        self.ever_connected = client is not None
        self.connecting: Client | None = None  # the client being connected: close() ends its handshake

    def alive(self) -> bool:
        """True while its client can take requests."""
        return self.client is not None and self.client.alive

    @property
    def remote(self) -> bool:
        """A server at a URL: it is reconnected to, never restarted (mcpcall does not run it)."""
        if self.config is not None:
            return self.config.kind == "http"
        return isinstance(getattr(getattr(self.client, "transport", None), "url", None), str)

    @property
    def start(self) -> str:
        """What the registry does to bring it back, for messages: "start it" or "connect to it"."""
        return "connect to it" if self.remote else "start it"


class ServerPool:
    """The servers of one registry, by name; thread-safe.

    ``changed()`` is called (never under a lock of the pool, and possibly on a
    client's callbacks thread) whenever a server's tool list changed or was
    fetched anew.
    """

    def __init__(self, *, timeout: float, max_restarts: int, connect_options: Mapping[str, Any],
                 changed: Callable[[], None]) -> None:
        self.timeout = timeout
        self.max_restarts = max_restarts
        self._options = dict(connect_options)
        self._changed = changed
        self._lock = threading.Lock()
        self._servers: dict[str, ServerState] = {}
        self.closed = False
        on_fork_in_child(self, _forget_in_child(weakref.ref(self)))

    def add(self, name: str, server: Any) -> None:
        """Add a server: a Client, a ServerConfig, an entry, a URL, a command line or an argv list."""
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a server name must be a non-empty string, not {name!r}")
        if isinstance(server, Client):
            release(server)  # the registry owns it now: a notebook re-run must not close it
            state = ServerState(name, None, server)
        elif isinstance(server, ServerConfig):
            if server.disabled:
                raise ConfigError(f"server {name!r} is disabled in its config")
            state = ServerState(name, server, None)
        else:
            state = ServerState(name, _config(name, server), None)
        with self._lock:
            if self.closed:
                raise ConfigError("the registry is closed")
            if name in self._servers:
                raise ConfigError(f"server {name!r} is in the registry already")
            self._servers[name] = state

    def names(self) -> list[str]:
        """The servers' names, in the order they were added."""
        with self._lock:
            return list(self._servers)

    def states(self) -> list[ServerState]:
        with self._lock:
            return list(self._servers.values())

    def unlisted(self) -> list[ServerState]:
        """Servers whose tools were never listed."""
        return [s for s in self.states() if s.tools is None]

    def errors(self) -> dict[str, BaseException]:
        """The last connect error of each server that is not connected now."""
        return {s.name: s.error for s in self.states() if s.error is not None and not s.alive()}

    def close(self) -> None:
        """Close every client (idempotent), without waiting on a connect under way."""
        with self._lock:
            self.closed = True
            states = list(self._servers.values())
        for state in states:
            # A connect under way fails at once (its client closed under it), and one that has not
            # begun sees the pool closed.
            for client in (state.connecting, state.client):
                if client is not None:
                    client.close()
            state.client = None

    def get(self, server: str) -> ServerState:
        """The server called ``server``; a ConfigError naming the known ones if none is."""
        with self._lock:
            state = self._servers.get(server)
        if state is None:
            raise ConfigError(f"no server {server!r} in the registry; servers: {', '.join(self.names()) or '(none)'}")
        return state

    def seconds(self, timeout: float | None, state: ServerState) -> float:
        """The timeout a call or connect of ``state`` gets: the caller's, else the config's, else the pool's."""
        if timeout is not None:
            return timeout
        if state.config is not None and state.config.timeout is not None:
            return state.config.timeout
        return self.timeout

    def connect_many(self, states: Sequence[ServerState], deadline: float,
                      then: Callable[[ServerState], None] | None = None) -> None:
        """Connect (and list) ``states`` in parallel, one short-lived thread each, waiting at most until ``deadline``."""

        def one(state: ServerState) -> None:
            try:
                self.connected(state, deadline)
            except BaseException as exc:  # noqa: BLE001 - kept in state.error; the callers make messages of it
                log.debug("server %r did not connect: %s", state.name, short(exc))
            if then is not None:
                then(state)

        if len(states) == 1:
            one(states[0])
            return
        threads = [threading.Thread(target=one, args=(s,), name=f"mcpcall-connect-{s.name}", daemon=True) for s in states]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(max(deadline - monotonic(), 0.0))

    def connected(self, state: ServerState, deadline: float) -> Client:
        """``state``'s client, up and listed; connected or restarted here if need be (bounded by ``deadline``)."""
        if not state.lock.acquire(timeout=max(deadline - monotonic(), 0.0)):
            raise RequestTimeout(f"server {state.name!r} is still connecting (by another caller)")
        try:
            if self.closed:
                raise ConnectionClosed("the tool registry was closed")
            client = state.client
            if client is None or not client.alive:
                client = self._reconnect(state, deadline)
            if state.tools is None or state.stale:
                state.stale = False
                try:
                    state.tools = client.list_tools(timeout=max(deadline - monotonic(), 1e-3))
                except BaseException as exc:
                    state.error = exc
                    state.stale = True
                    raise
                state.error = None
                self._changed()
            return client
        finally:
            state.lock.release()

    def _reconnect(self, state: ServerState, deadline: float) -> Client:
        """Connect ``state`` for the first time or after it died (with backoff between failures); lock held."""
        old, state.client = state.client, None
        if old is not None:
            closed_by_its_user = old.closed  # reg.client(...) in a with block: no crash of the server
            _close_aside(old, state.name)
            if not closed_by_its_user and monotonic() - state.connected_at < _QUICK_DEATH:
                # It died soon after it started (a server that crashes on every call): back off as
                # for a failed start, though the first such restart is at once.
                state.failures += 1
                if state.failures > 1:
                    state.retry_at = monotonic() + self._delay(state.failures - 1)
        if state.config is None:
            exc: BaseException = ConnectionClosed(f"server {state.name!r} is gone and cannot be "
                                                  f"{'reconnected' if state.remote else 'restarted'} "
                                                  "(it was given to the registry as a connected client)")
            state.error = exc
            raise exc
        wait = state.retry_at - monotonic()
        if wait > 0:
            raise ConnectionClosed(f"server {state.name!r} is down; the next attempt to {state.start} is in {wait:.1f} s")
        seconds = deadline - monotonic()
        if seconds <= 0:
            raise RequestTimeout(f"no time left to connect to server {state.name!r}")
        if state.ever_connected:
            log.warning("server %r is gone; %s", state.name, "reconnecting" if state.remote else "restarting it")
        try:
            # Built, then connected within what is left of the caller's deadline; its own default timeout
            # for later requests stays the configured one.
            client = state.config.connect(**{**self._options, "timeout": self.seconds(None, state), "start": False})
            state.connecting = client
            try:
                if self.closed:
                    client.close()  # built, never started: nothing else would close it
                    raise ConnectionClosed("the tool registry was closed")
                _connect_unattended(client, seconds, state.name)
            finally:
                state.connecting = None
        except BaseException as exc:
            if self.closed:
                raise ConnectionClosed("the tool registry was closed") from None
            state.error = exc
            if isinstance(exc, SignInRequired):
                # Not a server in trouble: it waits for the user's auth.login(url), and the first call
                # after that connects (no backoff; a connect that needs a sign-in fails at once).
                log.warning("server %r needs a sign-in: %s", state.name, str(exc))
                raise
            state.failures += 1
            state.retry_at = monotonic() + self._delay(state.failures)
            log.warning("server %r could not be started: %s", state.name, str(exc))
            raise
        state.client, state.error, state.ever_connected = client, None, True
        state.connected_at = monotonic()
        if self.closed:  # close() ran while this connected: whichever of us comes second closes it
            state.client = None
            client.close()
            raise ConnectionClosed("the tool registry was closed")
        state.tools = None
        self._watch(state, client, deadline)
        return client

    def _delay(self, failures: int) -> float:
        """Seconds to wait after ``failures`` failures in a row: 0.5, 1, 2, …; a minute once past ``max_restarts``."""
        return _COOLDOWN if failures >= self.max_restarts else min(_FIRST_BACKOFF * 2 ** (failures - 1), _COOLDOWN)

    def succeeded(self, state: ServerState) -> None:
        """A call of ``state`` worked: its server is healthy again."""
        state.failures = 0

    def _watch(self, state: ServerState, client: Client, deadline: float) -> None:
        """Re-list ``state``'s tools after the server says they changed."""
        tools = client.capabilities.get("tools")
        if not (isinstance(tools, dict) and tools.get("listChanged")):
            return

        def changed(_event: Any) -> None:
            state.stale = True  # a flag only: this runs on the client's callbacks thread
            self._changed()

        left = min(5.0, deadline - monotonic())
        if left < 0.05:  # no time to ask: the list is fetched again on the next call of a new session anyway
            log.debug("server %r: no time left to ask for tool change notifications", state.name)
            return
        try:
            client.subscribe(tools=True, on_change=changed, timeout=left)
        except MCPError as exc:
            log.debug("server %r: no tool change notifications (%s)", state.name, str(exc))

    def gone_text(self, state: ServerState, exc: BaseException) -> str:
        """A call failed because ``state``'s server went away or could not be reached: what happened and what
        the next call does, in one line for a model, true for both kinds of server."""
        if unreachable(exc):
            happened = f"server {state.name!r} could not be reached"
        else:
            happened = f"server {state.name!r} went away ({model_text(exc)})"
        if state.remote and state.alive():  # the same client sends the next request, on a new connection
            return f"{happened}; mcpcall will reconnect on the next call"
        if state.config is None:
            return f"{happened}; it cannot be {'reconnected' if state.remote else 'restarted'} (it was given to the " \
                   "registry as a connected client)"
        return f"{happened}; {'mcpcall will reconnect' if state.remote else 'it will be restarted'} on the next call"

    def failed(self, state: ServerState, exc: BaseException) -> None:
        """Note a failure seen by a call: a dead server is restarted (or reconnected to) on the next call."""
        if isinstance(exc, (ConnectionClosed, ForkedClient)):
            state.error = exc

    def down_text(self, state: ServerState, deadline: float) -> str:
        """Why ``state`` cannot take calls, in one line for a model (no error text: see :func:`model_text`)."""
        if self.closed:
            return "the tool registry was closed"
        if state.alive() and state.tools is None:  # connected, but its tools/list failed or did not finish
            if state.error is None or isinstance(state.error, RequestTimeout):
                return f"server {state.name!r} did not list its tools in time; they are listed again on the next call"
            return f"server {state.name!r} could not list its tools ({model_text(state.error)})"
        if state.error is None and monotonic() >= deadline:
            return f"server {state.name!r} did not connect in time"
        text = f"server {state.name!r} is not available ({model_text(state.error, state.ever_connected)})"
        wait = state.retry_at - monotonic()
        if wait > 0 and state.failures:
            text += f"; the next attempt to {state.start} is in {wait:.1f} s"
        return text


def _forget_in_child(ref: weakref.ref[ServerPool]) -> Callable[[], None]:
    """In a forked child (gunicorn ``--preload``, Celery prefork): let go of the parent's clients.

    Their servers belong to the parent (each client's own hook gives up its
    descriptors); the child connects its own on first use. Locks are made
    anew: a parent's thread may have held one at the fork.
    """

    def forget() -> None:
        pool = ref()
        if pool is None:
            return
        pool._lock = threading.Lock()
        for state in pool._servers.values():
            state.lock = threading.Lock()
            if state.client is not None and state.config is not None:
                state.client = None  # reconnected in this process on first use
            state.failures, state.retry_at = 0, 0.0

    return forget


def _config(name: str, server: Any) -> ServerConfig:
    """A :class:`ServerConfig` of an ``mcpServers``-style entry, a URL, a command line or an argv list."""
    if isinstance(server, Mapping):
        return _bare_entry(server, name)  # as connect() reads one: the same fields, no ${...} expansion
    if isinstance(server, str):
        if is_url(server):
            return ServerConfig(name, {"url": server})
        try:
            argv = shlex.split(server)
        except ValueError as exc:
            raise ConfigError(f"server {name!r}: its command line cannot be split ({exc})") from None
    elif isinstance(server, Sequence) and all(isinstance(word, str) for word in server):
        argv = list(server)
    else:
        raise ConfigError(f"server {name!r}: expected a config entry, a URL, a command line, an argv list or a "
                          f"connected Client, not {type(server).__name__}")
    if not argv:
        raise ConfigError(f"server {name!r}: the command is empty")
    return ServerConfig(name, {"command": argv[0], "args": argv[1:]})


def _connect_unattended(client: Client, seconds: float, name: str) -> None:
    """``client.connect(timeout=seconds)`` on an ``mcpcall-connect-<server>`` thread, waited for here.

    The registry never asks a person to sign in: not from ``execute`` (a model's turn), nor
    from ``call``, ``tools`` or ``client``, whichever thread they run on, and however many
    servers connect at once. The rule that decides is the client's own (``Client._sign_in``):
    a sign-in that needs a person runs in ``connect()`` only on a thread of the user's, never
    on one of mcpcall's. Every registry connect runs on one of mcpcall's threads, so it fails
    at once with :class:`~mcpcall.SignInRequired` instead (the user calls ``auth.login(url)``
    or runs ``mcpcall login URL``, and the next call connects).
    """
    if threading.current_thread().name.startswith("mcpcall-"):
        client.connect(timeout=seconds)  # a connecting thread of connect_many already
        return
    failure: list[BaseException] = []

    def run() -> None:
        try:
            client.connect(timeout=seconds)
        except BaseException as exc:  # noqa: BLE001 - raised again on the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=run, name=f"mcpcall-connect-{name}", daemon=True)
    thread.start()
    # connect() keeps to its own deadline; the grace is for a thread switch, not for more work.
    thread.join(seconds + _JOIN_GRACE)
    if thread.is_alive():
        client.close()  # ends the handshake under way; the thread then ends by itself
        raise RequestTimeout(f"server {name!r} did not finish connecting within {seconds:g} s", timeout=seconds)
    if failure:
        raise failure[0]


def _close_aside(client: Client, name: str) -> None:
    """Close a dead client off the caller's path: its close ladder may take seconds (a process that ignores SIGTERM)."""
    try:
        threading.Thread(target=client.close, name=f"mcpcall-close-{name}", daemon=True).start()
    except RuntimeError:  # no new threads (interpreter shutdown): close here
        client.close()


def short(exc: BaseException | None) -> str:
    """The first line of an error's message (no stderr tails), or its type."""
    if exc is None:
        return "unknown error"
    text = str(exc).strip().split("\n", 1)[0]
    return text or type(exc).__name__
