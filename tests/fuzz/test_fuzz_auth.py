"""What an authorization server or a protected MCP server sends: WWW-Authenticate headers, metadata, token responses.

Properties: the header parser never raises (its docstring says so) and gives well-formed challenges;
metadata checks raise only :class:`AuthError`; a token response gives a Token or a
:class:`TokenResponseError`; URLs in every message are redacted, and redacting never raises. Costs:
parsing a header is linear (counted steps), and so is every check of a document, however its strings
are built (timed: the redaction is regular expressions).
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from mcpcall.auth.challenge import bearer_challenge, parse_www_authenticate
from mcpcall.auth.discovery import (
    authorization_server_metadata_urls,
    check_authorization_server,
    check_protected_resource,
    protected_resource_metadata_urls,
)
from mcpcall.auth.tokens import Token
from mcpcall.errors import AuthError, TokenResponseError
from mcpcall import urls as urls_module
from mcpcall.urls import redact_url

from .cost import assert_comparable, assert_linear, assert_linear_time, steps
from .profiles import fuzz
from .strategies import BIG_INTS, field_values, hostile_text, json_values, long_texts, numbers, shaped, texts

SERVER = "https://mcp.example.com/mcp"
ISSUER = "https://auth.example.com"

# -- WWW-Authenticate ---------------------------------------------------------------------------------------

header_units = st.text(st.sampled_from(' ,="\\=aB\t\r\n;/+~.'), min_size=1, max_size=10)
headers = st.one_of(
    hostile_text,
    st.text(alphabet=' ,="\\=abcBearer\t', max_size=60),
    st.tuples(header_units, st.integers(0, 300)).map(lambda t: t[0] * t[1]),
    st.lists(st.sampled_from(['Bearer', 'realm="x"', 'scope="a b"', "error=invalid_token", 'resource_metadata="https://h/x"',
                              "DPoP", "Basic", "abc==", '"', "\\", ",", " ", "=", "a=", 'a="', 'b="\\"']), max_size=20)
    .map(" ".join),
)


@fuzz(300)
@given(headers)
@example('Bearer a="' + "\\" * 1000)
@example('a="' + ',a="' * 500)
def test_a_header_is_read_without_raising(value: str) -> None:
    for challenge in parse_www_authenticate(value):
        assert challenge.scheme and all(c in "!#$%&'*+-.^_`|~" or c.isascii() and c.isalnum() for c in challenge.scheme)
        assert all(name == name.lower() for name in challenge.params)
        assert isinstance(challenge.scope, tuple)
    found = bearer_challenge([value, value])
    assert found is None or found.is_scheme("Bearer")


@fuzz(100)
@given(st.one_of(numbers, json_values, st.lists(texts, max_size=3)))
def test_a_header_of_any_type_is_no_challenge(value: Any) -> None:
    assert parse_www_authenticate(value) == [] or isinstance(value, str)


@fuzz(40, deadline=None)
@given(st.text(st.sampled_from('Ba ,="\\=\t'), max_size=4), header_units, st.text(st.sampled_from('Ba ,="\\='), max_size=4))
@example("", 'a="', "")
@example("Bearer ", "x=1 ", '"')
def test_reading_a_header_costs_linear_steps(prefix: str, unit: str, suffix: str) -> None:
    assert_linear(lambda n: steps(parse_www_authenticate, prefix + unit * n + suffix), 16, f"{prefix!r} + {unit!r} * n")


def test_a_crafted_header_costs_about_what_a_plain_one_does() -> None:
    plain = 'Bearer realm="mcp", scope="read write", error="invalid_token", '
    for unit in ('a="', 'a="\\', "a b c ", '",a="', "Bearer " + "x" * 40, 'x=' + '"' * 10, "=" * 10, "\\\"" * 5):
        size = 20_000
        assert_comparable(lambda header: steps(parse_www_authenticate, header), (plain * size)[:size],
                          (unit * size)[:size], f"a header of {unit!r}", limit=4)


# -- metadata documents -------------------------------------------------------------------------------------

urls = st.one_of(
    st.sampled_from([SERVER, SERVER + "/", "HTTPS://MCP.EXAMPLE.COM:443/mcp", "https://mcp.example.com", ISSUER,
                     "http://127.0.0.1:8/x", "https://[::1]/", "https://h:99999/", "https://[bad/", "//h/x", "file:///etc",
                     "https://u:p@h/mcp?token=abc", "https://h/\u00e9", "https://h\u3002example.com/",
                     "https://example.com\uff03@evil.com/"]),
    texts,
    long_texts(30_000),
)
resource_metadata = shaped({"resource": urls, "authorization_servers": st.lists(urls, max_size=3),
                            "scopes_supported": st.lists(texts, max_size=3)})
server_metadata = shaped({"issuer": st.one_of(st.just(ISSUER), urls), "authorization_endpoint": urls, "token_endpoint": urls,
                          "registration_endpoint": urls, "code_challenge_methods_supported": st.lists(
                              st.sampled_from(["S256", "plain", ""]), max_size=3),
                          "scopes_supported": st.lists(texts, max_size=2), "token_endpoint_auth_methods_supported":
                          st.lists(texts, max_size=2), "client_id_metadata_document_supported": field_values()})


@fuzz(200)
@given(st.one_of(resource_metadata, json_values), st.booleans())
def test_protected_resource_metadata_is_accepted_or_refused_with_an_auth_error(document: Any, parent: bool) -> None:
    try:
        found = check_protected_resource(document, SERVER, allow_parent=parent)
    except AuthError as exc:
        assert "token=abc" not in str(exc) and "u:p@" not in str(exc)  # URLs redacted
        return
    assert found.authorization_servers and all(isinstance(s, str) for s in found.authorization_servers)


@fuzz(200)
@given(st.one_of(server_metadata, json_values))
def test_authorization_server_metadata_is_accepted_or_refused_with_an_auth_error(document: Any) -> None:
    try:
        found = check_authorization_server(document, ISSUER)
    except AuthError as exc:
        assert "token=abc" not in str(exc) and "u:p@" not in str(exc)
        return
    assert "S256" in found.code_challenge_methods_supported and found.issuer == ISSUER


@fuzz(150)
@given(urls, st.one_of(st.none(), urls))
def test_where_to_look_is_an_auth_error_at_worst(issuer: str, hint: str | None) -> None:
    # The issuer comes from the resource's metadata, the hint from a 401's challenge: both the server's.
    try:
        for url in authorization_server_metadata_urls(issuer):
            assert url.startswith(("https://", "http://127.0.0.1", "http://localhost", "http://[::1]"))
    except AuthError:
        pass
    assert protected_resource_metadata_urls(SERVER, hint)[-1] == "https://mcp.example.com/.well-known/oauth-protected-resource"


def _issuer_document(issuer: str) -> dict[str, Any]:
    return {"issuer": issuer, "authorization_endpoint": "https://a/x", "token_endpoint": "https://a/t",
            "code_challenge_methods_supported": ["S256"]}


def _check_quietly(check: Any, document: Any, *args: Any) -> None:
    try:
        check(document, *args)
    except AuthError:
        pass


@fuzz(15, deadline=None)
@given(st.sampled_from(["issuer", "resource", "authorization_endpoint"]),
       st.text(st.sampled_from("a1:/?#@=&;-_.%~ \"'(<"), min_size=1, max_size=6))
@example("issuer", "a")  # redact_url's embedded-URL pattern rescanned each run of letters from every position
@example("resource", "a")
def test_checking_a_document_is_linear_in_its_strings(field: str, unit: str) -> None:
    def check(text: str) -> None:
        if field == "resource":
            _check_quietly(check_protected_resource, {"resource": text, "authorization_servers": [ISSUER]}, SERVER)
        elif field == "issuer":
            _check_quietly(check_authorization_server, _issuer_document(text), ISSUER)
        else:
            _check_quietly(check_authorization_server, {**_issuer_document(ISSUER), field: text}, ISSUER)

    assert_linear_time(check, lambda n: (unit * n)[:n], 4_000, f"{field} made of {unit!r}")


@fuzz(200)
@given(st.one_of(hostile_text, urls, st.tuples(st.sampled_from(["", "see ", "url='", "(", "x="]), urls).map("".join)))
def test_redaction_never_raises_and_hides_credentials(text: str) -> None:
    shown = redact_url(text)
    assert isinstance(shown, str)
    if "https://u:p@h/mcp?token=abc" in text:
        assert "u:p@" not in shown and "token=abc" not in shown


@fuzz(15, deadline=None)
@given(st.sampled_from(["http://", "see http://", "redis://u"]),
       st.text(st.sampled_from("a1:/?#@[]=&;-.% \"'("), min_size=1, max_size=6), st.sampled_from(["", "]", "@h/x", "/x"]))
@example("http://", "a:", "]")  # the test for a port that is no port rescanned the authority from every ":" before a "]"
@example("see http://", "a:", "]")
def test_redaction_is_linear_in_the_url(prefix: str, unit: str, suffix: str) -> None:
    assert_linear_time(redact_url, lambda n: prefix + (unit * n)[:n] + suffix, 2_000, f"{prefix}{unit!r}...{suffix}")


# The pattern redact_url used before it was made linear: what it found is what the linear one must find.
_QUADRATIC_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*|(?:^|(?<=[\s'\"(=]))/(?!/)[^\s'\"<>]*")


@fuzz(300)
@given(st.lists(st.one_of(st.text(st.sampled_from("aZ1+.-:/ '\"(=<>?#@&\n"), max_size=8), urls.filter(lambda u: len(u) < 80),
                          st.sampled_from(["sk-abcdefghij12345", "token=x", "://", "http://u:p@h/x?key=1"])), max_size=8)
       .map("".join))
def test_redaction_finds_the_urls_the_plain_pattern_finds(text: str) -> None:
    assert urls_module._EMBEDDED_URL.sub(urls_module._redact_embedded, text) == \
        _QUADRATIC_PATTERN.sub(lambda m: urls_module._redact_one(m.group()), text)


# -- token responses ----------------------------------------------------------------------------------------

token_responses = shaped({
    "access_token": st.one_of(st.just("tok"), texts), "token_type": st.sampled_from(["Bearer", "bearer", "DPoP", "mac"]),
    "expires_in": st.one_of(numbers, st.sampled_from(["3600", "1e400", "nan", "-1", " 5 ", "\u0663"])),
    "refresh_token": texts, "scope": texts,
})


@fuzz(300)
@given(st.one_of(token_responses, json_values))
@example({"access_token": "t", "token_type": "Bearer", "expires_in": 10**400})  # float(): OverflowError
@example({"access_token": "t", "token_type": "Bearer", "expires_in": -(10**400)})
def test_a_token_response_gives_a_token_or_a_token_response_error(body: Any) -> None:
    try:
        token = Token.from_response(body, issuer=ISSUER, resource=SERVER, now=1000.0)
    except TokenResponseError as exc:
        assert "tok" not in str(exc).replace("token", "")  # never the token
        return
    assert token.access_token and token.token_type in ("Bearer", "DPoP")
    assert token.expires_at is None or token.expires_at >= 1000.0
    assert "tok" not in repr(token).replace("Token(", "")
    Token.from_json(token.to_json())


@fuzz(50)
@given(st.sampled_from(BIG_INTS))
def test_a_refresh_response_with_any_number_is_read_or_refused(expires_in: int) -> None:
    token = Token.from_response({"access_token": "a", "token_type": "Bearer"}, issuer=ISSUER, resource=SERVER)
    try:
        token.with_refreshed({"access_token": "b", "token_type": "Bearer", "expires_in": expires_in})
    except TokenResponseError:
        pass
