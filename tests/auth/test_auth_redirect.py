"""mcpcall.auth.redirect: the loopback listener (real sockets), the paste prompt, and default_redirect's rule."""

from __future__ import annotations

import io
import socket
import sys
import threading
import time
from collections.abc import Iterator
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests

import mcpcall.auth.redirect as redirect_module
from mcpcall.auth.discovery import AuthError
from mcpcall.auth.oauth import OAuth
from mcpcall.auth.redirect import LoopbackRedirect, PasteRedirect, RedirectTimeout, default_redirect
from mcpcall.auth.tokens import MemoryTokenStore
from tests.servers.oauth_server import OAuthServer

STATE = "st-" + "x" * 20


def authorize_url(handler: LoopbackRedirect, state: str = STATE) -> str:
    """A fake authorization URL whose 'authorization server' is the test itself."""
    return "https://as.example/authorize?" + urlencode({"redirect_uri": handler.redirect_uri, "state": state})


_browsers: list[threading.Thread] = []


def browser_thread(fn: object) -> threading.Thread:
    thread = threading.Thread(target=fn, daemon=True)  # type: ignore[arg-type]
    thread.start()
    _browsers.append(thread)
    return thread


@pytest.fixture(autouse=True)
def _join_browsers() -> Iterator[None]:
    yield
    while _browsers:
        _browsers.pop().join(10)


@pytest.fixture
def server() -> Iterator[OAuthServer]:
    with OAuthServer(scopes_supported=["mcp:read"]) as srv:
        yield srv


def test_loopback_with_the_real_flow(server: OAuthServer) -> None:
    seen: list[str] = []

    def browser(url: str) -> bool:
        def go() -> None:
            with requests.Session() as session:  # a browser: GET the authorize URL, follow the 302 to the loopback
                response = session.get(url, timeout=10)
                seen.append(response.text)
        browser_thread(go)
        return True

    handler = LoopbackRedirect(open_browser=browser, timeout=20)
    with OAuth(redirect_handler=handler, token_store=MemoryTokenStore(), timeout=10) as auth:
        token = auth.login(server.mcp_url)
        assert token is not None
        assert server.authorize_requests[0]["redirect_uri"] == handler.redirect_uri
        response = requests.post(server.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, auth=auth, timeout=10)
        assert response.status_code == 200 and response.history == []
    assert "close this window" in seen[0]
    code = next(iter(server.tokens))  # nothing of the exchange shows on the page
    assert code not in seen[0] and "code-" not in seen[0]
    assert "listening" not in repr(handler)


def test_returns_the_redirected_url_ignores_favicon_and_other_states() -> None:
    handler = LoopbackRedirect(timeout=10)
    pages: dict[str, int] = {}

    def browser(url: str) -> bool:
        callback = parse_qs(urlsplit(url).query)["redirect_uri"][0]
        base = callback.rsplit("/", 1)[0]

        def go() -> None:
            pages["favicon"] = requests.get(base + "/favicon.ico", timeout=5).status_code
            pages["wrong state"] = requests.get(callback + "?code=c1&state=other", timeout=5).status_code
            pages["no code"] = requests.get(callback + "?state=" + STATE, timeout=5).status_code
            pages["ok"] = requests.get(callback + "?" + urlencode({"code": "c2", "state": STATE, "iss": "x"}), timeout=5).status_code
        browser_thread(go)
        return True

    handler = LoopbackRedirect(open_browser=browser, timeout=10)
    got = handler(authorize_url(handler))
    _browsers.pop().join(10)
    assert got == f"{handler.redirect_uri}?code=c2&state={STATE}&iss=x"
    assert pages == {"favicon": 404, "wrong state": 400, "no code": 400, "ok": 200}
    assert "c2" not in repr(handler) and STATE not in repr(handler)


def test_error_redirect_is_returned_too() -> None:
    def browser(url: str) -> bool:
        callback = parse_qs(urlsplit(url).query)["redirect_uri"][0]
        browser_thread(lambda: requests.get(callback + "?error=access_denied&state=" + STATE, timeout=5))
        return True

    handler = LoopbackRedirect(open_browser=browser, timeout=10)
    assert "error=access_denied" in handler(authorize_url(handler))


def test_timeout_is_bounded_and_an_idle_connection_does_not_block() -> None:
    handler = LoopbackRedirect(open_browser=lambda url: True, timeout=0.5)
    idle = socket.create_connection(("127.0.0.1", handler.port), timeout=5)  # a browser's spare connection
    try:
        started = time.monotonic()
        with pytest.raises(RedirectTimeout) as info:
            handler(authorize_url(handler))
        assert time.monotonic() - started < 3
        assert isinstance(info.value, TimeoutError) and isinstance(info.value, AuthError)
        assert STATE not in str(info.value)
    finally:
        idle.close()


def test_socket_closed_after_the_call_and_the_port_is_reused() -> None:
    def browser(url: str) -> bool:
        callback = parse_qs(urlsplit(url).query)["redirect_uri"][0]
        browser_thread(lambda: requests.get(callback + "?code=c&state=" + STATE, timeout=5))
        return True

    handler = LoopbackRedirect(open_browser=browser, timeout=10)
    uri = handler.redirect_uri
    port = handler.port
    handler(authorize_url(handler))
    assert "closed" in repr(handler)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    assert handler.redirect_uri == uri  # bound again, same port
    handler(authorize_url(handler))
    handler.close()
    handler.close()  # idempotent


