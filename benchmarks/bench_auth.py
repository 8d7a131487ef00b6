"""What OAuth costs per request: mcpcall calling a tool over HTTP with ``OAuth`` (token in memory or in
a file), with a static bearer token, and a bare ``requests`` loop sending the same token, in the same run.

The server is the repository's test authorization server and protected MCP endpoint
(tests/servers/oauth_server.py, a threaded stdlib server on 127.0.0.1, in this process), so
the absolute figures include its cost; the ratios say what the OAuth object adds on the
caller's side: looking the token up (and, in a file store, reading the file under its lock),
checking its expiry and attaching it. Sign-in happens once, before timing. Rounds are
interleaved and the best round of each is kept.

    python benchmarks/bench_auth.py [--rounds 5] [--seconds 1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import requests
from common import run_sequential

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mcpcall  # noqa: E402
from tests.servers.oauth_server import OAuthServer  # noqa: E402

CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}


def follow(url: str) -> str:
    """The browser step: the test server approves at once and redirects back."""
    return str(requests.get(url, allow_redirects=False, timeout=5).headers["Location"])


def per_call(call: Callable[[], Any], seconds: float) -> float:
    calls, elapsed, _ = run_sequential(call, seconds)
    return elapsed / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    with OAuthServer() as server, tempfile.TemporaryDirectory() as tmp:
        memory = mcpcall.OAuth(redirect_handler=follow, redirect_uri="http://127.0.0.1:9/callback")
        filed = mcpcall.OAuth(redirect_handler=follow, redirect_uri="http://127.0.0.1:9/callback",
                              token_store=mcpcall.FileTokenStore(Path(tmp) / "tokens.json"))
        token = memory.login(server.mcp_url)
        filed.login(server.mcp_url)
        assert token is not None
        clients = {
            "mcpcall OAuth (memory store)": mcpcall.connect(server.mcp_url, auth=memory, protocol="2025-11-25"),
            "mcpcall OAuth (file store)": mcpcall.connect(server.mcp_url, auth=filed, protocol="2025-11-25"),
            "mcpcall static bearer": mcpcall.connect(server.mcp_url, auth=token.access_token, protocol="2025-11-25"),
        }
        session = requests.Session()
        headers = {"Authorization": f"Bearer {token.access_token}", "Accept": "application/json, text/event-stream"}
        calls: dict[str, Callable[[], Any]] = {
            name: (lambda c=client: c.call_tool("echo", {"text": "x"})) for name, client in clients.items()
        }
        calls["raw requests loop"] = lambda: session.post(server.mcp_url, json=CALL, headers=headers, timeout=10).json()
        best = {name: float("inf") for name in calls}
        try:
            for _ in range(args.rounds):
                for name, call in calls.items():
                    best[name] = min(best[name], per_call(call, args.seconds))
        finally:
            for client in clients.values():
                client.close()
            memory.close()
            filed.close()
            session.close()
    base = best["mcpcall static bearer"]
    raw = best["raw requests loop"]
    print(f"{'client':<30} {'µs/call':>9} {'vs static bearer':>17} {'vs raw':>8}")
    for name, seconds in best.items():
        print(f"{name:<30} {seconds * 1e6:>9.0f} {base / seconds:>16.2f}x {raw / seconds:>7.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
