"""Keys and signed JWTs for OAuth: private_key_jwt client assertions (RFC 7523) and DPoP proofs (RFC 9449).

Built on PyJWT with ``cryptography`` (the optional extra ``pip install 'mcpcall[auth]'``),
imported only when a key is made, so the rest of mcpcall works without them.

- :class:`SigningKey` – an asymmetric private key (ES256 by default), its public JWK and
  RFC 7638 thumbprint; signs a claims set into a compact JWS. Its repr shows the algorithm,
  the ``kid`` and the thumbprint, never key material.
- :func:`client_assertion` – the JWT a client authenticates with at a token endpoint
  (``client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer``).
- :class:`DPoPProver` – one key per client, a fresh proof per HTTP request, server nonces
  remembered per origin; :func:`dpop_nonce` and :func:`is_use_dpop_nonce` read a response.

Errors::

    AuthError
    ├── CryptoUnavailable  (also ImportError)   PyJWT[crypto] is not installed
    └── InvalidKey         (also ValueError)    a key that cannot be loaded or used
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Union
from urllib.parse import urlsplit

from ..errors import CryptoUnavailable, InvalidKey
from ._json import _json_object

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

    PrivateKey = Union[EllipticCurvePrivateKey, RSAPrivateKey, Ed25519PrivateKey]

__all__ = [
    "CLIENT_ASSERTION_TYPE",
    "CryptoUnavailable",
    "DPoPProver",
    "InvalidKey",
    "SigningKey",
    "client_assertion",
    "dpop_nonce",
    "is_use_dpop_nonce",
    "jwk_thumbprint",
]

#: ``client_assertion_type`` of a JWT client assertion (RFC 7523 section 2.2).
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

_INSTALL = "pip install 'mcpcall[auth]'"
_EC_ALGS = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
_EC_CURVES = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}
_RSA_ALGS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
_NONCE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,512}")  # RFC 9449 section 8: 1*NQCHAR
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _modules() -> tuple[Any, Any]:
    """``(jwt, cryptography.hazmat.primitives.serialization)``, or :class:`CryptoUnavailable`."""
    try:
        import jwt
        from cryptography.hazmat.primitives import serialization
    except ImportError:
        raise CryptoUnavailable(f"signed JWTs (private_key_jwt, DPoP) need PyJWT[crypto]: {_INSTALL}") from None
    return jwt, serialization


def b64url(data: bytes) -> str:
    """Base64url without padding (RFC 7515 section 2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _int_bytes(value: int, length: int | None = None) -> bytes:
    size = length if length is not None else max(1, (value.bit_length() + 7) // 8)
    return value.to_bytes(size, "big")


class SigningKey:
    """An asymmetric private key that signs JWTs: EC (ES256/384/512), RSA (RS*/PS*) or Ed25519 (EdDSA).

    Make one with :meth:`generate`, :meth:`from_pem` or :meth:`from_jwk`. ``alg`` is
    inferred from the key (P-256 → ES256, RSA → RS256, Ed25519 → EdDSA) unless given;
    ``kid``, when set, goes into every JWS header this key signs.
    """

    __slots__ = ("_alg", "_key", "_kid", "_public_jwk")

    def __init__(self, private_key: PrivateKey, *, alg: str | None = None, kid: str | None = None) -> None:
        _modules()
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

        if isinstance(private_key, ec.EllipticCurvePrivateKey):
            curve = private_key.curve.name
            if curve not in _EC_ALGS:
                raise InvalidKey(f"EC curve {curve} is not supported (use P-256, P-384 or P-521)")
            inferred = _EC_ALGS[curve]
            if alg is not None and alg != inferred:
                raise InvalidKey(f"algorithm {alg} does not fit an EC {_EC_CURVES[curve]} key (use {inferred})")
        elif isinstance(private_key, rsa.RSAPrivateKey):
            inferred = "RS256"
            if alg is not None and alg not in _RSA_ALGS:
                raise InvalidKey(f"algorithm {alg} does not fit an RSA key (use one of {', '.join(sorted(_RSA_ALGS))})")
            if private_key.key_size < 2048:
                raise InvalidKey(f"an RSA key of {private_key.key_size} bits is too short (2048 at least)")
        elif isinstance(private_key, ed25519.Ed25519PrivateKey):
            inferred = "EdDSA"
            if alg is not None and alg not in ("EdDSA", "Ed25519"):
                raise InvalidKey(f"algorithm {alg} does not fit an Ed25519 key (use EdDSA)")
        else:
            raise InvalidKey(f"{type(private_key).__name__} is not a supported private key (EC, RSA or Ed25519)")
        if kid is not None and (not isinstance(kid, str) or not kid):
            raise InvalidKey("kid must be a non-empty string")
        self._key = private_key
        self._alg = alg if alg in _RSA_ALGS else inferred
        self._kid = kid
        self._public_jwk = self._make_public_jwk()

    # -- construction ----------------------------------------------------------------------------

    @classmethod
    def generate(cls, alg: str = "ES256", *, kid: str | None = None) -> SigningKey:
        """A new random key for ``alg`` (ES256, ES384, ES512, RS256…PS512 with 2048-bit RSA, or EdDSA)."""
        _modules()
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

        curves: dict[str, ec.EllipticCurve] = {"ES256": ec.SECP256R1(), "ES384": ec.SECP384R1(), "ES512": ec.SECP521R1()}
        key: PrivateKey
        if alg in curves:
            key = ec.generate_private_key(curves[alg])
        elif alg in _RSA_ALGS:
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        elif alg == "EdDSA":
            key = ed25519.Ed25519PrivateKey.generate()
        else:
            raise InvalidKey(f"cannot generate a key for algorithm {alg!r}")
        return cls(key, alg=alg, kid=kid)

    @classmethod
    def from_pem(
        cls, pem: str | bytes, *, alg: str | None = None, kid: str | None = None, password: bytes | None = None
    ) -> SigningKey:
        """Load a PEM private key (PKCS#8, or traditional EC/RSA); ``password`` if it is encrypted."""
        _, serialization = _modules()
        data = pem.encode("utf-8") if isinstance(pem, str) else pem
        if not isinstance(data, bytes):
            raise InvalidKey(f"a PEM key must be str or bytes, not {type(pem).__name__}")
        try:
            key = serialization.load_pem_private_key(data, password=password)
        except (ValueError, TypeError) as exc:
            # cryptography's messages do not quote the key; keep only the kind of failure
            reason = "wrong or missing password" if "password" in str(exc).lower() else "not a PEM private key"
            raise InvalidKey(f"cannot load the private key: {reason}") from None
        except Exception:  # noqa: BLE001 - unsupported key types raise UnsupportedAlgorithm
            raise InvalidKey("cannot load the private key: unsupported key type") from None
        return cls(key, alg=alg, kid=kid)

    @classmethod
    def from_jwk(cls, jwk: Mapping[str, Any] | str, *, alg: str | None = None, kid: str | None = None) -> SigningKey:
        """Load a private JWK (a dict or its JSON text) of kty EC, RSA or OKP (Ed25519); its ``alg``/``kid`` are used if set."""
        jwt, _ = _modules()
        try:
            document = json.loads(jwk) if isinstance(jwk, str) else dict(jwk)
        except (ValueError, TypeError):
            raise InvalidKey("a JWK must be a JSON object") from None
        if not isinstance(document, dict):
            raise InvalidKey("a JWK must be a JSON object")
        if "d" not in document:
            raise InvalidKey("the JWK has no private part ('d'); a signing key must be private")
        try:
            key = jwt.PyJWK(document).key
        except Exception:  # noqa: BLE001 - PyJWT raises several types; none may carry the key
            raise InvalidKey(f"cannot load the JWK (kty {document.get('kty')!r})") from None
        given_alg = alg or (document.get("alg") if isinstance(document.get("alg"), str) else None)
        given_kid = kid or (document.get("kid") if isinstance(document.get("kid"), str) else None)
        return cls(key, alg=given_alg, kid=given_kid)

    # -- public side -----------------------------------------------------------------------------

    @property
    def alg(self) -> str:
        """The JWS algorithm this key signs with."""
        return self._alg

    @property
    def kid(self) -> str | None:
        """The key id put in JWS headers, if any."""
        return self._kid

    @property
    def public_jwk(self) -> dict[str, str]:
        """The public key as a JWK (required members only, plus ``kid`` when set); no private part."""
        jwk = dict(self._public_jwk)
        if self._kid:
            jwk["kid"] = self._kid
        return jwk

    def _make_public_jwk(self) -> dict[str, str]:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

        key = self._key
        if isinstance(key, ec.EllipticCurvePrivateKey):
            numbers = key.public_key().public_numbers()
            size = (key.curve.key_size + 7) // 8
            return {
                "kty": "EC",
                "crv": _EC_CURVES[key.curve.name],
                "x": b64url(_int_bytes(numbers.x, size)),
                "y": b64url(_int_bytes(numbers.y, size)),
            }
        if isinstance(key, rsa.RSAPrivateKey):
            rsa_numbers = key.public_key().public_numbers()
            return {"kty": "RSA", "n": b64url(_int_bytes(rsa_numbers.n)), "e": b64url(_int_bytes(rsa_numbers.e))}
        assert isinstance(key, ed25519.Ed25519PrivateKey)
        raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return {"kty": "OKP", "crv": "Ed25519", "x": b64url(raw)}

    def thumbprint(self) -> str:
        """The RFC 7638 JWK SHA-256 thumbprint of the public key, base64url (DPoP's ``jkt``)."""
        return jwk_thumbprint(self._public_jwk)

    def public_key(self) -> Any:
        """The ``cryptography`` public key object (for verifying what this key signed)."""
        return self._key.public_key()

    def sign(self, claims: Mapping[str, Any], headers: Mapping[str, Any] | None = None) -> str:
        """A compact JWS of ``claims`` signed with this key; ``headers`` are added to ``alg`` (and ``kid``)."""
        jwt, _ = _modules()
        header: dict[str, Any] = {}
        if self._kid:
            header["kid"] = self._kid
        header.update(headers or {})
        header.pop("alg", None)
        try:
            token: str = jwt.encode(dict(claims), self._key, algorithm=self._alg, headers=header)
        except (TypeError, ValueError) as exc:
            raise InvalidKey(f"cannot sign the JWT ({type(exc).__name__})") from None
        return token

    def __repr__(self) -> str:
        kid = f" kid={self._kid!r}" if self._kid else ""
        return f"<SigningKey {self._alg}{kid} jkt={self.thumbprint()[:12]}…>"

    def __reduce__(self) -> Any:
        raise TypeError("a SigningKey is not picklable (it holds a private key)")


_THUMBPRINT_MEMBERS = {"EC": ("crv", "kty", "x", "y"), "RSA": ("e", "kty", "n"), "OKP": ("crv", "kty", "x")}


def jwk_thumbprint(jwk: Mapping[str, Any]) -> str:
    """The RFC 7638 SHA-256 thumbprint of a public JWK: its required members, sorted, no whitespace, hashed."""
    members = _THUMBPRINT_MEMBERS.get(str(jwk.get("kty")))
    if members is None or not all(isinstance(jwk.get(name), str) for name in members):
        raise InvalidKey(f"cannot compute a thumbprint for a JWK of kty {jwk.get('kty')!r}")
    canonical = json.dumps({name: jwk[name] for name in members}, sort_keys=True, separators=(",", ":"))
    return b64url(hashlib.sha256(canonical.encode("utf-8")).digest())


def client_assertion(
    key: SigningKey,
    client_id: str,
    audience: str,
    *,
    lifetime: float = 60.0,
    extra_claims: Mapping[str, Any] | None = None,
    now: float | None = None,
) -> str:
    """An RFC 7523 section 2.2 client assertion for ``private_key_jwt`` at a token endpoint.

    ``iss`` and ``sub`` are ``client_id``; ``aud`` is ``audience`` (the authorization
    server's issuer identifier, RFC 7523bis); ``iat`` now, ``exp`` ``lifetime``
    seconds later, and a random ``jti`` so the server can refuse replays.
    """
    if not isinstance(client_id, str) or not client_id:
        raise ValueError("client_id must be a non-empty string")
    if not isinstance(audience, str) or not audience:
        raise ValueError("audience must be a non-empty string")
    if not lifetime > 0:
        raise ValueError("lifetime must be a positive number of seconds")
    issued = int(time.time() if now is None else now)
    claims: dict[str, Any] = dict(extra_claims or {})
    claims.update(
        {
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": issued,
            "exp": issued + max(1, int(lifetime)),
            "jti": secrets.token_urlsafe(16),
        }
    )
    return key.sign(claims, {"typ": "JWT"})


# -- DPoP ----------------------------------------------------------------------------------------


def _origin(url: str) -> str:
    """``scheme://host[:port]`` with a lowercase scheme and host and no default port: the key for nonces."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        host = f"{host}:{port}"
    return f"{scheme}://{host}"


def htu(url: str) -> str:
    """The DPoP ``htu`` of a request URL: scheme, host, port and path; no user info, query or fragment."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError("a DPoP proof needs an absolute http(s) URL")
    return _origin(url) + (parts.path or "/")


def access_token_hash(access_token: str) -> str:
    """DPoP ``ath``: base64url of the SHA-256 of the access token's ASCII bytes (RFC 9449 section 4.2)."""
    return b64url(hashlib.sha256(access_token.encode("ascii")).digest())


class DPoPProver:
    """Makes DPoP proofs (RFC 9449) with one key; safe to share between threads.

    ``proof(method, url, access_token)`` gives the value of a ``DPoP`` header: a JWT with
    ``typ: dpop+jwt``, the public ``jwk`` in its header, and ``jti``, ``iat``, ``htm``,
    ``htu`` (no query or fragment), ``ath`` when an access token is given, and ``nonce``
    when a server at that URL's origin handed one out (:meth:`remember_nonce`).
    """

    def __init__(self, key: SigningKey | None = None) -> None:
        self.key = key if key is not None else SigningKey.generate("ES256")
        if not isinstance(self.key, SigningKey):
            raise TypeError("key must be a SigningKey")
        self._lock = threading.Lock()
        self._nonces: dict[str, str] = {}

    @property
    def thumbprint(self) -> str:
        """The key's RFC 7638 thumbprint: the ``jkt`` a DPoP-bound token carries (``dpop_jkt`` in requests)."""
        return self.key.thumbprint()

    def proof(self, method: str, url: str, access_token: str | None = None, *, now: float | None = None) -> str:
        """A fresh proof for one request (a new ``jti`` every call)."""
        if not isinstance(method, str) or not method:
            raise ValueError("method must be an HTTP method name")
        claims: dict[str, Any] = {
            "jti": secrets.token_urlsafe(16),
            "htm": method.upper(),
            "htu": htu(url),
            "iat": int(time.time() if now is None else now),
        }
        if access_token is not None:
            claims["ath"] = access_token_hash(access_token)
        with self._lock:
            nonce = self._nonces.get(_origin(url))
        if nonce is not None:
            claims["nonce"] = nonce
        return self.key.sign(claims, {"typ": "dpop+jwt", "jwk": self.key.public_jwk})

    def remember_nonce(self, url: str, nonce: str) -> bool:
        """Use ``nonce`` in later proofs to ``url``'s origin; ``False`` (ignored) unless it is a valid nonce."""
        if not isinstance(nonce, str) or not _NONCE.fullmatch(nonce):
            return False
        try:
            origin = _origin(url)
        except ValueError:
            return False
        with self._lock:
            self._nonces[origin] = nonce
        return True

    def nonce_for(self, url: str) -> str | None:
        """The nonce remembered for ``url``'s origin, if any."""
        with self._lock:
            return self._nonces.get(_origin(url))

    def update_from_response(self, response: Any) -> bool:
        """Remember a ``DPoP-Nonce`` the response carries; ``True`` when it is a ``use_dpop_nonce`` challenge to retry."""
        nonce = dpop_nonce(response)
        url = getattr(getattr(response, "request", None), "url", None) or getattr(response, "url", None)
        learnt = bool(nonce and isinstance(url, str) and self.remember_nonce(url, nonce))
        return learnt and is_use_dpop_nonce(response)

    def __repr__(self) -> str:
        with self._lock:
            known = len(self._nonces)
        return f"<DPoPProver {self.key.alg} jkt={self.thumbprint[:12]}… nonces={known}>"


def dpop_nonce(response: Any) -> str | None:
    """The ``DPoP-Nonce`` header of a ``requests`` response, if it holds a valid nonce."""
    headers = getattr(response, "headers", None)
    value = headers.get("DPoP-Nonce") if headers is not None else None
    return value if isinstance(value, str) and _NONCE.fullmatch(value) else None


def is_use_dpop_nonce(response: Any) -> bool:
    """Whether a response asks for a retry with a nonce (RFC 9449 sections 8 and 9).

    From an authorization server: HTTP 400 with JSON ``{"error": "use_dpop_nonce"}``.
    From a resource server: HTTP 401 with ``WWW-Authenticate: DPoP error="use_dpop_nonce"``.
    """
    from .challenge import bearer_challenge

    status = getattr(response, "status_code", None)
    if status == 401:
        headers = getattr(response, "headers", None)
        value = headers.get("WWW-Authenticate", "") if headers is not None else ""
        challenge = bearer_challenge(value, scheme="DPoP")
        return challenge is not None and challenge.error == "use_dpop_nonce"
    if status == 400:
        body = _json_object(response)
        return body is not None and body.get("error") == "use_dpop_nonce"
    return False
