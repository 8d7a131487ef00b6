"""Machine-to-machine grants end to end against tests/servers/grant_server.py (mcpcall.auth.grants)."""

from __future__ import annotations

import base64
import threading
import time
from dataclasses import replace
from typing import Any

import pytest
import requests

jwt = pytest.importorskip("jwt")

import mcpcall
from mcpcall.auth.discovery import AuthError
from mcpcall.auth.flow import TokenEndpointError
from mcpcall.auth.grants import ClientCredentials, EnterpriseAuth, JWTBearer
from mcpcall.auth.jose import SigningKey
from mcpcall.auth.tokens import FileTokenStore, MemoryTokenStore
from tests.servers.grant_server import JWT_BEARER, TOKEN_EXCHANGE, GrantServer

pytestmark = pytest.mark.timeout(60)

SECRET = "s3cret-value-never-shown"
MESSAGE = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}

from tests.auth.conftest import _made  # closed after each test by the autouse fixture there


def made(auth: Any) -> Any:
    _made.append(auth)
    return auth


def post(srv: GrantServer, auth: Any, session: requests.Session | None = None) -> requests.Response:
    sender = session or requests
    response: requests.Response = sender.post(srv.mcp_url, json=MESSAGE, auth=auth, timeout=10)
    response.close()
    return response


def basic_pair(header: str) -> tuple[str, str]:
    client_id, _, secret = base64.b64decode(header[len("Basic "):]).decode().partition(":")
    return client_id, secret


# -- client_credentials --------------------------------------------------------------------------


def test_client_secret_basic_by_default() -> None:
    with GrantServer(secrets_={"svc": SECRET}) as srv:
        auth = made(ClientCredentials("svc", SECRET, timeout=5))
        response = post(srv, auth)
        assert response.status_code == 200
        assert len(response.history) == 1 and response.history[0].status_code == 401
        [request] = srv.token_requests
        assert request["auth_method"] == "client_secret_basic" and request["client_id"] == "svc"
        assert basic_pair(request["authorization"]) == ("svc", SECRET)
        assert request["form"] == {"grant_type": "client_credentials", "resource": srv.mcp_url}
        # the token is reused: no second 401, no second token request
        assert post(srv, auth).status_code == 200
        assert srv.unauthorized == 1 and len(srv.token_requests) == 1 and srv.mcp_ok == 2


def test_client_secret_post_when_that_is_all_the_server_takes() -> None:
    with GrantServer(secrets_={"svc": SECRET}, auth_methods=["client_secret_post"]) as srv:
        assert post(srv, made(ClientCredentials("svc", SECRET, timeout=5))).status_code == 200
        [request] = srv.token_requests
        assert request["authorization"] is None
        assert request["form"]["client_id"] == "svc" and request["form"]["client_secret"] == SECRET


def test_client_secret_basic_encodes_special_characters() -> None:
    odd_id, odd_secret = "svc:1 é", "p@ss:w/rd+="
    with GrantServer(secrets_={odd_id: odd_secret}) as srv:
        assert post(srv, made(ClientCredentials(odd_id, odd_secret, timeout=5))).status_code == 200
        assert srv.token_requests[0]["client_id"] == odd_id


@pytest.mark.parametrize("key_form", ["object", "pem", "jwk"])
def test_private_key_jwt(key_form: str) -> None:
    key = SigningKey.generate(kid="svc-key")
    given: Any = key
    if key_form == "pem":
        from cryptography.hazmat.primitives import serialization

        given = key._key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
    elif key_form == "jwk":
        import json

        given = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key._key))
    with GrantServer(keys={"svc": key.public_key()}, auth_methods=["private_key_jwt"]) as srv:
        assert post(srv, made(ClientCredentials("svc", signing_key=given, timeout=5))).status_code == 200
        [request] = srv.token_requests
        form = request["form"]
        assert request["auth_method"] == "private_key_jwt" and request["client_id"] == "svc"
        assert form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        claims = jwt.decode(form["client_assertion"], key.public_key(), algorithms=["ES256"], audience=srv.base)
        assert claims["iss"] == claims["sub"] == "svc" and claims["exp"] - claims["iat"] <= 60
        assert "client_secret" not in form and request["authorization"] is None


