"""The stdio transport and client against real subprocesses: the demo server and the fault server."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import CancelledError
from pathlib import Path
from typing import Any, Dict, List

import pytest

import mcpcall
from mcpcall import ConfigError, ConnectionClosed, ProtocolError, RequestTimeout, RPCError, ToolError
from tests.conftest import PYTHON, demo_argv, fault_argv, pid_alive

FAST = {"probe_timeout": 1.0, "close_timeout": 1.0}


# -- the demo server, both eras --------------------------------------------------------


@pytest.mark.parametrize("protocol, era", [("auto", "modern"), ("modern", "modern"), ("legacy", "legacy"), ("2024-11-05", "legacy")])
def test_demo_server_in_each_era(protocol: str, era: str) -> None:
    with mcpcall.connect(demo_argv(), protocol=protocol) as c:
        assert c.era == era
        assert c.server_info is not None and c.server_info.name == "mcpcall-demo"
        if protocol == "2024-11-05":
            assert c.protocol_version == "2024-11-05"
        names = [t.name for t in c.list_tools()]
        assert {"echo", "add", "slow", "weather", "fail", "boom", "confirm"} <= set(names)
        assert c.call_tool("echo", {"message": "hé\nllo"}).text == "hé\nllo"
        added = c.call_tool("add", {"a": 2, "b": 3})
        assert added.text == "5" and added.structured_content == {"sum": 5}
        failed = c.call_tool("fail", {"message": "nope"})
        assert failed.is_error
        with pytest.raises(ToolError, match="nope"):
            failed.raise_for_error()
        with pytest.raises(RPCError) as info:
            c.call_tool("boom")
        assert info.value.code == -32603
        c.ping()


def test_pagination_over_stdio() -> None:
    with mcpcall.connect(demo_argv("--page-size", "2")) as c:
        assert len(c.list_tools()) == 7


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
def test_progress_from_a_real_server(protocol: str) -> None:
    seen: List[tuple] = []
    threads = set()

    def on_progress(progress: float, total: Any, message: Any) -> None:
        threads.add(threading.current_thread().name)
        seen.append((progress, total))

    with mcpcall.connect(demo_argv(), protocol=protocol) as c:
        result = c.call_tool("slow", {"seconds": 0.2, "steps": 4}, on_progress=on_progress)
        assert result.text.startswith("done")
        deadline = time.monotonic() + 5
        while len(seen) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert [p for p, _ in seen] == sorted(p for p, _ in seen) and len(seen) == 4
    assert threads == {f"mcpcall-callbacks-{c.name}"}


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
def test_elicitation_in_both_eras(protocol: str) -> None:
    asked: List[Dict[str, Any]] = []

    def elicit(params: Dict[str, Any]) -> Dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {"confirmed": True}}

    with mcpcall.connect(demo_argv(), protocol=protocol, handlers={"elicitation/create": elicit}) as c:
        result = c.call_tool("confirm", {"question": "Ship it?"})
    assert "confirmed: true" in result.text.lower()
    assert asked and "Ship it?" in str(asked[0])


def test_timeout_cancels_but_keeps_the_server() -> None:
    with mcpcall.connect(demo_argv()) as c:
        pid = c.transport.process.pid  # type: ignore[attr-defined]
        with pytest.raises(RequestTimeout) as info:
            c.call_tool("slow", {"seconds": 30, "steps": 2}, timeout=0.3)
        assert isinstance(info.value, TimeoutError)
        assert "slow" not in str(info.value) or "tools/call" in str(info.value)
        assert pid_alive(pid)
        assert c.call_tool("echo", {"message": "still here"}).text == "still here"


def test_future_cancel_over_stdio() -> None:
    with mcpcall.connect(demo_argv()) as c:
        f = c.call_tool_future("slow", {"seconds": 30, "steps": 2})
        time.sleep(0.1)
        assert f.cancel()
        with pytest.raises(CancelledError):
            f.result(1)
        assert c.call_tool("echo", {"message": "ok"}).text == "ok"


@pytest.mark.timeout(120)
def test_eight_threads_times_a_hundred_futures() -> None:
    with mcpcall.connect(demo_argv()) as c:
        errors: List[str] = []

        def worker(n: int) -> None:
            futures = [(f"{n}-{i}", c.call_tool_future("echo", {"message": f"{n}-{i}"})) for i in range(100)]
            for expected, future in futures:
                got = future.result(30).text
                if got != expected:
                    errors.append(f"{expected} != {got}")

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        assert c.dispatcher.in_flight() == 0


def test_threads_are_named_and_end_on_close() -> None:
    c = mcpcall.connect(demo_argv(), name="named")
    names = {t.name for t in threading.enumerate()}
    assert {"mcpcall-reader-named", "mcpcall-writer-named", "mcpcall-stderr-named"} <= names
    c.close()
    c.close()
    assert not any(t.name.endswith("-named") for t in threading.enumerate() if t.is_alive())


# -- faults ---------------------------------------------------------------------------------


def test_hanging_tool_times_out() -> None:
    with mcpcall.connect(fault_argv("hang"), **FAST) as c, pytest.raises(RequestTimeout):
        c.call_tool("echo", {"message": "x"}, timeout=0.3)


def test_server_that_never_answers_fails_connect_promptly() -> None:
    started = time.monotonic()
    with pytest.raises(RequestTimeout, match="initialize"):
        mcpcall.connect(fault_argv("hang-all"), timeout=0.5, probe_timeout=0.3, close_timeout=0.5)
    assert time.monotonic() - started < 10


def test_crash_mid_call_fails_pending_with_exit_code_and_stderr() -> None:
    with mcpcall.connect(fault_argv("crash-on-call"), **FAST) as c:
        slow = c.call_tool_future("slow", {"seconds": 30})
        with pytest.raises(ConnectionClosed) as info:
            c.call_tool("echo", {"message": "x"})
        assert info.value.returncode == 3
        assert any("crashing on purpose" in line for line in info.value.stderr_tail)
        assert "crashing on purpose" in str(info.value) and "code 3" in str(info.value)
        with pytest.raises(ConnectionClosed):
            slow.result(5)
        with pytest.raises(ConnectionClosed):
            c.call_tool("echo", {"message": "again"})


def test_exit_at_start_shows_stderr() -> None:
    with pytest.raises(ConnectionClosed) as info:
        mcpcall.connect(fault_argv("exit-at-start"), **FAST)
    assert info.value.returncode == 2
    assert "missing API key DEMO_API_KEY" in str(info.value)


def test_garbage_on_stdout_is_skipped() -> None:
    with mcpcall.connect(fault_argv("garbage"), **FAST) as c:
        assert c.call_tool("echo", {"message": "fine"}).text == "fine"
        assert len(c.list_tools()) == 7


@pytest.mark.timeout(90)
def test_stderr_flood_does_not_stall() -> None:
    lines: List[str] = []
    with mcpcall.connect(fault_argv("stderr-flood"), stderr=lines.append, **FAST) as c:
        assert c.call_tool("echo", {"message": "after flood"}, timeout=60).text == "after flood"
    assert sum(len(line) for line in lines) > 15_000_000


def test_close_kills_a_server_that_ignores_sigterm() -> None:
    c = mcpcall.connect(fault_argv("ignore-sigterm"), probe_timeout=1.0, close_timeout=0.3)
    pid = c.transport.process.pid  # type: ignore[attr-defined]
    c.close()
    assert not pid_alive(pid)


def test_close_terminates_a_server_that_ignores_stdin_eof() -> None:
    c = mcpcall.connect(fault_argv("ignore-stdin-eof"), probe_timeout=1.0, close_timeout=0.3)
    pid = c.transport.process.pid  # type: ignore[attr-defined]
    c.close()
    assert not pid_alive(pid)
    assert c.transport.returncode == -15  # type: ignore[attr-defined]


@pytest.mark.parametrize("stdio", ["inherit", "devnull"])
def test_close_leaves_no_grandchild(tmp_path: Path, stdio: str) -> None:
    pidfile = tmp_path / "grandchild.pid"
    c = mcpcall.connect(
        fault_argv("grandchild", extra=("--pidfile", str(pidfile), "--grandchild-stdio", stdio)), **FAST
    )
    deadline = time.monotonic() + 5
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    grandchild = int(pidfile.read_text())
    assert pid_alive(grandchild)
    c.close()
    deadline = time.monotonic() + 5
    while pid_alive(grandchild):
        assert time.monotonic() < deadline, "grandchild survived close()"
        time.sleep(0.02)


@pytest.mark.parametrize("fault", ["duplicate", "unknown-id"])
def test_duplicate_and_unknown_responses(fault: str) -> None:
    with mcpcall.connect(fault_argv(fault), **FAST) as c:
        for i in range(20):
            assert c.call_tool("echo", {"message": str(i)}).text == str(i)


def test_out_of_order_responses() -> None:
    with mcpcall.connect(fault_argv("out-of-order", extra=("--batch", "4")), **FAST) as c:
        futures = [c.call_tool_future("echo", {"message": str(i)}) for i in range(16)]
        assert [f.result(10).text for f in futures] == [str(i) for i in range(16)]


@pytest.mark.timeout(120)
def test_oversize_line_fails_its_call_and_the_client_goes_on() -> None:
    with mcpcall.connect(fault_argv("big-line"), max_message_bytes=4 * 1024 * 1024, **FAST) as c:
        with pytest.raises(ProtocolError) as info:
            c.call_tool("echo", {"message": "big"}, timeout=60)
        assert "over the limit" in str(info.value) and "max_message_bytes" in str(info.value)
        assert c.call_tool("echo", {"message": "small"}).text == "small"


def test_slow_initialize_is_waited_for() -> None:
    with mcpcall.connect(fault_argv("slow-init", extra=("--delay", "1")), probe_timeout=3) as c:
        assert c.call_tool("echo", {"message": "x"}).text == "x"


@pytest.mark.timeout(60)
def test_server_that_stops_reading_cannot_block_callers() -> None:
    with mcpcall.connect(fault_argv("no-stdin-read"), **FAST) as c:
        payload = "x" * (1 << 20)
        started = time.monotonic()
        for _ in range(4):  # far more than a pipe buffer holds
            with pytest.raises(RequestTimeout):
                c.call_tool("echo", {"message": payload}, timeout=0.3)
        assert time.monotonic() - started < 20


@pytest.mark.parametrize(
    "fault, era",
    [("legacy-only", "legacy"), ("legacy-silent", "legacy"), ("modern-only", "modern")],
)
def test_auto_detects_the_era_of_real_servers(fault: str, era: str) -> None:
    # Only the silent server has to be waited out; a server that answers the probe gets the default time, which
    # its start-up on a loaded machine counts against (0.5 s for every one had the modern-only server taken for legacy).
    with mcpcall.connect(fault_argv(fault), probe_timeout=0.5 if fault == "legacy-silent" else 5.0) as c:
        assert c.era == era
        assert c.call_tool("echo", {"message": "x"}).text == "x"


def test_legacy_client_against_modern_only_server() -> None:
    with pytest.raises(RPCError, match="initialize"):
        mcpcall.connect(fault_argv("modern-only"), protocol="legacy", **FAST)


# -- configuration, environment, security ---------------------------------------------------

ENV_PROBE = "import os, sys; sys.stderr.write(' '.join(sorted(os.environ)) + '\\n'); sys.exit(7)"


def _env_of(**options: Any) -> List[str]:
    with pytest.raises(ConnectionClosed) as info:
        mcpcall.connect([PYTHON, "-c", ENV_PROBE], **options)
    assert info.value.returncode == 7
    return info.value.stderr_tail[-1].split()


def test_minimal_environment_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPCALL_TEST_SECRET", "hunter2")
    names = _env_of()
    assert "MCPCALL_TEST_SECRET" not in names
    assert "PATH" in names
    assert "GIVEN" in _env_of(env={"GIVEN": "1"})
    assert "MCPCALL_TEST_SECRET" in _env_of(inherit_env=True)


def test_secrets_stay_out_of_reprs() -> None:
    with mcpcall.connect(demo_argv(), env={"API_KEY": "hunter2"}) as c:
        assert "hunter2" not in repr(c) and "hunter2" not in repr(c.transport)


def test_mcpservers_entry_and_command_string(tmp_path: Path) -> None:
    entry = {"command": PYTHON, "args": ["-m", "mcpcall.demo_server"], "env": {"PYTHONPATH": str(Path.cwd())}, "cwd": str(tmp_path)}
    with mcpcall.connect(entry) as c:
        assert c.call_tool("echo", {"message": "entry"}).text == "entry"
    with mcpcall.connect(f"'{PYTHON}' -m mcpcall.demo_server") as c:
        assert c.call_tool("echo", {"message": "string"}).text == "string"


def test_no_shell_is_used(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    with pytest.raises(ConnectionClosed):  # echo prints its arguments and exits; touch never runs
        mcpcall.connect(f"echo hi; touch {marker}", **FAST)
    with pytest.raises(ConnectionClosed):
        mcpcall.connect([PYTHON, "-c", "import sys; sys.exit(0)", "; touch", str(marker)], **FAST)
    assert not marker.exists()


@pytest.mark.parametrize(
    "spec, match",
    [
        ("", "empty"),
        ([], "list"),
        ({"args": ["x"]}, "command"),
        ({"command": "x", "disabled": True}, "disabled"),
        ("ftp://example.invalid/mcp", "http"),
        ("http:///nohost", "host"),
        ({"url": "https://example.invalid/mcp", "args": ["x"]}, "args"),
        ({"url": "https://example.invalid/mcp", "transport": "pigeon"}, "transport"),
        (42, "cannot connect"),
        ("unbalanced 'quote", "split"),
    ],
)
def test_bad_configs(spec: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        mcpcall.connect(spec)


def test_missing_command_and_cwd() -> None:
    with pytest.raises(ConnectionClosed, match="not found"):
        mcpcall.connect(["/nonexistent/mcp-server"])
    with pytest.raises(ConfigError, match="does not exist"):
        mcpcall.connect(demo_argv(), cwd="/nonexistent/dir")


def test_stderr_to_a_file_object_and_devnull() -> None:
    buffer = io.StringIO()
    with mcpcall.connect(demo_argv("--verbose"), stderr=buffer) as c:
        c.call_tool("echo", {"message": "x"})
    with mcpcall.connect(demo_argv(), stderr="devnull") as c:
        assert c.call_tool("echo", {"message": "y"}).text == "y"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_gets_a_clear_error() -> None:
    with mcpcall.connect(demo_argv()) as c:
        pid = os.fork()
        if pid == 0:  # child: must not touch the parent's pipes
            code = 1
            try:
                c.call_tool("echo", {"message": "x"})
            except mcpcall.ForkedClient:
                code = 0
            except BaseException:
                code = 2
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert c.call_tool("echo", {"message": "parent"}).text == "parent"


def test_interpreter_exit_closes_servers() -> None:
    script = (
        "import mcpcall, sys\n"
        f"c = mcpcall.connect({demo_argv()!r})\n"
        "print(c.transport.process.pid, flush=True)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=True)
    server_pid = int(out.stdout.strip())
    deadline = time.monotonic() + 5
    while pid_alive(server_pid):
        assert time.monotonic() < deadline, "the server outlived the interpreter"
        time.sleep(0.02)


# -- hardening: malformed answers, dead servers, connect deadline, the garbage collector --------


@pytest.mark.parametrize(
    "tool, match",
    [
        ("null-result", "a result that is NoneType"),
        ("no-code", "not an object with an integer code"),
        ("array-result", "a result that is list"),
        ("bad-utf8", "not valid JSON"),
        ("batch", "batch"),
    ],
)
def test_a_malformed_answer_fails_its_call_at_once(tool: str, match: str) -> None:
    # Each was logged and dropped before, so the caller waited out its whole timeout.
    with mcpcall.connect(fault_argv("bad-answers"), protocol="legacy", **FAST) as c:
        with pytest.raises(ProtocolError, match=match):
            c.call_tool_future(tool).result(timeout=10)  # a TimeoutError here is the old defect
        assert c.call_tool("echo", {"message": "still fine"}).text == "still fine"


def test_a_deeply_nested_line_is_skipped_and_the_connection_lives_on() -> None:
    # json.loads raised RecursionError out of the read loop: every later call failed.
    with mcpcall.connect(fault_argv("bad-answers"), protocol="legacy", **FAST) as c:
        with pytest.raises(RPCError, match="nested"):  # the answer after the nested line: no such tool
            c.call_tool("nested")
        for i in range(3):
            assert c.call_tool("echo", {"message": str(i)}).text == str(i)


def test_connect_is_bounded_by_timeout_and_names_the_steps() -> None:
    # A silent server with timeout=3 took 8 s (a 5 s probe, then 3 s for initialize).
    started = time.monotonic()
    with pytest.raises(RequestTimeout) as info:
        mcpcall.connect(fault_argv("hang-all"), timeout=2)  # the default close ladder: 2 s steps
    elapsed = time.monotonic() - started
    # The timeout and no close ladder on top (a failed connect signals at once), plus slack for a
    # loaded machine; with the ladder it took 2 + 2 s.
    assert elapsed < 2 + 1.5, elapsed
    text = str(info.value)
    assert "within 2 s" in text and "initialize" in text and "server/discover" in text, text


def test_calls_after_a_server_died_fail_at_once_although_a_helper_holds_its_stdout(tmp_path: Path) -> None:
    # A helper in its own session (setsid) keeps stdout open, so EOF never came: later calls waited
    # their full timeout, and close() hung on the reader's buffered-file lock.
    pidfile = tmp_path / "helper.pid"
    helper = None
    try:
        c = mcpcall.connect(fault_argv("setsid-helper", "crash-on-call", extra=("--pidfile", str(pidfile))), **FAST)
        deadline = time.monotonic() + 5
        while not pidfile.exists():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        helper = int(pidfile.read_text())
        with pytest.raises(ConnectionClosed) as info:
            c.call_tool_future("echo", {"message": "x"}).result(timeout=20)
        assert info.value.returncode == 3
        assert "holds its stdout" in str(info.value) or "code 3" in str(info.value)
        with pytest.raises(ConnectionClosed):
            c.call_tool_future("echo", {"message": "again"}).result(timeout=5)
        closer = threading.Thread(target=c.close)
        closer.start()
        closer.join(15)
        assert not closer.is_alive(), "close() hung"
    finally:
        if helper is not None:
            os.kill(helper, 9)
            deadline = time.monotonic() + 5
            while pid_alive(helper) and time.monotonic() < deadline:
                time.sleep(0.02)


def test_a_server_that_exits_early_is_reported_once(caplog: pytest.LogCaptureFixture) -> None:
    # It was logged as a WARNING and raised, so the CLI printed its stderr tail twice.
    with caplog.at_level("DEBUG", logger="mcpcall"), pytest.raises(ConnectionClosed, match="DEMO_API_KEY"):
        mcpcall.connect(fault_argv("exit-at-start"), **FAST)
    assert not [r for r in caplog.records if r.levelno >= 30 and "DEMO_API_KEY" in r.getMessage()]


def test_arguments_must_be_a_mapping() -> None:
    with mcpcall.connect(demo_argv()) as c:
        with pytest.raises(mcpcall.InvalidRequest, match="arguments must be a mapping") as raised:
            c.call_tool("echo", "hello")  # type: ignore[arg-type]
        assert isinstance(raised.value, TypeError)
        with pytest.raises(mcpcall.InvalidRequest, match="cannot be sent"):
            c.call_tool("echo", {"message": object()})
        assert c.call_tool("echo", {"message": "ok"}).text == "ok"


def test_an_unreachable_client_is_closed_by_the_garbage_collector() -> None:
    # Its threads held it: a notebook cell run three times left six servers and eighteen threads.
    import gc
    import weakref

    def open_and_drop() -> tuple[int, weakref.ref[mcpcall.Client]]:
        client = mcpcall.connect(demo_argv(), name="dropped")
        assert client.call_tool("echo", {"message": "x"}).text == "x"
        return client.transport.process.pid, weakref.ref(client)  # type: ignore[attr-defined]

    # Freed by reference counting alone, the moment the last name goes (as a file is): no reference
    # cycle may hold a client until the cyclic collector happens to run.
    gc.disable()
    try:
        with pytest.warns(ResourceWarning, match="unclosed mcpcall client for server 'dropped'") as seen:
            pid, ref = open_and_drop()
            assert ref() is None, gc.get_referrers(ref())
    finally:
        gc.enable()
    assert any(w.filename == __file__ for w in seen), [w.filename for w in seen]  # points at the user's line
    deadline = time.monotonic() + 10
    while pid_alive(pid) or any(t.name.endswith("-dropped") for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the dropped client's server or threads survived"
        time.sleep(0.02)


def test_a_handler_answer_that_cannot_be_encoded_still_answers_the_server() -> None:
    # A handler returning a datetime: the TypeError ended in a log line and the call waited out its timeout.
    import datetime

    def answer(params: dict) -> dict:
        return {"action": "accept", "content": {"confirmed": datetime.datetime.now()}}

    with mcpcall.connect(demo_argv(), protocol="legacy", handlers={"elicitation/create": answer}, **FAST) as c:
        started = time.monotonic()
        result = c.call_tool("confirm", {"question": "?"}, timeout=20)
        assert time.monotonic() - started < 10  # answered (with an error), not timed out
        assert "cannot be sent as JSON" in result.text, result.raw


# -- review findings: the drain runs no user code, bounded queues, what the reports say -------------------


def test_a_slow_stderr_callback_runs_on_the_callbacks_thread_and_never_stalls_the_server() -> None:
    # The callback (and logging handlers) ran on the drain: while it was slow nothing read the pipe,
    # the server blocked writing its stderr and the call timed out.
    threads = set()

    def slow_sink(line: str) -> None:
        threads.add(threading.current_thread().name)
        time.sleep(0.05)

    with mcpcall.connect(fault_argv("stderr-flood"), stderr=slow_sink, name="flood", **FAST) as c:
        started = time.monotonic()
        assert c.call_tool("echo", {"message": "through"}, timeout=30).text == "through"
        assert time.monotonic() - started < 15
    assert threads == {"mcpcall-callbacks-flood"}


def test_what_waits_for_a_server_that_stopped_reading_stdin_is_bounded() -> None:
    # Requests (and cancel notices) piled up without end: 300 MB queued, the process grew by as much.
    big = "x" * (256 * 1024)
    # validate_output=False: a first call would list the tools, and this server reads nothing after connecting.
    with mcpcall.connect(fault_argv("no-stdin-read"), max_message_bytes=1 << 20, validate_output=False, **FAST) as c:
        futures = []
        with pytest.raises(ConnectionClosed, match="is not reading its stdin"):
            for _ in range(200):  # 50 MB if nothing stopped it
                futures.append(c.call_tool_future("echo", {"message": big}, timeout=30))
                for f in futures:
                    if f.done():
                        f.result()
        assert c.transport._pending_bytes <= 1 << 20  # type: ignore[attr-defined]
        for f in futures:
            f.cancel()


def test_a_message_the_pipe_takes_only_in_part_is_finished_by_the_writer_and_counted_until_then() -> None:
    # A send with nothing queued writes at once on the caller's thread; what the pipe leaves goes to the
    # writer thread and stays counted against the backlog limit until written (then the count is 0 again).
    big = "y" * (1 << 20)  # far more than a pipe holds
    with mcpcall.connect(demo_argv(), protocol="legacy", validate_output=False, **FAST) as c:
        for _ in range(3):
            assert c.call_tool("echo", {"message": big}, timeout=30).text == big
        transport: Any = c.transport

        def drained() -> bool:  # the writer may count its last write a moment after the server answered
            until = time.monotonic() + 10
            while transport._pending_bytes or transport._out or transport._inbox:
                if time.monotonic() > until:
                    return False
                time.sleep(0.01)
            return transport._pending_bytes == 0

        assert drained(), transport._pending_bytes
        results = []
        threads = [threading.Thread(target=lambda: results.append(c.call_tool("echo", {"message": big}, timeout=30).text))
                   for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert results == [big] * 4
        assert drained(), transport._pending_bytes


def test_a_server_that_exits_at_once_is_reported_as_exited_not_as_a_broken_pipe(tmp_path: Path) -> None:
    # A server that printed a line and exited 0 was reported as "stopped reading its stdin (Broken pipe)".
    with pytest.raises(ConnectionClosed) as info:
        mcpcall.connect([PYTHON, "-c", "import sys; print('hello'); print('bye', file=sys.stderr)"], **FAST)
    assert "exited with code 0" in str(info.value), str(info.value)
    assert info.value.returncode == 0


PROBE_NOISE_SERVER = r"""
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "server/discover":
        for i in range(30):
            print(f"validation error {i} for ClientRequest", file=sys.stderr, flush=True)
        out = {"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32602, "message": "Invalid request parameters"}}
    elif m.get("method") == "initialize":
        out = {"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": m["params"]["protocolVersion"],
               "capabilities": {"tools": {}}, "serverInfo": {"name": "noisy", "version": "1"}}}
    elif m.get("method") == "tools/call":
        print("FATAL: database connection lost", file=sys.stderr, flush=True)
        sys.exit(3)
    elif "id" in m:
        out = {"jsonrpc": "2.0", "id": m["id"], "result": {"tools": []}}
    else:
        continue
    print(json.dumps(out), flush=True)
