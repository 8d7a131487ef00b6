"""The command line over config files: servers, tools across servers, resources, prompts, ping, progress."""

from __future__ import annotations

import io
import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from mcpcall.cli import COMMANDS, EXIT_BROKEN_PIPE, main
from mcpcall.cli.progress import PlainBar, progress_bar
from tests.conftest import ROOT, demo_argv, everything_argv
from tests.cli.test_cli import _assert_quiet, _run_into_pipe

SCRIPT = ROOT / ".venv" / "bin" / "mcpcall"
KNOWN = "commands: " + ", ".join(COMMANDS)


def entry(argv: list[str], **extra: Any) -> dict[str, Any]:
    return {"command": argv[0], "args": argv[1:], **extra}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory and home: no config file anywhere unless a test writes one."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder / ".config"))
    monkeypatch.delenv("MCPCALL_PROGRESS", raising=False)
    monkeypatch.chdir(folder)
    return folder


@pytest.fixture
def config(home: Path) -> str:
    """Three servers: the demo server, one whose command does not exist, and a disabled one."""
    path = home / "servers.json"
    path.write_text(json.dumps({"mcpServers": {
        "demo": entry(demo_argv()),
        "broken": {"command": str(home / "no-such-server"), "args": ["--token", "s3cr3t-value"]},
        "off": entry(demo_argv(), disabled=True),
    }}))
    return str(path)


@pytest.fixture
def one(home: Path) -> str:
    """A config of one server."""
    path = home / "one.json"
    path.write_text(json.dumps({"mcpServers": {"demo": entry(demo_argv())}}))
    return str(path)


@pytest.fixture
def everything(home: Path) -> str:
    """server-everything (which has resources and prompts) next to the demo server."""
    path = home / "everything.json"
    path.write_text(json.dumps({"mcpServers": {"everything": entry(everything_argv("stdio")), "demo": entry(demo_argv())}}))
    return str(path)


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(args, out=out)
    return code, out.getvalue(), capsys.readouterr().err


