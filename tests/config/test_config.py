"""Server specs to transports: strict flags, and no secret in any message (``redact_url``)."""

from __future__ import annotations

import random
import sys
from typing import Any

import pytest

import mcpcall
from mcpcall import ConfigError, ConnectionClosed
from mcpcall.config import _parse_bool, make_transport, redact_url
from mcpcall.transports.http import HTTPTransport, SSETransport

PYTHON = sys.executable
SECRETS = ("hunter2", "sk-env-s3cr3t", "hdr-s3cr3t", "tok-s3cr3t", "qs-s3cr3t", "arg-s3cr3t")


def _shown_text(exc: BaseException) -> str:
    """Everything a traceback of ``exc`` would print: its message, repr, and the chain shown with it."""
    parts = []
    seen = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts += [str(current), repr(current)]
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return "\n".join(parts)


def _assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, text


# -- redact_url --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, shown",
    [
        ("https://example.com/mcp", "https://example.com/mcp"),
        ("https://alice:hunter2@example.com/mcp", "https://***@example.com/mcp"),
        ("https://tok-s3cr3t@example.com:8443/mcp", "https://***@example.com:8443/mcp"),
        ("https://a:b@c@example.com/", "https://***@example.com/"),
        ("https://example.com/mcp?api_key=qs-s3cr3t&page=2", "https://example.com/mcp?api_key=***&page=2"),
        ("https://example.com/mcp?access_token=1&X-Amz-Signature=2&Password=3&client_secret=4&sig=5&auth=6&code=7",
         "https://example.com/mcp?access_token=***&X-Amz-Signature=***&Password=***&client_secret=***&sig=***&auth=***&code=***"),
        ("https://example.com/cb#access_token=qs-s3cr3t&state=x", "https://example.com/cb#access_token=***&state=x"),
        ("https://example.com/mcp?q=hello&lang=en", "https://example.com/mcp?q=hello&lang=en"),
        ("https://example.com/mcp?token=&flag", "https://example.com/mcp?token=&flag"),
        ("HTTP://U:hunter2@EXAMPLE.com", "HTTP://***@EXAMPLE.com"),
        ("  https://u:hunter2@example.com/", "https://***@example.com/"),   # urlsplit skips leading blanks
        ("ht\ttps://u:hunter2@example.com/", "https://***@example.com/"),   # and drops tabs and newlines
        ("//u:hunter2@example.com/x", "//***@example.com/x"),
        ("http:u:hunter2@example.com", "http:***@example.com"),
        ("https://u:pa#ss@example.com/", "https://***@example.com/"),      # a "#" or "?" in a password
        ("https://u:pa?ss@example.com/", "https://***@example.com/"),
        ("https://example.com/users/a@b.org", "https://example.com/users/a@b.org"),  # "@" in the path
        ("https://[::1]:8080/mcp", "https://[::1]:8080/mcp"),
        ("https://u:hunter2@[::1", "https://***@[::1"),
        ("npx mcp-remote https://u:hunter2@example.com/mcp?key=qs-s3cr3t", "npx mcp-remote https://***@example.com/mcp?key=***"),
        ("python server.py", "python server.py"),
        ("C:\\x@y", "C:\\x@y"),
        ("", ""),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_redact_url_never_raises() -> None:
    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no")

    for odd in (None, 42, b"https://u:hunter2@h/", Unprintable(), "\x00" * 5, "%" * 50, "?&=#@/" * 20, "\ud800"):
        shown = redact_url(odd)  # type: ignore[arg-type]
        assert isinstance(shown, str) and "hunter2" not in shown
    alphabet = "ab:/@?#&=%[]\\ \t\n;+.-x"
    rng = random.Random(1234)
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(40)))
        assert isinstance(redact_url(text), str)
        url = f"https://{text.replace('/', '')}u:hunter2@host/{text}"  # whatever precedes the first "/" is hidden
        assert "hunter2" not in redact_url(url), url


# -- no secret in a ConfigError ---------------------------------------------------------------------------


class _SecretRepr:
    def __repr__(self) -> str:
        return "<thing holding tok-s3cr3t>"


