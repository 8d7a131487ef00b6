"""The command line: commands, argument parsing, output, and exit codes scripts can trust."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from typing import List, Tuple

import pytest

from mcpcall.cli import main, parse_arguments, parse_value
from mcpcall.types import Tool
from tests.conftest import fault_argv


def run(args: List[str], capsys: pytest.CaptureFixture[str]) -> Tuple[int, str, str]:
    out = io.StringIO()
    code = main(args, out=out)
    return code, out.getvalue(), capsys.readouterr().err


def test_tools_on_the_demo_server(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["tools"], capsys)
    assert code == 0
    assert out.splitlines()[0].startswith("echo")
    assert "add" in out and "slow" in out


def test_tools_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["tools", "--json"], capsys)
    assert code == 0
    tools = json.loads(out)
    assert {t["name"] for t in tools} >= {"echo", "add"}
    assert tools[0]["inputSchema"]["type"] == "object"


def test_call_with_key_values_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["call", "add", "a=2", "b=3"], capsys)
    assert (code, out.strip()) == (0, "5")
    assert "ms" in err  # latency goes to stderr, results to stdout
    code, out, _ = run(["call", "echo", '{"message": "hi there"}'], capsys)
    assert (code, out.strip()) == (0, "hi there")
    code, out, _ = run(["--json", "call", "add", "a=1", "b=1"], capsys)
    assert json.loads(out)["structuredContent"] == {"sum": 2}


def test_string_schema_keeps_numbers_as_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["call", "echo", "message=123"], capsys)
    assert (code, out.strip()) == (0, "123")


def test_info(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["info"], capsys)
    assert code == 0 and "mcpcall-demo" in out and "2026-07-28" in out
    code, out, _ = run(["info", "--json", "--protocol", "legacy"], capsys)
    info = json.loads(out)
    assert info["era"] == "legacy" and info["server"]["name"] == "mcpcall-demo"


def test_explicit_server_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run([f"{sys.executable} -m mcpcall.demo_server", "call", "echo", "message=x"], capsys)
    assert (code, out.strip()) == (0, "x")


@pytest.mark.parametrize(
    "args, code",
    [
        (["call", "fail", "message=bad"], 1),
        ([], 2),
        (["frobnicate"], 2),
        (["call"], 2),
        (["call", "echo", "novalue"], 2),
        (["call", "echo", "{not json"], 2),
        (["/nonexistent/server", "tools"], 3),
        (["call", "slow", "seconds=30", "--timeout", "0.3"], 4),
        (["call", "boom"], 5),
        (["call", "nosuchtool"], 5),
    ],
)
def test_exit_codes(args: List[str], code: int, capsys: pytest.CaptureFixture[str]) -> None:
    got, _, err = run(args, capsys)
    assert got == code, err
    if code >= 2:
        assert err.strip()  # a reason is always printed


def test_server_failure_message_names_the_cause(capsys: pytest.CaptureFixture[str]) -> None:
    server = " ".join(fault_argv("exit-at-start"))
    code, _, err = run([server, "tools"], capsys)
    assert code == 3 and "missing API key" in err


def test_demo_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["demo"], capsys)
    assert code == 0
    assert "call echo" in out and "call add" in out and "calls/s" in out and " ms" in out


def test_module_entry_point() -> None:
    done = subprocess.run([sys.executable, "-m", "mcpcall", "call", "add", "a=20", "b=22"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "42"
    bad = subprocess.run([sys.executable, "-m", "mcpcall", "call", "fail"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1


def test_value_parsing() -> None:
    assert parse_value("3", None) == 3
    assert parse_value("true", None) is True
    assert parse_value("hello", None) == "hello"
    assert parse_value("3", {"type": "string"}) == "3"
    tool = Tool(name="t", input_schema={"properties": {"s": {"type": "string"}, "n": {"type": "number"}}})
    assert parse_arguments(["s=1", "n=1.5", "x=[1,2]"], tool) == {"s": "1", "n": 1.5, "x": [1, 2]}
    assert parse_arguments(['{"a": 1}'], None) == {"a": 1}
