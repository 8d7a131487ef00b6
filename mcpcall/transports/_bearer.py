"""A bearer token as a ``requests`` auth object: what ``auth="token"`` becomes (re-exported as ``mcpcall.auth.BearerAuth``)."""

from __future__ import annotations

from typing import Any

__all__ = ["BearerAuth"]


class BearerAuth:
    """``Authorization: Bearer <token>`` on every request; the token never shows in a repr.

    ``requests`` accepts any callable that takes and returns a prepared
    request, so this needs no import of ``requests`` to exist.
    """

    __slots__ = ("_token",)

    def __init__(self, token: str) -> None:
        if not isinstance(token, str) or not token or any(ch in token for ch in "\r\n"):
            raise ValueError("a bearer token must be a non-empty string on one line")
        self._token = token

    def __call__(self, request: Any) -> Any:
        request.headers["Authorization"] = f"Bearer {self._token}"
        return request

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BearerAuth) and other._token == self._token

    def __hash__(self) -> int:
        return hash((BearerAuth, self._token))

    def __repr__(self) -> str:
        return "<BearerAuth ***>"