"""


def test_what_a_legacy_server_logs_about_the_probe_does_not_bury_its_last_words(tmp_path: Path) -> None:
    # FastMCP 1.x logs dozens of lines about server/discover: the crash report's tail was all that noise.
    script = tmp_path / "noisy.py"
    script.write_text(PROBE_NOISE_SERVER)
    with mcpcall.connect([PYTHON, str(script)], **FAST) as c:
        assert c.era == "legacy"
        time.sleep(0.3)  # let the drain read the noise
        with pytest.raises(ConnectionClosed) as info:
            c.call_tool("anything", timeout=10)
    tail = info.value.stderr_tail
    assert tail[-1] == "FATAL: database connection lost", tail
    assert len(tail) <= 6, tail  # two lines from each end of the probe's 30, a count, the last words
    assert any("lines written while mcpcall probed" in line for line in tail), tail


def test_a_dropped_client_with_a_call_in_flight_is_closed_too() -> None:
    # Pending entries held the client through bound methods: one call with timeout=inf kept the client,
    # its three threads and its server alive for good.
    import gc
    import weakref

    def open_and_drop() -> tuple[int, weakref.ref[mcpcall.Client], Any]:
        client = mcpcall.connect(fault_argv("hang"), name="inflight", protocol="legacy", **FAST)
        future = client.call_tool_future("echo", {"message": "x"}, timeout=float("inf"))
        return client.transport.process.pid, weakref.ref(client), future  # type: ignore[attr-defined]

    gc.disable()
    try:
        with pytest.warns(ResourceWarning, match="unclosed mcpcall client for server 'inflight'"):
            pid, ref, future = open_and_drop()
            assert ref() is None, gc.get_referrers(ref())
    finally:
        gc.enable()
    with pytest.raises(ConnectionClosed):
        future.result(10)
    deadline = time.monotonic() + 10
    while pid_alive(pid) or any(t.name.endswith("-inflight") for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the dropped client's server or threads survived"
        time.sleep(0.02)


# -- second review: the drain's cut-off, the drop note, quiet startup output, no wait on our threads ----

SLOW_SHUTDOWN_SERVER = r"""
import json, sys, time
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": m["params"]["protocolVersion"],
              "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}}), flush=True)
