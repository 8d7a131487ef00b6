"""mcpcall.auth.jose: signing keys, client assertions and DPoP proofs, checked with PyJWT as the verifier."""

from __future__ import annotations

import base64
import hashlib
import json
import pickle
import sys
import threading
import time

import pytest
import requests

jwt = pytest.importorskip("jwt")
pytest.importorskip("cryptography")

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from mcpcall.auth.discovery import AuthError
from mcpcall.auth.jose import (
    CLIENT_ASSERTION_TYPE,
    CryptoUnavailable,
    DPoPProver,
    InvalidKey,
    SigningKey,
    client_assertion,
    dpop_nonce,
    is_use_dpop_nonce,
    jwk_thumbprint,
)

pytestmark = pytest.mark.timeout(30)


def pem(key: object) -> bytes:
    return key.private_bytes(  # type: ignore[attr-defined,no-any-return]
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def b64decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def header_of(token: str) -> dict[str, object]:
    return json.loads(b64decode(token.split(".")[0]))  # type: ignore[no-any-return]


# -- keys ----------------------------------------------------------------------------------------


def test_generated_key_signs_a_jwt_pyjwt_verifies() -> None:
    key = SigningKey.generate(kid="k1")
    assert key.alg == "ES256" and key.kid == "k1"
    token = key.sign({"hello": "world"}, {"typ": "JWT"})
    assert header_of(token) == {"alg": "ES256", "kid": "k1", "typ": "JWT"}
    assert jwt.decode(token, key.public_key(), algorithms=["ES256"]) == {"hello": "world"}
    other = SigningKey.generate()
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(token, other.public_key(), algorithms=["ES256"])


@pytest.mark.parametrize(
    ("private", "alg", "kty"),
    [
        (lambda: ec.generate_private_key(ec.SECP256R1()), "ES256", "EC"),
        (lambda: ec.generate_private_key(ec.SECP384R1()), "ES384", "EC"),
        (lambda: ec.generate_private_key(ec.SECP521R1()), "ES512", "EC"),
        (lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256", "RSA"),
        (lambda: ed25519.Ed25519PrivateKey.generate(), "EdDSA", "OKP"),
    ],
)
def test_pem_keys_infer_their_algorithm(private: object, alg: str, kty: str) -> None:
    raw = private()  # type: ignore[operator]
    key = SigningKey.from_pem(pem(raw).decode())
    assert key.alg == alg
    jwk = key.public_jwk
    assert jwk["kty"] == kty and "d" not in jwk and "p" not in jwk
    token = key.sign({"n": 1})
    assert jwt.decode(token, raw.public_key(), algorithms=[alg]) == {"n": 1}
    # the public JWK is enough to verify: PyJWT reads it back
    assert jwt.decode(token, jwt.PyJWK(jwk, algorithm=alg).key, algorithms=[alg]) == {"n": 1}


def test_rsa_pss_and_wrong_algorithms() -> None:
    raw = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key = SigningKey(raw, alg="PS256")
    assert jwt.decode(key.sign({"a": 1}), raw.public_key(), algorithms=["PS256"]) == {"a": 1}
    with pytest.raises(InvalidKey, match="ES384 does not fit an EC P-256 key"):
        SigningKey(ec.generate_private_key(ec.SECP256R1()), alg="ES384")
    with pytest.raises(InvalidKey, match="does not fit an RSA key"):
        SigningKey(raw, alg="ES256")
    with pytest.raises(InvalidKey, match="too short"):
        SigningKey(rsa.generate_private_key(public_exponent=65537, key_size=1024))
    with pytest.raises(InvalidKey, match="cannot generate"):
        SigningKey.generate("HS256")


def test_bad_pem_says_so_without_quoting_it() -> None:
    secret_text = "-----BEGIN PRIVATE KEY-----\nTOPSECRETMATERIAL\n-----END PRIVATE KEY-----\n"
    with pytest.raises(InvalidKey) as info:
        SigningKey.from_pem(secret_text)
    assert "TOPSECRET" not in str(info.value)
    assert isinstance(info.value, AuthError) and isinstance(info.value, ValueError)
    encrypted = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(b"pw")
    )
    with pytest.raises(InvalidKey, match="password"):
        SigningKey.from_pem(encrypted)
    assert SigningKey.from_pem(encrypted, password=b"pw").alg == "ES256"


def test_jwk_private_key_round_trip() -> None:
    raw = ec.generate_private_key(ec.SECP256R1())
    private_jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(raw))
    private_jwk.update({"kid": "from-jwk", "alg": "ES256"})
    key = SigningKey.from_jwk(private_jwk)
    assert key.kid == "from-jwk" and key.alg == "ES256"
    assert key.public_jwk == {k: private_jwk[k] for k in ("kty", "crv", "x", "y", "kid")}
    assert jwt.decode(key.sign({"x": 1}), raw.public_key(), algorithms=["ES256"]) == {"x": 1}
    assert SigningKey.from_jwk(json.dumps(private_jwk)).thumbprint() == key.thumbprint()
    public_only = {k: v for k, v in private_jwk.items() if k != "d"}
    with pytest.raises(InvalidKey, match="no private part"):
        SigningKey.from_jwk(public_only)
    with pytest.raises(InvalidKey) as info:
        SigningKey.from_jwk({"kty": "EC", "crv": "P-256", "d": "c2VjcmV0LWQtdmFsdWU", "x": "AA", "y": "AA"})
    assert "c2VjcmV0" not in str(info.value)