def script(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real console script."""
    return subprocess.run([str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "HOME": str(cwd), "XDG_CONFIG_HOME": str(cwd / ".config"), **(env or {})})


# -- servers -------------------------------------------------------------------------------------


def test_servers_lists_without_connecting(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["--config", config, "servers"], capsys)
    assert code == 0
    assert err == f"config: {config}\n"
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == ["demo", "broken", "off"]
    assert "stdio" in lines[0] and "mcpcall.demo_server" in lines[0]
    assert lines[2].endswith("(disabled)")
    assert "s3cr3t-value" not in out and "--token ***" in lines[1]


def test_servers_json_and_check(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--config", config, "servers", "--json"], capsys)
    assert code == 0
    servers = json.loads(out)
    assert [(s["name"], s["kind"], s["disabled"]) for s in servers] == [
        ("demo", "stdio", False), ("broken", "stdio", False), ("off", "stdio", True)]
    assert all("ok" not in s for s in servers)

    code, out, err = run(["--config", config, "--json", "servers", "--check"], capsys)
    assert code == 3, err
    checked = {s["name"]: s for s in json.loads(out)}
    assert checked["demo"]["ok"] is True and checked["demo"]["tools"] >= 5
    assert checked["broken"]["ok"] is False and "no-such-server" in checked["broken"]["error"]
    assert "ok" not in checked["off"]

    code, out, _ = run(["--config", config, "servers", "--check"], capsys)
    assert code == 3
    assert "ok, " in out.splitlines()[0] and "error: " in out.splitlines()[1]


def test_servers_needs_a_config(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["servers"], capsys)
    assert (code, out) == (2, "")
    assert "no config file" in err and "--config FILE" in err


# -- tools ---------------------------------------------------------------------------------------


def test_tools_across_servers_reports_the_failing_one(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["--config", config, "tools"], capsys)
    assert code == 3
    assert out.splitlines()[0] == "demo:" and "  echo" in out and "broken" not in out and "off" not in out
    assert "server 'broken'" in err and "s3cr3t-value" not in err

    code, out, _ = run(["--config", config, "tools", "--json"], capsys)
    assert code == 3
    tools = json.loads(out)
    assert list(tools) == ["demo"] and {t["name"] for t in tools["demo"]} >= {"echo", "add", "slow"}


def test_tools_of_one_server_by_name_url_or_command(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--config", config, "tools", "demo", "--json"], capsys)
    assert code == 0 and {t["name"] for t in json.loads(out)} >= {"echo", "add"}
    code, out, _ = run(["--config", config, "demo", "tools"], capsys)  # the older order
    assert code == 0 and out.startswith("echo")
    code, out, _ = run(["tools", " ".join(demo_argv())], capsys)  # a command line, no config
    assert code == 0 and out.startswith("echo")
    code, _, err = run(["tools", "http://127.0.0.1:9/mcp", "--timeout", "5"], capsys)  # a URL: nothing listens
    assert code == 3 and "127.0.0.1:9" in err


def test_no_config_anywhere_still_means_the_demo_server(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["tools"], capsys)
    assert code == 0 and out.startswith("echo")


# -- call ----------------------------------------------------------------------------------------


def test_call_in_both_orders(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["--config", config, "call", "demo", "add", "a=2", "b=3"], capsys)
    assert (code, out) == (0, "5\n") and "(add: " in err
    code, out, _ = run(["--config", config, "demo", "call", "add", "a=2", "b=5"], capsys)
    assert (code, out) == (0, "7\n")
    code, out, _ = run(["--config", config, "--json", "call", "demo", "echo", '{"message": "hi"}'], capsys)
    assert code == 0 and json.loads(out)["content"][0]["text"] == "hi"
    code, _, _ = run(["--config", config, "call", "demo", "fail", "message=x"], capsys)
    assert code == 1


def test_one_server_config_needs_no_server_name(one: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--config", one, "call", "add", "a=1", "b=2"], capsys)
    assert (code, out) == (0, "3\n")
    code, out, _ = run(["--config", one, "info", "--json"], capsys)
    assert code == 0 and json.loads(out)["server"]["name"] == "mcpcall-demo"


def test_unknown_and_disabled_server_names(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    known = f"servers in {config}: demo, broken, off (disabled)"
    for args in (["tools", "nosuch"], ["call", "nosuch", "add", "a=1"], ["ping", "nosuch"], ["nosuch", "tools"]):
        code, out, err = run(["--config", config, *args], capsys)
        assert (code, out) == (2, ""), args
        assert err.strip() == f"mcpcall: error: unknown server 'nosuch'; {known}", args
    code, _, err = run(["--config", config, "ping", "off"], capsys)
    assert code == 2 and "server 'off' is disabled" in err
    code, _, err = run(["--config", config, "ping"], capsys)
    assert code == 2 and "name a server" in err and "demo, broken" in err


@pytest.mark.parametrize(("word", "near"), [("tols", "tools"), ("get-promt", "get-prompt"), ("server", "servers"),
                                            ("resource", "resources")])
def test_mistyped_command(word: str, near: str, config: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["--config", config, word], capsys)
    assert (code, out) == (2, "")
    assert err.strip() == f"mcpcall: error: unknown command {word!r} (did you mean {near!r}?); {KNOWN}"


# -- resources, prompts, ping ------------------------------------------------------------------------


def test_resources_and_read(everything: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["--config", everything, "resources", "everything", "--json"], capsys)
    assert code == 0, err
    resources = json.loads(out)
    uri = resources[0]["uri"]
    code, out, _ = run(["--config", everything, "resources", "everything"], capsys)
    assert code == 0 and out.splitlines()[0].startswith(uri)
    code, out, _ = run(["--config", everything, "read", "everything", uri], capsys)
    assert code == 0 and out.startswith("# ")
    code, out, _ = run(["--config", everything, "read", "everything", uri, "--json"], capsys)
    assert code == 0 and json.loads(out)["contents"][0]["uri"] == uri
    code, _, err = run(["--config", everything, "read", "everything", "demo://no/such/thing"], capsys)
    assert code == 5 and "everything" in err
    code, out, err = run(["--config", everything, "resources", "demo", "--json"], capsys)  # no resources there
    assert (code, json.loads(out)) == (0, []) and "offers no resources" in err


def test_prompts_and_get_prompt(everything: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["--config", everything, "prompts", "everything"], capsys)
    assert code == 0, err
    assert any(line.startswith("args-prompt") and "city=…" in line for line in out.splitlines())
    code, out, _ = run(["--config", everything, "prompts", "everything", "--json"], capsys)
    assert "simple-prompt" in {p["name"] for p in json.loads(out)}
    code, out, _ = run(["--config", everything, "get-prompt", "everything", "args-prompt", "city=Paris"], capsys)
    assert code == 0 and out.startswith("[user]\n") and "Paris" in out
    code, out, _ = run(["--config", everything, "--json", "get-prompt", "everything", "simple-prompt"], capsys)
    assert code == 0 and json.loads(out)["messages"][0]["role"] == "user"


def test_ping(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--config", config, "ping", "demo"], capsys)
    assert code == 0 and out.startswith("demo: ") and out.endswith(" ms\n")
    code, out, _ = run(["--config", config, "ping", "demo", "--json"], capsys)
    answer = json.loads(out)
    assert code == 0 and answer["server"] == "demo" and answer["ms"] > 0
    code, _, err = run(["--config", config, "ping", "broken"], capsys)
    assert code == 3 and "no-such-server" in err


# -- progress ------------------------------------------------------------------------------------


def test_progress_bar_plain_when_forced(one: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPCALL_PROGRESS", "plain")
    code, out, err = run(["--config", one, "call", "slow", "seconds=0.3", "steps=3"], capsys)
    assert code == 0 and "\r" not in out
    assert "\rslow [" in err and "] 3/3 100%  step 3 of 3" in err
    code, out, err = run(["--config", one, "--json", "call", "slow", "seconds=0.2", "steps=2"], capsys)
    assert code == 0 and json.loads(out).get("isError", False) is False and "2/2 100%" in err


def test_no_progress_bar_off_a_terminal(one: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["--config", one, "call", "slow", "seconds=0.2", "steps=2"], capsys)
    assert code == 0 and "\r" not in err


def test_plain_bar_from_many_threads() -> None:
    stream = io.StringIO()
    bar = PlainBar(stream, "job")
    assert bar.line(1, 4, "a\nb") == "job [######------------------] 1/4  25%  a b"
    assert bar.line(7, None, None) == "job 7"
    threads = [threading.Thread(target=lambda: [bar.update(i, 100, None) for i in range(101)]) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    bar.close()
    assert "100/100 100%" in stream.getvalue() and stream.getvalue().endswith("\r")
    bar.update(5, 10, None)  # closed: nothing more
    assert not stream.getvalue().endswith("5/10")


def test_progress_modes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPCALL_PROGRESS", "off")
    assert progress_bar(io.StringIO(), "x") is None
    monkeypatch.setenv("MCPCALL_PROGRESS", "auto")
    assert progress_bar(io.StringIO(), "x") is None  # no terminal
    monkeypatch.setenv("MCPCALL_PROGRESS", "plain")
    assert isinstance(progress_bar(io.StringIO(), "x"), PlainBar)


# -- the console script, a found config, a closed pipe ---------------------------------------------


def test_console_script_finds_mcp_json_in_the_cwd(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"demo": entry(demo_argv()), "other": entry(demo_argv())}}))
    done = script(["servers"], tmp_path)
    assert done.returncode == 0 and done.stderr == f"config: {tmp_path / '.mcp.json'}\n"
    assert [line.split()[0] for line in done.stdout.splitlines()] == ["demo", "other"]
    done = script(["call", "other", "add", "a=20", "b=22"], tmp_path)
    assert (done.returncode, done.stdout) == (0, "42\n"), done.stderr
    done = script(["--json", "tools"], tmp_path)  # a found config, no SERVER: every server
    assert done.returncode == 0 and list(json.loads(done.stdout)) == ["demo", "other"]
    done = script(["call", "add", "a=1", "b=1"], tmp_path)  # no server named: the demo server, as before
    assert (done.returncode, done.stdout) == (0, "2\n")
    done = script(["--help"], tmp_path)
    assert done.returncode == 0 and f"config: {tmp_path / '.mcp.json'} (found)" in done.stdout
    done = script(["tols"], tmp_path)
    assert done.returncode == 2 and "did you mean 'tools'?" in done.stderr


def test_console_script_progress(one: str, home: Path) -> None:
    done = script(["--config", one, "call", "slow", "seconds=0.2", "steps=2"], home, env={"MCPCALL_PROGRESS": "plain"})
    assert done.returncode == 0 and done.stdout.strip() and "\r" not in done.stdout, done.stderr
    assert "2/2 100%" in done.stderr


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
def test_tools_of_a_config_into_a_closed_pipe(one: str, unbuffered: bool) -> None:
    code, err, _ = _run_into_pipe([str(SCRIPT), "--config", one, "tools"], unbuffered, read_first_line=False)
    assert code == EXIT_BROKEN_PIPE
    _assert_quiet(err)
