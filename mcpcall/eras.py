"""Which protocol era and version a server speaks: probing, handshakes, and what is remembered.

- **legacy** (2024-11-05 … 2025-11-25): the ``initialize`` handshake.
- **modern** (2026-07-28): no handshake; ``server/discover`` tells versions,
  capabilities and identity, and every request carries its own ``_meta``.

With ``protocol="auto"`` the client probes with ``server/discover``: a result,
or a -32022 naming a modern version, means modern; any other error or silence
within ``probe_timeout`` means legacy, and ``initialize`` follows; over HTTP, a
refused Streamable HTTP endpoint falls back to the HTTP+SSE transport. What
auto found is remembered per server command (or URL) for the life of the process.

:class:`EraNegotiation` is the part of :class:`mcpcall.Client` that does this.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from typing import Any

from .dispatcher import Dispatcher
from .errors import HTTPError, ProtocolError, RequestTimeout, RPCError, UnsupportedVersion
from .transports.base import Transport
from .types import Implementation

__all__ = [
    "LATEST_LEGACY_VERSION",
    "LATEST_MODERN_VERSION",
    "LEGACY_VERSIONS",
    "MODERN_VERSIONS",
    "EraNegotiation",
]

log = logging.getLogger("mcpcall.client")

LEGACY_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
LATEST_LEGACY_VERSION = LEGACY_VERSIONS[0]
LATEST_MODERN_VERSION = MODERN_VERSIONS[0]

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

# Era found per server (argv or URL) by protocol="auto": ("modern"|"legacy", version).
_era_cache: dict[Any, tuple[str, str]] = {}


class EraNegotiation:
    """Agreeing on an era and version with the server (mixed into the Client)."""

    # What the Client provides.
    transport: Transport
    dispatcher: Dispatcher
    name: str
    timeout: float
    protocol: str
    probe_timeout: float
    log_level: str | None
    client_info: Implementation
    _client_capabilities: dict[str, Any]
    _session_lock: threading.Lock

    # What negotiation finds out.
    era: str | None
    protocol_version: str | None
    server_info: Implementation | None
    capabilities: dict[str, Any]
    instructions: str | None
    supported_versions: list[str]
    _meta: dict[str, Any]

    def request(self, method: str, params: dict[str, Any] | None = None, timeout: float | None = None) -> Future[dict[str, Any]]:
        raise NotImplementedError  # provided by the Client

    def _cache_key(self) -> Any:
        return getattr(self.transport, "era_cache_key", None)

    def _negotiate(self) -> None:
        protocol = self.protocol
        if protocol in LEGACY_VERSIONS:
            self._initialize(protocol)
            return
        if protocol == "legacy":
            self._initialize(LATEST_LEGACY_VERSION)
            return
        if protocol in MODERN_VERSIONS:
            self._discover(protocol, probe=False)
            return
        if protocol == "modern":
            self._discover(LATEST_MODERN_VERSION, probe=False)
            return
        if getattr(self.transport, "legacy_only", False):
            self._initialize(LATEST_LEGACY_VERSION)
            return
        key = self._cache_key()
        cached = _era_cache.get(key) if key is not None else None
        if cached is not None:
            era, version = cached
            try:
                if era == "modern":
                    self._discover(version, probe=False)
                else:
                    self._initialize(version)
                return
            except (RPCError, ProtocolError, RequestTimeout, HTTPError):
                log.info("server %r no longer speaks %s %s; probing again", self.name, era, version)
                _era_cache.pop(key, None)
        if self._discover(LATEST_MODERN_VERSION, probe=True):
            return
        try:
            self._initialize(LATEST_LEGACY_VERSION)
        except HTTPError as exc:
            # Streamable HTTP refused (400/404/405): maybe the 2024-11-05 HTTP+SSE transport.
            fallback = getattr(self.transport, "fallback", None)
            if exc.status not in (400, 404, 405) or fallback is None:
                raise
            log.info("server %r refused Streamable HTTP (%s); trying the HTTP+SSE transport", self.name, exc)
            try:
                self._switch_transport(fallback())
                self._initialize(LATEST_LEGACY_VERSION)
            except HTTPError as second:
                url = getattr(self.transport, "url", "")
                raise HTTPError(
                    f"{url} does not look like an MCP endpoint: Streamable HTTP got HTTP {exc.status}, "
                    f"HTTP+SSE got HTTP {second.status} (check the path, often /mcp or /sse)",
                    status=second.status,
                    body=second.body,
                ) from second

    def _switch_transport(self, transport: Transport) -> None:
        self.transport.close()
        self.transport = transport
        self.dispatcher.transport = transport
        transport.start(self.dispatcher)

    def _discover(self, version: str, *, probe: bool) -> bool:
        """Call server/discover at ``version``; on a modern answer adopt it and return True.

        When probing, a non-modern error or silence returns False (legacy server).
        """
        attempts = 0
        while True:
            attempts += 1
            timeout = min(self.probe_timeout, self.timeout) if probe else self.timeout
            params = {"_meta": self._request_meta(version)}
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
                    self._initialize(legacy[0])
                    return True
                raise ProtocolError(
                    f"server {self.name!r} supports protocol versions {list(exc.supported)}, none of which "
                    f"mcpcall speaks ({', '.join(MODERN_VERSIONS + LEGACY_VERSIONS)})"
                ) from exc
            except (RPCError, RequestTimeout, HTTPError) as exc:
                if probe:
                    log.debug("server %r did not answer server/discover as a modern server (%s); legacy", self.name, exc)
                    return False
                raise ProtocolError(f"server {self.name!r} is not a modern ({version}) MCP server: {exc}") from exc
            break
        self._check_result_type(result, "server/discover")
        supported = result.get("supportedVersions")
        supported = [v for v in supported if isinstance(v, str)] if isinstance(supported, list) else []
        if probe and not supported:
            # Not a DiscoverResult: some legacy servers answer any method with an empty result.
            log.debug("server %r answered server/discover without supportedVersions; legacy", self.name)
            return False
        if supported and version not in supported:
            common = [v for v in MODERN_VERSIONS if v in supported]
            if common:
                version = common[0]
            elif probe:
                legacy = [v for v in LEGACY_VERSIONS if v in supported]
                if legacy:
                    self._initialize(legacy[0])
                    return True
                return False
            else:
                raise ProtocolError(f"server {self.name!r} supports only {supported}; mcpcall speaks {version}")
        self._adopt_modern(version, result, supported)
        return True

    def _adopt_modern(self, version: str, result: dict[str, Any], supported: list[str]) -> None:
        self.era = "modern"
        self.protocol_version = version
        self.supported_versions = supported or [version]
        caps = result.get("capabilities")
        self.capabilities = caps if isinstance(caps, dict) else {}
        meta = result.get("_meta")
        info = meta.get(META_SERVER_INFO) if isinstance(meta, dict) else None
        if info is None:
            info = result.get("serverInfo")
        self.server_info = Implementation.from_wire(info) if isinstance(info, dict) else None
        instructions = result.get("instructions")
        self.instructions = instructions if isinstance(instructions, str) else None
        self._meta = self._request_meta(version)
        self.transport.negotiated("modern", version)
        self._remember("modern", version)

    def _request_meta(self, version: str) -> dict[str, Any]:
        meta: dict[str, Any] = {
            META_VERSION: version,
            META_CAPABILITIES: self._client_capabilities,
            META_CLIENT_INFO: self.client_info.to_wire(),
        }
        if self.log_level:
            meta[META_LOG_LEVEL] = self.log_level
        return meta

    def _initialize(self, version: str) -> None:
        params = {
            "protocolVersion": version,
            "capabilities": self._client_capabilities,
            "clientInfo": self.client_info.to_wire(),
        }
        future = self.dispatcher.request("initialize", params, self.timeout, cancel_on_timeout=False)
        result = future.result()
        chosen = result.get("protocolVersion")
        if chosen not in LEGACY_VERSIONS:
            raise ProtocolError(
                f"server {self.name!r} answered initialize with protocol version {chosen!r}, which mcpcall "
                f"does not speak (it speaks {', '.join(LEGACY_VERSIONS)})"
            )
        self.era = "legacy"
        self.protocol_version = chosen
        self.supported_versions = [chosen]
        caps = result.get("capabilities")
        self.capabilities = caps if isinstance(caps, dict) else {}
        self.server_info = Implementation.from_wire(result.get("serverInfo"))
        instructions = result.get("instructions")
        self.instructions = instructions if isinstance(instructions, str) else None
        self.transport.negotiated("legacy", chosen)
        self.dispatcher.notify("notifications/initialized")
        if self.log_level and "logging" in self.capabilities:
            self.request("logging/setLevel", {"level": self.log_level})
        self._remember("legacy", chosen)

    def _new_session(self) -> None:
        """The server dropped our (legacy HTTP) session: initialize again, once, for everyone."""
        with self._session_lock:
            if self.transport.session_lost and self.protocol_version is not None:
                log.info("server %r: starting a new session", self.name)
                self._initialize(self.protocol_version)

    def _remember(self, era: str, version: str) -> None:
        if self.protocol != "auto":
            return  # a forced era says nothing about what the server would choose
        key = self._cache_key()
        if key is not None:
            _era_cache[key] = (era, version)

    def _check_result_type(self, result: dict[str, Any], method: str) -> None:
        kind = result.get("resultType", "complete")
        if kind != "complete":
            raise ProtocolError(f"server {self.name!r} answered {method} with resultType {kind!r}")
