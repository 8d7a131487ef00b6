"""PKCE (RFC 7636) verifiers and challenges, and OAuth ``state`` values.

Only the ``S256`` method is produced: OAuth 2.1 and the MCP authorization
spec require it whenever the client can compute SHA-256, which every Python can.
Everything here is pure (no I/O) apart from reading ``secrets``.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass, field

__all__ = ["PKCE", "UNRESERVED", "challenge_for", "new_pkce", "new_state"]

#: RFC 7636 §4.1: ``unreserved = ALPHA / DIGIT / "-" / "." / "_" / "~"``.
UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

_MIN_LEN = 43
_MAX_LEN = 128


def challenge_for(verifier: str) -> str:
    """Return ``BASE64URL(SHA256(ASCII(verifier)))`` without ``=`` padding (RFC 7636 §4.2)."""
    if not _MIN_LEN <= len(verifier) <= _MAX_LEN or not set(verifier) <= UNRESERVED:
        raise ValueError("a PKCE verifier must be 43-128 characters from the unreserved set")
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class PKCE:
    """A code verifier (kept secret until the token request) and its S256 challenge.

    The repr shows the challenge only: the verifier is what proves possession
    of the authorization code, so it must not reach logs.
    """

    verifier: str = field(repr=False)
    challenge: str
    method: str = "S256"

    @classmethod
    def from_verifier(cls, verifier: str) -> PKCE:
        """Build the pair for a given verifier (used for test vectors and resumed flows)."""
        return cls(verifier=verifier, challenge=challenge_for(verifier))


def new_pkce(length: int = 64) -> PKCE:
    """Return a fresh verifier of ``length`` characters (43-128) and its challenge.

    ``secrets.token_urlsafe`` yields characters from ``[A-Za-z0-9_-]``, a subset
    of the unreserved set; 64 characters carry 384 bits of entropy.
    """
    if not _MIN_LEN <= length <= _MAX_LEN:
        raise ValueError("a PKCE verifier length must be between 43 and 128")
    verifier = secrets.token_urlsafe(length)[:length]
    return PKCE.from_verifier(verifier)


def new_state() -> str:
    """Return an unguessable ``state`` value (256 bits, URL-safe) for one authorization request."""
    return secrets.token_urlsafe(32)
