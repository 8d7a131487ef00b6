"""Change notifications in both eras, behind one call: ``client.subscribe(...)``.

- **legacy**: a server that declares ``listChanged`` sends
  ``notifications/{tools,prompts,resources}/list_changed`` on its own;
  resource updates need ``resources/subscribe`` per URI (and
  ``resources/unsubscribe`` when no subscription wants the URI any more).
- **modern**: ``subscriptions/listen`` opens a stream with a filter; the
  server acknowledges the subset it honours
  (``notifications/subscriptions/acknowledged``) and tags every message with
  the subscription's id (the JSON-RPC id of the listen request), which routes
  it here. A stream that ends without the server closing it gracefully is
  listened to again, with backoff, until the subscription is closed.

In both eras a server that cannot send what was asked is no error: the
subscription's ``acknowledged`` is then ``{}`` (legacy: its capabilities
declare no ``listChanged`` / ``subscribe`` for it; modern: the same, checked
before ``subscriptions/listen`` is sent, or the server answers it with -32601
Method not found). Other errors are raised.

``on_change(event)`` runs on the client's callbacks thread with a
:class:`ChangeEvent`. A :class:`Subscription` is a context manager; closing it
(or the client) ends the stream.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import field
from time import monotonic
from typing import Any, Callable

from .. import jsonrpc
from ..callbacks import CallbackRunner
from ..dispatcher import RequestFuture
from ..errors import MCPError, RequestTimeout, RPCError
from ..protocol import META_SUBSCRIPTION_ID
from ..scheduler import get_scheduler
from ..types._record import record
from .calls import Call, Caller

__all__ = ["ChangeEvent", "Subscription", "Subscriptions"]

log = logging.getLogger("mcpcall.client")

_KIND_OF = {
    "notifications/tools/list_changed": "tools",
    "notifications/prompts/list_changed": "prompts",
    "notifications/resources/list_changed": "resources",
    "notifications/resources/updated": "resource",
}
_RELISTEN_FIRST = 0.5
_RELISTEN_MAX = 30.0
_STABLE_SECONDS = 30.0  # a stream that lasted this long resets the re-listen backoff


@record
class ChangeEvent:
    """Something the server changed: ``kind`` is "tools", "prompts", "resources" (the list) or
    "resource" (one resource's contents, ``uri``)."""

    kind: str
    uri: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


class Subscription:
    """What one ``subscribe()`` asked for; ``close()`` ends it (idempotent)."""

    def __init__(self, owner: Subscriptions, *, tools: bool, prompts: bool, resources_list: bool,
                 uris: Sequence[str], on_change: Callable[[ChangeEvent], Any] | None) -> None:
        self._owner = owner
        self.tools = tools
        self.prompts = prompts
        self.resources_list = resources_list
        self.uris = tuple(uris)
        self.on_change = on_change
        #: What the server agreed to send (modern: its acknowledgement; legacy: what its capabilities allow).
        self.acknowledged: dict[str, Any] = {}
        self.closed = False
        #: True once the server ended the subscription gracefully (it is not listened to again).
        self.ended = False
        self.ever_acknowledged = False
        #: The JSON-RPC id of the current listen request (modern), the subscription id on the wire.
        self.subscription_id: Any = None
        self._future: RequestFuture | None = None
        self._acked = threading.Event()
        self._delay = _RELISTEN_FIRST
        self._listened_at = 0.0
        self._counted: list[str] = []  # legacy: the URIs this subscription counts in the refcounts

    def __repr__(self) -> str:
        wants = [k for k, on in (("tools", self.tools), ("prompts", self.prompts), ("resources", self.resources_list)) if on]
        state = "closed" if self.closed else "open"
        return f"<mcpcall.Subscription {', '.join(wants + list(self.uris)) or 'nothing'} {state}>"

    def wants(self, kind: str, uri: str | None) -> bool:
        if kind == "resource":
            return uri in self.uris
        return {"tools": self.tools, "prompts": self.prompts, "resources": self.resources_list}.get(kind, False)

    def filter(self) -> dict[str, Any]:
        """The modern ``notifications`` filter."""
        wanted: dict[str, Any] = {}
        if self.tools:
            wanted["toolsListChanged"] = True
        if self.prompts:
            wanted["promptsListChanged"] = True
        if self.resources_list:
            wanted["resourcesListChanged"] = True
        if self.uris:
            wanted["resourceSubscriptions"] = list(self.uris)
        return wanted

    def close(self, timeout: float | None = None) -> None:
        """Stop receiving: the stream is ended (modern) or the URIs unsubscribed (legacy)."""
        self._owner.close(self, timeout)

    def __enter__(self) -> Subscription:  # noqa: PYI034 - no typing_extensions for Self on 3.9/3.10
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Subscriptions:
    """Every subscription of one client, and the routing of what the server sends for them."""

    def __init__(self, caller: Caller) -> None:
        self.caller = caller
        self.name = caller.name
        self._lock = threading.Lock()
        self._open: list[Subscription] = []
        self._by_id: dict[Any, Subscription] = {}
        # Legacy: how many open subscriptions want each URI, and which URIs the server has agreed to.
        self._uri_refs: dict[str, int] = {}
        self._subscribed: set[str] = set()

    @property
    def callbacks(self) -> CallbackRunner:
        return self.caller.callbacks

    # -- opening and closing ----------------------------------------------------------------

    def subscribe(self, *, tools: bool, prompts: bool, resources_list: bool, uris: Sequence[str],
                  on_change: Callable[[ChangeEvent], Any] | None, timeout: float | None) -> Subscription:
        if isinstance(uris, str):
            raise TypeError("resources= takes a list of URIs, not one string")
        sub = Subscription(self, tools=tools, prompts=prompts, resources_list=resources_list,
                           uris=[str(u) for u in uris], on_change=on_change)
        with self._lock:
            self._open.append(sub)
        try:
            if self.caller.state.era == "modern":
                if self._offers_any(sub):
                    self._listen(sub, timeout, first=True)
                else:
                    log.debug("server %r declares none of the change notifications asked for (%r); "
                              "subscriptions/listen not sent", self.name, repr(sub))
                    self._unsupported(sub)
            else:
                self._legacy_open(sub, timeout)
        except BaseException:
            self.close(sub, timeout)  # what it subscribed, it unsubscribes; its listen request ends
            raise
        return sub

    def close(self, sub: Subscription, timeout: float | None = None) -> None:
        with self._lock:
            if sub.closed:
                return
            sub.closed = True
            if sub in self._open:
                self._open.remove(sub)
            self._by_id.pop(sub.subscription_id, None)
            drop = []
            for uri in sub._counted:
                self._uri_refs[uri] -= 1
                if self._uri_refs[uri] == 0:
                    del self._uri_refs[uri]
                    if uri in self._subscribed:  # only what the server agreed to
                        self._subscribed.discard(uri)
                        drop.append(uri)
            sub._counted = []
        future = sub._future
        if future is not None:
            future.cancel()  # stdio: notifications/cancelled; HTTP: the stream is closed
        if not self.caller.connection.closed:
            for uri in drop:
                try:
                    self.caller.result(Call("resources/unsubscribe", {"uri": uri}, timeout), cache=False)
                except MCPError as exc:
                    log.debug("server %r: resources/unsubscribe %r failed: %s", self.name, uri, str(exc))

    def _offers_any(self, sub: Subscription) -> bool:
        """Whether the server's capabilities declare any of what ``sub`` asks for (the spec has no
        capability for ``subscriptions/listen`` itself: ``listChanged`` and ``resources.subscribe`` say it)."""
        caps = self.caller.state.capabilities

        def declared(section: str, flag: str) -> bool:
            value = caps.get(section)
            return isinstance(value, dict) and bool(value.get(flag))

        return ((sub.tools and declared("tools", "listChanged")) or (sub.prompts and declared("prompts", "listChanged"))
                or (sub.resources_list and declared("resources", "listChanged"))
                or (bool(sub.uris) and declared("resources", "subscribe")))

    @staticmethod
    def _unsupported(sub: Subscription) -> None:
        """The server sends nothing for ``sub``: acknowledged nothing, and nothing to listen to again."""
        sub.acknowledged = {}
        sub._acked.set()

    def _legacy_open(self, sub: Subscription, timeout: float | None) -> None:
        caps = self.caller.state.capabilities
        acked: dict[str, Any] = {}
        for key, on, section in (("toolsListChanged", sub.tools, "tools"), ("promptsListChanged", sub.prompts, "prompts"),
                                 ("resourcesListChanged", sub.resources_list, "resources")):
            declared = caps.get(section)
            if on and isinstance(declared, dict) and declared.get("listChanged"):
                acked[key] = True
        if sub.uris:
            resources = caps.get("resources")
            if not (isinstance(resources, dict) and resources.get("subscribe")):
                log.info("server %r does not offer resource subscriptions; %d URIs not subscribed", self.name, len(sub.uris))
            else:
                with self._lock:  # decide who subscribes each URI in one step (two threads never both skip)
                    first = []
                    for uri in dict.fromkeys(sub.uris):
                        self._uri_refs[uri] = self._uri_refs.get(uri, 0) + 1
                        sub._counted.append(uri)
                        if self._uri_refs[uri] == 1:
                            first.append(uri)
                for uri in first:
                    self.caller.result(Call("resources/subscribe", {"uri": uri}, timeout), cache=False)
                    with self._lock:
                        self._subscribed.add(uri)
                acked["resourceSubscriptions"] = list(sub.uris)
        sub.acknowledged = acked
        sub.ever_acknowledged = True
        sub._acked.set()

    def _listen(self, sub: Subscription, timeout: float | None, *, first: bool) -> None:
        """Send ``subscriptions/listen``; the first time, wait for the acknowledgement."""
        params = {"notifications": sub.filter()}
        call = Call("subscriptions/listen", params, math.inf)
        sub._acked.clear()
        sub._listened_at = monotonic()
        future = self.caller.send(call)
        with self._lock:
            if sub.closed:
                future.cancel()
                return
            self._by_id.pop(sub.subscription_id, None)
            sub.subscription_id = future.request_id
            sub._future = future
            self._by_id[future.request_id] = sub
        Future.add_done_callback(future, lambda f: self._ended(sub, f))  # our code, on the completing thread
        if not first:
            return
        wait = self.caller.timeout if timeout is None else timeout
        if not sub._acked.wait(None if wait == math.inf else wait):
            if future.done() and future.exception() is not None:
                raise future.exception()  # type: ignore[misc]
            future.cancel()
            raise RequestTimeout(
                f"server {self.name!r} did not acknowledge subscriptions/listen within {wait:g} s",
                method="subscriptions/listen", timeout=wait,
            )
        if future.done() and not future.cancelled() and future.exception() is not None:
            error = future.exception()
            if _method_not_found(error):
                log.debug("server %r does not offer subscriptions/listen (%s); no change notifications", self.name,
                          str(error))
                self._unsupported(sub)
                return
            raise error  # type: ignore[misc]

    def _ended(self, sub: Subscription, future: Future[Any]) -> None:
        """A listen request finished: gracefully (the server ended it), or broken (listen again)."""
        sub._acked.set()  # wakes a subscribe() still waiting; it looks at the Future
        if sub.closed or future.cancelled() or self.caller.connection.closed:
            return
        error = future.exception()
        # This runs where the listen request completes (a reader thread, often): every record goes
        # through the callbacks runner, which hands it over from an I/O thread.
        if error is None:
            sub.ended = True
            self.callbacks.log(log, logging.INFO, "server %r ended a subscription (%s)", self.name, repr(sub))
            return
        if _method_not_found(error):  # no listen at all (any more): listening again cannot help
            with self._lock:
                self._by_id.pop(sub.subscription_id, None)
            if sub.ever_acknowledged:
                sub.ended = True
                self.callbacks.log(log, logging.INFO, "server %r no longer offers subscriptions/listen; %s ended",
                                   self.name, repr(sub))
            return
        if not sub.ever_acknowledged:
            return  # refused when opened: subscribe() raises it
        if monotonic() - sub._listened_at > _STABLE_SECONDS:
            sub._delay = _RELISTEN_FIRST  # it had been fine for a while: start the backoff afresh
        delay = sub._delay
        sub._delay = min(delay * 2, _RELISTEN_MAX)
        self.callbacks.log(log, logging.INFO, "server %r: subscription stream broke (%s); listening again in %.1f s",
                           self.name, str(error), delay)
        callbacks = self.callbacks

        def relisten() -> None:  # on the scheduler: only hand over
            callbacks.submit(self._relisten, sub)

        get_scheduler().schedule(delay, relisten)

    def _relisten(self, sub: Subscription) -> None:
        if sub.closed or self.caller.connection.closed:
            return
        try:
            self._listen(sub, None, first=False)
        except MCPError as exc:
            log.info("server %r: listening again failed (%s)", self.name, str(exc))
            self._ended(sub, _failed(exc))

    # -- what the server sends (reader thread) ----------------------------------------------

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Route a change notification to the subscriptions that asked for it."""
        meta = params.get("_meta")
        sid = meta.get(META_SUBSCRIPTION_ID) if isinstance(meta, dict) else None
        if method == "notifications/subscriptions/acknowledged":
            with self._lock:
                sub = self._by_id.get(sid)
            if sub is not None:
                agreed = params.get("notifications")
                sub.acknowledged = dict(agreed) if isinstance(agreed, dict) else {}
                sub.ever_acknowledged = True
                sub._acked.set()
            return
        kind = _KIND_OF.get(method)
        if kind is None:
            return
        uri = params.get("uri") if isinstance(params.get("uri"), str) else None
        event = ChangeEvent(kind, uri, params)
        with self._lock:
            if sid is not None:  # tagged: that subscription only (a closed or unknown one: nobody)
                targets = [self._by_id[sid]] if sid in self._by_id else []
            else:  # legacy, or a server that does not tag: whoever asked for it
                targets = list(self._open)
        for sub in targets:
            if sub.on_change is not None and not sub.closed and sub.wants(kind, uri):
                # Only the latest matters: one event per subscription, kind and URI waits at a time
                # (the URIs are the subscription's own, so the keys are bounded by what the client asked).
                self.callbacks.offer(_deliver, sub, event, key=(sub, kind, uri))

    def close_all(self) -> None:
        with self._lock:
            subs = list(self._open)
        for sub in subs:
            sub.closed = True


def _deliver(sub: Subscription, event: ChangeEvent) -> None:
    """On the callbacks thread."""
    if not sub.closed and sub.on_change is not None:
        sub.on_change(event)


def _method_not_found(error: BaseException | None) -> bool:
    return isinstance(error, RPCError) and error.code == jsonrpc.METHOD_NOT_FOUND


def _failed(exc: BaseException) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_exception(exc)
    return future
