"""The fault matrix: which faults were tried on which transports, and how each came out.

Every test in ``tests/faults`` carries ``@pytest.mark.fault("<name>")`` with a name from
:data:`FAULTS`, and is run per transport: a ``transport`` parameter (one of
:data:`TRANSPORTS`), or ``@pytest.mark.fault("<name>", transport="stdio")`` for a test of one
transport only. At the end of the run the table of faults × transports is printed (and written to
``$MCPCALL_FAULT_MATRIX`` when that is set): ``ok``, ``FAIL``, ``skip``, or ``-`` where the fault
does not apply (a subprocess that ignores SIGTERM has no HTTP counterpart).
``test_matrix.py`` fails when a cell that :data:`APPLIES` names has no test.

Every cell is held to the same expectations, applied by :class:`Expect` (one place, so that every
test applies them the same way):

1. the call returns or fails within its deadline plus :data:`MARGIN`, never hangs (:meth:`Expect.returns`,
   :meth:`Expect.fails`);
2. a failure raises the documented error type, with a message naming the server and the cause
   (:meth:`Expect.fails`);
3. afterwards the client is usable where the protocol allows (:meth:`Expect.usable`: a next call
   succeeds) or says it is closed (:meth:`Expect.closed`: a next call fails at once with
   ``ConnectionClosed``);
4. no thread, child process or file descriptor (sockets included) is left: the root conftest's leak
   check, which no test here may opt out of (``allow_leaks`` is refused at collection);
5. floods: what waits for a slow user callback is bounded (:meth:`Expect.bounded`, with a
   :class:`SlowCallback` that records how much waited each time it ran).
"""

from __future__ import annotations

import os
import re
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple, Type

import pytest

import mcpcall

STDIO = "stdio"
HTTP_LEGACY_JSON = "http-legacy-json"
HTTP_LEGACY_SSE = "http-legacy-sse"
HTTP_MODERN_JSON = "http-modern-json"
HTTP_MODERN_SSE = "http-modern-sse"
HTTPSSE = "http+sse"

#: Every transport and era the client speaks, as the matrix's columns.
TRANSPORTS: Tuple[str, ...] = (STDIO, HTTP_LEGACY_JSON, HTTP_LEGACY_SSE, HTTP_MODERN_JSON, HTTP_MODERN_SSE, HTTPSSE)
HTTP_ALL: Tuple[str, ...] = TRANSPORTS[1:]
STREAMABLE: Tuple[str, ...] = (HTTP_LEGACY_JSON, HTTP_LEGACY_SSE, HTTP_MODERN_JSON, HTTP_MODERN_SSE)
#: The transports that carry server messages as SSE events (a reply stream or the HTTP+SSE stream).
SSE_STREAMS: Tuple[str, ...] = (HTTP_LEGACY_SSE, HTTP_MODERN_SSE, HTTPSSE)

#: The faults, as the matrix's rows, each with the transports it applies to.
APPLIES: Dict[str, Tuple[str, ...]] = {
    # -- any transport -----------------------------------------------------------------------------
    "never answers": TRANSPORTS,
    "answers late": TRANSPORTS,
    "answers twice": TRANSPORTS,
    "answers an unknown id": TRANSPORTS,
    "answers out of order": TRANSPORTS,
    "garbage / non-JSON-RPC messages": TRANSPORTS,
    "truncated message": TRANSPORTS,
    "message over the size limit": TRANSPORTS,
    "progress flood, slow callback": TRANSPORTS,
    "log flood, slow callback": TRANSPORTS,
    "list_changed flood, slow callback": TRANSPORTS,
    # -- a subprocess --------------------------------------------------------------------------------
    "exits at start (stderr message)": (STDIO,),
    "dies mid-call": (STDIO,),
    "closes stdout, keeps running": (STDIO,),
    "stops reading stdin": (STDIO,),
    "floods stderr": (STDIO,),
    "ignores SIGTERM": (STDIO,),
    "leaves grandchildren": (STDIO,),
    # -- HTTP ----------------------------------------------------------------------------------------
    "HTTP 5xx": HTTP_ALL,
    "HTTP 401": HTTP_ALL,
    "HTTP 404 session expiry": (HTTP_LEGACY_JSON, HTTP_LEGACY_SSE, HTTPSSE),
    "connection reset mid-stream": HTTP_ALL,
    "stream that never ends": SSE_STREAMS,
    "slow drip": HTTP_ALL,
    "invalid SSE": SSE_STREAMS,
    "redirect to another origin": HTTP_ALL,
    "endpoint on another origin": (HTTPSSE,),
    "host stops accepting connections": HTTP_ALL,
    "slow TLS handshake": HTTP_ALL,
}
FAULTS: Tuple[str, ...] = tuple(APPLIES)

