"""Facts of the MCP specification that more than one layer needs: protocol versions and ``_meta`` keys.

One place, so the client, the transports and the demo server never disagree on
a version string or a key.
"""

from __future__ import annotations

__all__ = [
    "LATEST_LEGACY_VERSION",
    "LATEST_MODERN_VERSION",
    "LEGACY_VERSIONS",
    "META_CAPABILITIES",
    "META_CLIENT_INFO",
    "META_LOG_LEVEL",
    "META_SERVER_INFO",
    "META_SUBSCRIPTION_ID",
    "META_VERSION",
    "MODERN_VERSIONS",
    "TASKS_EXTENSION",
]

#: Versions of the legacy era (the ``initialize`` handshake), newest first.
LEGACY_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
#: Versions of the modern era (stateless, ``server/discover``), newest first.
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
LATEST_LEGACY_VERSION = LEGACY_VERSIONS[0]
LATEST_MODERN_VERSION = MODERN_VERSIONS[0]

# Keys of a modern-era request's ``_meta`` (and of the result's, for the server's info).
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"

#: The tasks extension (2026-07-28): a tools/call may be answered with a task handle.
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