BAD_SPECS: list[Any] = [
    {"env": {"API_KEY": "sk-env-s3cr3t"}, "args": ["-m", "x"]},   # no command: the keys are named, not the values
    {"name": "svc", "env": {"API_KEY": "sk-env-s3cr3t"}},
    {"command": "", "env": {"API_KEY": "sk-env-s3cr3t"}},
    {"command": "x", "env": {"API_KEY": "sk-env-s3cr3t"}, "bogus": 1},
    {"command": "x", "args": ["--token", {"value": "arg-s3cr3t"}]},
    {"command": "x", "args": "--token arg-s3cr3t"},
    {"command": "x", "env": {"API_KEY": "sk-env-s3cr3t"}, "inherit_env": "sk-env-s3cr3t pasted in the wrong place"},
    {"command": "x", "env": {"API_KEY": "sk-env-s3cr3t"}, "inherit_env": {"K": "sk-env-s3cr3t"}},
    {"url": "https://u:hunter2@example.invalid/mcp?token=qs-s3cr3t", "headers": {"X-Api-Key": "hdr-s3cr3t"}, "bogus": 1},
    {"url": "https://u:hunter2@example.invalid/mcp?token=qs-s3cr3t", "headers": {"X-Api-Key": "hdr-s3cr3t"},
     "transport": "pigeon"},
    {"url": "https://example.invalid/mcp", "headers": {"X-Api-Key": "hdr-s3cr3t\r\nX-Evil: 1"}},
    {"url": "https://example.invalid/mcp", "headers": {"X-Api-Key": " hdr-s3cr3t"}},
    {"url": "https://example.invalid/mcp", "headers": {"X Api Key": "hdr-s3cr3t"}},
    {"url": "https://example.invalid/mcp", "auth": "tok-s3cr3t\n"},
    {"url": "https://example.invalid/mcp", "verify": "", "headers": {"X-Api-Key": "hdr-s3cr3t"}},
    {"url": "https://example.invalid/mcp", "verify": {"ca": "tok-s3cr3t"}},
    {"url": ["https://u:hunter2@example.invalid/"]},
    "ftp://u:hunter2@example.invalid/mcp?api_key=qs-s3cr3t",
    "http://u:hunter2@/nohost?token=qs-s3cr3t",
    "https://u:hunter2@[::1/mcp",
    "https://u:hunter2@exa\uff03mple/mcp",  # urlsplit's own error quotes the netloc, credentials included
    "https://u:hunter2@example.invalid:99999999999/mcp?key=qs-s3cr3t",
    "my-server --token arg-s3cr3t 'unbalanced",
    ["my-server", "--token", "arg-s3cr3t", 7],
    _SecretRepr(),
    b"https://u:hunter2@example.invalid/",
]


@pytest.mark.parametrize("spec", BAD_SPECS, ids=[str(i) for i in range(len(BAD_SPECS))])
def test_config_errors_carry_no_secret(spec: Any) -> None:
    try:
        transport = make_transport(spec)
    except ConfigError as exc:
        _assert_no_secret(_shown_text(exc))
    else:  # the out-of-range port is the HTTP transport's to refuse; its name must still be clean
        assert isinstance(transport, (HTTPTransport, SSETransport))
        _assert_no_secret(transport.name)


def test_entry_without_command_names_its_keys() -> None:
    with pytest.raises(ConfigError) as info:
        make_transport({"name": "svc", "env": {"API_KEY": "sk-env-s3cr3t"}, "args": ["-m", "x"]})
    message = str(info.value)
    assert "'command'" in message and "'url'" in message and "'env'" in message and "'svc'" in message
    assert "sk-env-s3cr3t" not in message


def test_command_split_error_names_only_the_program() -> None:
    with pytest.raises(ConfigError, match="split") as info:
        make_transport("my-server --token arg-s3cr3t 'unbalanced")
    assert "my-server" in str(info.value) and "arg-s3cr3t" not in str(info.value)
    assert info.value.__suppress_context__


def test_keyword_options_are_checked_too() -> None:
    with pytest.raises(ConfigError, match="X-Api-Key") as info:
        make_transport("https://example.invalid/mcp", http={"headers": {"X-Api-Key": "hdr-s3cr3t\n"}})
    _assert_no_secret(str(info.value))
    with pytest.raises(ConfigError, match="bearer token") as info:
        make_transport("https://example.invalid/mcp", http={"auth": "tok-s3cr3t\r\nX: y"})
    _assert_no_secret(str(info.value))
    with pytest.raises(ConfigError, match="header"):
        make_transport("https://example.invalid/mcp", http={"headers": {"X-Count": 3}})


def test_default_name_hides_url_credentials() -> None:
    transport = make_transport(["npx", "https://u:hunter2@example.invalid"])
    assert transport.name == "***@example.invalid"
    assert make_transport(["npx", "-y", "@scope/server-thing"]).name == "server-thing"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        # Every npm server run by node was called "index.js": servers could not be told apart.
        (["node", "/x/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", "/tmp"], "server-filesystem"),
        (["npx", "-y", "@modelcontextprotocol/server-everything@2026.8.31"], "server-everything"),
        (["npx", "-y", "mcp-remote@latest", "https://example.invalid"], "mcp-remote"),
        (["python3", "-m", "mcpcall.demo_server"], "mcpcall.demo_server"),
        (["python3", "-c", "import sys; print(sys.argv)"], "python3 -c"),  # not the whole code string
        (["/usr/bin/python3.11", "servers/my_server.py", "--flag"], "my_server"),
        (["uv", "run", "server.py"], "server"),
        (["uvx", "mcp-server-time"], "mcp-server-time"),
        (["/opt/bin/mcp-server-time", "--local-timezone", "UTC"], "mcp-server-time"),
    ],
)
def test_default_names_tell_servers_apart(argv: list[str], expected: str) -> None:
    assert make_transport(argv).name == expected


