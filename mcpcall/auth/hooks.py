"""What the ``requests`` hooks of every auth object (:class:`~mcpcall.auth.oauth.OAuth` and the grants) share.

Each rule holds here, once:

- a request's resource is its connection's: the server URL the user configured, set by
  mcpcall's transports around each send (an HTTP+SSE POST goes to the endpoint the
  server named, but its token is the SSE URL's) — :func:`connection_url`;
- a record is never emitted on an HTTP worker or reader thread (logging handlers are
  user code): inside one of mcpcall's sends it goes through the connection, which emits
  it on the client's callbacks thread — :func:`emit`;
- a 401/403 body is read at most :data:`MAX_CHALLENGE_BODY` bytes — :func:`drain`;
- a token fresh from a token endpoint that the server refuses gets the 401 passed on for
  :data:`REFUSED_COOLDOWN` seconds rather than yet another token request — :class:`Refusals`;
- waits and token requests made inside a request end with that request (its deadline,
  cancel or ``close()`` abort its exchange): :func:`request_exchange` gives it to the
  single-flight gate and to :func:`~mcpcall.auth.flow._call`.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

import requests

from ..callbacks import as_text
from ..transports._exchanges import Exchange, current_exchange, current_sending

if TYPE_CHECKING:  # tokens.py logs through emit() here: no import of it at run time
    from .tokens import Token

__all__ = ["MAX_CHALLENGE_BODY", "REFUSED_COOLDOWN", "IssuedHere", "Refusals", "connection_url", "drain", "emit", "request_exchange"]

#: The most of a 401/403 body kept (for the error message when it is passed on); the rest is dropped.
MAX_CHALLENGE_BODY = 64 * 1024
#: After a token fresh from the token endpoint is refused (401), requests carrying it get the 401 as it
#: is for this long instead of getting yet another token (a server refusing every token).
REFUSED_COOLDOWN = 30.0


def connection_url(request: requests.PreparedRequest) -> str:
    """The URL whose resource ``request`` is for: its connection's server URL inside mcpcall, else its own."""
    context = current_sending()
    return context.url if context is not None else str(request.url)


def emit(logger: logging.Logger, level: int, fmt: str, *args: Any) -> None:
    """Log a record of an auth hook: off the I/O thread inside one of mcpcall's sends, else here."""
    context = current_sending()
    if context is None:
        logger.log(level, fmt, *as_text(args))
    elif logger.isEnabledFor(level):
        context.log(level, fmt, *args, logger=logger.name)


def request_exchange() -> Exchange | None:
    """The exchange of the request this thread is sending, whose end ends what is done for it."""
    return current_exchange()


def drain(response: requests.Response) -> None:
    """Read at most :data:`MAX_CHALLENGE_BODY` of ``response`` into ``.content`` and release its connection."""
    if not getattr(response, "_content_consumed", True):
        try:
            data = response.raw.read(MAX_CHALLENGE_BODY + 1, decode_content=True) or b""
        except Exception:  # noqa: BLE001 - a broken body: keep nothing
            data = b""
        response._content = data[:MAX_CHALLENGE_BODY]
        setattr(response, "_content_consumed", True)  # noqa: B010 - what requests sets once it has read a body
    response.close()


class Refusals:
    """Tokens fresh from a token endpoint that a resource refused, for :data:`REFUSED_COOLDOWN` seconds; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refused: dict[str, tuple[str, float]] = {}  # resource -> (token refused, when)

    def refuse(self, resource: str, access_token: str) -> None:
        with self._lock:
            self._refused[resource] = (access_token, time.monotonic())

    def refused(self, resource: str, access_token: str | None) -> bool:
        """Whether ``access_token`` was refused by ``resource`` within the cooldown."""
        with self._lock:
            entry = self._refused.get(resource)
        return entry is not None and entry[0] == access_token and time.monotonic() - entry[1] < REFUSED_COOLDOWN

    def forget(self, resource: str) -> None:
        with self._lock:
            self._refused.pop(resource, None)


class IssuedHere:
    """Mixin: the access tokens this auth object got from a token endpoint itself (the most recent 1024).

    A token read from a store may be another process's (a DPoP one bound to another key);
    only a token issued here is one a 401 says this object's flow got wrong. Uses the
    owner's ``_lock`` (renewed in a forked child) and keeps ``_issued``.
    """

    _lock: threading.Lock
    _issued: dict[str, None]

    def _note(self, token: Token) -> Token:
        """Remember that ``token`` came from the token endpoint to this object (not from a store)."""
        with self._lock:
            self._issued[token.access_token] = None
            while len(self._issued) > 1024:  # the oldest go first: only recent tokens are asked about
                del self._issued[next(iter(self._issued))]
        return token

    def _issued_here(self, token: Token) -> bool:
        with self._lock:
            return token.access_token in self._issued
