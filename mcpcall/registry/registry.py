"""Many servers behind one object: :class:`ToolRegistry`.

The registry owns one :class:`~mcpcall.Client` per server, connected when
first needed (or all at once, in parallel, with :meth:`ToolRegistry.connect_all`).
It names every tool ``mcp__<server>__<tool>`` (see :mod:`.names`), exports the
tools in each LLM provider's format (:mod:`.formats`), and turns an LLM's tool
call into the tool message for the next turn, never raising at the model.

Threads: the registry starts none of its own for calls. Calls go out as
Futures on each server's client (``execute_many`` sends every call before it
waits for any); only connecting runs on short-lived threads (see
:mod:`.servers`, which owns the servers, their connects and restarts). One
lock guards the name table and is never held while waiting for a server.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import field
from fnmatch import fnmatchcase
from time import monotonic
from typing import Any, Callable, Literal

from ..callbacks import log_exception
from ..client import Client
from ..config import load_config
from ..dispatcher import ProgressCallback, RequestFuture
from ..errors import ConfigError, ConnectionClosed, InvalidRequest, MCPError, RequestTimeout, RPCError, SessionExpired
from ..forking import on_fork_in_child
from ..types import CallToolResult, Tool, ToolList
from ..types._record import record
from .failures import failure_text, model_text, refused
from .formats import (
    ParsedCall,
    parse_tool_call,
    result_text,
    to_anthropic_tools,
    to_gemini_tools,
    to_json_schema,
    to_openai_tools,
    tool_message,
    unknown_tool_text,
)
from .names import NameTable, build_names, sanitize
from .servers import ServerPool, ServerState
from .stats import StatsKeeper, ToolStats

__all__ = ["RegisteredTool", "ToolRegistry"]

log = logging.getLogger("mcpcall.registry")

Patterns = Mapping[str, Sequence[str]]


@record
class RegisteredTool:
    """A tool as the registry shows it to a model: its exposed ``name``, its ``server`` and the MCP ``tool``."""

    name: str
    server: str
    tool: Tool = field(repr=False)


class _Sent:
    """One call of :meth:`ToolRegistry.call_future`: what was asked, where it went, and by when; and, once it
    was answered ``SessionExpired``, whether it was sent again (``"sent"``) or that answer counted (``"counted"``)."""

    __slots__ = ("again", "arguments", "deadline", "lock", "name", "on_progress", "server", "started", "tool")

    def __init__(self, name: str, server: str, tool: str, arguments: Mapping[str, Any] | None,
                 on_progress: ProgressCallback | None, deadline: float) -> None:
        self.name = name
        self.server = server
        self.tool = tool
        self.arguments = arguments
        self.on_progress = on_progress
        self.deadline = deadline
        self.started = 0.0  # when it was first sent
        self.again: Literal["", "sent", "counted"] = ""
        self.lock = threading.Lock()  # guards ``again``: call_again and the callbacks thread may decide at once


class _Outcome:
    """One call on its way: either a message already (it failed before it was sent) or a Future."""

    __slots__ = ("future", "message", "name", "parsed", "retried", "server", "started", "tool")

    def __init__(self, parsed: ParsedCall, name: str) -> None:
        self.parsed = parsed
        self.name = name
        self.server = ""
        self.tool = ""
        self.started = monotonic()
        self.future: Future[CallToolResult] | None = None
        self.message: dict[str, Any] | None = None
        self.retried = False  # sent a second time, in a new session

    def elapsed(self) -> float:
        """Seconds from sending to the answer (not to when the caller got round to it)."""
        done_at = getattr(self.future, "done_at", None)
        return (done_at if done_at is not None else monotonic()) - self.started


class ToolRegistry:
    """The tools of many MCP servers as one toolbox for an LLM; thread-safe, one per process.

    ``servers`` maps each server's name to a :class:`~mcpcall.config.ServerConfig`,
    an ``mcpServers``-style entry or anything :func:`mcpcall.connect` takes
    (the registry connects and owns it), or a connected :class:`~mcpcall.Client`
    (owned too: closed with the registry, but never restarted). Options:

    - ``prefix`` / ``separator``: exposed names are ``prefix + sep + server + sep + tool``
      ("mcp" and "__"; ``prefix=""`` leaves the prefix out);
    - ``allow`` / ``deny``: per server name, shell-style patterns of MCP tool
      names to keep or drop (``{"github": ["search_*"]}``; ``"*"`` as the key
      applies to every server);
    - ``timeout``: seconds for a call (and a connect) when the caller and the
      server's config give none;
    - ``max_restarts``: a server that died is reconnected on the next call, at
      most this many times in a row (waiting 0.5 s, 1 s, 2 s, … between
      failed attempts); after that once a minute at most;
    - ``lazy=False``: connect every server now (in parallel; failures are kept
      in :attr:`errors`, never raised);
    - ``connect_options``: passed to every :func:`mcpcall.connect` (``sampling=``,
      ``roots=``, ``stderr=``, …).
    """

    def __init__(
        self,
        servers: Mapping[str, Any] | None = None,
        *,
        prefix: str = "mcp",
        separator: str = "__",
        allow: Patterns | None = None,
        deny: Patterns | None = None,
        timeout: float = 60.0,
        max_restarts: int = 3,
        lazy: bool = True,
        connect_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ConfigError(f"timeout must be positive seconds, not {timeout!r}")
        build_names((), prefix=prefix, separator=separator)  # checks both
        self._prefix = prefix
        self._separator = separator
        self.timeout = float(timeout)
        self._allow = _patterns(allow, "allow")
        self._deny = _patterns(deny, "deny")
        self._lock = threading.Lock()  # guards the name table
        self._table: NameTable | None = None  # None: made again when next needed
        self._given: dict[tuple[str, str], str] = {}  # every (server, tool) name handed out so far
        self._warned: set[str] = set()
        self._stats = StatsKeeper()
        self._pool = ServerPool(timeout=self.timeout, max_restarts=max_restarts, connect_options=connect_options or {},
                                changed=self._forget_names)
        on_fork_in_child(self, _fresh_in_child(weakref.ref(self)))
        for name, server in (servers or {}).items():
            self.add_server(name, server)
        if not lazy:
            self.connect_all()

    @classmethod
    def from_config(cls, source: Any, *, inputs: Mapping[str, str] | None = None, **options: Any) -> ToolRegistry:
        """A registry of every enabled server of a config file (a path) or dict (``{"mcpServers": …}``)."""
        return cls(load_config(source, inputs=inputs), **options)

    @classmethod
    def from_clients(cls, clients: Iterable[Client] | Mapping[str, Client], **options: Any) -> ToolRegistry:
        """A registry over clients already connected (named by ``client.name`` unless given a mapping)."""
        named = dict(clients) if isinstance(clients, Mapping) else {client.name: client for client in clients}
        return cls(named, **options)

    def __repr__(self) -> str:
        names = self._pool.names()
        return f"<mcpcall.ToolRegistry {len(names)} servers: {', '.join(names)}>"

    def __enter__(self) -> ToolRegistry:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- servers ----------------------------------------------------------------------------------

    prefix = property(lambda self: self._prefix, doc="The exposed names' prefix (fixed: names once shown to a model stay).")
    separator = property(lambda self: self._separator, doc="What separates prefix, server and tool in exposed names.")

    def add_server(self, name: str, server: Any) -> None:
        """Add a server (as in the constructor); its name must be new."""
        self._pool.add(name, server)
        self._forget_names()

    @property
    def servers(self) -> list[str]:
        """The servers' names, in the order they were added."""
        return self._pool.names()

    @property
    def errors(self) -> dict[str, BaseException]:
        """The last connect error of each server that is not connected now."""
        return self._pool.errors()

    def client(self, server: str, timeout: float | None = None) -> Client:
        """The connected client of ``server`` (connecting or restarting it if needed)."""
        state = self._pool.get(server)
        return self._pool.connected(state, monotonic() + self._pool.seconds(timeout, state))

    def connect_all(self, timeout: float | None = None) -> dict[str, BaseException]:
        """Connect every server not yet connected, in parallel, within ``timeout`` in all.

        Returns the errors by server name (empty when all connected); one
        server's failure never stops the others.
        """
        states = self._pool.states()
        deadline = monotonic() + (self.timeout if timeout is None else timeout)
        self._pool.connect_many([s for s in states if not s.alive() or s.tools is None or s.stale], deadline)
        return {s.name: s.error for s in states if s.error is not None and not s.alive()}

    def close(self) -> None:
        """Close every server's client (idempotent). Calls in flight fail as error messages."""
        self._pool.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._pool.closed

    # -- tools --------------------------------------------------------------------------------

    def tools(self, timeout: float | None = None) -> ToolList[RegisteredTool]:
        """Every tool of every server that could be reached, as exposed to a model.

        Connects (in parallel) and lists what is not known yet, within
        ``timeout``; a server that fails is left out (see :attr:`errors`).
        """
        self.connect_all(timeout)
        return self._registered()

    def _registered(self) -> ToolList[RegisteredTool]:
        table = self._names()
        states = self._pool.states()
        return ToolList(RegisteredTool(table.name_of(s.name, tool.name), s.name, tool)
                        for s in states for tool in self._visible(s))

    @property
    def collisions(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """Exposed names several (server, tool) pairs would share: each got a hash suffix instead."""
        return [(c.name, list(c.pairs)) for c in self._names().collisions]

    def to_openai_tools(self, api: Literal["chat", "responses"] = "chat", timeout: float | None = None) -> list[dict[str, Any]]:
        """The tools for OpenAI: Chat Completions (``api="chat"``) or the Responses API (``api="responses"``)."""
        return to_openai_tools(self._entries(timeout), api=api)

    def to_anthropic_tools(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """The tools for Anthropic's Messages API."""
        return to_anthropic_tools(self._entries(timeout))

    def to_gemini_tools(self, timeout: float | None = None, *, wrap: bool = False,
                        json_schema: bool = False) -> list[dict[str, Any]]:
        """The tools as Gemini function declarations (``wrap=True``: as the ``tools`` entry,
        ``[{"function_declarations": [...]}]``; ``json_schema=True``: plain JSON Schema in
        ``parameters_json_schema``, with nothing dropped)."""
        return to_gemini_tools(self._entries(timeout), wrap=wrap, json_schema=json_schema)

    def to_json_schema(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """The tools with their input schemas untouched: ``{"name", "description", "input_schema"}``."""
        return to_json_schema(self._entries(timeout))

    def _entries(self, timeout: float | None) -> list[tuple[str, Tool]]:
        return [(t.name, t.tool) for t in self.tools(timeout)]

    def stats(self) -> dict[str, ToolStats]:
        """Calls, errors, timeouts and p50/p95 latency of every tool called so far, by exposed name."""
        return self._stats.snapshot()

    # -- calls --------------------------------------------------------------------------------

    def call(self, name: str, arguments: Mapping[str, Any] | None = None, timeout: float | None = None, *,
             on_progress: ProgressCallback | None = None) -> CallToolResult:
        """Call a tool by its exposed name and return its result (errors raise, as with a client).

        ``on_progress(progress, total, message)`` runs on the client's callbacks thread, as with
        :meth:`Client.call_tool <mcpcall.Client.call_tool>`.
        """
        sent, state, client = self._prepare(name, arguments, timeout, on_progress)
        left = sent.deadline - monotonic()
        if left <= 0:
            raise RequestTimeout(f"tool {sent.tool!r} of server {sent.server!r} was not called: no time left after connecting")
        server, tool = sent.server, sent.tool
        started = monotonic()
        retried = False
        try:
            try:
                result = client.call_tool(tool, arguments, timeout=left, on_progress=on_progress)
            except SessionExpired as exc:  # not run: once more in a new session, as execute() does
                left = sent.deadline - monotonic()
                if left <= 0 or not client.alive:
                    raise
                retried = True
                log.info("server %r no longer knew our session (%s); sending tool %r again in a new session",
                         server, str(exc), tool)
                result = client.call_tool(tool, arguments, timeout=left, on_progress=on_progress)
        except BaseException as exc:
            self._failed(state, name, server, tool, monotonic() - started, exc, retried)
            raise
        self._pool.succeeded(state)
        self._stats.record(name, server, tool, monotonic() - started, "isError" if result.is_error else None,
                           retried=retried)
        return result

    def call_future(self, name: str, arguments: Mapping[str, Any] | None = None, timeout: float | None = None, *,
                    on_progress: ProgressCallback | None = None) -> Future[CallToolResult]:
        """:meth:`call` without waiting for the answer: its Future (``future.cancel()`` cancels it at the server).

        The tool is looked up and its server connected (or restarted) here, within
        ``timeout``, which also bounds the call; then the call is sent and its Future
        returned. Failures to get that far raise. The stats and the restart policy
        see every outcome as they see :meth:`call`'s (a call the client refuses
        before sending it too). A result checked against the tool's ``outputSchema``
        is checked where it is read, as with a client's Future (never on the
        client's callbacks thread), and counted then. An answer ``SessionExpired``
        (the server forgot our session; the call did not run) is the caller's to
        send again, once, with :meth:`call_again`: it is counted as one call when
        sent again, or as a failure when it cannot be (:meth:`call_again` returns
        None, or there is no time or client left for it when it comes). Unlike
        :meth:`call`, the progress callbacks may still be running when the Future is done.
        """
        sent, state, client = self._prepare(name, arguments, timeout, on_progress)
        return self._sent(sent, state, client, retried=False)

    def _prepare(self, name: str, arguments: Mapping[str, Any] | None, timeout: float | None,
                 on_progress: ProgressCallback | None) -> tuple[_Sent, ServerState, Client]:
        """The call to make, its server's state and its client, connected (a lookup and a connect, within ``timeout``)."""
        deadline = monotonic() + (self.timeout if timeout is None else timeout)  # one for the lookup and the call
        found = self._resolve(name, deadline)
        if found is None:
            raise InvalidRequest(unknown_tool_text(name, self._names().names))
        server, tool = found
        state = self._pool.get(server)
        if timeout is None:
            deadline = min(deadline, monotonic() + self._pool.seconds(None, state))
        client = self._pool.connected(state, deadline)
        return _Sent(name, server, tool, arguments, on_progress, deadline), state, client

    def _sent(self, sent: _Sent, state: ServerState, client: Client, *, retried: bool) -> Future[CallToolResult]:
        """Send ``sent`` on ``client``; its Future, watched: the pool and the stats hear how it ended."""
        left = sent.deadline - monotonic()
        if retried:
            left = max(left, 1e-3)  # call_again saw time left: the call goes, and its deadline ends it
        elif left <= 0:
            raise RequestTimeout(f"tool {sent.tool!r} of server {sent.server!r} was not called: no time left after connecting")
        started = monotonic()
        if not retried:
            sent.started = started
        try:
            future = client.call_tool_future(sent.tool, sent.arguments, timeout=left, on_progress=sent.on_progress)
        except BaseException as exc:  # refused before it was sent (arguments, a closed client): counted as call() does
            self._failed(state, sent.name, sent.server, sent.tool, monotonic() - started, exc, retried)
            raise
        future.sent = sent  # type: ignore[attr-defined]  # for call_again: what to send once more, and where
        future.retried = retried  # type: ignore[attr-defined]

        def ended(done: Future[CallToolResult]) -> None:
            """Count ``done``'s outcome: on the callbacks thread, or where the result's check ran (its reader)."""
            elapsed = getattr(done, "done_at", monotonic()) - started
            if done.cancelled():
                self._stats.record(sent.name, sent.server, sent.tool, elapsed, "cancelled", retried=retried)
                return
            exc = done.exception()  # the verdict is in: no check runs here
            if isinstance(exc, SessionExpired) and not retried:
                self._expired(sent, state, exc, elapsed)
                return
            if exc is not None:
                self._failed(state, sent.name, sent.server, sent.tool, elapsed, exc, retried)
                return
            self._pool.succeeded(state)
            result = done.result()
            self._stats.record(sent.name, sent.server, sent.tool, elapsed, "isError" if result.is_error else None,
                               retried=retried)

        if isinstance(future, RequestFuture):
            future.add_checked_callback(ended)
        else:  # pragma: no cover - a client's call_tool_future always gives a RequestFuture
            future.add_done_callback(ended)
        return future

    def _failed(self, state: ServerState, name: str, server: str, tool: str, elapsed: float | None, exc: BaseException,
                retried: bool) -> None:
        """A call that failed with ``exc``: the restart policy and the stats hear of it."""
        self._pool.failed(state, exc)
        self._stats.record(name, server, tool, elapsed, model_text(exc), isinstance(exc, RequestTimeout), retried=retried)

    def _expired(self, sent: _Sent, state: ServerState, exc: SessionExpired, elapsed: float) -> None:
        """``sent`` was answered ``SessionExpired``: call_again's to send once more; counted now if it cannot be."""
        with sent.lock:
            if sent.again or self._can_send_again(sent, state):
                return  # sent again already (counted when that one ends), or call_again's to decide
            sent.again = "counted"
        self._failed(state, sent.name, sent.server, sent.tool, elapsed, exc, False)

    def _can_send_again(self, sent: _Sent, state: ServerState) -> bool:
        client = state.client
        return not self._pool.closed and client is not None and client.alive and sent.deadline - monotonic() > 0

    def call_again(self, future: Future[CallToolResult], exc: SessionExpired) -> Future[CallToolResult] | None:
        """The call of ``future`` (a Future of :meth:`call_future` answered ``SessionExpired``) sent once more,
        in a new session; None if it cannot be (no time or client left, or ``future`` is that second sending).

        Once per call: a second use for the same ``future`` raises
        :class:`~mcpcall.errors.InvalidRequest`, as does a ``future`` that is not
        one of :meth:`call_future`'s or was not answered ``SessionExpired``.
        """
        sent: _Sent | None = getattr(future, "sent", None)
        if sent is None:
            raise InvalidRequest("call_again takes a Future of ToolRegistry.call_future")
        if getattr(future, "retried", False):
            return None  # the second sending: not sent a third time (counted when it ended)
        if not future.done() or future.cancelled() or not isinstance(future.exception(), SessionExpired):
            raise InvalidRequest(f"call_again: the call of tool {sent.tool!r} of server {sent.server!r} was not "
                                 "answered SessionExpired; only such a call is sent again")
        state = self._pool.get(sent.server)
        with sent.lock:
            if sent.again == "sent":
                raise InvalidRequest(f"call_again: the call of tool {sent.tool!r} of server {sent.server!r} was sent "
                                     "again already; a call is sent again once")
            if sent.again == "counted":
                return None
            if not self._can_send_again(sent, state):
                sent.again = "counted"
                send = False
            else:
                sent.again = "sent"
                send = True
        if not send:
            done_at = getattr(future, "done_at", None)
            self._failed(state, sent.name, sent.server, sent.tool, None if done_at is None else done_at - sent.started,
                         exc, False)
            return None
        client = state.client
        assert client is not None
        log.info("server %r no longer knew our session (%s); sending tool %r again in a new session",
                 sent.server, str(exc), sent.tool)
        return self._sent(sent, state, client, retried=True)

    def resolve(self, name: str, timeout: float | None = None) -> tuple[str, str]:
        """``(server, tool)`` of an exposed name; listing servers not listed yet if needed.

        Raises :class:`~mcpcall.errors.InvalidRequest` for a name no server has; when the server
        the name points to could not list its tools, that server's error (a
        :class:`~mcpcall.errors.RequestTimeout`, :class:`~mcpcall.SignInRequired`, …) instead.
        """
        found = self._resolve(name, monotonic() + (self.timeout if timeout is None else timeout))
        if found is None:
            raise InvalidRequest(unknown_tool_text(name, self._names().names))
        return found

    def execute(self, tool_call: Any, timeout: float | None = None) -> dict[str, Any]:
        """Run one LLM tool call and return the tool message for the model's next turn.

        ``tool_call`` is an OpenAI Chat Completions tool call, a Responses
        ``function_call`` item or an Anthropic ``tool_use`` block (an object
        or a dict); the message is in the same format. Invalid JSON arguments,
        an unknown tool, an ``isError`` result, a timeout or a dead server
        each become an error message that says what happened: nothing is
        raised at the model. Only something that is not a tool call at all
        raises :class:`~mcpcall.errors.InvalidRequest`.
        """
        return self.execute_many([tool_call], timeout)[0]

    def execute_many(self, tool_calls: Sequence[Any], timeout: float | None = None) -> list[dict[str, Any]]:
        """Run tool calls concurrently, across servers, under one deadline; the messages in order.

        Every call is sent as soon as its server is up, before any is waited
        for; servers that must connect (or re-list their tools) first do so in
        parallel. A server that hangs costs its own calls an error message at
        the deadline; the others return as soon as they are done.
        """
        parsed = [parse_tool_call(call) for call in tool_calls]  # not a tool call at all: the caller's bug
        deadline = monotonic() + (self.timeout if timeout is None else timeout)
        outcomes = [_Outcome(p, p.name) for p in parsed]
        waiting: dict[str, list[_Outcome]] = {}  # by the server to connect or re-list first
        orphans: list[_Outcome] = []  # names of no server known yet: looked up once every server is listed
        for outcome in outcomes:
            self._route(outcome, deadline, waiting, orphans)
        if orphans:
            for state in self._pool.unlisted():
                waiting.setdefault(state.name, [])
        if waiting:
            states = [self._pool.get(name) for name in waiting]
            gate = threading.Lock()  # a connect that finishes after the deadline sends nothing

            def after(state: ServerState) -> None:
                with gate:
                    for outcome in waiting[state.name]:
                        if outcome.message is None and outcome.future is None:
                            try:
                                self._place(outcome, state, deadline)
                            except BaseException as exc:  # noqa: BLE001 - logged, and the call fails with it
                                log_exception(log, logging.ERROR, "placing a call of %r failed", outcome.name)
                                self._fail(outcome, f"tool {outcome.name!r} was not called: {type(exc).__name__}")

            self._pool.connect_many(states, deadline, then=after)
            with gate:
                for state in states:  # connects that ran out of time
                    for outcome in waiting[state.name]:
                        if outcome.future is None and outcome.message is None:
                            self._fail(outcome, f"tool {outcome.name!r} was not called: "
                                                f"{self._pool.down_text(state, deadline)}", timeout=True)
        for outcome in orphans:
            self._place(outcome, None, deadline)
        return [self._finish(outcome, deadline) for outcome in outcomes]

    # -- the steps of a call ----------------------------------------------------------------

    def _route(self, outcome: _Outcome, deadline: float, waiting: dict[str, list[_Outcome]], orphans: list[_Outcome]) -> None:
        """Send the call at once if its server is up and listed; else queue it behind that server's connect."""
        parsed = outcome.parsed
        if self._pool.closed:
            self._fail(outcome, "the tool registry was closed")
            return
        if parsed.error is not None:
            self._fail(outcome, f"invalid arguments for tool {parsed.name!r}: {parsed.error}. "
                                "Send the arguments as one JSON object.")
            return
        found = self._names().lookup(parsed.name)
        if found is not None:
            state = self._pool.get(found[0])
            if state.alive() and not state.stale and not state.lock.locked():
                outcome.server, outcome.tool = found
                self._send(outcome, state, deadline)
                return
            waiting.setdefault(state.name, []).append(outcome)
            return
        states = self._pool.states()
        hinted = [s for s in states if parsed.name.startswith(self._stem(s.name))
                  and (s.tools is None or s.stale or not s.alive())]
        if hinted:
            owner = max(hinted, key=lambda s: len(s.name))
            # Counted as that server's call if it fails there (not listed, not reachable); a name the
            # server turns out not to have is counted as nobody's.
            outcome.server, outcome.tool = owner.name, self._tool_named(parsed.name, owner.name)
            waiting.setdefault(owner.name, []).append(outcome)
        else:
            orphans.append(outcome)

    def _place(self, outcome: _Outcome, state: ServerState | None, deadline: float) -> None:
        """After ``state`` (None: every server) connected or failed: look the name up again, then send."""
        if self._pool.closed:
            self._fail(outcome, "the tool registry was closed")
            return
        found = self._names().lookup(outcome.name)
        if found is None:
            if state is not None and not (state.alive() and state.tools is not None):
                # Its server is down or never listed its tools (a tools/list that timed out): whether
                # it has the tool is not known, so the name is not called unknown.
                self._fail(outcome, f"tool {outcome.name!r} was not called: {self._pool.down_text(state, deadline)}",
                           timeout=_timed_out(state, deadline))
            else:
                outcome.server = outcome.tool = ""  # a name no server has: nobody's call in the stats
                self._fail(outcome, self._unknown_text(outcome.name))
            return
        outcome.server, outcome.tool = found
        target = self._pool.get(found[0])
        self._send(outcome, target, deadline)

    def _send(self, outcome: _Outcome, state: ServerState, deadline: float) -> None:
        client = state.client
        if client is None or not client.alive:
            self._fail(outcome, f"tool {outcome.name!r} was not called: {self._pool.down_text(state, deadline)}",
                           timeout=_timed_out(state, deadline))
            return
        left = deadline - monotonic()
        if left <= 0:
            self._fail(outcome, f"tool {outcome.tool!r} of server {state.name!r} was not called: "
                                "the deadline passed while its server was connecting", timeout=True)
            return
        outcome.started = monotonic()
        try:
            outcome.future = client.call_tool_future(outcome.tool, outcome.parsed.arguments, timeout=left)
        except MCPError as exc:  # the client closed meanwhile, arguments refused, a request that cannot be encoded, …
            self._pool.failed(state, exc)
            log.warning("tool %r of server %r could not be called: %s", outcome.tool, state.name, str(exc))
            what = f"tool {outcome.tool!r} of server {state.name!r}"
            self._fail(outcome, failure_text(what, exc) if refused(exc) else f"{what} could not be called: {model_text(exc)}")

    def _finish(self, outcome: _Outcome, deadline: float) -> dict[str, Any]:
        if outcome.message is not None:
            return outcome.message
        assert outcome.future is not None
        what = f"tool {outcome.tool!r} of server {outcome.server!r}"
        try:
            try:
                result = outcome.future.result(timeout=max(deadline - monotonic(), 0.0))
            except SessionExpired as exc:
                if not self._send_again(outcome, exc, deadline):
                    raise
                result = outcome.future.result(timeout=max(deadline - monotonic(), 0.0))
        except (RequestTimeout, FutureTimeout) as exc:
            outcome.future.cancel()  # tells the server
            return self._done(outcome, failure_text(what, exc, deadline - outcome.started), timeout=True)
        except ConnectionClosed as exc:
            state = self._pool.get(outcome.server)
            self._pool.failed(state, exc)
            log.warning("%s failed: %s", what, str(exc))  # the text: a kept record must not keep the registry alive
            if self._pool.closed:
                return self._done(outcome, f"{what} failed: the tool registry was closed")
            return self._done(outcome, f"{what} failed: {self._pool.gone_text(state, exc)}")
        except RPCError as exc:  # the server's own words about the call: the model may read them
            self._pool.succeeded(self._pool.get(outcome.server))  # it answered: alive and well
            return self._done(outcome, failure_text(what, exc))
        except MCPError as exc:
            log.warning("%s failed: %s", what, str(exc))
            return self._done(outcome, failure_text(what, exc))
        except BaseException as exc:  # noqa: BLE001 - logged, and the model is told
            log_exception(log, logging.ERROR, "%s failed unexpectedly", what)
            return self._done(outcome, failure_text(what, exc))
        error = None
        if result.is_error:
            error = "isError"
        self._pool.succeeded(self._pool.get(outcome.server))  # it answered: not a server in a crash loop
        self._stats.record(outcome.name, outcome.server, outcome.tool, outcome.elapsed(), error, retried=outcome.retried)
        return tool_message(outcome.parsed, text=result_text(result), is_error=result.is_error, result=result)

    def _send_again(self, outcome: _Outcome, exc: SessionExpired, deadline: float) -> bool:
        """The server refused the call for a session it no longer knows (a remote server that restarted): the
        call was not run, so it goes once more, in a new session (the client opens it first), within the same
        deadline. False when it cannot (sent again already, no time left, the client gone)."""
        client = self._pool.get(outcome.server).client
        if outcome.retried or self._pool.closed or client is None or not client.alive or deadline - monotonic() <= 0:
            return False
        outcome.retried = True
        log.info("server %r no longer knew our session (%s); sending tool %r again in a new session",
                 outcome.server, str(exc), outcome.tool)
        try:
            outcome.future = client.call_tool_future(outcome.tool, outcome.parsed.arguments,
                                                     timeout=max(deadline - monotonic(), 1e-3))
        except MCPError as failure:  # the new session could not be opened in time, the client closed, …
            failed: Future[CallToolResult] = Future()
            failed.set_exception(failure)
            outcome.future = failed
        return True

    def _done(self, outcome: _Outcome, text: str, timeout: bool = False) -> dict[str, Any]:
        self._stats.record(outcome.name, outcome.server, outcome.tool, outcome.elapsed(), text, timeout,
                           retried=outcome.retried)
        return tool_message(outcome.parsed, text=text, is_error=True)

    def _fail(self, outcome: _Outcome, text: str, timeout: bool = False) -> None:
        """The call ends before it was sent: counted (with no latency) only when it named a known tool."""
        if outcome.server and outcome.tool:
            self._stats.record(outcome.name, outcome.server, outcome.tool, None, text, timeout)
        outcome.message = tool_message(outcome.parsed, text=text, is_error=True)

    # -- names ----------------------------------------------------------------------------------

    def _visible(self, state: ServerState) -> list[Tool]:
        tools = state.tools or []
        allow = self._allow.get(state.name, self._allow.get("*"))
        deny = list(self._deny.get(state.name, ())) + list(self._deny.get("*", ()))
        return [t for t in tools
                if (allow is None or any(fnmatchcase(t.name, p) for p in allow))
                and not any(fnmatchcase(t.name, p) for p in deny)]

    def _names(self) -> NameTable:
        with self._lock:
            table = self._table
            if table is None:
                pairs = [(s.name, t.name) for s in self._pool.states() for t in self._visible(s)]
                # Names once shown to a model stay: a tool added later never renames one mid-conversation.
                # Every name ever handed out, for a server whose tools are missing from this table for a while.
                table = self._table = build_names(pairs, prefix=self._prefix, separator=self._separator,
                                                  keep=self._given or None)
                self._given.update(table.by_pair)
                for collision in table.collisions:
                    if collision.name not in self._warned:
                        self._warned.add(collision.name)
                        log.warning("tools %s would all be named %r: %s", ", ".join(f"{t!r} of {s!r}" for s, t in collision.pairs),
                                    collision.name, "each got a hash suffix" if collision.kept_by is None
                                    else f"{collision.kept_by[1]!r} of {collision.kept_by[0]!r} keeps it, the others got a hash suffix")
            return table

    def _resolve(self, name: str, deadline: float) -> tuple[str, str] | None:
        """``(server, tool)`` for an exposed name, listing the servers it may belong to if needed."""
        states = self._pool.states()
        stale = [s for s in states if s.stale]
        if stale:
            self._pool.connect_many(stale, deadline)
        found = self._names().lookup(name)
        if found is not None:
            return found
        unlisted = self._pool.unlisted()
        hinted = [s for s in unlisted if name.startswith(self._stem(s.name))]
        for group in (hinted, [s for s in unlisted if s not in hinted]):
            if group:
                self._pool.connect_many(group, deadline)
                found = self._names().lookup(name)
                if found is not None:
                    return found
        for state in hinted:
            if state.tools is None:  # the server the name points to never listed its tools: not "no such tool"
                raise state.error or RequestTimeout(f"server {state.name!r} did not list its tools in time")
        return None

    def _unknown_text(self, name: str) -> str:
        """No listed server has ``name``: say so, and which servers' tools are not known (they could not be listed)."""
        text = unknown_tool_text(name, self._names().names)
        unlisted = [s.name for s in self._pool.unlisted()]
        if unlisted:
            text += (f" The tools of server{'s' if len(unlisted) > 1 else ''} {', '.join(repr(n) for n in unlisted)} "
                     "are not known: listing them failed or did not finish in time.")
        return text

    def _tool_named(self, name: str, server: str) -> str:
        """The MCP tool of ``server`` that an exposed name stands for, before the server's tools are listed:
        the one it was given for before, else the name without the prefix and server."""
        with self._lock:
            given = [tool for (owner, tool), exposed in self._given.items() if exposed == name and owner == server]
        return given[0] if given else name[len(self._stem(server)):]

    def _forget_names(self) -> None:
        """A tool list changed: the names are made again when next needed."""
        with self._lock:
            self._table = None

    def _stem(self, server: str) -> str:
        head = f"{self._prefix}{self._separator}" if self._prefix else ""
        return f"{head}{sanitize(server)}{self._separator}"

def _timed_out(state: ServerState, deadline: float) -> bool:
    """Whether a call that could not be sent to ``state`` failed for want of time (counted as a timeout)."""
    return isinstance(state.error, RequestTimeout) or (state.error is None and monotonic() >= deadline)


def _fresh_in_child(ref: weakref.ref[ToolRegistry]) -> Callable[[], None]:
    """In a forked child: a lock of its own (a parent's thread may have held it) and no parent's stats."""

    def fresh() -> None:
        registry = ref()
        if registry is not None:
            registry._lock = threading.Lock()
            registry._stats = StatsKeeper()

    return fresh


def _patterns(value: Patterns | None, what: str) -> dict[str, tuple[str, ...]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{what} must map server names to lists of tool name patterns, not {type(value).__name__}")
    out = {}
    for server, patterns in value.items():
        if isinstance(patterns, str) or not all(isinstance(p, str) for p in patterns):
            raise ConfigError(f"{what}[{server!r}] must be a list of tool name patterns (strings)")
        out[server] = tuple(patterns)
    return out
