"""What a newcomer tripped over: bare entries to connect(), not-found messages, and the command line's rough edges."""

from __future__ import annotations

import io
import json
import logging
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import mcpcall
from mcpcall import ConfigError, ConnectionClosed
from mcpcall.cli import EXIT_TIMEOUT, EXIT_USAGE, main
from mcpcall.cli.commands import _print_result
from mcpcall.cli.output import Output
from mcpcall.cli.progress import WaitNotice
from mcpcall.config import make_transport
from mcpcall.config.entries import _bare_entry
from mcpcall.transports.http import HTTPTransport
from mcpcall.types.tools import parse_call_result
from tests.conftest import ROOT, demo_argv, everything_argv

PYTHON = sys.executable
DEMO = demo_argv()
DEMO_LINE = shlex.join(DEMO)
SCRIPT = ROOT / ".venv" / "bin" / "mcpcall"
# Prints the MCPCALL_* variables it was given, then exits 7: the environment a server gets, seen from outside.
ENV_PROBE = ("import os, sys; sys.stderr.write(repr(sorted((k, v) for k, v in os.environ.items() "
             "if k.startswith('MCPCALL_T_'))) + '\\n'); sys.exit(7)")


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(args, out=out)
    return code, out.getvalue(), capsys.readouterr().err


def probe_env(spec: Any, **options: Any) -> list[tuple[str, str]]:
    with pytest.raises(ConnectionClosed) as info:
        mcpcall.connect(spec, probe_timeout=2, timeout=10, **options)
    assert info.value.returncode == 7
    found: list[tuple[str, str]] = eval(info.value.stderr_tail[-1])  # our own probe's repr
    return found


# -- 1. a bare entry is read like a config file's entry -------------------------------------------


def test_bare_entry_fields_are_those_of_a_config_entry(monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    entry = {"command": PYTHON, "args": ["-m", "mcpcall.demo_server"], "timeout": 7,
             "disabled": False, "type": "stdio", "autoApprove": ["echo"], "alwaysAllow": [], "description": "demo"}
    with caplog.at_level(logging.DEBUG, logger="mcpcall.config"), mcpcall.connect(entry) as bare:
        assert bare.call_tool("add", {"a": 2, "b": 3}).text == "5"
        assert bare.timeout == 7.0
        assert bare.name == "mcpcall.demo_server"
    assert "ignoring key 'autoApprove'" in caplog.text and "ignoring key 'description'" in caplog.text
    with mcpcall.connect({"mcpServers": {"demo": entry}}) as configured:
        assert configured.timeout == 7.0
    with mcpcall.connect(entry, timeout=3) as explicit:  # the caller's timeout wins
        assert explicit.timeout == 3.0


def test_a_whole_config_expands_variables_and_fails_on_an_unset_one() -> None:
    entry = {"command": PYTHON, "args": ["-m", "mcpcall.demo_server", "${NOPE_VAR}"]}
    with pytest.raises(ConfigError) as configured:
        mcpcall.connect({"mcpServers": {"demo": entry}})
    assert "field 'args[2]' uses variable 'NOPE_VAR', which is not set" in str(configured.value)


def test_a_bare_entry_built_in_python_is_never_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A URL or header a user typed into an application must not pull secrets out of its environment.
    monkeypatch.setenv("MCPCALL_T_SECRET", "s3cr3t")
    spec = _bare_entry({"url": "http://127.0.0.1:1/mcp/${MCPCALL_T_SECRET}", "headers": {"X-Key": "${MCPCALL_T_SECRET}"}}).spec
    transport = make_transport(spec)
    assert isinstance(transport, HTTPTransport)
    assert transport.url == "http://127.0.0.1:1/mcp/${MCPCALL_T_SECRET}"
    assert transport.extra_headers["X-Key"] == "${MCPCALL_T_SECRET}"
    assert "s3cr3t" not in repr(spec)


def test_bare_entry_env_file_is_relative_to_the_cwd_and_values_are_literal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "server.env").write_text("MCPCALL_T_FROM_FILE=file-value\nMCPCALL_T_LITERAL=${NOT_EXPANDED}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MCPCALL_T_SOURCE", "src")
    entry = {"command": PYTHON, "args": ["-c", ENV_PROBE], "envFile": "server.env",
             "env": {"MCPCALL_T_EXPANDED": "${MCPCALL_T_SOURCE}-x"}}
    assert probe_env(entry) == [("MCPCALL_T_EXPANDED", "${MCPCALL_T_SOURCE}-x"),
                                ("MCPCALL_T_FROM_FILE", "file-value"), ("MCPCALL_T_LITERAL", "${NOT_EXPANDED}")]
    with pytest.raises(ConfigError, match=r"field 'envFile': the file missing\.env does not exist"):
        mcpcall.connect({**entry, "envFile": "missing.env"})