def test_a_url_server_is_named_by_host_and_port() -> None:
    # Every local URL was "127.0.0.1", whatever its port.
    assert make_transport("http://127.0.0.1:8123/mcp").name == "127.0.0.1:8123"
    assert make_transport("https://example.invalid/mcp").name == "example.invalid"
    assert make_transport("https://u:hunter2@example.invalid:8443/mcp").name == "example.invalid:8443"
    assert make_transport("http://127.0.0.1:8123/mcp", http={"transport": "sse"}).name == "127.0.0.1:8123"


# -- strict flags -----------------------------------------------------------------------------------------

TRUE_WORDS = [True, "true", "True", "TRUE", "yes", "Yes", "1", "on", "ON", " true "]
FALSE_WORDS = [False, "false", "False", "FALSE", "no", "NO", "0", "off", "Off", " false "]
NOT_FLAGS: list[Any] = ["maybe", "", "tru", "y", "n", "2", "enabled", None, 1, 0, 2.5, [], {}]


@pytest.mark.parametrize("value", TRUE_WORDS + FALSE_WORDS)
def test_flags_parse_strictly(value: Any) -> None:
    assert _parse_bool(value, "inherit_env", "svc") is (value in TRUE_WORDS)


@pytest.mark.parametrize("value", NOT_FLAGS, ids=[repr(v) for v in NOT_FLAGS])
def test_not_a_flag_is_a_config_error(value: Any) -> None:
    with pytest.raises(ConfigError) as info:
        make_transport({"name": "svc", "command": "x", "inherit_env": value})
    assert "'svc'" in str(info.value) and "'inherit_env'" in str(info.value)
    if value is not None:  # the keyword's None means "not given": the entry decides
        with pytest.raises(ConfigError, match="'inherit_env'"):
            make_transport(["x"], name="svc", inherit_env=value)


ENV_PROBE = "import os, sys; sys.stderr.write(' '.join(sorted(os.environ)) + '\\n'); sys.exit(7)"


def _env_names(spec: Any, **options: Any) -> list[str]:
    with pytest.raises(ConnectionClosed) as info:
        mcpcall.connect(spec, probe_timeout=2, timeout=10, **options)
    assert info.value.returncode == 7
    return info.value.stderr_tail[-1].split()


def test_inherit_env_false_as_a_string_inherits_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPCALL_TEST_SECRET", "hunter2")
    entry: dict[str, Any] = {"command": PYTHON, "args": ["-c", ENV_PROBE]}
    assert "MCPCALL_TEST_SECRET" not in _env_names({**entry, "inherit_env": "false"})  # bool("false") was True
    assert "MCPCALL_TEST_SECRET" not in _env_names([PYTHON, "-c", ENV_PROBE], inherit_env="off")
    assert "MCPCALL_TEST_SECRET" in _env_names({**entry, "inherit_env": "yes"})
    assert "MCPCALL_TEST_SECRET" not in _env_names({**entry, "inherit_env": True}, inherit_env=False)  # the keyword wins


@pytest.mark.parametrize(
    "verify, expected",
    [(True, True), (False, False), ("false", False), ("No", False), ("TRUE", True), ("on", True),
     ("/etc/ssl/certs/ca.pem", "/etc/ssl/certs/ca.pem"), ("ca bundle.pem", "ca bundle.pem")],
)
def test_verify_is_a_flag_or_a_ca_path(verify: Any, expected: Any) -> None:
    entry = make_transport({"url": "https://example.invalid/mcp", "verify": verify})
    keyword = make_transport("https://example.invalid/mcp", http={"verify": verify})
    assert isinstance(entry, HTTPTransport) and isinstance(keyword, HTTPTransport)
    assert entry.verify == expected and keyword.verify == expected
    assert type(entry.verify) is type(expected)


@pytest.mark.parametrize("verify", ["", "  ", 0, 1, [], {"path": "x"}])
def test_verify_that_is_neither_is_a_config_error(verify: Any) -> None:
    # "" in particular: requests reads an empty CA path as "do not verify".
    with pytest.raises(ConfigError, match="'verify'"):
        make_transport({"name": "svc", "url": "https://example.invalid/mcp", "verify": verify})