print("shutting down: flushing 3 records", file=sys.stderr, flush=True)
time.sleep(1.2)
print("ERROR: could not flush 3 records to disk", file=sys.stderr, flush=True)
"""


def test_what_a_server_says_while_it_shuts_down_still_reaches_stderr_consumers(tmp_path: Path) -> None:
    # The cut-off for slow consumers counted from the start of close(): last words written during the
    # close ladder's wait were dropped.
    script = tmp_path / "slow_shutdown.py"
    script.write_text(SLOW_SHUTDOWN_SERVER)
    got: List[str] = []
    with mcpcall.connect([PYTHON, str(script)], protocol="legacy", stderr=got.append):
        pass
    assert got == ["shutting down: flushing 3 records", "ERROR: could not flush 3 records to disk"], got


BURST_SERVER = r"""
import json, sys, time
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": m["params"]["protocolVersion"],
              "capabilities": {}, "serverInfo": {"name": "b", "version": "1"}}}), flush=True)
    elif m.get("method") == "notifications/initialized":
        for i in range(2000):
            print(f"line {i}", file=sys.stderr, flush=True)
            time.sleep(0.0005)
        print("LAST: worker pool crashed", file=sys.stderr, flush=True)
"""


def test_skipped_stderr_lines_are_reported_when_the_consumer_catches_up(tmp_path: Path) -> None:
    # The "N lines not shown" note rode on the next batch: a server that went quiet never had it shown.
    script = tmp_path / "burst.py"
    script.write_text(BURST_SERVER)
    got: List[str] = []
    clients: List[Any] = []

    def stalls_once(text: str) -> None:
        # The first line holds the consumer until the whole burst is in the tail (more than the backlog takes),
        # however slowly a loaded machine runs the server: then lines were dropped, and the note must follow.
        if not got:
            until = time.monotonic() + 20
            while time.monotonic() < until and not (
                    clients and clients[0].transport.stderr_tail[-1:] == ["LAST: worker pool crashed"]):
                time.sleep(0.02)
        got.append(text)

    with mcpcall.connect([PYTHON, str(script)], protocol="legacy", stderr=stalls_once) as c:
        clients.append(c)
        deadline = time.monotonic() + 20
        while not any("not shown" in line for line in got):
            assert time.monotonic() < deadline, f"no note after {len(got)} lines"
            time.sleep(0.05)
        assert c.transport.stderr_tail[-1] == "LAST: worker pool crashed"  # type: ignore[attr-defined]


STARTUP_SERVER = r"""
import json, sys
for text in ("starting", "loading config", "ERROR: DATABASE_URL is not set", "falling back to memory"):
    print(text, file=sys.stderr, flush=True)
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "server/discover":
        out = {"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "Method not found"}}
    elif m.get("method") == "initialize":
        out = {"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": m["params"]["protocolVersion"],
               "capabilities": {"tools": {}}, "serverInfo": {"name": "w", "version": "1"}}}
    elif m.get("method") == "tools/call":
        print("fatal: no database", file=sys.stderr, flush=True)
        sys.exit(3)
    else:
        continue
    print(json.dumps(out), flush=True)
