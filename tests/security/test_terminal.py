"""Escape sequences a server puts in its progress messages reach no terminal through the command line's bar.

(Tool names, results, errors, log messages and stderr lines: tests/cli/test_cli_terminal.py; a
URL-mode question: tests/security/test_elicitation.py.) The server is tests/servers/hostile_server.py.
"""

from __future__ import annotations

import importlib.util
import io

import pytest

from mcpcall.cli import main
from tests.conftest import PYTHON, SERVERS

HOSTILE = str(SERVERS / "hostile_server.py")
CONTROLS = ("\x1b", "\x07", "\x9b", "\x7f")  # "\r" is the bar's own way to redraw its line
HAVE_TQDM = importlib.util.find_spec("tqdm") is not None


@pytest.mark.parametrize("mode", ["plain", pytest.param("tqdm", marks=pytest.mark.skipif(not HAVE_TQDM, reason="no tqdm"))])
def test_a_progress_message_is_shown_escaped(mode: str, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPCALL_PROGRESS", mode)
    out = io.StringIO()
    assert main(["call", f"{PYTHON} {HOSTILE}", "progress"], out=out) == 0
    err = capsys.readouterr().err
    assert out.getvalue() == "done\n"
    assert "step x\\x1b]52;c;cHduZWQ=\\x07y" in err, err  # shown escaped (the plain bar cuts it to the width)
    assert not any(c in err for c in CONTROLS), repr(err)
