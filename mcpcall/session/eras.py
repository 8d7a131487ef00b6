"""Which protocol era and version a server speaks: probing, handshakes, and what is remembered.

- **legacy** (2024-11-05 … 2025-11-25): the ``initialize`` handshake.
- **modern** (2026-07-28): no handshake; ``server/discover`` tells versions,
  capabilities and identity, and every request carries its own ``_meta``.

With ``protocol="auto"`` the client probes with ``server/discover``: a result,
or a -32022 naming a modern version, means modern; any other error or silence
within the probe's share of the time means legacy, and ``initialize`` follows;
over HTTP with ``transport="auto"``, a refused Streamable HTTP endpoint falls
back to the HTTP+SSE transport. What auto found is remembered per server
command (or URL) for the life of the process.

The whole of it — probe, handshake, fallback — runs against one deadline: the
client's ``timeout``. :class:`Negotiator` does the work and returns an
:class:`Agreement`; it holds no session state of its own.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from time import monotonic
from typing import Any, Callable

from ..dispatcher import Dispatcher
from ..errors import HTTPError, ProtocolError, RequestTimeout, RPCError, UnsupportedVersion
from ..jsonrpc import EncodedObject
from ..protocol import (
    LATEST_LEGACY_VERSION,
    LATEST_MODERN_VERSION,
    LEGACY_VERSIONS,
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_SERVER_INFO,
    META_VERSION,
    MODERN_VERSIONS,
)
from ..transports.base import Transport
from ..types import Implementation

__all__ = [
    "DEFAULT_LOG_LEVEL",
    "Agreement",
    "Negotiator",
]

log = logging.getLogger("mcpcall.client")

#: Modern era, ``on_log=`` without ``log_level=``: the level asked in each request's ``_meta``. A
#: legacy client sends no ``logging/setLevel`` then and gets what the server logs by default, which
#: for the SDKs and the demo server is info and above; without a level, a modern server sends nothing.
DEFAULT_LOG_LEVEL = "info"


# Era found per server (argv or URL) by protocol="auto": ("modern"|"legacy", version). Bounded: a
# process that connects to ever new URLs (a token in each query) does not grow without end.
_era_cache: dict[Any, tuple[str, str]] = {}
_ERA_CACHE_SIZE = 256


@dataclass
class Agreement:
    """What the server and the client agreed on."""

    era: str
    version: str
    supported_versions: list[str]
    capabilities: dict[str, Any] = field(default_factory=dict)
    server_info: Implementation | None = None
    instructions: str | None = None


class _Budget:
    """The connect deadline, and what each step of it got (for the message when it runs out)."""

    def __init__(self, name: str, timeout: float, deadline: float | None = None,
                 note: Callable[[], str | None] | None = None) -> None:
        self.name = name
        self.note = note  # what the server wrote instead of answering (stdio: lines that are not JSON-RPC)
        self.timeout = timeout
        if deadline is None:
            deadline = monotonic() + timeout if timeout != math.inf else math.inf
        self.deadline = deadline
        self.steps: list[str] = []

    def remaining(self, step: str) -> float:
        left = self.deadline - monotonic()
        if left <= 0:
            raise self.exhausted(step)
        return left

    def exhausted(self, step: str, timed_out: RequestTimeout | None = None) -> RequestTimeout:
        """The deadline passed at ``step``; ``timed_out``: how the request of that step timed out (its note: HTTP, a
        connect of that request that had not finished)."""
        tried = f" ({'; '.join(self.steps)})" if self.steps else ""
        note = (self.note() if self.note is not None else None) or (timed_out.note if timed_out is not None else None)
        return RequestTimeout(
            f"server {self.name!r} did not finish connecting within {self.timeout:g} s: no answer to {step}{tried}"
            + (f"; {note}" if note else ""),
            method=step,
            timeout=self.timeout,
            note=note or "",
        )


class Negotiator:
    """Agrees on an era and version with the server behind ``dispatcher``."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        protocol: str,
        probe_timeout: float,
        client_info: Implementation,
        capabilities: Mapping[str, Any],
        log_level: str | None,
        switch_transport: Callable[[Transport, float], None],
        default_log_level: str | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.name = dispatcher.name
        self.protocol = protocol
        self.probe_timeout = probe_timeout
        self.client_info = client_info
        self.capabilities = dict(capabilities)
        self.log_level = log_level
        #: Modern era, no ``log_level`` asked: the level each request still asks for (``on_log`` given:
        #: :data:`DEFAULT_LOG_LEVEL`), as a legacy server logs at its own default without ``logging/setLevel``.
        self.default_log_level = default_log_level
        self._switch_transport = switch_transport

    @property
    def transport(self) -> Transport:
        return self.dispatcher.transport

    def request_meta(self, version: str) -> dict[str, Any]:
        """The ``_meta`` every modern request carries (built once per version and level, not per request).

        Encoded once, too (an :class:`~mcpcall.jsonrpc.EncodedObject`): each request writes its text as it is.

        The log level: the one asked (``log_level=``, :meth:`set_logging_level`), else the
        default (``on_log=`` alone), else none: the server then sends no log messages at all
        (the spec: it MUST NOT without the field).
        """
        meta: dict[str, Any] = {
            META_VERSION: version,
            META_CAPABILITIES: self.capabilities,
            META_CLIENT_INFO: self.client_info.to_wire(),
        }
        level = self.log_level or self.default_log_level
        if level:
            meta[META_LOG_LEVEL] = level
        try:
            return EncodedObject(meta)
        except (TypeError, ValueError, RecursionError):  # not JSON (a capability's value): each send says so, as before
            return meta

    # -- the whole negotiation ------------------------------------------------------

    def negotiate(self, timeout: float, deadline: float | None = None) -> Agreement:
        """Find the era and version, within ``timeout`` seconds in all (or by ``deadline``, a monotonic time)."""
        budget = _Budget(self.name, timeout, deadline, note=lambda: self.transport.skipped_note())
        protocol = self.protocol
        if protocol in LEGACY_VERSIONS:
            return self._initialize(protocol, budget)
        if protocol == "legacy":
            return self._initialize(LATEST_LEGACY_VERSION, budget)
        if protocol in MODERN_VERSIONS:
            return self._discover_or_fail(protocol, budget)
        if protocol == "modern":
            return self._discover_or_fail(LATEST_MODERN_VERSION, budget)
        if self.transport.legacy_only:
            return self._initialize(LATEST_LEGACY_VERSION, budget)
        key = self.transport.era_cache_key
        cached = _era_cache.get(key) if key is not None else None
        if cached is not None:
            era, version = cached
            try:
                if era == "modern":
                    return self._discover_or_fail(version, budget)
                return self._initialize(version, budget)
            except (RPCError, ProtocolError, HTTPError) as exc:
                log.info("server %r no longer speaks %s %s (%s); probing again", self.name, era, version, str(exc))
                _era_cache.pop(key, None)
        probed = monotonic()
        found = self._discover(LATEST_MODERN_VERSION, budget, probe=True)
        if found is not None:
            return found
        try:
            agreement = self._initialize(LATEST_LEGACY_VERSION, budget)
            # What a legacy server logged about the probe is noise that would bury its later last words.
            self.transport.quiet_since(probed)
            return agreement
        except UnsupportedVersion as exc:
            # A modern server slow to start: it took the probe after the probe's time ran out, so its
            # connection now serves the modern era and it refuses initialize. Speak what it says it speaks.
            legacy = [v for v in LEGACY_VERSIONS if v in exc.supported]
            if legacy:
                return self._initialize(legacy[0], budget)
            modern = [v for v in MODERN_VERSIONS if v in exc.supported] or [LATEST_MODERN_VERSION]
            budget.steps.append(f"initialize: {exc}")
            log.info("server %r refused initialize after a late probe (%s); speaking %s", self.name, str(exc), modern[0])
            return self._discover_or_fail(modern[0], budget)
        except HTTPError as exc:
            # Streamable HTTP refused (400/404/405): maybe the 2024-11-05 HTTP+SSE transport.
            fallback = self.transport.fallback()
            if exc.status not in (400, 404, 405) or fallback is None:
                raise
            log.info("server %r refused Streamable HTTP (%s); trying the HTTP+SSE transport", self.name, str(exc))
            budget.steps.append(f"Streamable HTTP got HTTP {exc.status}")
            try:
                self._switch_transport(fallback, budget.remaining("the HTTP+SSE stream"))
                return self._initialize(LATEST_LEGACY_VERSION, budget)
            except HTTPError as second:
                url = getattr(self.transport, "display_url", "the URL")
                raise HTTPError(
                    f"{url} does not look like an MCP endpoint: Streamable HTTP got HTTP {exc.status}, "
                    f"HTTP+SSE got HTTP {second.status} (check the path, often /mcp or /sse)",
                    status=second.status,
                    body=second.body,
                ) from second

    def _discover_or_fail(self, version: str, budget: _Budget) -> Agreement:
        found = self._discover(version, budget, probe=False)
        assert found is not None  # not probing: it raises instead
        return found

    def _discover(self, version: str, budget: _Budget, *, probe: bool) -> Agreement | None:
        """Call server/discover at ``version``; a modern answer is adopted.

        When probing, a non-modern error or silence returns None (a legacy server).
        """
        attempts = 0
        while True:
            attempts += 1
            left = budget.remaining("server/discover")
            # A probe leaves at least half the time to initialize, for legacy servers that ignore it.
            timeout = min(self.probe_timeout, left / 2) if probe else left
            params = {"_meta": self.request_meta(version)}
            future = self.dispatcher.request("server/discover", params, timeout, cancel_on_timeout=not probe)
            try:
                result = future.result()
            except UnsupportedVersion as exc:
                modern = [v for v in MODERN_VERSIONS if v in exc.supported]
                if modern and attempts < 3:
                    version = modern[0]
                    continue
                legacy = [v for v in LEGACY_VERSIONS if v in exc.supported]
                if legacy:
                    return self._initialize(legacy[0], budget)
                raise ProtocolError(
                    f"server {self.name!r} supports protocol versions {list(exc.supported)}, none of which "
                    f"mcpcall speaks ({', '.join(MODERN_VERSIONS + LEGACY_VERSIONS)})"
                ) from exc
            except RequestTimeout as exc:
                if probe:
                    budget.steps.append(f"server/discover: no answer in {timeout:.3g} s")
                    log.debug("server %r did not answer server/discover within %.3g s; legacy", self.name, timeout)
                    return None
                raise budget.exhausted("server/discover", exc) from exc
            except (RPCError, HTTPError) as exc:
                if probe:
                    budget.steps.append(f"server/discover: {exc}")
                    log.debug("server %r did not answer server/discover as a modern server (%s); legacy", self.name,
                              str(exc))
                    return None
                detail = str(exc)
                named = f"server {self.name!r} "
                if detail.startswith(named):  # "... MCP server: it answered ...", not the name twice
                    detail = "it " + detail[len(named):]
                raise ProtocolError(f"server {self.name!r} is not a modern ({version}) MCP server: {detail}") from exc
            break
        _check_complete(self.name, result, "server/discover")
        supported = result.get("supportedVersions")
        supported = [v for v in supported if isinstance(v, str)] if isinstance(supported, list) else []
        if probe and not supported:
            # Not a DiscoverResult: some legacy servers answer any method with an empty result.
            budget.steps.append("server/discover: a result without supportedVersions")
            log.debug("server %r answered server/discover without supportedVersions; legacy", self.name)
            return None
        if supported and version not in supported:
            common = [v for v in MODERN_VERSIONS if v in supported]
            if common:
                version = common[0]
            elif probe:
                legacy = [v for v in LEGACY_VERSIONS if v in supported]
                if legacy:
                    return self._initialize(legacy[0], budget)
                return None
            else:
                raise ProtocolError(f"server {self.name!r} supports only {supported}; mcpcall speaks {version}")
        return self._adopt_modern(version, result, supported)

    def _adopt_modern(self, version: str, result: dict[str, Any], supported: list[str]) -> Agreement:
        caps = result.get("capabilities")
        meta = result.get("_meta")
        info = meta.get(META_SERVER_INFO) if isinstance(meta, dict) else None
        if info is None:
            info = result.get("serverInfo")
        instructions = result.get("instructions")
        self.transport.negotiated("modern", version)
        self._remember("modern", version)
        return Agreement(
            era="modern",
            version=version,
            supported_versions=supported or [version],
            capabilities=caps if isinstance(caps, dict) else {},
            server_info=Implementation.from_wire(info) if isinstance(info, dict) else None,
            instructions=instructions if isinstance(instructions, str) else None,
        )

    # -- legacy ------------------------------------------------------------------------

    def initialize(self, version: str, timeout: float) -> Agreement:
        """The ``initialize`` handshake at ``version`` (also: a new legacy HTTP session)."""
        return self._initialize(version, _Budget(self.name, timeout))

    def _initialize(self, version: str, budget: _Budget) -> Agreement:
        params = {
            "protocolVersion": version,
            "capabilities": self.capabilities,
            "clientInfo": self.client_info.to_wire(),
        }
        timeout = budget.remaining("initialize")
        future = self.dispatcher.request("initialize", params, timeout, cancel_on_timeout=False)
        try:
            result = future.result()
        except RequestTimeout as exc:
            raise budget.exhausted("initialize", exc) from exc
        _check_complete(self.name, result, "initialize")
        chosen = result.get("protocolVersion")
        if chosen not in LEGACY_VERSIONS:
            raise ProtocolError(
                f"server {self.name!r} answered initialize with protocol version {chosen!r}, which mcpcall "
                f"does not speak (it speaks {', '.join(LEGACY_VERSIONS)})"
            )
        caps = result.get("capabilities")
        capabilities = caps if isinstance(caps, dict) else {}
        instructions = result.get("instructions")
        self.transport.negotiated("legacy", chosen)
        self.dispatcher.notify("notifications/initialized", timeout=budget.remaining("notifications/initialized"))
        if self.log_level and "logging" in capabilities:
            # Not waited for: the server's answer changes nothing here.
            self.dispatcher.request("logging/setLevel", {"level": self.log_level}, budget.remaining("logging/setLevel"))
        self._remember("legacy", chosen)
        return Agreement(
            era="legacy",
            version=chosen,
            supported_versions=[chosen],
            capabilities=capabilities,
            server_info=Implementation.from_wire(result.get("serverInfo")),
            instructions=instructions if isinstance(instructions, str) else None,
        )

    def _remember(self, era: str, version: str) -> None:
        if self.protocol != "auto":
            return  # a forced era says nothing about what the server would choose
        key = self.transport.era_cache_key
        if key is not None:
            _era_cache.pop(key, None)
            while len(_era_cache) >= _ERA_CACHE_SIZE:
                _era_cache.pop(next(iter(_era_cache)), None)  # the oldest
            _era_cache[key] = (era, version)


def _check_complete(name: str, result: dict[str, Any], method: str) -> None:
    kind = result.get("resultType", "complete")
    if kind != "complete":
        raise ProtocolError(f"server {name!r} answered {method} with resultType {kind!r}")
