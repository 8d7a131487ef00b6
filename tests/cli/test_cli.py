"""The command line: commands, argument parsing, output, and exit codes scripts can trust."""

from __future__ import annotations

import fcntl
import io
import json
import os
import subprocess
import sys

import pytest

from mcpcall.cli import EXIT_BROKEN_PIPE, EXIT_OUTPUT, main, main_exit, parse_arguments, parse_value
from mcpcall.types import Tool
from tests.conftest import fault_argv


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
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


def test_a_text_that_ends_its_line_gets_no_blank_line_after_it(capsys: pytest.CaptureFixture[str]) -> None:
    # A file's text (server-filesystem's read_text_file) ends in a newline: it was printed with a second one.
    code, out, _ = run(["call", "echo", json.dumps({"message": "two\nlines\n"})], capsys)
    assert (code, out) == (0, "two\nlines\n")
    code, out, _ = run(["call", "echo", "message=one"], capsys)
    assert (code, out) == (0, "one\n")


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
def test_exit_codes(args: list[str], code: int, capsys: pytest.CaptureFixture[str]) -> None:
    got, _, err = run(args, capsys)
    assert got == code, err
    if code >= 2:
        assert err.strip()  # a reason is always printed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # Each was taken silently: "info extra" ran info, "a=2 a=3" sent a=3, --timeout 0 spoke of math.inf.
        (["info", "extra"], "info [SERVER]: 'extra' is not a server: no config names it"),
        (["tools", "demo"], "tools [SERVER]: 'demo' is not a server"),  # it once said "takes no arguments"
        (["tools", "x", "y"], "tools takes one SERVER at most; got 'x' 'y'"),
        (["call", "add", "a=2", "a=3", "b=1"], "argument 'a' is given twice"),
        (["--timeout", "0", "tools"], "--timeout: must be a positive number of seconds (or inf for none), not '0'"),
        (["--timeout", "soon", "tools"], "not 'soon'"),
    ],
)
def test_usage_mistakes_are_named(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(args, capsys)
    assert code == 2 and message in err, err
    assert out == ""


def test_a_timeout_speaks_of_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["call", "slow", "seconds=30", "--timeout", "2"], capsys)
    assert code == 4
    assert "raise --timeout" in err and "timeout=" not in err, err


def test_server_failure_message_names_the_cause(capsys: pytest.CaptureFixture[str]) -> None:
    server = " ".join(fault_argv("exit-at-start"))
    code, _, err = run([server, "tools"], capsys)
    assert code == 3 and "missing API key" in err


def test_demo_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["demo"], capsys)
    assert code == 0
    assert "call echo" in out and "call add" in out and "calls/s" in out and " ms" in out


def test_module_entry_point() -> None:
    done = subprocess.run([sys.executable, "-m", "mcpcall", "call", "add", "a=20", "b=22"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "42"
    bad = subprocess.run([sys.executable, "-m", "mcpcall", "call", "fail"], capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 1


def test_value_parsing() -> None:
    assert parse_value("3", None) == 3
    assert parse_value("true", None) is True
    assert parse_value("hello", None) == "hello"
    assert parse_value("3", {"type": "string"}) == "3"
    tool = Tool(name="t", input_schema={"properties": {"s": {"type": "string"}, "n": {"type": "number"}}})
    assert parse_arguments(["s=1", "n=1.5", "x=[1,2]"], tool) == {"s": "1", "n": 1.5, "x": [1, 2]}
    assert parse_arguments(['{"a": 1}'], None) == {"a": 1}


# -- a reader that goes away: `mcpcall tools | head -1` -------------------------------------------

F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)  # Linux; named in fcntl from Python 3.10
F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)
BIG_MESSAGE = "\n".join(f"line {i:05d} " + "x" * 90 for i in range(1000))  # ~100 KB, under the 128 KiB argv limit


def _child_env(unbuffered: bool) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    return env


def _run_into_pipe(argv: list[str], unbuffered: bool, read_first_line: bool) -> tuple[int, bytes, bytes]:
    """Run ``argv`` with stdout into a pipe whose reader closes it: at once, or after the first line.

    Deterministic either way: with the reader gone before the child starts, its first write
    fails; with one line read from a pipe that holds one page, output larger than that page
    plus the line cannot all have been written when the reader closes.
    """
    r, w = os.pipe()
    first = b""
    try:
        if read_first_line:
            fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
        else:
            os.close(r)
            r = -1
        child = subprocess.Popen(argv, stdout=w, stderr=subprocess.PIPE, env=_child_env(unbuffered))
        os.close(w)
        w = -1
        if read_first_line:
            while not first.endswith(b"\n"):
                byte = os.read(r, 1)
                if not byte:
                    break
                first += byte
            os.close(r)
            r = -1
        _, err = child.communicate(timeout=60)
    finally:
        for fd in (r, w):
            if fd >= 0:
                os.close(fd)
    return child.returncode, err, first


def _assert_quiet(err: bytes) -> None:
    for word in (b"Traceback", b"BrokenPipe", b"Exception ignored", b"Broken pipe"):
        assert word not in err, err.decode(errors="replace")
    assert err == b"", err.decode(errors="replace")  # no message at all


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
def test_reader_gone_before_any_output(unbuffered: bool) -> None:
    # Buffered, the write only fails in the flush (before the fix: at exit, "Exception ignored", status 120);
    # unbuffered, in the write itself (before the fix: a traceback and status 1, "the tool reported an error").
    code, err, _ = _run_into_pipe([sys.executable, "-m", "mcpcall", "tools"], unbuffered, read_first_line=False)
    assert code == EXIT_BROKEN_PIPE == 141
    _assert_quiet(err)


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
def test_reader_gone_after_one_line(unbuffered: bool) -> None:
    # Unbuffered (-u, PYTHONUNBUFFERED=1), a write cut short by the reader going away returned the bytes
    # it wrote and TextIOWrapper dropped the rest without an error: status 0 and the output cut silently.
    r, w = os.pipe()
    try:
        fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
        capacity = fcntl.fcntl(w, F_GETPIPE_SZ)
    finally:
        os.close(r)
        os.close(w)
    if len(BIG_MESSAGE) < capacity + 1000:
        pytest.skip(f"a pipe here holds at least {capacity} bytes: the output would fit")
    argv = [sys.executable, "-m", "mcpcall", "call", "echo", "message=" + BIG_MESSAGE]
    code, err, first = _run_into_pipe(argv, unbuffered=unbuffered, read_first_line=True)
    assert first == b"line 00000 " + b"x" * 90 + b"\n"
    assert code == EXIT_BROKEN_PIPE
    _assert_quiet(err)


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
def test_output_that_cannot_be_written_is_one_line_and_its_own_status(unbuffered: bool) -> None:
    # > /dev/full printed a traceback and exited 1, the status of a tool error.
    env = dict(os.environ, PYTHONUNBUFFERED="1") if unbuffered else {k: v for k, v in os.environ.items()
                                                                      if k != "PYTHONUNBUFFERED"}
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "mcpcall", "tools"], stdout=full, stderr=subprocess.PIPE,
                              env=env, timeout=60, check=False)
    assert done.returncode == EXIT_OUTPUT == 74, done.stderr
    assert b"Traceback" not in done.stderr
    assert done.stderr.decode().strip() == "mcpcall: cannot write the output: [Errno 28] No space left on device"


