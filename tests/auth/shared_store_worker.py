"""A worker process of the shared-token tests: one OAuth object over a token store shared with other processes.

Run as ``python -m tests.auth.shared_store_worker STORE MCP_URL CLIENT_ID CLIENT_SECRET TIMEOUT``,
``STORE`` being ``redis:<url>`` or ``file:<path>``. It sends one MCP ``ping`` (with the stored
token: the 401 it gets first tells it the authorization server) and prints ``{"ready": status}``
(``MCP_URL`` ``-``: no OAuth, no ping, ``{"ready": 0}``, for ``hold``);
then, for each line ``go <epoch seconds>`` on stdin, it waits until that moment (so that every
worker sends at once), sends a ``ping`` and prints ``{"status": ..., "sent": <the access token
sent>, "history": <statuses before it>}``; ``hold <issuer> <resource> <lease>`` takes the store's
refresh lock, prints ``{"held": true}`` and keeps it until the process is killed; ``quit`` (or
end of input) ends it. ``MCPCALL_TEST_LEASE`` (seconds) shortens the lease of the store's refresh
lock that OAuth takes, to make a holder overrun it on purpose. ``MCPCALL_TEST_GRANT=client_credentials``:
a :class:`~mcpcall.auth.grants.ClientCredentials` object instead of OAuth, and no ``ping`` before
``{"ready": 0}`` (the first ``go`` gets the first token).
"""

from __future__ import annotations

import json
import os
import sys
import time

import requests

from mcpcall.auth.grants import ClientCredentials
from mcpcall.auth.oauth import OAuth
from mcpcall.auth.tokens import FileTokenStore, TokenStore

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def _store(spec: str) -> TokenStore:
    kind, _, target = spec.partition(":")
    if kind == "redis":
        from mcpcall.auth.redis_store import RedisTokenStore

        return RedisTokenStore(target, timeout=5.0)
    return FileTokenStore(target)


def _say(message: object) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _ping(url: str, auth: requests.auth.AuthBase) -> dict[str, object]:
    response = requests.post(url, json=PING, auth=auth, timeout=30)
    sent = response.request.headers.get("Authorization", "")
    return {"status": response.status_code, "sent": str(sent).partition(" ")[2], "history": [r.status_code for r in response.history]}


def main() -> None:
    spec, url, client_id, client_secret, timeout = sys.argv[1:6]
    store = _store(spec)
    lease = os.environ.get("MCPCALL_TEST_LEASE")
    if lease:
        OAuth._lease = lambda self: float(lease)  # type: ignore[method-assign]
    auth: OAuth | ClientCredentials | None = None
    if url == "-":
        _say({"ready": 0})
    elif os.environ.get("MCPCALL_TEST_GRANT") == "client_credentials":
        auth = ClientCredentials(client_id, client_secret, token_store=store, timeout=float(timeout))
        _say({"ready": 0})
    else:
        auth = OAuth(client_id=client_id, client_secret=client_secret, token_store=store, interactive=False,
                     timeout=float(timeout))
        _say({"ready": _ping(url, auth)["status"]})
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        if words[0] == "go" and auth is not None:
            time.sleep(max(0.0, float(words[1]) - time.time()))
            _say(_ping(url, auth))
        elif words[0] == "hold":
            lock = getattr(store, "lock")
            with lock(words[1], words[2], timeout=30.0, lease=float(words[3])):
                _say({"held": True})
                time.sleep(3600)  # until killed
    if auth is not None:
        auth.close()
    close = getattr(store, "close", None)
    if callable(close):
        close()


if __name__ == "__main__":
    main()
