"""Per-tool call counts, errors and latency percentiles, kept by a :class:`~mcpcall.registry.ToolRegistry`.

Latencies are kept in a bounded window (the last :data:`WINDOW` calls of each
tool), so a long-running worker's memory does not grow with its call count;
counts are since the registry was built.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import field

from ..types._record import record

__all__ = ["WINDOW", "StatsKeeper", "ToolStats"]

#: How many recent latencies of each tool the percentiles are computed over.
WINDOW = 1024


@record
class ToolStats:
    """What one tool's calls came to: ``calls`` (finished), ``errors`` (of them: every failure,
    ``isError`` results included), ``timeouts`` (of the errors), the median and 95th
    percentile latency in milliseconds over the last :data:`WINDOW` calls (None before any),
    and ``retries``: calls sent a second time, in a new session, because the server no longer
    knew the first one's session (HTTP 404: a remote server that restarted; that request
    was not run)."""

    name: str
    server: str
    tool: str
    calls: int = 0
    errors: int = 0
    timeouts: int = 0
    p50_ms: float | None = None
    p95_ms: float | None = None
    last_error: str | None = field(default=None, compare=False)
    retries: int = 0


def _percentile(ordered: list[float], fraction: float) -> float:
    """The value below which ``fraction`` of ``ordered`` lies (nearest rank)."""
    rank = math.ceil(fraction * len(ordered) - 1e-9)  # 0.95 * 20 is 19.000000000000004
    return ordered[min(max(rank, 1), len(ordered)) - 1]


class _Counter:
    __slots__ = ("calls", "errors", "last_error", "latencies", "retries", "server", "timeouts", "tool")

    def __init__(self, server: str, tool: str) -> None:
        self.server = server
        self.tool = tool
        self.calls = 0
        self.errors = 0
        self.timeouts = 0
        self.retries = 0
        self.last_error: str | None = None
        self.latencies: deque[float] = deque(maxlen=WINDOW)


class StatsKeeper:
    """Thread-safe counters by exposed tool name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, _Counter] = {}

    def record(self, name: str, server: str, tool: str, seconds: float | None, error: str | None = None,
               timeout: bool = False, retried: bool = False) -> None:
        """Count one finished call of ``name`` that took ``seconds`` (``error``: what went wrong;
        ``retried``: it was sent again in a new session).

        ``seconds`` is None for a call that was never sent (its server could not be reached):
        it counts, as an error, but gives no latency.
        """
        with self._lock:
            counter = self._counters.get(name)
            if counter is None:
                counter = self._counters[name] = _Counter(server, tool)
            counter.calls += 1
            counter.retries += retried
            if seconds is not None:
                counter.latencies.append(seconds)
            if error is not None:
                counter.errors += 1
                counter.last_error = error
                counter.timeouts += timeout

    def snapshot(self) -> dict[str, ToolStats]:
        """Every tool called so far, by exposed name."""
        with self._lock:
            rows = [(name, c.server, c.tool, c.calls, c.errors, c.timeouts, c.retries, c.last_error, sorted(c.latencies))
                    for name, c in self._counters.items()]
        out = {}
        for name, server, tool, calls, errors, timeouts, retries, last_error, ordered in rows:
            out[name] = ToolStats(
                name=name, server=server, tool=tool, calls=calls, errors=errors, timeouts=timeouts,
                p50_ms=_percentile(ordered, 0.5) * 1000 if ordered else None,
                p95_ms=_percentile(ordered, 0.95) * 1000 if ordered else None,
                last_error=last_error, retries=retries,
            )
        return out