def test_key_preferred_over_secret_when_both_allowed_and_secret_when_key_not_listed() -> None:
    key = SigningKey.generate()
    with GrantServer(secrets_={"svc": SECRET}, keys={"svc": key.public_key()}) as srv:
        assert post(srv, made(ClientCredentials("svc", SECRET, signing_key=key, timeout=5))).status_code == 200
        assert srv.token_requests[0]["auth_method"] == "private_key_jwt"
    with GrantServer(secrets_={"svc": SECRET}, auth_methods=["client_secret_basic"]) as srv:
        assert post(srv, made(ClientCredentials("svc", SECRET, signing_key=key, timeout=5))).status_code == 200
        assert srv.token_requests[0]["auth_method"] == "client_secret_basic"
    with GrantServer(secrets_={"svc": SECRET}) as srv:
        auth = made(ClientCredentials("svc", SECRET, signing_key=key, auth_method="client_secret_post", timeout=5))
        assert post(srv, auth).status_code == 200
        assert srv.token_requests[0]["auth_method"] == "client_secret_post"


def test_no_method_in_common_is_an_error_without_the_secret() -> None:
    with GrantServer(secrets_={"svc": SECRET}, auth_methods=["private_key_jwt"]) as srv:
        with pytest.raises(AuthError) as info:
            post(srv, made(ClientCredentials("svc", SECRET, timeout=5)))
        message = str(info.value)
        assert "private_key_jwt" in message and "client_secret_basic" in message and SECRET not in message
        assert srv.token_requests == []


# -- scopes --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("server", "given", "expected"),
    [
        ({"challenge_scope": "mcp:tools", "scopes_supported": ["a", "b"]}, ["mine"], "mcp:tools"),
        ({"scopes_supported": ["a", "b"]}, ["mine"], "a b"),
        ({}, ["mine", "yours"], "mine yours"),
        ({}, None, None),
    ],
)
def test_scope_from_challenge_else_metadata_else_given_else_omitted(server: dict[str, Any], given: Any, expected: str | None) -> None:
    with GrantServer(secrets_={"svc": SECRET}, **server) as srv:
        assert post(srv, made(ClientCredentials("svc", SECRET, scopes=given, timeout=5))).status_code == 200
        assert srv.token_requests[0]["form"].get("scope") == expected


# -- threads, expiry, stores ---------------------------------------------------------------------


def test_eight_threads_one_token_request() -> None:
    with GrantServer(secrets_={"svc": SECRET}, token_delay=0.3) as srv:
        auth = made(ClientCredentials("svc", SECRET, timeout=5))
        barrier = threading.Barrier(8)
        statuses: list[int] = []
        errors: list[BaseException] = []

        def work() -> None:
            try:
                with requests.Session() as session:
                    barrier.wait(5)
                    statuses.append(post(srv, auth, session).status_code)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert not errors and statuses == [200] * 8
        assert len(srv.token_requests) == 1
        assert 1 <= srv.unauthorized <= 8 and srv.mcp_ok == 8  # each 401 was re-sent once, with the one token


def _about_to_expire(store: MemoryTokenStore) -> None:
    """Move every stored token's expiry to 1 s from now (its lifetime, and the server's clock, unchanged)."""
    for token in list(store._tokens.values()):
        store.put(replace(token, expires_at=time.time() + 1))


def test_token_renewed_before_expiry_without_a_401() -> None:
    with GrantServer(secrets_={"svc": SECRET}, expires_in=60) as srv:
        store = MemoryTokenStore()
        auth = made(ClientCredentials("svc", SECRET, token_store=store, timeout=5))
        assert post(srv, auth).status_code == 200
        _about_to_expire(store)  # within a quarter of its 60 s life
        assert post(srv, auth).status_code == 200
        assert srv.unauthorized == 1 and len(srv.token_requests) == 2


def test_renewal_failure_keeps_a_still_valid_token() -> None:
    with GrantServer(secrets_={"svc": SECRET}, expires_in=60) as srv:
        store = MemoryTokenStore()
        auth = made(ClientCredentials("svc", SECRET, token_store=store, timeout=5))
        assert post(srv, auth).status_code == 200
        _about_to_expire(store)
        srv.token_reply = (503, {"error": "temporarily_unavailable"}, {})
        assert post(srv, auth).status_code == 200  # the old token still works
        assert len(srv.token_requests) == 2


def test_a_rejected_token_gets_a_new_one(tmp_path: Any) -> None:
    with GrantServer(secrets_={"svc": SECRET}) as srv:
        auth = made(ClientCredentials("svc", SECRET, timeout=5))
        assert post(srv, auth).status_code == 200
        with srv.lock:
            srv.tokens.clear()  # the server forgets (revokes) every token
        assert post(srv, auth).status_code == 200
        assert len(srv.token_requests) == 2 and srv.unauthorized == 2


