"""protocol="modern" against a legacy-only server: the error names the server once and says what it answered.

Seen with mcp 1.x FastMCP and the TypeScript SDK's example servers:
"server 'f1' is not a modern (2026-07-28) MCP server: server 'f1' answered to
server/discover with error -32602: Invalid request parameters".
"""

from __future__ import annotations


import pytest

import mcpcall
from tests.servers.http_fault_server import FaultServer


@pytest.fixture
def server(server: FaultServer) -> FaultServer:
    server.modern = False  # a legacy-only server: server/discover is -32601
    return server


def test_modern_refused_names_the_server_once(server: FaultServer) -> None:
    with pytest.raises(mcpcall.ProtocolError) as info:
        mcpcall.connect(server.url, name="fault", timeout=10, protocol="modern")
    message = str(info.value)
    assert message.startswith(f"server 'fault' is not a modern ({mcpcall.LATEST_MODERN_VERSION}) MCP server: it answered")
    assert message.count("'fault'") == 1, message
    assert "server/discover" in message
