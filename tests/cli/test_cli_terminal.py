"""The command line at a terminal and elsewhere: questions a server asks (elicitation), a config's
``${input:ID}``, servers without a capability, what server text may do to a terminal, advice worded for
a shell."""

from __future__ import annotations

import fcntl
import io
import json
import os
import select
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest

from mcpcall.cli import main
from mcpcall.cli.app import _connect_options, show_stderr_line
from mcpcall.cli.output import Output, json_text, printable
from mcpcall.cli.progress import PlainBar, screen
from mcpcall.cli.words import build_parser, for_the_shell
from mcpcall.errors import MethodNotFound
from mcpcall.session.inbound import NoHandler
from tests.conftest import child_pythonpath, fault_argv

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
PEER = str(ROOT / "tests" / "servers" / "cli_peer.py")
EVIL = "x\x1b]52;c;cHduZWQ=\x07y\x1b[2Jz\x9b31m\x7f\rw"
RAW_CONTROLS = ("\x1b", "\x07", "\x9b", "\x7f", "\r")


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(args, out=out)
    return code, out.getvalue(), capsys.readouterr().err


def _child_env(progress: str = "off") -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = child_pythonpath()
    env["MCPCALL_PROGRESS"] = progress
    return env


def _make_controlling_tty() -> None:  # in the child, after setsid: the pty is its terminal (Ctrl-C is SIGINT)
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def at_a_terminal(argv: list[str], answers: list[tuple[str, str]], cwd: Path = ROOT,
                  deadline: float = 30.0, progress: str = "off") -> tuple[int, str, str]:
    """Run ``mcpcall argv`` with a pseudo-terminal as stdin and stderr; each answer is typed once the
    terminal shows its prompt. Returns (status, stdout, what the terminal showed)."""
    master, slave = os.openpty()
    proc = subprocess.Popen([PYTHON, "-m", "mcpcall", *argv], stdin=slave, stderr=slave, stdout=subprocess.PIPE,
                            cwd=cwd, env=_child_env(progress), start_new_session=True, preexec_fn=_make_controlling_tty)  # noqa: PLW1509 - only ioctl in the child
    os.close(slave)
    seen = b""
    pending = list(answers)
    ends = time.monotonic() + deadline
    try:
        while time.monotonic() < ends:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: every holder of the slave side is gone
                    break
                if not chunk:
                    break
                seen += chunk
                if pending and seen.decode("utf-8", "replace").rstrip().endswith(pending[0][0]):
                    os.write(master, pending.pop(0)[1].encode())
            elif proc.poll() is not None:
                break
        assert proc.stdout is not None
        out = proc.stdout.read().decode()
        code = proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
        os.close(master)
    assert not pending, f"never asked for {pending}; the terminal showed {seen!r}"
    return code, out, seen.decode("utf-8", "replace")


# -- 25. elicitation: asked at a terminal, declined elsewhere ---------------------------------------------


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
def test_confirm_accepted_at_a_terminal(protocol: str) -> None:
    code, out, shown = at_a_terminal(["--protocol", protocol, "call", "confirm", "question=Deploy now?"],
                                     [("[c]ancel:", "y\n"), ("[y/n]:", "y\n")])
    assert (code, out) == (0, "confirmed: true\n"), shown
    assert "Deploy now?" in shown and "confirmed (boolean, required" in shown
    assert "-32021" not in shown


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
def test_confirm_declined_at_a_terminal(protocol: str) -> None:
    code, out, shown = at_a_terminal(["--protocol", protocol, "call", "confirm", "question=Deploy now?"],
                                     [("[c]ancel:", "n\n")])
    assert (code, out) == (0, "declined\n"), shown


def test_confirm_field_answered_no_and_a_bad_answer_asked_again() -> None:
    code, out, shown = at_a_terminal(["call", "confirm", "question=Deploy now?"],
                                     [("[c]ancel:", "y\n"), ("[y/n]:", "maybe\n"), ("[y/n]:", "no\n")])
    assert (code, out) == (0, "confirmed: false\n"), shown
    assert "type y or n" in shown


@pytest.mark.parametrize("key", ["\x04", "\x03"], ids=["eof", "ctrl-c"])
def test_end_of_input_or_ctrl_c_at_the_question_cancels_it(key: str) -> None:
    code, out, shown = at_a_terminal(["call", "confirm", "question=Deploy now?"], [("[c]ancel:", key)])
    assert (code, out) == (0, "declined\n"), shown  # the demo says "declined" for decline and cancel alike
    assert "(cancelled)" in shown and "Traceback" not in shown


def test_ctrl_c_outside_a_question_still_stops_the_command() -> None:
    server = " ".join(fault_argv("hang-all"))
    code, out, shown = at_a_terminal(["--timeout", "20", "ping", server], [("--timeout to change)", "\x03")],
                                     progress="auto")  # the line that says it waits, then Ctrl-C
    assert (code, out) == (130, ""), shown
    assert "Traceback" not in shown