def test_reader_gone_console_script_and_help() -> None:
    script = [sys.executable, "-c", "from mcpcall.cli import main_exit; main_exit()", "tools", "--json"]
    code, err, _ = _run_into_pipe(script, unbuffered=False, read_first_line=False)
    assert code == EXIT_BROKEN_PIPE
    _assert_quiet(err)
    # argparse writes --help into the buffer and exits; the flush that fails is ours, not the interpreter's.
    code, err, _ = _run_into_pipe([sys.executable, "-m", "mcpcall", "--help"], unbuffered=False, read_first_line=False)
    assert code == EXIT_BROKEN_PIPE
    _assert_quiet(err)


class _GonePipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_broken_output_in_process(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["tools"], out=_GonePipe()) == EXIT_BROKEN_PIPE
    assert main(["demo"], out=_GonePipe()) == EXIT_BROKEN_PIPE
    assert capsys.readouterr() == ("", "")
    monkeypatch.setattr(sys, "argv", ["mcpcall", "info"])
    monkeypatch.setattr(sys, "stdout", _GonePipe())
    with pytest.raises(SystemExit) as info:
        main_exit()
    assert info.value.code == EXIT_BROKEN_PIPE


def test_closed_stderr_keeps_the_exit_status() -> None:
    r, w = os.pipe()
    os.close(r)
    try:
        done = subprocess.run([sys.executable, "-m", "mcpcall", "tool"], check=False, stdout=subprocess.PIPE, stderr=w, timeout=60)
    finally:
        os.close(w)
    assert done.returncode == 2 and done.stdout == b""


# -- words that are no command: `mcpcall tool` ------------------------------------------------------

KNOWN = "commands: servers, tools, call, resources, read, prompts, get-prompt, ping, info, demo"


@pytest.mark.parametrize(
    "args, message",
    [
        (["tool"], f"mcpcall: error: unknown command 'tool' (did you mean 'tools'?); {KNOWN}"),
        (["Tools"], f"mcpcall: error: unknown command 'Tools' (did you mean 'tools'?); {KNOWN}"),
        (["cal", "add", "a=1"], f"mcpcall: error: unknown command 'cal' (did you mean 'call'?); {KNOWN}"),
        (["frobnicate"], f"mcpcall: error: unknown command 'frobnicate'; {KNOWN}"),
        (["npx -y some-server", "tool"], (f"mcpcall: error: after server 'npx -y some-server': unknown command 'tool' "
                                          f"(did you mean 'tools'?); {KNOWN}")),
        (["./server.py", "list"], f"mcpcall: error: after server './server.py': unknown command 'list'; {KNOWN}"),
        (["npx -y some-server"], f"mcpcall: error: no command after server 'npx -y some-server'; {KNOWN}"),
        (["https://example.invalid/mcp"], f"mcpcall: error: no command after server 'https://example.invalid/mcp'; {KNOWN}"),
        ([sys.executable], f"mcpcall: error: no command after server {sys.executable!r}; {KNOWN}"),
    ],
    ids=["typo", "typo-case", "typo-with-args", "no-match", "server-then-typo", "server-then-unknown",
         "server-only", "url-only", "program-only"],
)
def test_unknown_command_names_the_words(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(args, capsys)
    assert (code, out) == (2, "")
    assert err.strip() == message


def test_unknown_command_hides_url_credentials(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["https://alice:hunter2@example.invalid/mcp?api_key=k-s3cr3t&x=1", "tool"], capsys)
    assert code == 2
    assert "hunter2" not in err and "alice" not in err and "k-s3cr3t" not in err
    assert "after server 'https://***@example.invalid/mcp?api_key=***&x=1': unknown command 'tool'" in err


def test_no_command_at_all(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run([], capsys)
    assert code == 2 and "name a command" in err
