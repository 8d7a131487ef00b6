"""The browser step of OAuth: send the user to the authorization page, get back the URL it redirected to.

A redirect handler is what :class:`~mcpcall.auth.oauth.OAuth` takes as
``redirect_handler=``: ``handler(authorize_url) -> redirected_url``. The
handlers here also carry their ``redirect_uri``, so OAuth needs nothing else:

- :class:`LoopbackRedirect` (RFC 8252 §7.3): a one-shot HTTP listener on
  127.0.0.1 that the browser is redirected to; opens the browser itself.
- :class:`PasteRedirect`: for machines with no usable browser (SSH sessions,
  containers, remote notebook kernels): shows the link and asks the user to
  paste the address the browser ended on.
- :func:`default_redirect`: picks one of the two (the rule is in its docstring).

The authorization code and ``state`` never go to a log, a repr or an error message.
"""

from __future__ import annotations

import errno
import hmac
import html
import importlib
import logging
import math
import os
import select
import socket
import sys
import threading
import time
import webbrowser
from collections.abc import Callable
from typing import Any, TextIO
from urllib.parse import parse_qs, urlsplit

from ..errors import AuthError, RedirectTimeout
from ..urls import redact_url

__all__ = ["LoopbackRedirect", "PasteRedirect", "RedirectTimeout", "default_redirect", "headless", "in_notebook"]

log = logging.getLogger("mcpcall.auth.redirect")

_LOOPBACK_HOSTS = ("127.0.0.1", "::1")
_MAX_REQUEST = 16 * 1024  # bytes of a request line and headers; a callback is far smaller
_IDLE = 10.0  # seconds a connection may stay silent (browsers open spare connections) before it is dropped
_SEND_TIMEOUT = 2.0
_PASTE_TRIES = 3
#: Set to ``loopback`` or ``paste`` to override :func:`default_redirect`'s guess.
OVERRIDE_ENV = "MCPCALL_OAUTH_REDIRECT"


def _page(title: str, text: str) -> bytes:
    body = (
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>mcpcall</title></head>"
        "<body style=\"font-family:sans-serif;margin:3em\">"
        f"<h2>{html.escape(title)}</h2><p>{html.escape(text)}</p></body></html>"
    )
    return body.encode("utf-8")


def _response(status: str, body: bytes) -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
        "Cache-Control: no-store\r\nReferrer-Policy: no-referrer\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def _expected_state(authorize_url: str) -> str | None:
    try:
        values = parse_qs(urlsplit(authorize_url).query).get("state")
    except ValueError:
        return None
    return values[0] if values else None


def _tell(out: TextIO | None, text: str) -> None:
    """Say ``text`` to the person being asked to sign in (stderr unless told): the prompt itself, not a log record."""
    stream = out if out is not None else sys.stderr
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        pass