def test_confirm_without_a_terminal_is_declined_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["call", "confirm", "question=Deploy now?"], capsys)
    assert (code, out) == (0, "declined\n")
    assert "asked for input ('Deploy now?'); declined: stdin is not a terminal" in err


def test_a_question_takes_the_progress_bar_off_the_line_first() -> None:
    stream = io.StringIO()
    bar = PlainBar(stream, "slow")
    bar.update(1, 4, "step 1")
    assert stream.getvalue().startswith("\rslow [")
    with screen():
        stream.write("QUESTION")
    drawn = stream.getvalue()
    before, _, _ = drawn.partition("QUESTION")
    assert before.endswith("\r"), drawn  # the bar's line was blanked and the cursor is at its start
    assert before.rstrip("\r").endswith(" " * len(bar.line(1, 4, "step 1")))
    bar.update(2, 4, "step 2")  # redrawn in full after the question, not on top of it
    assert stream.getvalue().endswith(bar.line(2, 4, "step 2"))
    bar.close()


# -- 26. ${input:ID}: --input, a prompt at a terminal, listing without any -------------------------------


def _vscode_config(tmp_path: Path) -> Path:
    folder = tmp_path / ".vscode"
    folder.mkdir()
    config = {
        "inputs": [
            {"type": "promptString", "id": "api-key", "description": "Peer API key", "password": True},
            {"type": "promptString", "id": "region", "description": "Region", "default": "eu"},
            {"type": "promptString", "id": "other-token", "description": "Other token", "password": True},
        ],
        "servers": {
            "peer": {"type": "stdio", "command": PYTHON, "args": [PEER, "env"],
                     "env": {"API_KEY": "${input:api-key}", "REGION": "${input:region}"}},
            "other": {"type": "stdio", "command": PYTHON, "args": [PEER, "env"], "env": {"TOKEN": "${input:other-token}"}},
        },
    }
    path = folder / "mcp.json"
    path.write_text(json.dumps(config))
    return path


def test_servers_lists_names_without_any_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _vscode_config(tmp_path)
    code, out, err = run(["--config", str(path), "servers"], capsys)
    assert code == 0, err
    assert [line.split()[0] for line in out.splitlines()] == ["peer", "other"]


def test_input_given_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _vscode_config(tmp_path)
    code, out, err = run(["--config", str(path), "--input", "api-key=s3cret", "call", "peer", "env", "name=API_KEY"], capsys)
    assert (code, out) == (0, "s3cret\n"), err
    code, out, err = run(["--config", str(path), "--input", "api-key=s3cret", "call", "peer", "env", "name=REGION"], capsys)
    assert (code, out) == (0, "eu\n"), err  # no terminal: the file's default
    # 'other' needs other-token, which nobody gave: not asked for, not an error, for a command on 'peer'
    assert "other-token" not in err