def test_a_config_entry_is_expanded_once(tmp_path: Path) -> None:
    # ServerConfig.connect() hands connect() an expanded spec: a literal "${" from an envFile must stay.
    (tmp_path / "server.env").write_text("MCPCALL_T_LITERAL=${NOT_EXPANDED}\n")
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"probe": {"command": PYTHON, "args": ["-c", ENV_PROBE],
                                                            "envFile": "server.env"}}}))
    server = mcpcall.load_config(str(config))["probe"]
    with pytest.raises(ConnectionClosed) as info:
        server.connect(probe_timeout=2, timeout=10)
    assert info.value.returncode == 7 and "('MCPCALL_T_LITERAL', '${NOT_EXPANDED}')" in info.value.stderr_tail[-1]


def test_a_disabled_bare_entry_says_so() -> None:
    for flag in (True, "yes"):
        with pytest.raises(ConfigError, match=r"^server 'svc': .*'disabled': true.*to connect") as info:
            mcpcall.connect({"name": "svc", "command": PYTHON, "args": ["-m", "mcpcall.demo_server"], "disabled": flag})
        assert "disabled" in str(info.value)
    with mcpcall.connect({"command": PYTHON, "args": ["-m", "mcpcall.demo_server"], "disabled": "false"}) as client:
        client.ping()


def test_python_only_keys_of_a_bare_entry_work_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPCALL_T_SECRET", "inherited")
    entry: dict[str, Any] = {"command": PYTHON, "args": ("-c", ENV_PROBE)}  # a tuple of args, as before
    assert probe_env({**entry, "inherit_env": "yes"}) == [("MCPCALL_T_SECRET", "inherited")]
    assert probe_env({**entry, "inherit_env": False}) == []
    assert probe_env({**entry, "inherit_env": True}, inherit_env=False) == []  # the keyword wins
    with mcpcall.connect({**dict(zip(("command", "args"), (DEMO[0], DEMO[1:]))), "name": "svc"}) as client:
        assert client.name == "svc"
    with pytest.raises(ConfigError, match="'inherit_env' must be true or false"):
        mcpcall.connect({**entry, "inherit_env": "maybe"})
    # HTTP entries: auth and verify still go through.
    spec = _bare_entry({"url": "http://127.0.0.1:8123/mcp", "headers": {"X-Key": "tok"},
                        "verify": "false", "auth": "bearer-token", "transport": "auto", "autoApprove": []}).spec
    transport = make_transport(spec)
    assert isinstance(transport, HTTPTransport)
    assert transport.url == "http://127.0.0.1:8123/mcp" and transport.verify is False
    assert transport.name == "127.0.0.1:8123" and transport.extra_headers["X-Key"] == "tok"
    assert transport.auth is not None
    with pytest.raises(ConfigError, match="unknown keys in server entry: inherit_env"):  # as before: stdio only
        mcpcall.connect({"url": "http://127.0.0.1:1/mcp", "inherit_env": True})


# -- 2, 3. a program not found: no environment in the message; a URL without its scheme --------------


def test_program_not_found_names_no_directory_of_path() -> None:
    with pytest.raises(ConnectionClosed) as info:
        mcpcall.connect("no-such-server-xyz")
    message = str(info.value)
    assert "'no-such-server-xyz' not found on PATH (" in message and "directories searched" in message
    assert "absolute path" in message and "did you mean" not in message
    for directory in filter(None, os.environ.get("PATH", "").split(os.pathsep)):
        assert directory not in message
    assert info.value.__cause__ is None and info.value.__suppress_context__


@pytest.mark.parametrize(("word", "url"), [("127.0.0.1:8765/mcp", "http://127.0.0.1:8765/mcp"),
                                           ("localhost:3000/mcp", "http://localhost:3000/mcp"),
                                           ("localhost:3000", "http://localhost:3000"),
                                           ("mcp.example.com/mcp", "https://mcp.example.com/mcp")])
def test_a_url_without_its_scheme_gets_a_hint(word: str, url: str) -> None:
    with pytest.raises(ConnectionClosed, match="not found") as info:
        mcpcall.connect(word)
    assert f"did you mean {url}?" in str(info.value)


def test_a_url_without_its_scheme_shows_no_token() -> None:
    with pytest.raises(ConnectionClosed) as info:
        mcpcall.connect("mcp.example.com:8443/mcp?token=tok-s3cr3t")
    message = str(info.value)
    assert "tok-s3cr3t" not in message and "server 'mcp'" in message
    assert "did you mean http://mcp.example.com:8443/mcp?token=***?" in message


# -- 4. missing words are usage errors ------------------------------------------------------------


