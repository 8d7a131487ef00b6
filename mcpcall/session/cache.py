"""Modern-era response caching: results kept for as long as the server's ``ttlMs`` says.

Cacheable are the complete results of ``server/discover``, the list methods
(each page on its own, keyed by its cursor) and ``resources/read`` (keyed by
URI). A result is kept only when ``ttlMs`` is positive; one built on input
responses (a later round of a multi round-trip request) is never kept; a
change notification drops what it concerns. The cache belongs to one client,
and so to one authorization context: ``cacheScope`` "private" and "public"
are both safe to keep here. ``cache=False`` on connect or per call opts out.
"""

from __future__ import annotations

import json
import threading
from time import monotonic
from typing import Any

from ..jsonrpc import copy_json
from ..schema import deeper_than

__all__ = ["CACHEABLE", "ResultCache"]

#: Methods whose complete results carry caching hints.
CACHEABLE = frozenset({
    "server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read",
})
_MAX_ENTRIES = 1024
_MAX_TTL_SECONDS = 24 * 3600.0  # a hint of years is taken as a day
_MAX_DEPTH = 100  # a result nested deeper is not kept (copying it would recurse that deep)


def _key(method: str, params: dict[str, Any] | None) -> tuple[str, str]:
    """The method and the params that affect the result (``_meta`` does not)."""
    if not params:
        return method, ""
    relevant = {k: v for k, v in params.items() if k != "_meta"}
    try:
        return method, json.dumps(relevant, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return method, repr(sorted(relevant.items()))


class ResultCache:
    """Fresh results by (method, params); thread-safe, bounded."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._entries: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._generations: dict[str, int] = {}  # per method: bumped by every invalidation
        self.hits = 0
        self.misses = 0

    def generation(self, method: str) -> int:
        """Taken before sending: a ``put`` made under an older generation is refused (the result may predate a change)."""
        with self._lock:
            return self._generations.get(method, 0)

    def get(self, method: str, params: dict[str, Any] | None) -> dict[str, Any] | None:
        """The cached result while fresh, else None."""
        if not self.enabled or method not in CACHEABLE:
            return None
        key = _key(method, params)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and monotonic() < entry[0]:
                self.hits += 1
                copied: dict[str, Any] = copy_json(entry[1])
                return copied  # the caller's to change: the cached one stays as the server sent it
            if entry is not None:
                del self._entries[key]
            self.misses += 1
        return None

    def put(self, method: str, params: dict[str, Any] | None, result: dict[str, Any], generation: int | None = None) -> None:
        """Keep ``result`` for its ``ttlMs`` (nothing for 0, absent, negative or an interim result).

        With ``generation`` (from :meth:`generation` before the request went out), nothing is kept
        when the method was invalidated meanwhile: the result may be from before the change.
        """
        if not self.enabled or method not in CACHEABLE or result.get("resultType", "complete") != "complete":
            return
        ttl = result.get("ttlMs")
        if not isinstance(ttl, (int, float)) or isinstance(ttl, bool) or not ttl > 0 or deeper_than(result, _MAX_DEPTH):
            return  # not a positive number (NaN neither)
        # Capped before dividing: an integer past any float would not divide (OverflowError).
        expires = monotonic() + (_MAX_TTL_SECONDS if ttl >= _MAX_TTL_SECONDS * 1000 else ttl / 1000.0)
        key = _key(method, params)
        kept = copy_json(result)
        with self._lock:
            if generation is not None and generation != self._generations.get(method, 0):
                return
            self._entries.pop(key, None)
            while len(self._entries) >= _MAX_ENTRIES:
                self._entries.pop(next(iter(self._entries)))  # the oldest
            self._entries[key] = (expires, kept)

    def invalidate(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Drop what ``method`` (with ``params``; None: every page and URI of it) has cached."""
        with self._lock:
            self._generations[method] = self._generations.get(method, 0) + 1
            if params is None:
                for key in [k for k in self._entries if k[0] == method]:
                    del self._entries[key]
            else:
                self._entries.pop(_key(method, params), None)

    def clear(self) -> None:
        """Drop everything (a new session, a reconnect)."""
        with self._lock:
            self._entries.clear()
