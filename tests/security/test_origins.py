"""Credentials stay where they belong: a grant's credentials at one authorization server, a token at its server.

An MCP server chooses which authorization server its metadata names: that is OAuth's design, and the
only thing it may choose. These tests play a second, hostile server beside an honest one, with one
auth object shared by both (as a registry or a long-lived process does), and look at what the
hostile one received. The peers are tests/servers/grant_server.py and tests/servers/oauth_server.py
on 127.0.0.1; each records every Authorization header its MCP endpoint saw.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

pytest.importorskip("jwt")  # the peers sign and check JWTs with PyJWT (the test extra)

import mcpcall
from mcpcall.auth.discovery import AuthError
from mcpcall.auth.grants import ClientCredentials, EnterpriseAuth, JWTBearer
from mcpcall.auth.jose import SigningKey
from tests.servers.grant_server import GrantServer
from tests.servers.oauth_server import OAuthServer

SECRET = "client-s3cret-never-sent-twice"
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
REDIRECT = "http://127.0.0.1:9/callback"


@pytest.fixture
def made() -> Iterator[list[Any]]:
    """Auth objects the test makes, closed after it."""
    objects: list[Any] = []
    yield objects
    for auth in objects:
        auth.close()
    gc.collect()  # the tracebacks of expected AuthErrors hold responses (and their sockets) in cycles


def _post(url: str, auth: Any) -> requests.Response:
    response = requests.post(url, json=PING, auth=auth, timeout=10)
    response.close()
    return response


def _tokens_in(presented: list[str]) -> set:
    return {header.split(" ", 1)[1] for header in presented if " " in header}


def _grant(kind: str, honest: GrantServer, idp: SigningKey) -> Any:
    if kind == "client_credentials":
        return ClientCredentials("svc", SECRET, timeout=5)
    if kind == "jwt_bearer":
        now = int(time.time())
        assertion = idp.sign({"iss": "https://idp.example", "sub": "workload", "aud": honest.base, "iat": now, "exp": now + 300})
        return JWTBearer(assertion, client_id="workload", timeout=5)  # a public client: the assertion is the credential
    return EnterpriseAuth(honest.id_token, client_id="mcp-client", client_secret=SECRET, idp_token_endpoint=honest.idp_token_endpoint,
                          idp_client_id="at-idp", timeout=5)


@pytest.mark.parametrize("kind", ["client_credentials", "jwt_bearer", "token_exchange"])
def test_no_grant_sends_anything_to_the_authorization_server_a_second_server_names(kind: str, made: list[Any]) -> None:
    idp = SigningKey.generate()
    clients = {"svc": SECRET, "mcp-client": SECRET}
    with GrantServer(secrets_=clients, assertion_key=idp.public_key()) as honest, \
            GrantServer(secrets_=clients, assertion_key=idp.public_key()) as hostile:
        auth = _grant(kind, honest, idp)
        made.append(auth)
        assert _post(honest.mcp_url, auth).status_code == 200
        exchanges = len(honest.idp_requests)  # the token exchange at the enterprise IdP (token_exchange only)
        with pytest.raises(AuthError, match="not sent there") as refused:
            _post(hostile.mcp_url, auth)
        assert SECRET not in str(refused.value)
        assert hostile.token_requests == [] and hostile.idp_requests == []  # no secret, assertion or ID-JAG went there
        assert len(honest.idp_requests) == exchanges  # no ID-JAG was even minted for the hostile server
        assert _tokens_in(hostile.presented) == set()  # nor the honest server's token
        assert _post(honest.mcp_url, auth).status_code == 200  # still good where it belongs


def _follow(url: str) -> str:
    response = requests.get(url, allow_redirects=False, timeout=5)
    response.close()
    assert response.status_code == 302, response.text
    return str(response.headers["Location"])


def _oauth(made: list[Any]) -> mcpcall.OAuth:
    auth = mcpcall.OAuth(redirect_uri=REDIRECT, redirect_handler=_follow, timeout=5.0)
    made.append(auth)
    return auth


def test_one_oauth_object_sends_each_server_only_its_own_token(made: list[Any]) -> None:
    auth = _oauth(made)
    with OAuthServer() as first, OAuthServer() as second:
        for server in (first, second, first, second):
            assert _post(server.mcp_url, auth).status_code == 200
        assert _tokens_in(first.presented) and _tokens_in(second.presented)
        assert _tokens_in(first.presented) <= set(first.tokens)
        assert _tokens_in(second.presented) <= set(second.tokens)


class _NamesAnother(OAuthServer):
    """A server whose resource metadata names another server's authorization server as its own."""

    named = ""

    def prm(self) -> dict[str, Any]:
        return {"resource": self.mcp_url, "authorization_servers": [self.named]}


def test_a_server_naming_your_authorization_server_gets_no_token_of_another_server(made: list[Any]) -> None:
    auth = _oauth(made)
    with OAuthServer() as honest, _NamesAnother() as hostile:
        hostile.named = honest.base
        assert _post(honest.mcp_url, auth).status_code == 200
        with pytest.raises(AuthError):  # the honest authorization server refuses a token for another resource
            _post(hostile.mcp_url, auth)
        assert _tokens_in(hostile.presented) == set()
        asked = [t["form"].get("resource") for t in honest.token_requests]
        assert asked == [honest.mcp_url, hostile.mcp_url]  # each token asked for names its own server (RFC 8707)


class _ClaimsAnotherResource(OAuthServer):
    """A server whose resource metadata speaks for another resource (one whose tokens it wants)."""

    def prm(self) -> dict[str, Any]:
        return {"resource": "https://bank.example/mcp", "authorization_servers": [self.base]}


class _MetadataOfAnotherIssuer(OAuthServer):
    """An authorization server metadata document that names another issuer than the one it was fetched for."""

    def as_metadata(self) -> dict[str, Any]:
        return {**super().as_metadata(), "issuer": "https://login.bank.example"}


@pytest.mark.parametrize("server_class, says", [(_ClaimsAnotherResource, "not for the MCP server"),
                                                (_MetadataOfAnotherIssuer, "names issuer")])
def test_metadata_that_speaks_for_someone_else_stops_the_flow_before_anything_is_sent(
        made: list[Any], server_class: Any, says: str) -> None:
    auth = _oauth(made)
    with server_class() as server:
        with pytest.raises(AuthError, match=says):
            _post(server.mcp_url, auth)
        assert server.registrations == [] and server.authorize_requests == [] and server.token_requests == []