@pytest.mark.parametrize(("words", "missing"), [
    ([DEMO_LINE, "call"], "call needs a tool name after the server"),
    (["call", DEMO_LINE], "call needs a tool name after the server"),
    (["call"], "call needs a tool name"),
    ([DEMO_LINE, "get-prompt"], "get-prompt needs a prompt name after the server"),
    (["get-prompt", DEMO_LINE], "get-prompt needs a prompt name after the server"),
    ([DEMO_LINE, "read"], "read needs a URI after the server"),
    (["read", DEMO_LINE], "read needs a URI after the server"),
    ([DEMO_LINE, "read", "a://1", "a://2"], "read takes one URI after the server"),
])
def test_missing_words_are_usage_errors(words: list[str], missing: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(words, capsys)
    assert code == EXIT_USAGE and out == ""
    assert err.startswith("mcpcall: error: ") and missing in err and "Traceback" not in err


def test_console_script_call_without_a_tool(tmp_path: Path) -> None:
    done = subprocess.run([str(SCRIPT), DEMO_LINE, "call"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == EXIT_USAGE and "call needs a tool name" in done.stderr and "Traceback" not in done.stderr


# -- 5. --help lists every option -----------------------------------------------------------------

OPTIONS = ("--timeout", "--protocol", "--env", "--input", "--inherit-env", "--cwd", "--stderr", "--header", "--bearer", "--config",
           "--check", "--json", "--version")


def test_help_lists_every_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--help"], capsys)  # into the given output, not sys.stdout
    assert code == 0
    done = subprocess.run([str(SCRIPT), "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0
    for text in (out, done.stdout):
        missing = [option for option in OPTIONS if f"  {option}" not in text]
        assert not missing, missing


# -- 6. content blocks printed readably, structured content once ----------------------------------


def _printed(raw: dict[str, Any]) -> str:
    buffer = io.StringIO()
    _print_result(parse_call_result(raw), Output(buffer))
    return buffer.getvalue()


def test_embedded_resources_are_printed_readably() -> None:
    blob = {"type": "resource", "resource": {"uri": "mem://b", "mimeType": "application/gzip", "blob": "AAECAwQ="}}
    text = {"type": "resource", "resource": {"uri": "mem://t", "mimeType": "text/plain", "text": "resource text\n"}}
    structured = {"sum": 5}
    shown = _printed({"content": [blob], "structuredContent": structured})
    assert shown.splitlines()[0] == "[binary contents of mem://b: 5 bytes, application/gzip; --json shows them in base64]"
    assert "AAECAwQ=" not in shown and '"blob"' not in shown
    assert shown.count('"sum": 5') == 1  # no text content: the structured content is the result
    shown = _printed({"content": [{"type": "text", "text": '{"sum": 5}'}, blob], "structuredContent": structured})
    assert shown.count("sum") == 1  # the text already says it
    shown = _printed({"content": [text, blob], "structuredContent": structured})
    assert shown.splitlines()[0] == "resource text" and "sum" not in shown
    image = _printed({"content": [{"type": "image", "mimeType": "image/png", "data": "iVBORw=="}]})
    assert image == "[image content: 4 bytes, image/png; --json shows them in base64]\n"


def test_embedded_blob_from_server_everything(capsys: pytest.CaptureFixture[str]) -> None:
    server = shlex.join(everything_argv("stdio"))
    code, out, _ = run([server, "call", "get-resource-reference", "resourceType=Blob"], capsys)
    assert code == 0
    assert "[binary contents of demo://resource/dynamic/blob/1: " in out and "bytes, text/plain;" in out
    assert '"blob"' not in out and "{" not in out
    code, out, _ = run(["--json", server, "call", "get-resource-reference", "resourceType=Blob"], capsys)
    assert code == 0 and '"blob"' in out  # --json shows everything


# -- 7. a silent server: one line after a while, on a terminal -----------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_wait_notice_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCPCALL_PROGRESS", raising=False)
    pipe, terminal = io.StringIO(), _Terminal()
    notices = [WaitNotice(pipe, "waiting", delay=0.05), WaitNotice(terminal, "waiting", delay=0.05)]
    time.sleep(0.5)
    for notice in notices:
        notice.stop()
    assert (pipe.getvalue(), terminal.getvalue()) == ("", "waiting\n")
    early = _Terminal()
    WaitNotice(early, "waiting", delay=5).stop()  # answered in time: nothing
    monkeypatch.setenv("MCPCALL_PROGRESS", "off")
    off = _Terminal()
    notice = WaitNotice(off, "waiting", delay=0.05)
    time.sleep(0.3)
    notice.stop()
    assert early.getvalue() == off.getvalue() == ""


def test_a_silent_server_gets_a_waiting_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MCPCALL_PROGRESS", "plain")  # forced: capsys is no terminal
    code, out, err = run(["--timeout", "4", "sleep 300", "tools"], capsys)
    assert code == EXIT_TIMEOUT and out == ""
    assert "mcpcall: waiting for server 'sleep' (timeout 4 s; --timeout to change)\n" in err
    assert err.count("waiting for server") == 1
    monkeypatch.setenv("MCPCALL_PROGRESS", "auto")
    code, _, err = run(["tools"], capsys)  # a server that answers: no line
    assert code == 0 and "waiting" not in err
