"""Transports: how messages travel (stdio pipes, streamable HTTP, HTTP+SSE, in-memory for tests).

They may import only the ground floor (errors, urls, jsonrpc, sse, headers, scheduler, callbacks, forking,
pieces, ...); never the dispatcher, the session, the client, auth or config. What they need of auth (a bearer
token as a ``requests`` auth object) lives here, in :mod:`._bearer`.
"""

from .base import Receiver, Transport

__all__ = ["Receiver", "Transport"]