def test_file_store_token_reused_by_the_next_run(tmp_path: Any) -> None:
    store = FileTokenStore(tmp_path / "tokens.json")
    with GrantServer(secrets_={"svc": SECRET}) as srv:
        assert post(srv, made(ClientCredentials("svc", SECRET, token_store=store, timeout=5))).status_code == 200
        assert post(srv, made(ClientCredentials("svc", SECRET, token_store=store, timeout=5))).status_code == 200
        assert len(srv.token_requests) == 1  # the second object found the stored token after discovery
    assert SECRET not in (tmp_path / "tokens.json").read_text()


# -- failures ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ((401, {"error": "invalid_client", "error_description": SECRET}, {}), r"HTTP 401 \(invalid_client\)"),
        ((500, b"<html>oops</html>", {}), "HTTP 500"),
        ((200, b"not json", {}), "without a JSON object"),
        ((200, {"token_type": "Bearer"}, {}), "no access_token"),
        ((200, {"access_token": "x", "token_type": "DPoP"}, {}), "DPoP token"),
        ((200, {"access_token": "x", "token_type": "mac"}, {}), "unsupported token_type"),
    ],
)
def test_bad_token_responses(reply: tuple[int, Any, dict[str, str]], expected: str) -> None:
    with GrantServer(secrets_={"svc": SECRET}, token_reply=reply) as srv:
        with pytest.raises(AuthError, match=expected) as info:
            post(srv, made(ClientCredentials("svc", SECRET, timeout=5)))
        message = str(info.value)
        assert SECRET not in message and srv.base + "/token" in message
        assert "token request (client_credentials)" in message


def test_token_endpoint_error_carries_status_and_code() -> None:
    with GrantServer(secrets_={"svc": "other"}) as srv:
        with pytest.raises(TokenEndpointError) as info:
            post(srv, made(ClientCredentials("svc", SECRET, timeout=5)))
        assert info.value.status == 401 and info.value.error == "invalid_client"


def test_redirect_from_the_token_endpoint_is_not_followed() -> None:
    with GrantServer() as elsewhere, GrantServer(secrets_={"svc": SECRET}) as srv:
        srv.token_reply = (307, None, {"Location": elsewhere.base + "/steal"})
        with pytest.raises(AuthError, match="HTTP 307"):
            post(srv, made(ClientCredentials("svc", SECRET, timeout=5)))
        assert elsewhere.other_hits == [] and elsewhere.token_requests == []


def test_token_request_timeout_is_bounded() -> None:
    with GrantServer(secrets_={"svc": SECRET}, token_delay=2.0) as srv:
        started = time.monotonic()
        with pytest.raises(AuthError, match="within 0.5 s"):
            post(srv, made(ClientCredentials("svc", SECRET, timeout=0.5)))
        assert time.monotonic() - started < 2.5


def test_metadata_for_another_issuer_is_refused() -> None:
    with GrantServer(secrets_={"svc": SECRET}, metadata_issuer="https://attacker.example.com") as srv:
        with pytest.raises(AuthError, match="refusing to use it"):
            post(srv, made(ClientCredentials("svc", SECRET, timeout=5)))
        assert srv.token_requests == []


def test_pinned_issuer_keeps_credentials_from_other_servers() -> None:
    with GrantServer(secrets_={"svc": SECRET}) as srv:
        auth = made(ClientCredentials("svc", SECRET, issuer="https://as.example.com", timeout=5))
        with pytest.raises(AuthError, match="not sent there") as info:
            post(srv, auth)
        assert SECRET not in str(info.value) and srv.token_requests == []
        assert post(srv, made(ClientCredentials("svc", SECRET, issuer=srv.base, timeout=5))).status_code == 200
        assert len(srv.token_requests) == 1


def test_reprs_hide_secrets_and_assertions() -> None:
    key = SigningKey.generate()
    texts = [
        repr(ClientCredentials("svc", SECRET)),
        repr(ClientCredentials("svc", signing_key=key)),
        repr(JWTBearer("eyJhbGciOi.secret-assertion.sig", client_id="w")),
        repr(JWTBearer(lambda: "x", client_id="w")),
        repr(EnterpriseAuth("id-token-value", client_id="c", client_secret=SECRET, idp_token_endpoint="https://idp.example.com/t",
                            idp_client_id="i", idp_client_secret="idp-" + SECRET)),
    ]
    for text in texts:
        assert SECRET not in text and "secret-assertion" not in text and "id-token-value" not in text
    assert "svc" in texts[0] and "***" in texts[0]
    for auth in (ClientCredentials("svc", SECRET), JWTBearer("a")):
        auth.close()


