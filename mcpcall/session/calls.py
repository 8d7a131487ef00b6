"""Sending a request in either era, to completion: rounds, retries, one deadline, the wait.

:class:`Caller` turns a :class:`Call` into dispatcher requests. In the modern
era every request carries the per-request ``_meta``; an ``input_required``
answer is answered through the client's handlers on the callbacks thread and
the request is sent again (multi round-trip requests), a ``-32022`` naming a
version we speak or a ``-32020`` header mismatch is retried once, and a
``resultType: "task"`` answer is handed to the tasks extension. Every round
shares the call's one deadline; between rounds the call is held by the
connection, so ``close()`` ends it.

:class:`State` is what the session agreed on (era, version, capabilities); the
client shows it, the caller reads it. Nothing here holds the client.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass, field
from time import monotonic
from typing import Any, Callable

from .. import forking, jsonrpc
from ..callbacks import CallbackRunner
from ..dispatcher import CONTINUED, Dispatcher, ProgressCallback, RequestFuture
from ..errors import ConnectionClosed, ProtocolError, RequestTimeout, RPCError, UnsupportedVersion
from ..protocol import MODERN_VERSIONS
from ..scheduler import get_scheduler
from ..transports.base import caller_waits
from ..types import Implementation
from .cache import ResultCache
from .eras import Agreement, Negotiator
from .inbound import check_input_required, input_requests
from .lifecycle import Connection

__all__ = ["Call", "Caller", "State"]

log = logging.getLogger("mcpcall.client")

_MRTR_METHODS = frozenset({"tools/call", "resources/read", "prompts/get"})
_MAX_ROUNDS = 16
_MAX_PAGES = 10_000
_WAIT_GRACE = 0.5  # seconds past a call's deadline before the wait itself gives up (the dispatcher's timeout first)

#: ``transform(result, future)`` -> the value the caller gets.
Transform = Callable[[dict[str, Any], RequestFuture], Any]


@dataclass
class State:
    """What the client and server agreed on; updated by a new session or a version retry."""

    era: str | None = None
    protocol_version: str | None = None
    supported_versions: list[str] = field(default_factory=list)
    capabilities: dict[str, Any] = field(default_factory=dict)
    server_info: Implementation | None = None
    instructions: str | None = None
    #: The modern per-request ``_meta`` (empty in the legacy era).
    meta: dict[str, Any] = field(default_factory=dict)

    def adopt(self, agreement: Agreement, meta: dict[str, Any]) -> None:
        self.era = agreement.era
        self.protocol_version = agreement.version
        self.supported_versions = agreement.supported_versions
        self.capabilities = agreement.capabilities
        self.server_info = agreement.server_info
        self.instructions = agreement.instructions
        self.meta = meta if agreement.era == "modern" else {}


class Call:
    """One request as the caller asked for it, and what sending it again needs."""

    __slots__ = (
        "cached",
        "deadline",
        "max_timeout",
        "meta",
        "method",
        "on_progress",
        "on_task",
        "params",
        "prepared",
        "prepared_note",
        "reset",
        "retried",
        "rounds",
        "timeout",
        "transform",
    )

    def __init__(
        self,
        method: str,
        params: dict[str, Any] | None,
        timeout: float | None,
        transform: Transform | None = None,
        on_progress: ProgressCallback | None = None,
        reset: bool = False,
        max_timeout: float | None = None,
    ) -> None:
        self.method = method
        self.params = params
        self.timeout = timeout
        self.transform = transform
        self.on_progress = on_progress
        self.reset = reset
        self.max_timeout = max_timeout
        #: Extra per-request ``_meta`` for this call only (modern: capabilities of an extension).
        self.meta: dict[str, Any] | None = None
        #: ``on_task(result, future)`` for a ``resultType: "task"`` answer (the tasks extension).
        self.on_task: Transform | None = None
        self.rounds = 0
        #: Something ran before the first send (see ``Caller.before_send``): it goes out under ``deadline`` too.
        self.prepared = False
        #: What explained a timeout while preparing (a listing whose connect had not finished), for the call's own.
        self.prepared_note = ""
        self.retried = False
        self.deadline = math.inf  # monotonic time by which every round must be done
        #: Set by :meth:`Caller.result`: the answer came from the cache.
        self.cached = False

    def with_params(self, params: dict[str, Any]) -> Call:
        """The same call with other params (the original stays as it was)."""
        other = Call(self.method, params, self.timeout, self.transform, self.on_progress, self.reset, self.max_timeout)
        other.meta = self.meta
        other.on_task = self.on_task
        other.rounds = self.rounds
        other.retried = self.retried
        other.prepared = self.prepared
        other.prepared_note = self.prepared_note
        other.deadline = self.deadline
        return other


class Caller:
    """Sends calls for one client, in its era, under its connection."""

    def __init__(
        self,
        *,
        name: str,
        connection: Connection,
        state: State,
        negotiator: Negotiator,
        timeout: float,
        run_handler: Callable[[str, dict[str, Any]], dict[str, Any]],
        cache: ResultCache,
    ) -> None:
        self.name = name
        self.connection = connection
        self.state = state
        self.negotiator = negotiator
        self.timeout = timeout
        self.cache = cache
        self._run_handler = run_handler
        #: ``relist(timeout)``: refresh the tool list (set by the tool catalog; a header mismatch uses it).
        self.relist: Callable[[float | None], Any] | None = None
        #: ``{method: prepare(call)}``: run on the caller's thread before a call of ``method`` is sent (the tool
        #: catalog lists the tools for ``tools/call`` when its ``outputSchema`` is not known yet); True when it
        #: did something, whose time then comes out of the call's deadline.
        self.before_send: dict[str, Callable[[Call], bool]] = {}
        self._session_lock = threading.Lock()

    @property
    def dispatcher(self) -> Dispatcher:
        return self.connection.dispatcher

    @property
    def callbacks(self) -> CallbackRunner:
        return self.connection.callbacks

    # -- sending -------------------------------------------------------------------------

    def send(self, call: Call) -> RequestFuture:
        """Start ``call``; the Future completes with its (transformed) result."""
        owner = self.connection.owner
        if owner.born != forking.generation:  # owner.check, inline: this is every call's path
            owner.check(self.name)
        if self.connection.closed:
            raise ConnectionClosed(f"client for server {self.name!r} is closed")
        if call.timeout is None:
            call.timeout = self.timeout
        if call.timeout != math.inf and call.timeout <= 0:
            raise ValueError(f"timeout must be positive seconds, not {call.timeout!r}")
        started = monotonic()
        prepare = self.before_send.get(call.method)
        if prepare is not None and prepare(call) and not call.reset:
            # What preparing took comes out of the call's one deadline (the errors still name its timeout).
            # With a timeout reset by progress, the dispatcher counts max_timeout from the send: preparing
            # (itself bounded by the timeout) may add to it, once per session.
            call.prepared = True
        if call.timeout != math.inf:
            limit = call.max_timeout if call.reset and call.max_timeout is not None else call.timeout
            call.deadline = started + (math.inf if call.reset and call.max_timeout is None else limit)
        connection = self.connection
        if connection.transport.session_lost:
            self._new_session(call)
        return self._dispatch(call, RequestFuture(call.method, call, connection.callbacks))

    def _params(self, call: Call) -> dict[str, Any]:
        """The call's params with the modern per-request ``_meta`` (the caller's own ``_meta`` keys win)."""
        meta = self.state.meta
        if call.meta:
            meta = {**meta, **call.meta}
        params = call.params
        if not params:
            return {"_meta": meta}
        out = dict(params)
        extra = params.get("_meta")
        out["_meta"] = {**meta, **extra} if extra else meta
        return out

    def _dispatch(self, call: Call, future: RequestFuture) -> RequestFuture:
        """Send ``call`` (again) under a new id, completing ``future``."""
        deadline: float | None = None
        if call.rounds or call.retried or call.prepared:
            # A later round, or a first one after preparing: what is left of the call's one deadline.
            deadline = call.deadline
            if deadline - monotonic() <= 0:
                future.fail(self._call_timeout(call))
                return future
        elif not call.reset:
            deadline = call.deadline  # send()'s start + timeout, as the dispatcher would count it: one clock read fewer
        if self.state.era == "modern":
            params: dict[str, Any] | None = self._params(call)
            transform: Any = self._modern_result
            on_error: Any = self._modern_error
        else:
            params = call.params
            transform = call.transform
            on_error = None
        return self.connection.dispatcher.request(
            call.method,
            params,
            call.timeout,
            deadline=deadline if deadline != math.inf else None,
            transform=transform,
            on_error=on_error,
            on_progress=call.on_progress,
            reset_timeout_on_progress=call.reset,
            max_timeout=call.max_timeout,
            future=future,
        )

    def _call_timeout(self, call: Call, request_id: Any = None) -> RequestTimeout:
        """The call's deadline passed; ``request_id``: the request then carrying it (None: none was pending)."""
        timeout = call.timeout or 0.0
        rounds = f" in {call.rounds + 1} rounds" if call.rounds else ""
        note = self._silence_note(request_id) or call.prepared_note
        text = f"; {note}" if note else ""
        if call.reset and call.max_timeout is not None:  # the call's deadline is max_timeout from its start
            return RequestTimeout(
                f"server {self.name!r} did not complete {call.method} within {call.max_timeout:g} s{rounds}{text} "
                f"(max_timeout; the timeout of {timeout:g} s is reset by progress; raise max_timeout= if the "
                "operation is slow)",
                method=call.method,
                timeout=call.max_timeout,
                note=note,
            )
        return RequestTimeout(
            f"server {self.name!r} did not complete {call.method} within {timeout:g} s{rounds}{text} "
            "(raise timeout= if the operation is slow)",
            method=call.method,
            timeout=timeout,
            note=note,
        )

    def _silence_note(self, request_id: Any) -> str:
        """What explains the silence of request ``request_id`` now (HTTP: a TCP connect, TLS handshake or name lookup
        of its that had not finished), as the dispatcher adds to a timeout; "" when nothing does. Lines a stdio
        server wrote earlier are not counted: the requests that waited for them said so."""
        return self.connection.dispatcher.skipped_note(self.connection.transport.skipped(), request_id)

    # -- the modern era: result types, rounds, retries (reader and callbacks threads) ------

    def _modern_result(self, result: dict[str, Any], future: RequestFuture) -> Any:
        """Check ``resultType``; on ``input_required`` take over and answer on the callbacks thread."""
        call: Call = future.context
        kind = result.get("resultType", "complete")
        if kind == "complete":
            return call.transform(result, future) if call.transform is not None else result
        if kind == "input_required" and call.method in _MRTR_METHODS:
            if call.rounds + 1 >= _MAX_ROUNDS:
                raise ProtocolError(f"server {self.name!r} asked for input {_MAX_ROUNDS} times on one {call.method}; gave up")
            self._between_rounds(call, future)
            self._later(self._answer_input_required, call, result, future)
            return CONTINUED
        if kind == "task" and call.on_task is not None:
            return call.on_task(result, future)
        raise ProtocolError(f"server {self.name!r} answered {call.method} with resultType {kind!r}, which mcpcall does not know")

    def _later(self, fn: Callable[..., None], call: Call, *args: Any) -> None:
        """Run the next step on the callbacks thread (the handlers' thread)."""
        future: RequestFuture = args[-1]
        if not self.callbacks.submit(fn, call, *args):
            future.fail(ConnectionClosed(f"client for server {self.name!r} was closed"))

    def _between_rounds(self, call: Call, future: RequestFuture) -> None:
        """Between rounds no request is pending: the call's own deadline still runs, and close() ends it."""
        self.connection.hold(future)
        if call.deadline == math.inf:
            return
        timeout_error = self._call_timeout(call)

        def expire() -> None:
            future.fail(timeout_error)

        gap = get_scheduler().schedule(max(0.0, call.deadline - monotonic()), expire)
        Future.add_done_callback(future, lambda _: gap.cancel())

    def _modern_error(self, exc: BaseException, future: RequestFuture) -> Any:
        """Retry once on a version the server names (-32022) or after re-listing tools (-32020)."""
        call: Call = future.context
        if call.retried or not isinstance(exc, RPCError):
            return None
        if isinstance(exc, UnsupportedVersion):
            common = [v for v in MODERN_VERSIONS if v in exc.supported]
            if not common:
                return None
            call.retried = True
            self.state.meta = self.negotiator.request_meta(common[0])
            self.state.protocol_version = common[0]
            self._between_rounds(call, future)
            self._later(self._retry, call, future)
            return CONTINUED
        if exc.code == jsonrpc.HEADER_MISMATCH and call.method == "tools/call":
            call.retried = True
            self._between_rounds(call, future)
            self._later(self._relist_and_retry, call, future)
            return CONTINUED
        return None

    def _retry(self, call: Call, future: RequestFuture) -> None:
        if future.done():
            return
        try:
            self._dispatch(call, future)
        except BaseException as exc:  # noqa: BLE001 - the caller's Future carries it
            future.fail(exc)

    def _relist_and_retry(self, call: Call, future: RequestFuture) -> None:
        try:
            left = call.deadline - monotonic()
            if left > 0 and self.relist is not None:
                self.relist(left if left != math.inf else None)
        except Exception as exc:  # noqa: BLE001 - the retry shows what is still wrong
            log.debug("re-listing tools after a header mismatch failed: %s", str(exc))
        self._retry(call, future)

    def answer_inputs(self, requests: Any, future: Future[Any] | None = None) -> dict[str, Any]:
        """Answers to ``inputRequests`` (``{key: {method, params}}``) from the handlers, in order."""
        responses: dict[str, Any] = {}
        method = future.method if isinstance(future, RequestFuture) else "a request"
        for key, kind, params in input_requests(self.name, method, requests):  # every shape checked first
            responses[key] = self._run_handler(kind, params)
            if future is not None and future.done():
                break
        return responses

    def _answer_input_required(self, call: Call, result: dict[str, Any], future: RequestFuture) -> None:
        if future.done():
            return  # cancelled or timed out before its turn
        try:
            check_input_required(self.name, call.method, result)
            responses = self.answer_inputs(result.get("inputRequests"), future)
            if future.done():
                return
            retry = dict(call.params or {})
            retry.pop("inputResponses", None)
            retry.pop("requestState", None)
            if responses:
                retry["inputResponses"] = responses
            state = result.get("requestState")
            if isinstance(state, str):
                retry["requestState"] = state
            follow_up = call.with_params(retry)
            follow_up.rounds += 1
            future.context = follow_up
            self._dispatch(follow_up, future)
        except BaseException as exc:  # noqa: BLE001 - a handler's failure belongs to the caller's Future
            future.fail(exc)

    # -- waiting -----------------------------------------------------------------------------

    def wait(self, future: Future[Any]) -> Any:
        """The result, once the progress callbacks queued before it have run (within the call's deadline)."""
        # Every request has a deadline on the scheduler; this wait ends by it too (with a little grace for the
        # dispatcher's own timeout to win): a result's transform (parsing it, on the reader thread; the outputSchema check
        # runs on the thread that reads the result) runs after the request left the pending map.
        call = future.context if future.__class__ is RequestFuture else getattr(future, "context", None)
        deadline = call.deadline if call.__class__ is Call or isinstance(call, Call) else math.inf
        connection = self.connection
        try:
            if future._state == "PENDING":
                # The only one waiting (and not the callbacks thread, whose queue must keep running): the
                # transport may read the answer on this thread, up to the same limit as the wait below.
                # Inside the try: a Ctrl-C while this thread reads cancels the request as one while it waits.
                if connection.callbacks.in_callback_thread():
                    connection.transport.reading()  # RequestFuture.result runs the callbacks queue meanwhile
                else:
                    transport = connection.transport
                    alone = len(connection.dispatcher._pending) == 1  # in_flight()
                    # A read_for() that did not read saw to the reader itself (and a lone caller's next call leads);
                    # after one that did, or with other waiters, the transport's threads read for this caller.
                    if (not alone or transport.read_for(future, deadline + _WAIT_GRACE)) and future._state == "PENDING":
                        transport.reading()
                    if future._state == "PENDING" and future.__class__ is RequestFuture:
                        # Future.result's wait, without its frames and the checks RequestFuture.result
                        # repeats (reading(), the callbacks thread): done above, once.
                        cond = future._condition
                        with cond:
                            if future._state == "PENDING":
                                cond.wait(None if deadline == math.inf else max(0.0, deadline + _WAIT_GRACE - monotonic()))
            left = None if deadline == math.inf or future._state == "FINISHED" else max(0.0, deadline + _WAIT_GRACE - monotonic())
            try:
                result = future.result(left)
            except FuturesTimeout:  # a RequestTimeout is one too: the Future's own error, when it is done
                if future.done():
                    return self._drained(future, future.result(0))  # its own result or error (just in)
                current = getattr(future, "context", call)
                timed_out: Call = current if isinstance(current, Call) else call  # type: ignore[assignment]
                error = self._call_timeout(timed_out, getattr(future, "request_id", None))
                if isinstance(future, RequestFuture):
                    future.fail(error)
                future.cancel()  # done now: only tells the server, if the request is still pending
                raise error from None
        except BaseException:
            if not future.done():
                future.cancel()  # interrupted while waiting (Ctrl-C): tell the server
            raise
        if future.__class__ is RequestFuture and future.progress_drained is None:
            return result  # no progress callbacks to wait for (what _drained would find)
        return self._drained(future, result)

    def _drained(self, future: Future[Any], result: Any) -> Any:
        """``result``, once the progress callbacks queued before it have run (within the call's deadline)."""
        drained = future.progress_drained if future.__class__ is RequestFuture else getattr(future, "progress_drained", None)
        if drained is not None and not self.callbacks.in_callback_thread():
            call = getattr(future, "context", None)
            deadline = call.deadline if isinstance(call, Call) else math.inf
            drained.wait(None if deadline == math.inf else max(0.0, deadline - monotonic()))
        return result

    def result(self, call: Call, *, cache: bool = True) -> Any:
        """Send ``call`` and wait; a cacheable modern result may come from (and go to) the cache."""
        use_cache = cache and self.state.era == "modern"
        if use_cache:
            hit = self.cache.get(call.method, call.params)
            if hit is not None:
                call.cached = True
                return call.transform(hit, _DONE) if call.transform is not None else hit
            generation = self.cache.generation(call.method)
            raw: list[dict[str, Any]] = []
            inner = call.transform

            def keep(result: dict[str, Any], future: RequestFuture) -> Any:
                context = future.context
                if isinstance(context, Call) and context.rounds == 0:  # never a result built on inputs
                    raw.append(result)
                return inner(result, future) if inner is not None else result

            call.transform = keep
            value = self.wait(self._send_blocking(call))
            if raw:
                self.cache.put(call.method, call.params, raw[0], generation)
            return value
        return self.wait(self._send_blocking(call))

    def _send_blocking(self, call: Call) -> RequestFuture:
        """:meth:`send` for a call this thread then waits for: within :meth:`blocking` where the transport asks."""
        if not self.connection.transport.uses_caller_waits:
            return self.send(call)
        with self.blocking():
            return self.send(call)

    def blocking(self) -> Any:
        """``with caller_waits(...)`` around sending a request this thread will then wait for.

        A transport may then run the request's I/O on this thread. Not on the
        callbacks thread, whose queue must keep running while it waits (a server
        request inside the reply needs a handler there).
        """
        return caller_waits(not self.callbacks.in_callback_thread())

    def _new_session(self, call: Call) -> None:
        """The server dropped our (legacy HTTP) session: initialize again, once, for everyone.

        Within what is left of ``call``'s deadline, waiting for another caller's
        renewal included.
        """
        left = call.deadline - monotonic()
        if left <= 0 or not self._session_lock.acquire(timeout=-1 if left == math.inf else left):
            raise self._call_timeout(call)
        try:
            transport = self.connection.transport
            if transport.session_lost and self.state.protocol_version is not None:
                log.info("server %r: starting a new session", self.name)
                left = call.deadline - monotonic()
                if left <= 0:
                    raise self._call_timeout(call)
                transport.start_session(left)  # HTTP+SSE: a new stream, which names the new session's endpoint
                left = call.deadline - monotonic()
                if left <= 0:
                    raise self._call_timeout(call)
                agreement = self.negotiator.initialize(self.state.protocol_version, left)
                self.state.adopt(agreement, {})
        finally:
            self._session_lock.release()

    # -- listings ----------------------------------------------------------------------------

    def paginate(self, method: str, key: str, timeout: float | None, *, cache: bool = True,
                 params: dict[str, Any] | None = None,
                 on_page: Callable[[dict[str, Any], bool], None] | None = None) -> Iterator[Any]:
        """Every item of every page, all pages within one ``timeout``; ``on_page(page, cached)`` sees each page.

        Pages are cached one by one; when a later page fails after cached ones, the
        cached pages may point at a cursor the server no longer knows: the listing
        starts over without the cache, once.
        """
        total = self.timeout if timeout is None else timeout
        deadline = monotonic() + total if total != math.inf else math.inf
        try:
            pages = self._pages(method, key, total, deadline, cache, params)
        except _StaleCursor:
            self.cache.invalidate(method)
            pages = self._pages(method, key, total, deadline, False, params)
        for page, cached in pages:
            if on_page is not None:
                on_page(page, cached)
            yield from page[key]

    def _pages(self, method: str, key: str, total: float, deadline: float, cache: bool,
               params: dict[str, Any] | None) -> list[tuple[dict[str, Any], bool]]:
        found: list[tuple[dict[str, Any], bool]] = []
        any_cached = False
        cursor: str | None = None
        seen = set()
        pages = 0
        while True:
            pages += 1
            if pages > _MAX_PAGES:
                raise ProtocolError(f"server {self.name!r} sent more than {_MAX_PAGES} pages for {method}; gave up")
            left = deadline - monotonic()
            page_params = dict(params or {})
            if cursor is not None:
                page_params["cursor"] = cursor
            call = Call(method, page_params or None, left)
            try:
                if left <= 0:
                    raise RequestTimeout("no time left", method=method, timeout=total)
                page = self.result(call, cache=cache)
            except RequestTimeout as exc:
                if pages == 1:
                    raise
                raise RequestTimeout(
                    f"server {self.name!r} did not finish {method} within {total:g} s ({pages - 1} pages so far)",
                    method=method, timeout=total, note=exc.note,
                ) from exc
            except RPCError as exc:
                if any_cached:
                    raise _StaleCursor() from exc  # paginate() starts over without the cache
                raise
            any_cached = any_cached or call.cached
            items = page.get(key)
            if not isinstance(items, list):
                raise ProtocolError(f"server {self.name!r} answered {method} without a list {key!r}")
            found.append((page, call.cached))
            cursor = page.get("nextCursor")
            if cursor is None or cursor == "":
                return found
            if not isinstance(cursor, str) or cursor in seen:
                raise ProtocolError(f"server {self.name!r} repeated or sent a bad nextCursor {jsonrpc.excerpt(cursor)} for {method}")
            seen.add(cursor)


class _StaleCursor(Exception):
    """A page after cached ones failed: their cursor may be stale."""


class _Done:
    """Stands in for a Future when a transform runs on a cached result (it only reads ``context``)."""

    context = None


_DONE: Any = _Done()
