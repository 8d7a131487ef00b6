"""A server that asks the user to open a URL (URL-mode elicitation) never gets a browser opened by mcpcall.

The library passes the request to the application's ``elicitation`` handler, unchanged, and without
one refuses it; the command line shows the URL (escaped) and asks, and opens nothing whatever the
answer. Every way a browser could be started is watched: ``BROWSER`` and the usual openers on PATH
(``xdg-open``, ``sensible-browser``, ...) are scripts that leave a mark, with a display set.
The server is tests/servers/hostile_server.py (its ``visit`` tool).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_cli_terminal import RAW_CONTROLS, at_a_terminal
from tests.conftest import PYTHON, SERVERS, child_pythonpath
from tests.servers.hostile_server import VISIT_MESSAGE, VISIT_URL

HOSTILE = str(SERVERS / "hostile_server.py")
OPENERS = ("xdg-open", "sensible-browser", "x-www-browser", "www-browser", "gio", "gnome-open", "kde-open", "open",
           "firefox", "chromium", "google-chrome", "links", "lynx", "w3m")

LIBRARY = r"""
import json, sys
import mcpcall

argv = [sys.executable, sys.argv[1]]
out = {}
with mcpcall.connect(argv, protocol="legacy", timeout=20) as client:
    out["without_handler"] = json.loads(client.call_tool("visit", {}).text)
seen = []

def handler(params):
    seen.append(params)
    return {"action": "decline"}

with mcpcall.connect(argv, protocol="legacy", timeout=20, elicitation=handler) as client:
    out["with_handler"] = json.loads(client.call_tool("visit", {}).text)
out["seen"] = seen
out["webbrowser_imported"] = "webbrowser" in sys.modules
print(json.dumps(out))
"""


def _watched_browsers(tmp_path: Path) -> dict[str, str]:
    """Environment changes that make every way of opening a URL leave a mark in ``tmp_path / "opened"``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in OPENERS:
        opener = bin_dir / name
        opener.write_text(f"#!/bin/sh\necho \"{name} $*\" >> {tmp_path / 'opened'}\n")
        opener.chmod(0o755)
    return {"BROWSER": str(bin_dir / "firefox"), "DISPLAY": ":0", "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def _opened(tmp_path: Path) -> str:
    mark = tmp_path / "opened"
    return mark.read_text() if mark.exists() else ""


def test_the_library_hands_the_url_to_the_application_and_opens_nothing(tmp_path: Path) -> None:
    env = {**os.environ, **_watched_browsers(tmp_path), "PYTHONPATH": child_pythonpath()}
    done = subprocess.run([sys.executable, "-c", LIBRARY, HOSTILE], capture_output=True, text=True, env=env, timeout=50,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["without_handler"]["error"]["code"] == -32601  # no handler: the request is refused
    assert out["with_handler"] == {"result": {"action": "decline"}}  # the handler's answer, as it gave it
    [params] = out["seen"]
    assert params["mode"] == "url" and params["url"] == VISIT_URL and params["message"] == VISIT_MESSAGE
    assert not out["webbrowser_imported"]
    assert _opened(tmp_path) == ""


@pytest.mark.parametrize("answer, action", [("y\n", "accept"), ("n\n", "decline")])
def test_the_command_line_shows_the_url_escaped_asks_and_opens_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      answer: str, action: str) -> None:
    for name, value in _watched_browsers(tmp_path).items():
        monkeypatch.setenv(name, value)  # the child's environment is this process's
    code, out, shown = at_a_terminal(["call", f"{PYTHON} {HOSTILE}", "visit"], [("[c]ancel:", answer)])
    assert code == 0, shown
    assert json.loads(out) == {"result": {"action": action}}
    assert "sign-in.example/start?next=x\\x1b]52;" in shown  # the URL is shown, its escape sequences escaped
    assert not any(c in shown for c in RAW_CONTROLS if c != "\r"), shown  # a terminal shows its own line ends as \r\n
    assert "\\x0dw" in shown  # the server's own carriage return, escaped
    assert _opened(tmp_path) == ""