def test_argument_checks() -> None:
    with pytest.raises(ValueError, match="client_secret or a signing_key"):
        ClientCredentials("svc")
    with pytest.raises(ValueError, match="auth_method"):
        ClientCredentials("svc", SECRET, auth_method="tls_client_auth")
    with pytest.raises(ValueError, match="timeout"):
        ClientCredentials("svc", SECRET, timeout=0)
    with pytest.raises(TypeError, match="list of strings"):
        ClientCredentials("svc", SECRET, scopes="a b")
    with pytest.raises(TypeError):
        JWTBearer("")
    with pytest.raises(ValueError, match="need a client_id"):
        JWTBearer("a", client_secret=SECRET)
    with pytest.raises(ValueError, match="idp_token_endpoint"):
        EnterpriseAuth("t", client_id="c")
    with pytest.raises(AuthError, match="https"):
        EnterpriseAuth("t", client_id="c", idp_token_endpoint="http://idp.example.com/token")


def test_forced_method_the_client_cannot_do() -> None:
    with GrantServer(secrets_={"svc": SECRET}) as srv, pytest.raises(AuthError, match="private_key_jwt needs client_id and signing_key"):
        post(srv, made(ClientCredentials("svc", SECRET, auth_method="private_key_jwt", timeout=5)))


# -- jwt-bearer ----------------------------------------------------------------------------------


def workload_jwt(key: SigningKey, audience: str, lifetime: int = 300) -> str:
    now = int(time.time())
    return key.sign({"iss": "https://idp.example", "sub": "workload", "aud": audience, "iat": now, "exp": now + lifetime})


def test_jwt_bearer_with_a_fixed_assertion() -> None:
    idp = SigningKey.generate()
    with GrantServer(assertion_key=idp.public_key(), auth_methods=["none"]) as srv:
        assertion = workload_jwt(idp, srv.base)
        assert post(srv, made(JWTBearer(assertion, client_id="wl", timeout=5))).status_code == 200
        [request] = srv.token_requests
        assert request["form"] == {"grant_type": JWT_BEARER, "assertion": assertion, "client_id": "wl", "resource": srv.mcp_url}
        assert request["authorization"] is None


def test_jwt_bearer_calls_the_provider_once_per_token_request() -> None:
    idp = SigningKey.generate()
    calls: list[float] = []
    with GrantServer(assertion_key=idp.public_key(), expires_in=60) as srv:

        def fresh() -> str:
            calls.append(time.time())
            return workload_jwt(idp, srv.base)

        store = MemoryTokenStore()
        auth = made(JWTBearer(fresh, token_store=store, timeout=5))
        assert post(srv, auth).status_code == 200
        _about_to_expire(store)
        assert post(srv, auth).status_code == 200  # renewed (expires within the margin): a new assertion
        assert len(calls) == 2 == len(srv.token_requests)
        assert srv.token_requests[0]["form"]["assertion"] != srv.token_requests[1]["form"]["assertion"]


def test_jwt_bearer_rejected_assertion_is_not_retried() -> None:
    idp, wrong = SigningKey.generate(), SigningKey.generate()
    with GrantServer(assertion_key=idp.public_key()) as srv:
        assertion = workload_jwt(wrong, srv.base)
        with pytest.raises(TokenEndpointError, match=r"jwt-bearer.*invalid_grant") as info:
            post(srv, made(JWTBearer(assertion, timeout=5)))
        assert assertion not in str(info.value)
        assert len(srv.token_requests) == 1


def test_jwt_bearer_provider_failures() -> None:
    with GrantServer() as srv:

        def broken() -> str:
            raise RuntimeError("cannot read /var/run/secrets/token: " + SECRET)

        with pytest.raises(AuthError, match=r"assertion provider failed \(RuntimeError\)") as info:
            post(srv, made(JWTBearer(broken, timeout=5)))
        assert SECRET not in str(info.value)
        with pytest.raises(AuthError, match="non-empty string"):
            post(srv, made(JWTBearer(lambda: None, timeout=5)))  # type: ignore[arg-type,return-value]
        assert srv.token_requests == []


# -- enterprise-managed authorization ------------------------------------------------------------


