"""The fault matrix: which faults were tried on which transports, and how each came out.

Every test in ``tests/faults`` carries ``@pytest.mark.fault("<name>")`` with a name from
:data:`FAULTS`, and is run per transport: a ``transport`` parameter (one of
:data:`TRANSPORTS`), or ``@pytest.mark.fault("<name>", transport="stdio")`` for a test of one
transport only. At the end of the run the table of faults × transports is printed (and written to
``$MCPCALL_FAULT_MATRIX`` when that is set): ``ok``, ``FAIL``, ``skip``, or ``-`` where the fault
does not apply (a subprocess that ignores SIGTERM has no HTTP counterpart).
``test_matrix.py`` fails when a cell that :data:`APPLIES` names has no test.

Every test here is also held to the root conftest's leak check: no thread, child process or file
descriptor (sockets included) is left behind.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

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