def test_input_missing_without_a_terminal_names_the_input_and_the_option(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = _vscode_config(tmp_path)
    code, out, err = run(["--config", str(path), "call", "peer", "env", "name=API_KEY"], capsys)
    assert (code, out) == (2, "")
    assert "input 'api-key' (Peer API key)" in err and "give --input api-key=VALUE" in err
    assert "load_config" not in err


def test_a_password_input_is_asked_at_a_terminal_without_echo(tmp_path: Path) -> None:
    path = _vscode_config(tmp_path)
    code, out, shown = at_a_terminal(["--config", str(path), "call", "peer", "env", "name=API_KEY"],
                                     [("(Peer API key):", "typed-secret\n"), ("(Region) [eu]:", "us\n")], cwd=tmp_path)
    assert (code, out) == (0, "typed-secret\n"), shown
    assert "typed-secret" not in shown  # getpass: no echo
    assert "other-token" not in shown  # only the inputs of the server in use are asked for


def test_input_option_form_is_checked(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["--input", "novalue", "tools"], capsys)
    assert code == 2 and "--input takes ID=VALUE" in err


# -- 27. a server without a capability has none: said, status 0 ------------------------------------------


@pytest.mark.parametrize("command", ["tools", "resources", "prompts"])
def test_a_listing_on_a_server_without_the_capability(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    server = f"{PYTHON} {PEER} bare"
    code, out, err = run([command, server], capsys)
    assert (code, out) == (0, ""), err
    assert f"offers no {command}" in err and "-32601" not in err
    code, out, err = run(["--json", command, server], capsys)
    assert (code, json.loads(out)) == (0, [])


# -- 28. server text cannot drive the terminal ------------------------------------------------------------


def test_printable_escapes_every_control_character_but_newline_and_tab() -> None:
    assert printable("a\tb\nc") == "a\tb\nc"
    shown = printable(EVIL)
    assert not any(c in shown for c in RAW_CONTROLS)
    assert shown == "x\\x1b]52;c;cHduZWQ=\\x07y\\x1b[2Jz\\x9b31m\\x7f\\x0dw"
    for code in [*range(0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]:
        assert printable(chr(code)) == f"\\x{code:02x}"


def test_json_output_escapes_them_and_keeps_the_value() -> None:
    text = json_text({"k": EVIL, EVIL: 1})
    assert not any(c in text for c in RAW_CONTROLS)
    assert json.loads(text) == {"k": EVIL, EVIL: 1}


def test_server_text_in_human_output_is_made_printable(capsys: pytest.CaptureFixture[str]) -> None:
    server = f"{PYTHON} {PEER} evil"
    for args in (["tools", server], ["call", server, "t"], ["call", server, "fail"]):
        code, out, err = run(args, capsys)
        assert code in (0, 5), err
        assert not any(c in out + err for c in RAW_CONTROLS), (args, out, err)
        assert "\\x1b]52" in out + err, (args, out, err)


def test_server_text_in_json_output_is_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["--json", "call", f"{PYTHON} {PEER} evil", "t"], capsys)
    assert code == 0, err
    assert not any(c in out for c in RAW_CONTROLS)
    assert json.loads(out)["content"][0]["text"] == f"result {EVIL}"


def test_server_stderr_lines_shown_are_made_printable(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser("").parse_intermixed_args(["--stderr", "show", "tools"])
    assert _connect_options(args)["stderr"] is show_stderr_line  # not "inherit": the lines pass through us
    show_stderr_line(f"stderr {EVIL}")
    err = capsys.readouterr().err
    assert err == f"{printable('stderr ' + EVIL)}\n"


def test_library_warnings_are_made_printable() -> None:
    code = ("import logging\nfrom mcpcall.cli.app import _warnings_on_stderr\n"
            f"with _warnings_on_stderr():\n    logging.getLogger('mcpcall.server.x').warning('log %s', {EVIL!r})\n")
    done = subprocess.run([PYTHON, "-c", code], capture_output=True, env=_child_env(), timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode() == f"log {printable(EVIL)}\n"


def test_output_write_is_printable_and_json_is_not_altered() -> None:
    buffer = io.StringIO()
    output = Output(buffer)
    output.write(EVIL + "\n")
    output.json({"a": "\x1b"})
    assert buffer.getvalue() == printable(EVIL) + '\n{\n  "a": "\\u001b"\n}\n'


# -- 29. advice for a shell, not for Python ---------------------------------------------------------------


def test_a_server_without_resources_asked_to_read_one(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["read", f"{PYTHON} {PEER} bare", "mem://x"], capsys)
    assert code == 5
    assert "does not offer resources" in err and "`mcpcall info SERVER` shows what it offers" in err
    assert "client.capabilities" not in err


def test_library_advice_is_worded_for_the_shell() -> None:
    texts: list[Any] = [
        str(MethodNotFound(-32601, "nope", server="s", method="resources/list", capability="resources")),
        str(NoHandler("sampling/createMessage", "s")),
        "x did not answer tools/call within 5 s (the request was cancelled; raise timeout= if the operation is slow)",
        ("authorization at https://a needs a person at a browser, and this OAuth object is not interactive: log in once "
         "with `mcpcall login URL` (a token file) or OAuth(token_store=...).login(url) (any store, RedisTokenStore "
         "included) and share that store, or pass redirect_handler="),
        ("authorization at https://a needs you to sign in (again): call auth.login(url) (or run `mcpcall login URL`) "
         "from your own code; mcpcall never opens a browser or prompts from inside a request"),
        "client registration: https://a has no registration_endpoint; pass client_id= or client_metadata_url=",
        "its credentials are not sent there (pass issuer= to say which server they belong to, or register a client there)",
        "config f: server 's': field 'env' uses input 'k': pass it with load_config(..., inputs={'k': ...})",
        "server 's' sent a message of more than 67108864 bytes (raise max_message_bytes= if it is legitimate)",
    ]
    for text in texts:
        shell = for_the_shell(text)
        for python in ("client.", "connect()", "redirect_handler=", "client_id=", "issuer=", "load_config", "timeout=",
                       "auth.login", "OAuth.login", ".login(url)", "token_store=", "handlers=", "max_message_bytes"):
            assert python not in shell, (python, shell)


def test_tools_of_every_server_with_one_that_has_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"bare": {"command": PYTHON, "args": [PEER, "bare"]},
                                               "evil": {"command": PYTHON, "args": [PEER, "evil"]}}}))
    code, out, err = run(["--config", str(path), "tools"], capsys)
    assert code == 0, err
    assert out.startswith("bare:\n  (no tools)\nevil:\n  t")


def test_servers_check_asks_only_for_the_inputs_of_enabled_servers(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = _vscode_config(tmp_path)
    config = json.loads(path.read_text())
    config["servers"]["other"]["disabled"] = True
    path.write_text(json.dumps(config))
    code, out, err = run(["--config", str(path), "--input", "api-key=k", "servers", "--check"], capsys)
    assert code == 0, err
    assert "ok, 1 tools" in out and "(disabled)" in out and "other-token" not in err
