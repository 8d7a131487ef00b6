"""Tests for mcpcall.auth.challenge and mcpcall.auth.discovery: pure, no network."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpcall.auth.challenge import Challenge, bearer_challenge, parse_www_authenticate
from mcpcall.auth.discovery import (
    AuthError,
    authorization_server_metadata_urls,
    canonical_resource,
    check_authorization_server,
    check_protected_resource,
    protected_resource_metadata_urls,
)
from mcpcall.errors import MCPError

# -- WWW-Authenticate ------------------------------------------------------------------------------


def test_spec_example_header() -> None:
    # MCP 2025-11-25 basic/authorization.mdx, "Example 401 response with scope guidance"
    value = (
        'Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource",\n'
        '                         scope="files:read"'
    )
    [challenge] = parse_www_authenticate(value)
    assert challenge.scheme == "Bearer"
    assert challenge.resource_metadata == "https://mcp.example.com/.well-known/oauth-protected-resource"
    assert challenge.scope == ("files:read",)
    assert challenge.error is None and challenge.error_description is None


def test_insufficient_scope_example() -> None:
    value = (
        'Bearer error="insufficient_scope", scope="files:read files:write user:profile", '
        'resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", '
        'error_description="Additional file write permission required"'
    )
    [challenge] = parse_www_authenticate(value)
    assert challenge.error == "insufficient_scope"
    assert challenge.scope == ("files:read", "files:write", "user:profile")
    assert challenge.error_description == "Additional file write permission required"


def test_multiple_challenges_and_commas_in_quotes() -> None:
    value = 'Basic realm="a, b", Bearer realm="x", error=invalid_token, Newauth abc=='
    challenges = parse_www_authenticate(value)
    assert [c.scheme for c in challenges] == ["Basic", "Bearer", "Newauth"]
    assert challenges[0].params == {"realm": "a, b"}
    assert challenges[1].params == {"realm": "x", "error": "invalid_token"}
    assert challenges[2].token68 == "abc==" and challenges[2].params == {}


def test_escapes_and_case_insensitivity() -> None:
    [challenge] = parse_www_authenticate(r'BEARER Realm="say \"hi\" \\ ok", SCOPE = "a"')
    assert challenge.is_scheme("bearer")
    assert challenge.params == {"realm": 'say "hi" \\ ok', "scope": "a"}
    assert challenge.scope == ("a",)


def test_token68_and_bare_scheme() -> None:
    assert parse_www_authenticate("Basic dXNlcjpwYXNz") == [Challenge("Basic", {}, "dXNlcjpwYXNz")]
    assert parse_www_authenticate("Bearer") == [Challenge("Bearer")]
    assert [c.scheme for c in parse_www_authenticate("Negotiate, Bearer")] == ["Negotiate", "Bearer"]


def test_first_value_of_repeated_param_wins() -> None:
    [challenge] = parse_www_authenticate('Bearer scope="a", scope="b"')
    assert challenge.scope == ("a",)


@pytest.mark.parametrize(
    "junk",
    ["", "   ", ",,,", "=", '"', 'Bearer realm="unterminated', "realm=x", "Bearer @@@, Basic", "\x00\x01", 'Bearer a="b" c'],
)
def test_junk_never_raises(junk: str) -> None:
    result = parse_www_authenticate(junk)
    assert isinstance(result, list)


def test_junk_is_skipped_but_the_rest_is_kept() -> None:
    challenges = parse_www_authenticate('realm=x, Bearer @@@, error="e", Basic realm="r"')
    assert [c.scheme for c in challenges] == ["Bearer", "Basic"]
    assert challenges[0].params == {"error": "e"}
    assert parse_www_authenticate(None) == []  # type: ignore[arg-type]


def test_bearer_challenge_picks_by_scheme() -> None:
    lines = ['Basic realm="x"', 'DPoP algs="ES256", Bearer resource_metadata="https://r/.well-known/x"']
    bearer = bearer_challenge(lines)
    assert bearer is not None and bearer.resource_metadata == "https://r/.well-known/x"
    dpop = bearer_challenge(lines, scheme="dpop")
    assert dpop is not None and dpop.params == {"algs": "ES256"}
    assert bearer_challenge(['Basic realm="x"']) is None
    assert bearer_challenge('bearer error="invalid_token"') is not None
    assert bearer_challenge([]) is None


def test_challenge_is_frozen_and_hashable() -> None:
    [challenge] = parse_www_authenticate('Bearer realm="x"')
    with pytest.raises(dataclasses.FrozenInstanceError):
        challenge.scheme = "Basic"  # type: ignore[misc]
    with pytest.raises(TypeError):
        challenge.params["realm"] = "y"  # type: ignore[index]
    assert hash(challenge) == hash(Challenge("Bearer", {"realm": "x"}))


_TOKEN_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~!#$%&'*+^`|")
_TOKEN = st.text(alphabet="".join(sorted(_TOKEN_CHARS)), min_size=1, max_size=12)


# That any text is read without raising, at a linear cost: tests/fuzz/test_fuzz_auth.py.


@given(scheme=_TOKEN, params=st.dictionaries(_TOKEN.map(str.lower), st.text(max_size=20), max_size=5), quote_all=st.booleans())
def test_round_trip_simple_params(scheme: str, params: dict[str, str], quote_all: bool) -> None:
    def encode(value: str) -> str:
        if not quote_all and value and all(ch in _TOKEN_CHARS for ch in value):
            return value
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    header = scheme + (" " + ", ".join(f"{k}={encode(v)}" for k, v in params.items()) if params else "")
    challenges = parse_www_authenticate(header + ", Other x=1")
    assert challenges[0].scheme == scheme
    assert dict(challenges[0].params) == params
    assert challenges[1].scheme == "Other" and challenges[1].params == {"x": "1"}


# -- well-known URLs -------------------------------------------------------------------------------


def test_protected_resource_urls_spec_example() -> None:
    # MCP 2025-11-25 basic/authorization.mdx "Protected Resource Metadata Discovery Requirements":
    # header URL when present, else path-inserted, then root.
    assert protected_resource_metadata_urls("https://example.com/public/mcp") == [
        "https://example.com/.well-known/oauth-protected-resource/public/mcp",
        "https://example.com/.well-known/oauth-protected-resource",
    ]
    hint = "https://mcp.example.com/.well-known/oauth-protected-resource"
    assert protected_resource_metadata_urls("https://example.com/public/mcp", hint) == [
        hint,
        "https://example.com/.well-known/oauth-protected-resource/public/mcp",
        "https://example.com/.well-known/oauth-protected-resource",
    ]


def test_protected_resource_urls_edge_cases() -> None:
    assert protected_resource_metadata_urls("HTTPS://Example.COM:443/") == [
        "https://example.com/.well-known/oauth-protected-resource"
    ]
    assert protected_resource_metadata_urls("http://127.0.0.1:8080/mcp/") == [
        "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp",
        "http://127.0.0.1:8080/.well-known/oauth-protected-resource",
    ]
    # a hint that is the same as a fallback is not tried twice; a hint that is no URL is ignored
    root = "https://example.com/.well-known/oauth-protected-resource"
    assert protected_resource_metadata_urls("https://example.com", root) == [root]
    assert protected_resource_metadata_urls("https://example.com", "not a url") == [root]
    assert protected_resource_metadata_urls("https://user:pw@example.com/mcp#frag") == [
        "https://example.com/.well-known/oauth-protected-resource/mcp",
        root,
    ]
    with pytest.raises(AuthError):
        protected_resource_metadata_urls("mcp.example.com")


def test_authorization_server_urls_spec_examples() -> None:
    # MCP 2025-11-25 basic/authorization.mdx "Authorization Server Metadata Discovery" (priority order)
    assert authorization_server_metadata_urls("https://auth.example.com/tenant1") == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example.com/.well-known/openid-configuration/tenant1",
        "https://auth.example.com/tenant1/.well-known/openid-configuration",
    ]
    assert authorization_server_metadata_urls("https://auth.example.com") == [
        "https://auth.example.com/.well-known/oauth-authorization-server",
        "https://auth.example.com/.well-known/openid-configuration",
    ]


def test_authorization_server_urls_edge_cases() -> None:
    assert authorization_server_metadata_urls("https://auth.example.com/") == [
        "https://auth.example.com/.well-known/oauth-authorization-server",
        "https://auth.example.com/.well-known/openid-configuration",
    ]
    assert (
        authorization_server_metadata_urls("https://auth.example.com/a/b/")[2]
        == "https://auth.example.com/a/b/.well-known/openid-configuration"
    )
    for bad in ["https://auth.example.com/?x=1", "https://auth.example.com#f", "ftp://auth.example.com", "auth.example.com"]:
        with pytest.raises(AuthError):
            authorization_server_metadata_urls(bad)


# -- canonical resource ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # the spec's valid canonical URIs stay as they are
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com", "https://mcp.example.com"),
        ("https://mcp.example.com:8443", "https://mcp.example.com:8443"),
        ("https://mcp.example.com/server/mcp", "https://mcp.example.com/server/mcp"),
        # uppercase scheme/host, fragment, root trailing slash, default port, user info
        ("HTTPS://MCP.Example.COM/Mcp", "https://mcp.example.com/Mcp"),
        ("https://mcp.example.com#fragment", "https://mcp.example.com"),
        ("https://mcp.example.com/", "https://mcp.example.com"),
        ("https://mcp.example.com:443/mcp", "https://mcp.example.com/mcp"),
        ("http://localhost:80/mcp", "http://localhost/mcp"),
        ("https://u:p@mcp.example.com/mcp", "https://mcp.example.com/mcp"),
        ("http://[::1]:3000/mcp", "http://[::1]:3000/mcp"),
        ("https://mcp.example.com/mcp?tenant=1", "https://mcp.example.com/mcp?tenant=1"),
    ],
)
def test_canonical_resource(url: str, expected: str) -> None:
    assert canonical_resource(url) == expected


@pytest.mark.parametrize("url", ["mcp.example.com", "", "https://", "https://host:notaport/", "file:///x"])
def test_canonical_resource_rejects(url: str) -> None:
    with pytest.raises(AuthError):
        canonical_resource(url)


# -- protected resource metadata -------------------------------------------------------------------


def _prm(**extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"resource": "https://mcp.example.com/mcp", "authorization_servers": ["https://auth.example.com"]}
    doc.update(extra)
    return doc


def test_check_protected_resource_ok() -> None:
    result = check_protected_resource(_prm(scopes_supported=["a", "b"]), "HTTPS://MCP.EXAMPLE.COM:443/mcp#x")
    assert result.resource == "https://mcp.example.com/mcp"
    assert result.authorization_servers == ("https://auth.example.com",)
    assert result.scopes_supported == ("a", "b")
    assert result.raw["resource"] == "https://mcp.example.com/mcp"
    assert check_protected_resource(_prm(), "https://mcp.example.com/mcp").scopes_supported is None
    assert check_protected_resource(_prm(resource="https://mcp.example.com/"), "https://mcp.example.com").resource


def test_check_protected_resource_mismatch() -> None:
    with pytest.raises(AuthError, match="mcp.example.com/other.*mcp.example.com/mcp"):
        check_protected_resource(_prm(resource="https://mcp.example.com/other"), "https://mcp.example.com/mcp")
    # a parent is not identical: refused unless asked for
    with pytest.raises(AuthError):
        check_protected_resource(_prm(resource="https://mcp.example.com"), "https://mcp.example.com/mcp")
    ok = check_protected_resource(_prm(resource="https://mcp.example.com"), "https://mcp.example.com/mcp", allow_parent=True)
    assert ok.resource == "https://mcp.example.com"
    for parent in ["https://mcp.example.com/m", "https://evil.example.com", "http://mcp.example.com"]:
        with pytest.raises(AuthError):
            check_protected_resource(_prm(resource=parent), "https://mcp.example.com/mcp", allow_parent=True)


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"authorization_servers": ["https://a"]},
        _prm(resource=3),
        _prm(resource="not a url"),
        _prm(authorization_servers=[]),
        _prm(authorization_servers="https://a"),
        {"resource": "https://mcp.example.com/mcp"},
        _prm(scopes_supported=[1]),
    ],
)
def test_check_protected_resource_rejects(doc: Any) -> None:
    with pytest.raises(AuthError):
        check_protected_resource(doc, "https://mcp.example.com/mcp")


def test_errors_redact_secrets() -> None:
    server = "https://mcp.example.com/mcp?access_token=SECRET1"
    with pytest.raises(AuthError) as info:
        check_protected_resource(_prm(resource="https://other.example.com/?api_key=SECRET2"), server)
    message = str(info.value)
    assert "SECRET1" not in message and "SECRET2" not in message
    assert "mcp.example.com" in message and "other.example.com" in message
    with pytest.raises(AuthError) as info:
        check_authorization_server(_asm(token_endpoint="http://auth.example.com/token?client_secret=SECRET3"), ISSUER)
    assert "SECRET3" not in str(info.value)
    with pytest.raises(AuthError) as info:
        canonical_resource("https://u:SECRET4@host:bad/")
    assert "SECRET4" not in str(info.value)
    assert isinstance(info.value, MCPError)


# -- authorization server metadata -----------------------------------------------------------------

ISSUER = "https://auth.example.com/tenant1"


def _asm(**extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "issuer": ISSUER,
        "authorization_endpoint": "https://auth.example.com/tenant1/authorize",
        "token_endpoint": "https://auth.example.com/tenant1/token",
        "code_challenge_methods_supported": ["plain", "S256"],
    }
    doc.update(extra)
    return doc


def test_check_authorization_server_ok() -> None:
    result = check_authorization_server(
        _asm(
            registration_endpoint="https://auth.example.com/register",
            scopes_supported=["openid"],
            token_endpoint_auth_methods_supported=["none", "private_key_jwt"],
            client_id_metadata_document_supported=True,
        ),
        ISSUER,
    )
    assert result.issuer == ISSUER
    assert result.token_endpoint.endswith("/token")
    assert result.registration_endpoint == "https://auth.example.com/register"
    assert result.code_challenge_methods_supported == ("plain", "S256")
    assert result.token_endpoint_auth_methods_supported == ("none", "private_key_jwt")
    assert result.client_id_metadata_document_supported is True
    minimal = check_authorization_server(_asm(), ISSUER)
    assert minimal.registration_endpoint is None and minimal.client_id_metadata_document_supported is False
    assert "raw" not in repr(minimal)


def test_loopback_http_allowed() -> None:
    for host in ["127.0.0.1:9000", "localhost", "[::1]:8080"]:
        issuer = f"http://{host}"
        doc = _asm(issuer=issuer, authorization_endpoint=f"http://{host}/a", token_endpoint=f"http://{host}/t")
        assert check_authorization_server(doc, issuer).issuer == issuer


def test_issuer_must_be_identical() -> None:
    # MCP 2026-07-28 authorization-server-discovery.mdx: the attacker example
    with pytest.raises(AuthError, match="refusing"):
        check_authorization_server(_asm(issuer="https://honest.example"), "https://attacker.example")
    for near in [ISSUER + "/", "HTTPS://auth.example.com/tenant1", None, 5]:
        with pytest.raises(AuthError):
            check_authorization_server(_asm(issuer=near), ISSUER)


@pytest.mark.parametrize(
    "extra",
    [
        {"authorization_endpoint": None},
        {"token_endpoint": None},
        {"token_endpoint": "http://auth.example.com/token"},
        {"authorization_endpoint": "http://auth.example.com/authorize"},
        {"registration_endpoint": "http://auth.example.com/register"},
        {"registration_endpoint": 7},
        {"token_endpoint": "/token"},
        {"code_challenge_methods_supported": None},
        {"code_challenge_methods_supported": ["plain"]},
        {"code_challenge_methods_supported": "S256"},
        {"scopes_supported": "openid"},
    ],
)
def test_check_authorization_server_rejects(extra: dict[str, Any]) -> None:
    doc = _asm(**extra)
    for key in [k for k, v in extra.items() if v is None]:
        del doc[key]
    with pytest.raises(AuthError):
        check_authorization_server(doc, ISSUER)


def test_pkce_refusal_messages() -> None:
    doc = _asm()
    del doc["code_challenge_methods_supported"]
    with pytest.raises(AuthError, match="PKCE"):
        check_authorization_server(doc, ISSUER)
    with pytest.raises(AuthError, match="S256"):
        check_authorization_server(_asm(code_challenge_methods_supported=["plain"]), ISSUER)
    with pytest.raises(AuthError):
        check_authorization_server("nope", ISSUER)  # type: ignore[arg-type]