def test_browser_that_cannot_open_prints_the_url() -> None:
    out = io.StringIO()

    def browser(url: str) -> bool:
        callback = parse_qs(urlsplit(url).query)["redirect_uri"][0]
        def later() -> None:
            time.sleep(0.3)
            requests.get(callback + "?code=c&state=" + STATE, timeout=5)

        browser_thread(later)
        return False

    handler = LoopbackRedirect(open_browser=browser, timeout=10, out=out)
    url = authorize_url(handler)
    handler(url)
    assert url in out.getvalue()


def test_raising_browser_also_prints_the_url() -> None:
    out = io.StringIO()

    def browser(url: str) -> bool:
        raise RuntimeError("no display")

    handler = LoopbackRedirect(open_browser=browser, timeout=0.5, out=out)
    with pytest.raises(RedirectTimeout):
        handler(authorize_url(handler))
    assert "Open this URL" in out.getvalue()


def test_port_in_use_is_an_auth_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        handler = LoopbackRedirect(port=taken.getsockname()[1])
        with pytest.raises(AuthError, match="in use"):
            handler.redirect_uri  # noqa: B018


def test_constructor_checks() -> None:
    with pytest.raises(ValueError):
        LoopbackRedirect(host="0.0.0.0")
    with pytest.raises(ValueError):
        LoopbackRedirect(timeout=0)
    with pytest.raises(ValueError):
        LoopbackRedirect(path="callback")
    with pytest.raises(ValueError):
        LoopbackRedirect(port=70000)
    with pytest.raises(ValueError):
        PasteRedirect("not a url")


def test_paste_redirect_with_injected_prompt() -> None:
    out = io.StringIO()
    answers = iter(["", "  http://127.0.0.1:9/callback?code=abc&state=s1  "])
    handler = PasteRedirect(prompt=lambda text: next(answers), out=out)
    assert handler.redirect_uri.startswith("http://127.0.0.1:")
    got = handler("https://as.example/authorize?state=s1")
    assert got == "http://127.0.0.1:9/callback?code=abc&state=s1"
    assert "https://as.example/authorize?state=s1" in out.getvalue()
    assert "abc" not in repr(handler)


def test_paste_redirect_accepts_only_the_query_and_gives_up() -> None:
    handler = PasteRedirect("http://127.0.0.1:8765/cb", prompt=lambda text: "?code=q&state=s", out=io.StringIO())
    assert handler("https://as.example/a") == "http://127.0.0.1:8765/cb?code=q&state=s"
    handler = PasteRedirect(prompt=lambda text: "nonsense", out=io.StringIO())
    with pytest.raises(AuthError, match="3 tries"):
        handler("https://as.example/a")

    def eof(text: str) -> str:
        raise EOFError

    with pytest.raises(AuthError, match="input ended"):
        PasteRedirect(prompt=eof, out=io.StringIO())("https://as.example/a")


def test_paste_redirect_in_the_real_flow(server: OAuthServer) -> None:
    def paste(text: str) -> str:
        url = out.getvalue().split("\n")[1].strip()
        return str(requests.get(url, allow_redirects=False, timeout=5).headers["Location"])

    out = io.StringIO()
    with OAuth(redirect_handler=PasteRedirect(prompt=paste, out=out), timeout=10) as auth:
        assert auth.login(server.mcp_url) is not None


# -- default_redirect ----------------------------------------------------------------------------


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER", redirect_module.OVERRIDE_ENV, *redirect_module._REMOTE_MARKERS):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(redirect_module, "_browser_found", lambda: True)
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    return monkeypatch


def test_default_headless_linux_is_paste(clean_env: pytest.MonkeyPatch) -> None:
    assert isinstance(default_redirect(), PasteRedirect)


def test_default_with_a_display_is_loopback(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("DISPLAY", ":0")
    handler = default_redirect(port=0)
    assert isinstance(handler, LoopbackRedirect)
    clean_env.setattr(redirect_module, "_browser_found", lambda: False)
    assert isinstance(default_redirect(), PasteRedirect)


def test_default_browser_env_counts_as_a_browser(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("BROWSER", "lynx")
    assert isinstance(default_redirect(), LoopbackRedirect)


def test_default_in_a_remote_notebook_is_paste(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("DISPLAY", ":0")
    clean_env.setitem(sys.modules, "ipykernel", sys)  # any module object: "a kernel is running"
    assert isinstance(default_redirect(), LoopbackRedirect)  # a local kernel with a desktop
    clean_env.setenv("JUPYTERHUB_API_URL", "http://hub")
    assert isinstance(default_redirect(), PasteRedirect)


def test_default_override_and_port(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv(redirect_module.OVERRIDE_ENV, "loopback")
    assert isinstance(default_redirect(), LoopbackRedirect)
    clean_env.setenv(redirect_module.OVERRIDE_ENV, "paste")
    handler = default_redirect(port=8765)
    assert isinstance(handler, PasteRedirect) and handler.redirect_uri == "http://127.0.0.1:8765/callback"


def test_default_macos_over_ssh_is_paste(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setattr(sys, "platform", "darwin")
    assert isinstance(default_redirect(), LoopbackRedirect)
    clean_env.setenv("SSH_CONNECTION", "1.2.3.4 5 6.7.8.9 22")
    assert isinstance(default_redirect(), PasteRedirect)