class LoopbackRedirect:
    """A one-shot HTTP listener on the loopback interface that receives the authorization redirect.

    ``redirect_uri`` (``http://127.0.0.1:PORT/callback``) binds the listening
    socket the first time it is read (``port=0``: a free port) and keeps that
    port for the object's life: a client registered with it stays valid, and a
    later authorization listens on the same port again. Calling the object
    with the authorization URL opens the browser (``open_browser``, default
    :func:`webbrowser.open`; if it cannot, the URL is printed on stderr for the
    user to open), waits at most ``timeout`` seconds for the one ``GET`` to
    ``path`` that carries ``code`` or ``error`` (and, when the authorization
    URL had one, the same ``state``), answers it with a page saying the window
    can be closed, and returns the full redirected URL. Other requests
    (``/favicon.ico``) get a 404. The listening socket is closed when the call
    ends; :meth:`close` closes it too. No thread serves it: the caller does.
    """

    #: A person answers this one: OAuth calls it only from ``login()``, on the caller's thread.
    needs_person = True

    def __init__(
        self,
        port: int = 0,
        path: str = "/callback",
        open_browser: Callable[[str], Any] | None = None,
        timeout: float = 300.0,
        host: str = "127.0.0.1",
        out: TextIO | None = None,
    ) -> None:
        if host not in _LOOPBACK_HOSTS:
            raise ValueError(f"host must be a loopback address ({' or '.join(_LOOPBACK_HOSTS)}), not {host!r}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError("port must be 0 (any free port) or a port number")
        if not isinstance(path, str) or not path.startswith("/") or any(c in path for c in "?# \r\n"):
            raise ValueError("path must start with '/' and hold no '?', '#' or whitespace")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (math.isfinite(timeout) and timeout > 0):
            raise ValueError("timeout must be a positive number of seconds")
        if open_browser is not None and not callable(open_browser):
            raise TypeError("open_browser must be a callable taking the URL")
        self.host = host
        self.path = path
        self.timeout = float(timeout)
        self._open_browser = open_browser
        self._out = out
        self._port = port
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()  # the socket and port
        self._busy = threading.Lock()  # one authorization at a time

    def __repr__(self) -> str:
        port = self._port or "unbound"
        state = "listening" if self._sock is not None else "closed"
        return f"<LoopbackRedirect {self.host} port={port} path={self.path!r} {state}>"

    @property
    def port(self) -> int:
        """The port listened on (binding now if not yet bound)."""
        self._listening()
        return self._port

    @property
    def redirect_uri(self) -> str:
        """``http://127.0.0.1:PORT/callback``; the first read binds the socket."""
        port = self.port
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{port}{self.path}"

    def _listening(self) -> socket.socket:
        with self._lock:
            if self._sock is not None:
                return self._sock
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                if sys.platform == "win32":
                    sock.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_EXCLUSIVEADDRUSE", 0) or socket.SO_REUSEADDR, 1)
                else:  # rebinding the same port while old connections linger in TIME_WAIT
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((self.host, self._port))
                sock.listen(8)
            except OSError as exc:
                sock.close()
                reason = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be listened on ({exc.strerror or exc})"
                raise AuthError(
                    f"the OAuth redirect listener: port {self._port} on {self.host} {reason}; "
                    "choose another port (it must match the client's registered redirect URI)"
                ) from None
            self._port = sock.getsockname()[1]
            self._sock = sock
            return sock

    def close(self) -> None:
        """Stop listening (idempotent). The port is kept: a later use listens on it again."""
        with self._lock:
            sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def __enter__(self) -> LoopbackRedirect:  # noqa: PYI034 - no typing_extensions for Self on 3.9/3.10
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        sock = getattr(self, "_sock", None)
        if sock is not None:
            sock.close()

    # -- one authorization ------------------------------------------------------------------------

    def __call__(self, authorize_url: str) -> str:
        """Open the browser at ``authorize_url`` and return the URL it was redirected to."""
        if not self._busy.acquire(timeout=self.timeout):
            raise RedirectTimeout(f"another authorization kept the redirect listener busy for {self.timeout:g} s")
        try:
            return self._run(authorize_url)
        finally:
            self.close()
            self._busy.release()

    def _run(self, authorize_url: str) -> str:
        listener = self._listening()
        deadline = time.monotonic() + self.timeout
        opener = _Opener(self._open_browser, authorize_url)
        opener.start()
        told = False
        connections: dict[socket.socket, tuple[bytearray, float]] = {}
        try:
            while True:
                if not told and opener.failed():
                    told = True
                    _tell(self._out, "mcpcall: could not open a browser. Open this URL to authorize:\n"
                                      f"  {authorize_url}\n")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RedirectTimeout(
                        f"no authorization came back to {self.redirect_uri} within {self.timeout:g} s "
                        "(was the browser window closed, or the sign-in not finished?)"
                    )
                readable, _, _ = select.select([listener, *connections], [], [], min(remaining, 0.1))
                now = time.monotonic()
                for sock in readable:
                    if sock is listener:
                        try:
                            conn, _ = listener.accept()
                        except OSError:
                            continue
                        conn.setblocking(False)
                        connections[conn] = (bytearray(), now)
                        continue
                    result = self._read(sock, connections, authorize_url)
                    if result is not None:
                        return result
                for sock, (_, since) in list(connections.items()):
                    if now - since > _IDLE:
                        del connections[sock]
                        sock.close()
        finally:
            for sock in connections:
                sock.close()
            opener.join(1.0)

    def _read(self, conn: socket.socket, connections: dict[socket.socket, tuple[bytearray, float]], authorize_url: str) -> str | None:
        buffer, _since = connections[conn]
        try:
            data = conn.recv(4096)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            data = b""
        if not data:
            del connections[conn]
            conn.close()
            return None
        buffer += data
        if b"\r\n\r\n" not in buffer and b"\n\n" not in buffer:
            if len(buffer) > _MAX_REQUEST:
                self._answer(conn, "431 Request Header Fields Too Large", _page("Request too large", ""))
                del connections[conn]
            return None
        del connections[conn]
        line = bytes(buffer).split(b"\n", 1)[0].decode("latin-1").strip()
        method, _, rest = line.partition(" ")
        target = rest.rsplit(" ", 1)[0] if " " in rest else rest
        path, _, query = target.partition("?")
        if method != "GET" or path != self.path:
            self._answer(conn, "404 Not Found", _page("Not found", "This is mcpcall's sign-in listener."))
            return None
        params = parse_qs(query, keep_blank_values=True)
        expected = _expected_state(authorize_url)
        state = params.get("state", [None])[0]
        if not ("code" in params or "error" in params) or (
            expected is not None and (state is None or not hmac.compare_digest(state.encode(), expected.encode()))
        ):
            log.debug("the redirect listener ignored a request to %s without a matching code or state", self.path)
            self._answer(conn, "400 Bad Request", _page("Not the expected sign-in", "Start the sign-in again from mcpcall."))
            return None
        if "error" in params:
            shown = params["error"][0][:64]
            self._answer(conn, "200 OK", _page("Authorization failed", f"The server said: {shown}. You can close this window."))
        else:
            self._answer(conn, "200 OK", _page("Signed in", "mcpcall has the authorization. You can close this window."))
        return f"{self.redirect_uri}?{query}"

    @staticmethod
    def _answer(conn: socket.socket, status: str, body: bytes) -> None:
        try:
            conn.setblocking(True)
            conn.settimeout(_SEND_TIMEOUT)
            conn.sendall(_response(status, body))
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        finally:
            conn.close()


class _Opener:
    """Opens the browser on its own thread: ``webbrowser`` waits for some browsers (``BROWSER=script``) to exit."""

    def __init__(self, open_browser: Callable[[str], Any] | None, url: str) -> None:
        self._open = open_browser if open_browser is not None else webbrowser.open
        self._url = url
        self._done = threading.Event()
        self._ok = False
        self._thread = threading.Thread(target=self._run, name="mcpcall-browser", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            self._ok = bool(self._open(self._url))
        except Exception as exc:  # noqa: BLE001 - no browser is no error: the URL is printed instead
            log.debug("opening a browser failed: %s", type(exc).__name__)
            self._ok = False
        finally:
            self._done.set()

    def failed(self) -> bool:
        return self._done.is_set() and not self._ok

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


def _default_paste_uri() -> str:
    """A loopback redirect URI on a port nothing listens on now (the browser shows an error page there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/callback"


def in_notebook() -> bool:
    """Whether this is a Jupyter (ipykernel) kernel."""
    return "ipykernel" in sys.modules


class PasteRedirect:
    """For a machine the browser cannot reach: show the link, ask for the URL the browser ended on.

    The browser is redirected to ``redirect_uri`` (default: a loopback URL on
    a port nothing listens on), so its page fails to load; the address bar
    then holds the code, and the user pastes that address (or just its
    ``?code=...`` part). In Jupyter the link is shown as a clickable link.
    ``prompt`` (default :func:`input`) asks; ``out`` (default ``sys.stderr``)
    gets the instructions. The prompt waits for the user; interrupt the
    kernel or press Ctrl-C to give up.
    """

    #: A person answers this one: OAuth calls it only from ``login()``, on the caller's thread.
    needs_person = True

    def __init__(self, redirect_uri: str | None = None, prompt: Callable[[str], str] = input, out: TextIO | None = None) -> None:
        if redirect_uri is not None:
            parts = urlsplit(redirect_uri)
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
                raise ValueError("redirect_uri must be an http(s) URL with a host and no query or fragment")
        if not callable(prompt):
            raise TypeError("prompt must be a callable like input()")
        self.redirect_uri = redirect_uri if redirect_uri is not None else _default_paste_uri()
        self._prompt = prompt
        self._out = out

    def __repr__(self) -> str:
        return f"<PasteRedirect {redact_url(self.redirect_uri)!r}>"

    def close(self) -> None:
        """Nothing to release; here for symmetry with :class:`LoopbackRedirect`."""

    def _show(self, authorize_url: str) -> None:
        if self._out is None and in_notebook():
            try:
                shown: Any = importlib.import_module("IPython.display")
            except ImportError:
                pass
            else:
                link = html.escape(authorize_url, quote=True)
                shown.display(shown.HTML(
                    f'<p>Sign in: <a href="{link}" target="_blank" rel="noopener noreferrer">open the authorization page</a>. '
                    "When the browser lands on a page that does not load, copy its address and paste it below.</p>"
                ))
                return
        _tell(self._out, "Open this URL in a browser to authorize:\n"
                          f"  {authorize_url}\n"
                          "After signing in the browser lands on a page that does not load; that is expected.\n"
                          "Copy that page's address from the address bar and paste it here.\n")

    def __call__(self, authorize_url: str) -> str:
        """Show ``authorize_url``, return the redirected URL the user pastes."""
        self._show(authorize_url)
        for _ in range(_PASTE_TRIES):
            try:
                answer = self._prompt("Redirected URL: ")
            except EOFError:
                raise AuthError("no redirected URL was pasted (the input ended); run this where you can type") from None
            url = self._complete(answer.strip() if isinstance(answer, str) else "")
            if url is not None:
                return url
            _tell(self._out, "That does not look like the redirected address (it has no code= or error=); try again.\n")
        raise AuthError(f"no usable redirected URL after {_PASTE_TRIES} tries")

    def _complete(self, text: str) -> str | None:
        """The pasted text as a full redirected URL, or None when it holds no code or error."""
        if not text:
            return None
        if "://" not in text:  # only the query was pasted
            text = f"{self.redirect_uri}?{text.lstrip('?')}"
        try:
            query = urlsplit(text).query
        except ValueError:
            return None
        params = parse_qs(query)
        return text if "code" in params or "error" in params else None


_REMOTE_MARKERS = ("SSH_CONNECTION", "SSH_CLIENT", "SSH_TTY", "JUPYTERHUB_API_URL", "COLAB_RELEASE_TAG",
                   "KAGGLE_KERNEL_RUN_TYPE", "DATABRICKS_RUNTIME_VERSION", "CODESPACES", "SAGEMAKER_INTERNAL_IMAGE_URI")


def headless(environ: dict[str, str] | None = None) -> bool:
    """Whether no graphical browser can be expected here.

    Linux and other Unix: no ``DISPLAY``, no ``WAYLAND_DISPLAY`` and no
    ``BROWSER``. macOS and Windows: only over SSH (``SSH_CONNECTION``) with no
    ``BROWSER``.
    """
    env = os.environ if environ is None else environ
    if env.get("BROWSER"):
        return False
    if sys.platform in ("darwin", "win32"):
        return bool(env.get("SSH_CONNECTION") or env.get("SSH_CLIENT"))
    return not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def _browser_found() -> bool:
    try:
        webbrowser.get()
    except webbrowser.Error:
        return False
    return True


def default_redirect(*, port: int = 0, path: str = "/callback", timeout: float = 300.0) -> LoopbackRedirect | PasteRedirect:
    """The redirect handler that can work here.

    - ``MCPCALL_OAUTH_REDIRECT=loopback`` or ``=paste`` decides, if set.
    - In a Jupyter kernel: :class:`PasteRedirect`, unless the kernel is
      plausibly on the machine the browser runs on (a browser is found, the
      machine is not headless, and none of the signs of a remote kernel is set:
      SSH, JupyterHub, Colab, Kaggle, Databricks, Codespaces, SageMaker);
      a remote kernel's 127.0.0.1 is not the browser's.
    - Elsewhere: :class:`LoopbackRedirect` when :func:`webbrowser.get` finds a
      browser and the machine is not :func:`headless`; else :class:`PasteRedirect`.

    ``port`` and ``path`` make the loopback redirect URI (port 0: any free
    one); the pasted variant uses them too when a port is given.
    """
    choice = os.environ.get(OVERRIDE_ENV, "").strip().lower()
    if choice not in ("", "loopback", "paste"):
        log.warning("%s=%r is neither loopback nor paste; guessing", OVERRIDE_ENV, choice[:20])
        choice = ""
    if not choice:
        usable = not headless() and _browser_found()
        if usable and in_notebook():
            usable = "google.colab" not in sys.modules and not any(os.environ.get(name) for name in _REMOTE_MARKERS)
        choice = "loopback" if usable else "paste"
    if choice == "loopback":
        return LoopbackRedirect(port=port, path=path, timeout=timeout)
    return PasteRedirect(f"http://127.0.0.1:{port}{path}" if port else None)