def test_thumbprint_matches_rfc_7638_example() -> None:
    # RFC 7638 section 3.1
    jwk = {
        "kty": "RSA",
        "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiF"
        "V4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdA"
        "ZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kE"
        "gU8awapJzKnqDKgw",
        "e": "AQAB",
        "alg": "RS256",
        "kid": "2011-04-29",
    }
    assert jwk_thumbprint(jwk) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


def test_thumbprint_of_a_key_ignores_kid_and_is_stable() -> None:
    raw = ec.generate_private_key(ec.SECP256R1())
    a, b = SigningKey(raw, kid="one"), SigningKey(raw, kid="two")
    assert a.thumbprint() == b.thumbprint() == jwk_thumbprint(a.public_jwk)
    members = {k: a.public_jwk[k] for k in ("crv", "kty", "x", "y")}
    digest = hashlib.sha256(json.dumps(members, sort_keys=True, separators=(",", ":")).encode()).digest()
    assert a.thumbprint() == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def test_repr_and_pickle_never_show_the_private_key() -> None:
    raw = ec.generate_private_key(ec.SECP256R1())
    key = SigningKey(raw, kid="mine")
    d = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(raw))["d"]
    text = repr(key) + str(key) + repr(DPoPProver(key))
    assert d not in text and "PRIVATE" not in text and "mine" in text
    with pytest.raises(TypeError, match="not picklable"):
        pickle.dumps(key)


def test_missing_pyjwt_gives_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jwt", None)
    with pytest.raises(CryptoUnavailable, match=r"pip install 'mcpcall\[auth\]'") as info:
        SigningKey.generate()
    assert isinstance(info.value, ImportError) and isinstance(info.value, AuthError)


# -- client assertions ---------------------------------------------------------------------------


def test_client_assertion_claims() -> None:
    key = SigningKey.generate()
    before = int(time.time())
    token = client_assertion(key, "my-client", "https://as.example.com", lifetime=60)
    claims = jwt.decode(token, key.public_key(), algorithms=["ES256"], audience="https://as.example.com")
    assert claims["iss"] == claims["sub"] == "my-client"
    assert before <= claims["iat"] <= int(time.time())
    assert claims["exp"] - claims["iat"] == 60
    assert len(claims["jti"]) >= 16
    again = jwt.decode(client_assertion(key, "my-client", "https://as.example.com"), options={"verify_signature": False})
    assert again["jti"] != claims["jti"]
    with pytest.raises(jwt.InvalidAudienceError):
        jwt.decode(token, key.public_key(), algorithms=["ES256"], audience="https://other.example.com")
    assert CLIENT_ASSERTION_TYPE == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    with pytest.raises(ValueError):
        client_assertion(key, "", "https://as.example.com")


# -- DPoP ----------------------------------------------------------------------------------------


def verify_proof(proof: str) -> tuple[dict[str, object], dict[str, object]]:
    """What a server does (RFC 9449 section 4.3): the key from the header, then the signature."""
    header = header_of(proof)
    assert header["typ"] == "dpop+jwt"
    jwk = header["jwk"]
    assert isinstance(jwk, dict) and "d" not in jwk
    public = jwt.PyJWK(jwk, algorithm=str(header["alg"])).key
    return header, jwt.decode(proof, public, algorithms=[str(header["alg"])])