@pytest.mark.parametrize("discover_idp", [False, True])
def test_enterprise_flow(discover_idp: bool) -> None:
    with GrantServer(secrets_={"mcp-client": SECRET}, scopes_supported=["mcp:read"]) as srv:
        where = {"idp_issuer": srv.idp_issuer} if discover_idp else {"idp_token_endpoint": srv.idp_token_endpoint}
        auth = made(EnterpriseAuth(srv.id_token, client_id="mcp-client", client_secret=SECRET, idp_client_id="at-idp", timeout=5,
                                   **where))
        assert post(srv, auth).status_code == 200
        [exchange] = srv.idp_requests
        assert exchange["form"] == {
            "grant_type": TOKEN_EXCHANGE,
            "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
            "audience": srv.base,
            "resource": srv.mcp_url,
            "subject_token": srv.id_token,
            "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
            "scope": "mcp:read",
            "client_id": "at-idp",
        }
        [grant] = srv.token_requests
        assert grant["form"]["grant_type"] == JWT_BEARER and grant["auth_method"] == "client_secret_basic"
        header = jwt.get_unverified_header(grant["form"]["assertion"])
        assert header["typ"] == "oauth-id-jag+jwt"
        assert grant["form"]["resource"] == srv.mcp_url and grant["form"]["scope"] == "mcp:read"
        assert post(srv, auth).status_code == 200 and len(srv.idp_requests) == 1


def test_enterprise_idp_client_secret_uses_basic() -> None:
    with GrantServer(secrets_={"mcp-client": SECRET}) as srv:
        auth = made(EnterpriseAuth(lambda: srv.id_token, client_id="mcp-client", client_secret=SECRET,
                                   idp_token_endpoint=srv.idp_token_endpoint, idp_client_id="at-idp", idp_client_secret="idp-pw",
                                   timeout=5))
        assert post(srv, auth).status_code == 200
        assert basic_pair(srv.idp_requests[0]["authorization"]) == ("at-idp", "idp-pw")
        assert "client_id" not in srv.idp_requests[0]["form"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ((400, {"error": "invalid_grant"}, {}), r"token exchange .* enterprise IdP .* HTTP 400 \(invalid_grant\)"),
        ((200, {"issued_token_type": "urn:ietf:params:oauth:token-type:id-jag"}, {}), "no access_token"),
        ((200, {"access_token": "x", "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}, {}), "not an ID-JAG"),
    ],
)
def test_enterprise_idp_failures(reply: tuple[int, Any, dict[str, str]], expected: str) -> None:
    with GrantServer(secrets_={"mcp-client": SECRET}, idp_reply=reply) as srv:
        auth = made(EnterpriseAuth("the-users-id-token", client_id="mcp-client", client_secret=SECRET,
                                   idp_token_endpoint=srv.idp_token_endpoint, timeout=5))
        with pytest.raises(AuthError, match=expected) as info:
            post(srv, auth)
        assert "the-users-id-token" not in str(info.value) and SECRET not in str(info.value)
        assert srv.token_requests == []


def test_enterprise_wrong_id_token_fails_at_the_idp() -> None:
    with GrantServer(secrets_={"mcp-client": SECRET}) as srv:
        auth = made(EnterpriseAuth("not-the-token", client_id="mcp-client", client_secret=SECRET,
                                   idp_token_endpoint=srv.idp_token_endpoint, timeout=5))
        with pytest.raises(AuthError, match="enterprise IdP"):
            post(srv, auth)


# -- through mcpcall.connect ---------------------------------------------------------------------


def test_connect_with_client_credentials() -> None:
    with GrantServer(secrets_={"svc": SECRET}) as srv:
        auth = made(ClientCredentials("svc", SECRET, timeout=5))
        with mcpcall.connect(srv.mcp_url, auth=auth, protocol="2025-11-25", timeout=10) as client:
            assert [tool.name for tool in client.list_tools()] == ["echo"]
            assert client.call_tool("echo", {"text": "hi"}).text == "hi"
        assert len(srv.token_requests) == 1


def test_connect_surfaces_the_auth_error() -> None:
    with GrantServer(secrets_={"svc": "other"}) as srv:
        auth = made(ClientCredentials("svc", SECRET, timeout=5))
        with pytest.raises(mcpcall.MCPError) as info:
            mcpcall.connect(srv.mcp_url, auth=auth, protocol="2025-11-25", timeout=10)
        assert SECRET not in str(info.value)
