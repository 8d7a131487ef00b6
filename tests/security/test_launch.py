"""Starting a stdio server: an argument list, never a shell; only an allow-listed environment by default.

The server is tests/servers/hostile_server.py, which reports the argv it got and the names of the
environment it was started with (as ``execve`` gave it), so these tests see what reached the program.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest

import mcpcall
from mcpcall import ConnectionClosed
from tests.conftest import PYTHON, SERVERS

HOSTILE = str(SERVERS / "hostile_server.py")
#: What a stdio server inherits by default on POSIX (SECURITY.rst and README say so).
ALLOWED = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
FAST = {"protocol": "legacy", "timeout": 20, "close_timeout": 1.0}


def _tool(spec: Any, tool: str, **options: Any) -> Any:
    with mcpcall.connect(spec, **{**FAST, **options}) as client:
        return json.loads(client.call_tool(tool, {}).text)


def _allowed_here() -> set:
    return {name for name in ALLOWED if name in os.environ and not os.environ[name].startswith("()")}


# -- no shell ---------------------------------------------------------------------------------------------


def test_a_command_string_is_split_like_a_shell_but_never_run_by_one(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    q = shlex.quote
    line = (f"{q(PYTHON)} {q(HOSTILE)} $HOME ; touch {q(str(marker))} `touch {q(str(marker))}` "
            f"$(touch {q(str(marker))}) '|' && > {q(str(tmp_path / 'redirected'))} '*'")
    got = _tool(line, "argv")
    assert got == shlex.split(line)[2:]  # each word as shlex splits it: $HOME, ;, `touch, ... as written
    assert "$HOME" in got and ";" in got and ">" in got
    assert not marker.exists() and not (tmp_path / "redirected").exists()


def test_argv_items_reach_the_server_as_they_are(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    items = ["$HOME", f"; touch {marker}", f"$(touch {marker})", f"`touch {marker}`", "*", "a b", "'q'", "\\", "|| true"]
    assert _tool([PYTHON, HOSTILE, *items], "argv") == items
    assert not marker.exists()


def test_a_config_files_command_is_one_program_never_a_command_line(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        "line": {"command": f"{PYTHON} {HOSTILE}; touch {marker}"},
        "args": {"command": PYTHON, "args": [HOSTILE, f"; touch {marker}", "$HOME", f"$(touch {marker})"]},
    }}))
    servers = mcpcall.load_config(str(config))
    with pytest.raises(ConnectionClosed, match="not found"):  # the whole string is taken as a program's name
        servers["line"].connect(**FAST)
    with servers["args"].connect(**FAST) as client:
        assert json.loads(client.call_tool("argv", {}).text) == [f"; touch {marker}", "$HOME", f"$(touch {marker})"]
    assert not marker.exists()


def test_a_descriptor_marked_inheritable_is_not_passed_to_the_server(tmp_path: Path) -> None:
    # Python opens descriptors non-inheritable; one an application marked inheritable still stays out of the server.
    fd = os.open(tmp_path / "private", os.O_RDWR | os.O_CREAT, 0o600)
    high = os.dup2(fd, 200, inheritable=True)
    try:
        assert os.get_inheritable(high)
        fds = _tool([PYTHON, HOSTILE], "fds")
    finally:
        os.close(high)
        os.close(fd)
    assert high not in fds and {0, 1, 2} <= set(fds)


# -- the environment ----------------------------------------------------------------------------------------


def test_a_server_inherits_only_the_allow_list_plus_what_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-s3cr3t")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-s3cr3t")
    monkeypatch.setenv("LD_PRELOAD", "/tmp/evil.so")
    allowed = _allowed_here()
    assert "PATH" in allowed, "precondition: this process has a PATH"
    assert set(_tool([PYTHON, HOSTILE], "environ")) == allowed
    assert set(_tool([PYTHON, HOSTILE], "environ", env={"GIVEN": "1"})) == allowed | {"GIVEN"}
    widened = set(_tool([PYTHON, HOSTILE], "environ", inherit_env=True))
    assert {"AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY", "LD_PRELOAD"} <= widened


def test_a_config_entrys_env_is_added_to_the_allow_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPCALL_T_SECRET", "s3cr3t")
    (tmp_path / "server.env").write_text("FROM_FILE=1\n")
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"s": {
        "command": PYTHON, "args": [HOSTILE], "env": {"TOKEN": "${MCPCALL_T_SECRET}"}, "envFile": "server.env"}}}))
    with mcpcall.load_config(str(config))["s"].connect(**FAST) as client:
        names: list[str] = json.loads(client.call_tool("environ", {}).text)
    assert set(names) == _allowed_here() | {"TOKEN", "FROM_FILE"}  # the secret only where the file names it


def test_an_exported_shell_function_is_not_passed_on(monkeypatch: pytest.MonkeyPatch) -> None:
    # A value that bash would read as a function definition (the Shellshock form) is left out, even when allow-listed.
    monkeypatch.setenv("TERM", "() { :; }; echo pwned")
    names = _tool([PYTHON, HOSTILE], "environ")
    assert "TERM" not in names and "PATH" in names


@pytest.mark.parametrize("argv, env, says", [
    ([PYTHON + "\0"], {}, "its command holds a NUL character"),
    ([PYTHON, "-c", "pass\0"], {}, "its argument 2 holds a NUL character"),
    ([PYTHON, "-c", "pass\ud800"], {}, "its argument 2 holds a character this system cannot encode"),
    ([PYTHON, "-c", "pass"], {"T": "sk-launch-s3cr3t\0"}, "the value of its environment variable 'T' holds a NUL character"),
    ([PYTHON, "-c", "pass"], {"T": "sk-launch-s3cr3t\ud800"},
     "the value of its environment variable 'T' holds a character this system cannot encode"),
    ([PYTHON, "-c", "pass"], {"A=B": "sk-launch-s3cr3t"}, "'A=B' cannot be the name of an environment variable"),
    ([PYTHON, "-c", "pass"], {"": "sk-launch-s3cr3t"}, "'' cannot be the name of an environment variable"),
])
def test_what_no_process_can_be_started_with_is_a_config_error_naming_the_server(argv: list[str], env: dict[str, str],
                                                                                 says: str) -> None:
    """subprocess refuses these with a bare ValueError, or a UnicodeEncodeError whose repr holds the whole value
    (an environment variable's: a secret); connect() says which server and which part, never the value."""
    with pytest.raises(mcpcall.ConfigError) as info:
        mcpcall.connect(argv, name="srv", timeout=5, env=env)
    text = f"{info.value}\n{info.value!r}"
    assert f"cannot start server 'srv': {says}" in text, text
    assert "s3cr3t" not in text and info.value.__cause__ is None and info.value.__context__ is None


def test_a_working_directory_no_process_can_be_started_in_is_a_config_error() -> None:
    from mcpcall.transports.stdio import StdioTransport

    with pytest.raises(mcpcall.ConfigError, match=r"cannot start server 'srv': its working directory holds a NUL character"):
        StdioTransport([PYTHON, "-c", "pass"], name="srv", cwd="/tmp\0x").start(lambda message: None)


def test_connect_says_why_a_working_directory_cannot_be_one() -> None:
    with pytest.raises(mcpcall.ConfigError, match=r"^the working directory '/tmp\\x00x' for server 'srv' holds a NUL character$"):
        mcpcall.connect([PYTHON, "-c", "pass"], name="srv", timeout=5, cwd="/tmp\0x")