def test_dpop_proof_claims() -> None:
    prover = DPoPProver()
    proof = prover.proof("post", "https://User:pw@MCP.Example.com:443/mcp/v1?x=1#frag")
    header, claims = verify_proof(proof)
    assert header["alg"] == "ES256"
    assert claims["htm"] == "POST"
    assert claims["htu"] == "https://mcp.example.com/mcp/v1"
    assert abs(int(claims["iat"]) - time.time()) < 5  # type: ignore[call-overload]
    assert "ath" not in claims and "nonce" not in claims
    jwk = header["jwk"]
    assert isinstance(jwk, dict)
    from mcpcall.auth.jose import jwk_thumbprint as thumb

    assert thumb(jwk) == prover.thumbprint


def test_dpop_ath_and_unique_jti() -> None:
    prover = DPoPProver()
    token = "an-access-token.with.dots"
    _, claims = verify_proof(prover.proof("GET", "http://127.0.0.1:8080/mcp", token))
    expected = base64.urlsafe_b64encode(hashlib.sha256(token.encode()).digest()).rstrip(b"=").decode()
    assert claims["ath"] == expected
    jtis = {verify_proof(prover.proof("GET", "http://127.0.0.1:8080/mcp"))[1]["jti"] for _ in range(20)}
    assert len(jtis) == 20


def test_dpop_nonce_is_per_origin() -> None:
    prover = DPoPProver()
    assert prover.remember_nonce("https://as.example.com/token", "n-1")
    _, claims = verify_proof(prover.proof("POST", "https://AS.example.com:443/other/path"))
    assert claims["nonce"] == "n-1"
    _, claims = verify_proof(prover.proof("POST", "https://as.example.com:8443/token"))
    assert "nonce" not in claims
    _, claims = verify_proof(prover.proof("POST", "http://as.example.com/token"))
    assert "nonce" not in claims
    assert not prover.remember_nonce("https://as.example.com/token", 'bad"nonce')
    assert not prover.remember_nonce("https://as.example.com/token", "")
    assert prover.nonce_for("https://as.example.com/x") == "n-1"
    assert prover.remember_nonce("https://as.example.com/token", "n-2")
    assert verify_proof(prover.proof("POST", "https://as.example.com/token"))[1]["nonce"] == "n-2"


def test_dpop_is_thread_safe() -> None:
    prover = DPoPProver()
    errors: list[BaseException] = []
    proofs: list[str] = []
    barrier = threading.Barrier(8)

    def work(i: int) -> None:
        try:
            barrier.wait(5)
            for j in range(10):
                prover.remember_nonce(f"https://h{i % 2}.example.com/", f"nonce-{i}-{j}")
                proofs.append(prover.proof("POST", f"https://h{i % 2}.example.com/token", "tok"))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not errors
    claims = [verify_proof(p)[1] for p in proofs]
    assert len({c["jti"] for c in claims}) == 80
    assert all(str(c["nonce"]).startswith("nonce-") for c in claims)


def response(status: int, headers: dict[str, str], body: bytes = b"", url: str = "https://as.example.com/token") -> requests.Response:
    r = requests.Response()
    r.status_code = status
    r.headers.update(headers)
    r._content = body
    r.url = url
    return r


def test_reading_nonce_challenges() -> None:
    as_challenge = response(400, {"DPoP-Nonce": "abc", "Content-Type": "application/json"}, b'{"error": "use_dpop_nonce"}')
    rs_challenge = response(401, {"DPoP-Nonce": "xyz", "WWW-Authenticate": 'DPoP error="use_dpop_nonce", algs="ES256"'},
                            url="https://mcp.example.com/mcp")
    other = response(400, {"Content-Type": "application/json"}, b'{"error": "invalid_grant"}')
    assert dpop_nonce(as_challenge) == "abc" and is_use_dpop_nonce(as_challenge)
    assert dpop_nonce(rs_challenge) == "xyz" and is_use_dpop_nonce(rs_challenge)
    assert dpop_nonce(other) is None and not is_use_dpop_nonce(other)
    assert not is_use_dpop_nonce(response(401, {"WWW-Authenticate": 'Bearer error="invalid_token"'}))
    assert dpop_nonce(response(200, {"DPoP-Nonce": "has space"})) is None
    prover = DPoPProver()
    assert prover.update_from_response(as_challenge)
    assert prover.nonce_for("https://as.example.com/") == "abc"
    assert prover.update_from_response(rs_challenge)
    assert prover.nonce_for("https://mcp.example.com/") == "xyz"
    # a fresh nonce on a successful answer is remembered, but is no reason to retry
    assert not prover.update_from_response(response(200, {"DPoP-Nonce": "next"}))
    assert prover.nonce_for("https://as.example.com/") == "next"
