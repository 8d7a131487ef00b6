"""A stand-in for the user's browser, for tests that run the real CLI: ``webbrowser`` runs it through ``BROWSER``.

It records each opening in ``FAKE_BROWSER_LOG`` and fetches the authorization URL, following
the authorization server's redirect to mcpcall's loopback listener, as a person approving at
once would.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.conftest import child_pythonpath

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """\
import os, sys, urllib.request
with open(os.environ["FAKE_BROWSER_LOG"], "a") as log:
    log.write("opened\\n")
with urllib.request.urlopen(sys.argv[1], timeout=20) as response:  # follows the 302 to the loopback listener
    response.read()
"""


def browser_env(tmp_path: Path) -> dict[str, str]:
    """The environment for a CLI run whose browser is the fake one (and whose token cache is in ``tmp_path``)."""
    script = tmp_path / "fake-browser"
    script.write_text(f"#!{sys.executable}\n{SCRIPT}")
    script.chmod(0o700)
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MCPCALL_OAUTH_REDIRECT")}
    env.update(BROWSER=str(script), FAKE_BROWSER_LOG=str(tmp_path / "browser.log"),
               XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONPATH=child_pythonpath())
    return env


def opened(tmp_path: Path) -> int:
    """How many times the fake browser was opened."""
    log = tmp_path / "browser.log"
    return len(log.read_text().splitlines()) if log.exists() else 0