"""


def test_a_servers_few_startup_lines_are_never_taken_for_probe_noise(tmp_path: Path) -> None:
    # Everything printed before initialize counted as noise: the real cause vanished from the tail.
    script = tmp_path / "startup.py"
    script.write_text(STARTUP_SERVER)
    with mcpcall.connect([PYTHON, str(script)], validate_output=False, **FAST) as c:  # it never answers tools/list
        time.sleep(0.2)
        with pytest.raises(ConnectionClosed) as info:
            c.call_tool("anything", timeout=10)
    assert "ERROR: DATABASE_URL is not set" in info.value.stderr_tail, info.value.stderr_tail
    assert not any("probed" in line for line in info.value.stderr_tail)


def test_a_broken_pipe_seen_on_an_mcpcall_thread_never_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    # A cancel notice on the scheduler that met a closed stdin slept 100 ms waiting for an exit status.
    with mcpcall.connect(demo_argv(), **FAST) as c:
        transport = c.transport
        waits: List[float] = []
        real = transport._exit_code  # type: ignore[attr-defined]
        monkeypatch.setattr(transport, "_exit_code", lambda wait: waits.append(wait) or real(0.0))
        worker = threading.Thread(target=transport._broken_pipe, args=(BrokenPipeError(32, "Broken pipe"),),  # type: ignore[attr-defined]
                                  name="mcpcall-scheduler-like")
        worker.start()
        worker.join(5)
        transport._broken_pipe(BrokenPipeError(32, "Broken pipe"))  # type: ignore[attr-defined]
        monkeypatch.undo()  # before close(), whose ladder waits on purpose
    assert waits == [0.0, 0.1], waits  # no wait on an mcpcall thread; a short one for a caller