#: How far past its deadline a call may return or fail (thread wake-ups, a loaded machine): an upper
#: bound that shows a hang, not a speed measurement.
MARGIN = 2.0

_results: Dict[Tuple[str, str], str] = {}


def cell(item: pytest.Item) -> Optional[Tuple[str, str]]:
    """The (fault, transport) a test item stands for, or ``None`` for a test outside the matrix."""
    marker = item.get_closest_marker("fault")
    if marker is None:
        return None
    fault = marker.args[0]
    transport = marker.kwargs.get("transport")
    callspec = getattr(item, "callspec", None)
    if transport is None and callspec is not None:
        transport = callspec.params.get("transport")
    if transport is None:
        raise pytest.UsageError(f"{item.nodeid}: a fault test needs a transport (parameter or marker keyword)")
    return fault, transport


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fault(name, transport=None): a cell of the fault matrix (tests/faults)")


#: The cells of tests that were collected but not selected (``-k``, ``-m``, ``--deselect``): they exist.
DESELECTED: Set[Tuple[str, str]] = set()


def pytest_deselected(items: List[pytest.Item]) -> None:
    DESELECTED.update(found for found in (cell(item) for item in items) if found is not None)


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    for item in items:
        found = cell(item)
        if found is None:
            continue
        fault, transport = found
        if fault not in APPLIES:
            raise pytest.UsageError(f"{item.nodeid}: unknown fault {fault!r} (add it to APPLIES in tests/faults/conftest.py)")
        if transport not in APPLIES[fault]:
            raise pytest.UsageError(f"{item.nodeid}: fault {fault!r} does not apply to {transport!r}")
        if item.get_closest_marker("allow_leaks") is not None:
            raise pytest.UsageError(f"{item.nodeid}: a cell of the fault matrix is always checked for leaks "
                                    "(no allow_leaks)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:  # type: ignore[type-arg]
    outcome = yield
    report = outcome.get_result()
    found = cell(item)
    if found is None:
        return
    # A cell is the worst of its tests and of their phases: one failure anywhere is FAIL.
    if report.failed:
        state = "FAIL"
    elif report.skipped:
        state = "skip"
    elif report.when == "call":
        state = "ok"
    else:
        return
    previous = _results.get(found)
    if previous == "FAIL" or (previous == "skip" and state == "ok"):
        return
    _results[found] = state


def matrix_text() -> str:
    """The table of faults × transports, as far as this run went."""
    width = max(len(f) for f in FAULTS)
    columns = [max(len(t), 4) for t in TRANSPORTS]
    lines = [" " * width + " | " + " | ".join(t.ljust(w) for t, w in zip(TRANSPORTS, columns))]
    lines.append("-" * len(lines[0]))
    for fault in FAULTS:
        row = []
        for transport, w in zip(TRANSPORTS, columns):
            if transport not in APPLIES[fault]:
                text = "-"
            else:
                text = _results.get((fault, transport), "")
            row.append(text.ljust(w))
        lines.append(fault.ljust(width) + " | " + " | ".join(row))
    passed = sum(1 for v in _results.values() if v == "ok")
    failed = sum(1 for v in _results.values() if v == "FAIL")
    applicable = sum(len(v) for v in APPLIES.values())
    lines.append(f"{passed} ok, {failed} failed, {len(_results)} run of {applicable} applicable cells")
    return "\n".join(lines)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _results:
        return
    text = matrix_text()
    terminalreporter.write_sep("=", "fault matrix (tests/faults)")
    terminalreporter.write_line(text)
    path = os.environ.get("MCPCALL_FAULT_MATRIX")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")


@contextmanager
def within(seconds: float, what: str = "the call") -> Iterator[None]:
    """Fail unless the block ends (returns or raises) within ``seconds`` plus :data:`MARGIN`."""
    started = time.monotonic()
    try:
        yield
    finally:
        took = time.monotonic() - started
        if took > seconds + MARGIN:
            pytest.fail(f"{what} took {took:.2f} s, past its deadline of {seconds:g} s (+{MARGIN:g} s margin)")


class SlowCallback:
    """A user's callback that takes ``seconds`` each time it runs (progress, on_log, on_change, a listener).

    It records its arguments and, each time it runs, how many entries wait on the client's callbacks
    thread (:meth:`watch` names the client): what a flood has queued behind it.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.calls: List[Tuple[Any, ...]] = []
        self.waiting: List[int] = []
        self._queued: Callable[[], int] = lambda: 0
        self._lock = threading.Lock()

    def watch(self, client: mcpcall.Client, waiting: Optional[Callable[[], int]] = None) -> None:
        """Count what waits on ``client``'s callbacks thread (or what ``waiting()`` says waits for this callback)."""
        self._queued = waiting if waiting is not None else client.callbacks.queued

    def __call__(self, *args: Any) -> None:
        with self._lock:
            self.calls.append(args)
            self.waiting.append(self._queued())
        time.sleep(self.seconds)


class Expect:
    """The expectations of every cell (see the module's docstring), for the client named ``server``."""

    def __init__(self, server: str) -> None:
        self.server = server

    def returns(self, action: Callable[[], Any], *, deadline: float, what: str = "the call") -> Any:
        """1: ``action()`` returns within ``deadline`` (+ MARGIN); its value."""
        with within(deadline, what):
            return action()

    def fails(self, action: Callable[[], Any], error: Type[BaseException], *, deadline: float, cause: str,
              what: str = "the call") -> BaseException:
        """1 and 2: ``action()`` fails within ``deadline`` (+ MARGIN) with ``error`` (exactly that type or a
        subclass), whose message names the server and matches ``cause`` (a regular expression)."""
        with within(deadline, what):
            try:
                action()
            except BaseException as exc:  # noqa: BLE001 - judged below
                raised: Optional[BaseException] = exc
            else:
                raised = None
        if raised is None:
            pytest.fail(f"{what} returned; expected {error.__name__} ({cause})")
        assert isinstance(raised, error), f"{what} raised {type(raised).__name__}, not {error.__name__}: {raised}"
        text = str(raised)
        assert repr(self.server) in text, f"the error does not name server {self.server!r}: {text}"
        assert re.search(cause, text), f"the error does not give the cause ({cause}): {text}"
        return raised

    def usable(self, client: mcpcall.Client, *, deadline: float = 5.0, call: Optional[Callable[[], Any]] = None) -> None:
        """3: the client goes on: a next call (default: ``echo``, checked) succeeds within its deadline."""
        if call is None:
            result = self.returns(lambda: client.call_tool("echo", {"message": "next"}, timeout=deadline),
                                  deadline=deadline, what="the next call")
            assert result.text == "next", f"the next call got {result.text!r}, not its own answer"
        else:
            self.returns(call, deadline=deadline, what="the next call")
        assert not client.closed

    def closed(self, client: mcpcall.Client) -> None:
        """3: the client says it is closed: a next call fails at once with ConnectionClosed naming the server."""
        self.fails(lambda: client.call_tool("echo", {"message": "next"}, timeout=30), mcpcall.ConnectionClosed,
                   deadline=0.0, cause=".", what="a call after the connection ended")

    def bounded(self, callback: SlowCallback, *, flood: int, most_waiting: int, most_runs: int) -> None:
        """5: a flood of ``flood`` messages behind ``callback``: at most ``most_waiting`` entries ever waited
        for it, and it ran at most ``most_runs`` times (what it missed was coalesced or dropped, not queued)."""
        assert callback.calls, "the callback never ran"
        assert max(callback.waiting) <= most_waiting, (
            f"up to {max(callback.waiting)} entries waited for a slow callback (a flood of {flood}); at most "
            f"{most_waiting} may")
        assert len(callback.calls) <= most_runs, (
            f"a slow callback ran {len(callback.calls)} times for a flood of {flood}: what waits for it is not bounded")
