"""Config files (``mcpServers``, VS Code ``servers``) to ServerConfig: fields, expansion, errors without secrets."""

from __future__ import annotations

import json
import logging
import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import mcpcall
from mcpcall import ConfigError, ServerConfig, find_config, load_config
from tests.conftest import demo_argv

PYTHON = sys.executable
SECRETS = ("sk-env-s3cr3t", "hdr-s3cr3t", "url-s3cr3t", "input-s3cr3t", "file-s3cr3t")


def _write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2), encoding="utf-8")
    return path


def _error(source: Any, **options: Any) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(source, **options)
    text = f"{info.value}\n{info.value!r}"
    for secret in SECRETS:
        assert secret not in text, text
    return str(info.value)


# -- the file shapes ---------------------------------------------------------------------------------


def test_claude_desktop_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "claude_desktop_config.json", {
        "globalShortcut": "Ctrl+Space",
        "mcpServers": {
            "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
            "github": {"command": "docker", "args": ["run", "-i", "ghcr.io/github/github-mcp-server"],
                       "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "sk-env-s3cr3t"}},
        },
    })
    configs = load_config(str(path))
    assert list(configs) == ["filesystem", "github"]
    github = configs["github"]
    assert github.name == "github" and github.kind == "stdio" and github.source == str(path)
    assert github.spec == {"name": "github", "command": "docker", "args": ["run", "-i", "ghcr.io/github/github-mcp-server"],
                           "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "sk-env-s3cr3t"}}
    assert github.timeout is None and github.disabled is False
    assert repr(github) == "ServerConfig(name='github', kind='stdio', command='docker', disabled=False)"


def test_claude_code_mcp_json_with_defaults(tmp_path: Path) -> None:
    path = _write(tmp_path / ".mcp.json", {"mcpServers": {
        "api": {"type": "http", "url": "${API_BASE:-https://api.example.com}/mcp",
                "headers": {"Authorization": "Bearer ${API_TOKEN}"}},
        "local": {"command": "${RUNNER:-uvx}", "args": ["tool", "--port", 8080], "env": {"LEVEL": "${LEVEL:-info}"}},
    }})
    configs = load_config(path, environ={"API_TOKEN": "hdr-s3cr3t", "LEVEL": ""})
    api = configs["api"]
    assert api.kind == "http"
    assert api.spec == {"name": "api", "url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer hdr-s3cr3t"},
                        "transport": "auto"}
    assert "hdr-s3cr3t" not in repr(api)
    assert configs["local"].spec["command"] == "uvx"
    assert configs["local"].spec["args"] == ["tool", "--port", "8080"]  # numbers become strings
    assert configs["local"].spec["env"] == {"LEVEL": "info"}  # ":-" also replaces an empty value, as in a shell


def test_vscode_mcp_json(tmp_path: Path) -> None:
    _write(tmp_path / ".vscode" / "tokens.env", "# secrets\nexport FILE_TOKEN='file-s3cr3t'\nSHARED=from-file\n")
    text = """{
      // VS Code writes JSON with comments
      "inputs": [{"type": "promptString", "id": "api-key", "description": "API key", "password": true}],
      "servers": {
        "tool": {
          "type": "stdio",
          "command": "${workspaceFolder}/bin/tool",
          "args": ["--home", "${userHome}", "--key", "${input:api-key}", "--sep", "${pathSeparator}"],
          "env": {"MODE": "${env:MODE}", "SHARED": "from-env", "WS": "${workspaceFolderBasename}"},
          "envFile": "${workspaceFolder}/.vscode/tokens.env",
          "cwd": "${workspaceFolder}/work",  /* block comment */
        },
        "remote": {"type": "sse", "url": "https://example.com/sse", "headers": {"X-Key": "${input:api-key}"},},
      },
    }"""
    path = _write(tmp_path / ".vscode" / "mcp.json", text)
    configs = load_config(path, inputs={"api-key": "input-s3cr3t"}, environ={"MODE": "dev"})
    tool = configs["tool"].spec
    assert tool["command"] == f"{tmp_path}/bin/tool"
    assert tool["args"] == ["--home", os.path.expanduser("~"), "--key", "input-s3cr3t", "--sep", os.sep]
    assert tool["env"] == {"FILE_TOKEN": "file-s3cr3t", "SHARED": "from-env", "MODE": "dev", "WS": tmp_path.name}
    assert tool["cwd"] == f"{tmp_path}/work"
    assert configs["remote"].spec["transport"] == "sse"
    assert configs["remote"].spec["headers"] == {"X-Key": "input-s3cr3t"}
    for config in configs.values():
        for secret in SECRETS:
            assert secret not in repr(config)


def test_workspace_folder_is_the_config_folder_or_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entry = {"servers": {"s": {"command": "${workspaceFolder}/x"}}}
    assert load_config(_write(tmp_path / "conf" / "mcp.json", entry))["s"].spec["command"] == f"{tmp_path}/conf/x"
    assert load_config(_write(tmp_path / ".cursor" / "mcp.json", entry))["s"].spec["command"] == f"{tmp_path}/x"
    monkeypatch.chdir(tmp_path)
    assert load_config(entry)["s"].spec["command"] == f"{tmp_path}/x"


def test_path_like_and_home_relative_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    _write(tmp_path / ".cursor" / "mcp.json", {"mcpServers": {"a": {"command": "a"}}})
    assert list(load_config("~/.cursor/mcp.json")) == ["a"]
    assert load_config(tmp_path / ".cursor" / "mcp.json")["a"].source == str(tmp_path / ".cursor" / "mcp.json")
    assert load_config({"mcpServers": {"a": {"command": "a"}}})["a"].source is None


def test_file_order_is_kept(tmp_path: Path) -> None:
    names = ["zeta", "alpha", "mid", "beta"]
    path = _write(tmp_path / "mcp.json", {"mcpServers": {n: {"command": n} for n in names}})
    assert list(load_config(path)) == names


# -- fields ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, kind",
    [("http", "auto"), ("streamable-http", "streamable-http"), ("streamable_http", "streamable-http"),
     ("streamableHttp", "streamable-http"), ("sse", "sse"), ("SSE", "sse"), (None, "auto")],
)
@pytest.mark.parametrize("field", ["type", "transport"])
def test_http_kinds(field: str, value: Any, kind: str) -> None:
    entry: dict[str, Any] = {"url": "https://example.com/mcp"}
    if value is not None:
        entry[field] = value
    assert load_config({"mcpServers": {"s": entry}})["s"].spec["transport"] == kind


def test_stdio_type_and_both_type_fields_agreeing() -> None:
    configs = load_config({"mcpServers": {"a": {"type": "stdio", "transport": "stdio", "command": "x"},
                                          "b": {"type": "http", "transport": "streamable-http", "url": "https://h/"},
                                          "c": {"type": "http", "transport": "sse", "url": "https://h/"}}})
    assert configs["a"].kind == "stdio" and configs["b"].spec["transport"] == "streamable-http"
    assert configs["c"].spec["transport"] == "sse"


def test_env_scalars_become_strings() -> None:
    spec = load_config({"mcpServers": {"s": {"command": "x", "env": {"A": 1, "B": 2.5, "C": True, "D": False, "E": "e"}}}})["s"].spec
    assert spec["env"] == {"A": "1", "B": "2.5", "C": "true", "D": "false", "E": "e"}


def test_env_file(tmp_path: Path) -> None:
    _write(tmp_path / "sub" / ".env", (
        "# a comment\n"
        "\n"
        "PLAIN=value   # trailing comment\n"
        "export EXPORTED=yes\n"
        "SINGLE='it''s # not a comment'\n".replace("''", "") +
        'DOUBLE="line1\\nline2 \\"q\\""\n'
        'MULTI="-----BEGIN KEY-----\n'
        "abc\n"
        '-----END KEY-----"\n'
        "EMPTY=\n"
        "SPACED = spaced out \n"
        "OVERRIDDEN=from-file\n"
        "HASH=a#b\n"
    ))
    path = _write(tmp_path / "mcp.json", {"mcpServers": {"s": {"command": "x", "envFile": "sub/.env",
                                                                "env": {"OVERRIDDEN": "from-env"}}}})
    env = load_config(path)["s"].spec["env"]
    assert env == {
        "PLAIN": "value", "EXPORTED": "yes", "SINGLE": "its # not a comment", "DOUBLE": 'line1\nline2 "q"',
        "MULTI": "-----BEGIN KEY-----\nabc\n-----END KEY-----", "EMPTY": "", "SPACED": "spaced out",
        "OVERRIDDEN": "from-env", "HASH": "a#b",
    }


def test_cwd_is_relative_to_the_config_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "mcp.json", {"mcpServers": {"rel": {"command": "x", "cwd": "work"},
                                                         "abs": {"command": "x", "cwd": "/srv"}}})
    configs = load_config(path)
    assert configs["rel"].spec["cwd"] == str(tmp_path / "work")
    assert configs["abs"].spec["cwd"] == "/srv"


def test_timeout_in_seconds(caplog: pytest.LogCaptureFixture) -> None:
    configs = load_config({"mcpServers": {"a": {"command": "x", "timeout": 30}, "b": {"command": "x", "timeout": 2.5},
                                          "c": {"command": "x"}}})
    assert (configs["a"].timeout, configs["b"].timeout, configs["c"].timeout) == (30.0, 2.5, None)
    with caplog.at_level(logging.WARNING, logger="mcpcall.config"):
        assert load_config({"mcpServers": {"gemini": {"command": "x", "timeout": 600000}}})["gemini"].timeout == 600000.0
    assert any("'gemini'" in r.getMessage() and "milliseconds" in r.getMessage() for r in caplog.records)


def test_disabled_entries_are_skipped_unchecked(caplog: pytest.LogCaptureFixture) -> None:
    config = {"mcpServers": {
        "on": {"command": "x", "disabled": False},
        "off": {"command": "x", "disabled": True, "env": {"T": "${SURELY_UNSET_VARIABLE}"}},
        "off2": {"url": "https://h/", "disabled": "yes"},
    }}
    with caplog.at_level(logging.DEBUG, logger="mcpcall.config"):
        assert list(load_config(config)) == ["on"]
    assert any("'off'" in r.getMessage() and "disabled" in r.getMessage() for r in caplog.records)
    everything = load_config(config, include_disabled=True, environ={"SURELY_UNSET_VARIABLE": "v"})
    assert list(everything) == ["on", "off", "off2"]
    assert everything["off"].disabled and everything["off2"].disabled and not everything["on"].disabled
    assert "disabled=True" in repr(everything["off"])


def test_unknown_keys_are_ignored_with_a_debug_record(caplog: pytest.LogCaptureFixture) -> None:
    entry = {"command": "x", "autoApprove": ["a"], "alwaysAllow": [], "description": "d", "dev": {"watch": "*"}}
    with caplog.at_level(logging.DEBUG, logger="mcpcall.config"):
        configs = load_config({"mcpServers": {"tools": entry}})
    assert configs["tools"].spec == {"name": "tools", "command": "x", "args": [], "env": {}}
    ignored = [r for r in caplog.records if r.levelno == logging.DEBUG and r.name == "mcpcall.config" and "ignoring" in r.getMessage()]
    assert len(ignored) == 4
    for key in ("autoApprove", "alwaysAllow", "description", "dev"):
        assert any(f"'{key}'" in r.getMessage() and "'tools'" in r.getMessage() for r in ignored)


def test_expansion_rules() -> None:
    environ = {"SET": "v", "EMPTY": ""}

    def expand(arg: str) -> str:
        spec = load_config({"mcpServers": {"s": {"command": "x", "args": [arg]}}}, environ=environ)["s"].spec
        return str(spec["args"][0])

    assert expand("a${SET}b${env:SET}") == "avbv"
    assert expand("${UNSET:-d}|${EMPTY:-d}|${SET:-d}|${env:UNSET:-e}") == "d|d|v|e"
    assert expand("${EMPTY}") == ""  # set but empty, no default: empty
    assert expand("${UNSET:-}") == ""
    assert expand("$SET and $ alone") == "$SET and $ alone"  # only ${...} is expanded
    assert expand("${UNSET:-a b/c}") == "a b/c"


def test_keywords_are_not_expanded_in_keys_or_timeouts() -> None:
    spec = load_config({"mcpServers": {"s": {"url": "https://h/", "headers": {"X-A": "1"}}}})["s"].spec
    assert spec["headers"] == {"X-A": "1"}


def test_old_names_still_import() -> None:
    from mcpcall.config import ServerSpec, _parse_bool, is_url, make_transport, redact_url  # noqa: F401
    from mcpcall.config.transports import make_transport as same

    assert same is make_transport and is_url("https://x") and _parse_bool("on", "f", "s") is True
    assert {"load_config", "find_config", "ServerConfig"} <= set(mcpcall.__all__)


def test_the_former_files_module_still_imports() -> None:
    """config/files.py did every job of config files before they were split: its public names import as before."""
    from mcpcall.config import OAuthSettings, ServerConfig, find_config, load_config
    from mcpcall.config import files

    assert (files.OAuthSettings, files.ServerConfig, files.find_config, files.load_config) == (
        OAuthSettings, ServerConfig, find_config, load_config)
    assert files.oauth_settings(True).__class__ is OAuthSettings


# -- errors ------------------------------------------------------------------------------------------

ERRORS = [
    ({"command": "x", "args": 5}, "field 'args' must be a list of strings, not int"),
    ({"command": "x", "args": ["ok", {"a": 1}]}, "field 'args[1]' must be a string, not dict"),
    ({"command": "x", "args": ["ok", True]}, "field 'args[1]' must be a string, not bool"),
    ({"command": 3}, "field 'command' must be a string, not int"),
    ({"command": "  "}, "field 'command' is empty"),
    ({"command": "x", "env": ["A=1"]}, "field 'env' must be a mapping of names to strings, not list"),
    ({"command": "x", "env": {"TOKEN": None}}, "field 'env.TOKEN' must be a string, not null"),
    ({"command": "x", "env": {"TOKEN": {"v": "sk-env-s3cr3t"}}}, "field 'env.TOKEN' must be a string, not dict"),
    ({"command": "x", "env": {"A=B": "sk-env-s3cr3t"}}, "field 'env' has a name that cannot be an environment variable"),
    ({"command": "x", "env": {"T": "sk-env-s3cr3t\0"}}, "field 'env.T' holds a NUL character"),
    # what subprocess would refuse with a bare ValueError or UnicodeEncodeError (whose repr holds the whole value)
    ({"command": "x\ud800"}, "field 'command' holds a character this system cannot encode"),
    ({"command": "x", "args": ["ok", "a\ud800"]}, "field 'args[1]' holds a character this system cannot encode"),
    ({"command": "x", "env": {"T": "sk-env-s3cr3t\ud800"}}, "field 'env.T' holds a character this system cannot encode"),
    ({"command": "x", "env": {"T\ud800": "sk-env-s3cr3t"}}, "field 'env' has a name that cannot be an environment variable"),
    ({"command": "x", "cwd": "/tmp\0x"}, "field 'cwd' holds a NUL character"),
    ({"command": "x", "cwd": "/tmp/\ud800"}, "field 'cwd' holds a character this system cannot encode"),
    ({"command": "x", "cwd": 1}, "field 'cwd' must be the path of a folder, not int"),
    ({"command": "x", "envFile": 1}, "field 'envFile' must be the path of a file, not int"),
    ({"command": "x", "envFile": "no-such.env"}, "field 'envFile': the file"),
    ({"command": "x", "url": "https://h/"}, "has both a 'command' and a 'url'"),
    ({"args": ["sk-env-s3cr3t"], "env": {"K": "sk-env-s3cr3t"}}, "needs a 'command' (stdio) or a 'url' (HTTP); it has 'args', 'env'"),
    ({"command": "x", "type": "websocket"}, "field 'type' must be one of stdio, http, streamable-http, sse; not 'websocket'"),
    ({"command": "x", "transport": 7}, "field 'transport' must be one of stdio, http, streamable-http, sse; not int"),
    ({"command": "x", "type": "http"}, "field 'type' says HTTP, but the entry has a 'command'"),
    ({"url": "https://h/", "type": "stdio"}, "field 'type' says stdio, but the entry has a 'url'"),
    ({"url": "https://h/", "type": "sse", "transport": "streamable-http"}, "'type' and 'transport' disagree"),
    ({"command": "x", "headers": {"A": "hdr-s3cr3t"}}, "field 'headers' applies only to servers with a 'url'"),
    ({"url": "https://h/", "env": {"A": "sk-env-s3cr3t"}}, "field 'env' applies only to servers with a 'command'"),
    ({"url": "https://h/", "args": []}, "field 'args' applies only to servers with a 'command'"),
    ({"url": 5}, "field 'url' must be a string, not int"),
    ({"url": "ftp://u:url-s3cr3t@h/x"}, "field 'url' must be an http:// or https:// URL with a host"),
    ({"url": "https:///path?token=url-s3cr3t"}, "field 'url' must be an http:// or https:// URL with a host"),
    ({"url": "https://h/", "headers": "Authorization: hdr-s3cr3t"}, "field 'headers' must be a mapping of names to strings, not str"),
    ({"url": "https://h/", "headers": {"Bad Name": "hdr-s3cr3t"}}, "field 'headers' has a name that is not a valid HTTP header name"),
    ({"url": "https://h/", "headers": {"X-Key": ["hdr-s3cr3t"]}}, "field 'headers.X-Key' must be a string, not list"),
    ({"url": "https://h/", "headers": {"X-Key": "hdr-s3cr3t\r\nX-Evil: 1"}}, "field 'headers.X-Key' has a line break"),
    ({"command": "x", "timeout": "30"}, "field 'timeout' must be a number of seconds, not str"),
    ({"command": "x", "timeout": True}, "field 'timeout' must be a number of seconds, not bool"),
    ({"command": "x", "timeout": 0}, "field 'timeout' must be a positive number of seconds"),
    ({"command": "x", "timeout": -5}, "field 'timeout' must be a positive number of seconds"),
    ({"command": "x", "timeout": math.nan}, "field 'timeout' must be a positive number of seconds"),
    ({"command": "x", "disabled": "maybe"}, "field 'disabled' must be true or false, not str"),
    ({"command": "x", "disabled": 2}, "field 'disabled' must be true or false, not int"),
    ({"command": "x", "env": {"T": "${GITHUB_TOKEN}"}},
     "field 'env.T' uses variable 'GITHUB_TOKEN', which is not set (set it, or write ${GITHUB_TOKEN:-default})"),
    ({"command": "x", "args": ["${env:MISSING_ONE}"]}, "field 'args[0]' uses variable 'MISSING_ONE', which is not set"),
    ({"url": "https://h/", "headers": {"A": "Bearer ${input:token}"}},
     "field 'headers.A' uses input 'token': pass it with load_config(..., inputs={'token': ...})"),
    ({"command": "${config:python.path}"}, "field 'command' uses ${config:...}, which mcpcall does not support"),
    ({"command": "x", "args": ["${A:-${B}}"]}, "field 'args[0]' has a '${' without its '}'"),
    ({"command": "x", "args": ["${OPEN"]}, "field 'args[0]' has a '${' without its '}'"),
    ({"command": "x", "args": ["${not a name}"]}, "field 'args[0]' has ${...} that is not a variable reference"),
    ({"url": "https://${HOST}/mcp?token=url-s3cr3t"}, "field 'url' uses variable 'HOST', which is not set"),
    (["command", "x"], "the entry must be an object, not list"),
]


@pytest.mark.parametrize("entry, message", ERRORS, ids=[m[:40] for _, m in ERRORS])
def test_entry_errors_name_file_server_and_field(tmp_path: Path, entry: Any, message: str) -> None:
    path = _write(tmp_path / ".mcp.json", {"mcpServers": {"good": {"command": "x"}, "svc": entry}})
    text = _error(path, environ={"HOME": "/home/u"})
    assert text.startswith(f"config {path}: server 'svc': "), text
    assert message in text


def test_mapping_errors_say_mapping() -> None:
    text = _error({"mcpServers": {"svc": {"command": "x", "args": 5}}})
    assert text == "config <mapping>: server 'svc': field 'args' must be a list of strings, not int"


def test_missing_input_shows_its_description() -> None:
    text = _error({"servers": {"gh": {"url": "https://h/", "headers": {"A": "${input:pat}"}}},
                   "inputs": [{"type": "promptString", "id": "pat", "description": "GitHub PAT", "password": True}]},
                  inputs={"other": "input-s3cr3t"})
    assert "input 'pat' (GitHub PAT)" in text


@pytest.mark.parametrize(
    "data, message",
    [
        ({"servers": {}, "mcpServers": {}}, "has both 'mcpServers' and 'servers'"),
        ({"github": {"command": "x"}},
         "expected 'mcpServers' (Claude Desktop, Claude Code, Cursor, Cline) or 'servers' (VS Code) at the top; found 'github'"),
        ({"mcpServers": ["a"]}, "field 'mcpServers' must be a mapping of server names to entries, not list"),
        ([1, 2], "expected a JSON object with 'mcpServers' or 'servers', not list"),
        ({"mcpServers": {"": {"command": "x"}}}, "a server name must be a non-empty string"),
    ],
)
def test_shape_errors(tmp_path: Path, data: Any, message: str) -> None:
    path = _write(tmp_path / "mcp.json", data)
    text = _error(path)
    assert text.startswith(f"config {path}") and message in text


def test_bad_json_names_line_and_column(tmp_path: Path) -> None:
    path = _write(tmp_path / "mcp.json", '{\n  "mcpServers": {\n    "a": {"command": "x" "env": {"T": "sk-env-s3cr3t"}}\n  }\n}\n')
    text = _error(path)
    assert text.startswith(f"config {path}: not valid JSON: ") and "line 3, column 26" in text


def test_bad_jsonc_keeps_line_and_column(tmp_path: Path) -> None:
    path = _write(tmp_path / "mcp.json", '{\n  // comment, with "quotes"\n  "servers": {"a" 1,},\n}\n')
    assert "Expecting ':' delimiter at line 3, column 19" in _error(path)


def test_unterminated_block_comment(tmp_path: Path) -> None:
    path = _write(tmp_path / "mcp.json", '{"servers": {}} /* never closed\n')
    assert "not valid JSON" in _error(path)


def test_missing_file_and_unreadable_files(tmp_path: Path) -> None:
    assert _error(tmp_path / "nope.json") == f"config {tmp_path / 'nope.json'} does not exist"
    assert _error(tmp_path) == f"config {tmp_path} is a folder, not a file"
    bad = tmp_path / "latin.json"
    bad.write_bytes(b'{"mcpServers": {"\xe9": {}}}')
    assert _error(bad) == f"config {bad} is not UTF-8 text"
    with pytest.raises(ConfigError, match="takes a path or a mapping"):
        load_config(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "content, message",
    [
        ("JUST_A_WORD\n", "line 1: expected KEY=VALUE"),
        ("OK=1\nfile-s3cr3t\n", "line 2: expected KEY=VALUE"),
        ("1BAD=file-s3cr3t\n", "line 1: expected KEY=VALUE"),
        ('A="file-s3cr3t\nB=2\n', "line 1: the quote opened for A is never closed"),
        ("A='file-s3cr3t' trailing\n", "line 1: text after the closing quote of A"),
    ],
)
def test_env_file_errors(tmp_path: Path, content: str, message: str) -> None:
    env_file = _write(tmp_path / "x.env", content)
    path = _write(tmp_path / "mcp.json", {"mcpServers": {"svc": {"command": "x", "envFile": "x.env"}}})
    text = _error(path)
    assert text.startswith(f"config {path}: server 'svc': field 'envFile': {env_file} ") and message in text


def test_loading_starts_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    configs = load_config({"mcpServers": {"s": {"command": PYTHON, "args": ["-c", f"open({str(marker)!r}, 'w')"]}}})
    assert configs["s"].kind == "stdio" and not marker.exists()


# -- find_config -------------------------------------------------------------------------------------


def test_find_config_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.chdir(project)
    assert find_config() is None
    desktop = _write(home / ".config" / "Claude" / "claude_desktop_config.json", {"mcpServers": {}})
    expected = [desktop]
    for path in (home / ".cursor" / "mcp.json", project / ".cursor" / "mcp.json", project / ".vscode" / "mcp.json",
                 project / ".mcp.json"):
        assert find_config() == str(expected[-1]) == find_config(str(project))
        expected.append(_write(path, {"mcpServers": {}}))
    assert find_config() == str(project / ".mcp.json")
    assert find_config(str(tmp_path)) == str(home / ".cursor" / "mcp.json")  # another folder: only the global ones
    (project / ".vscode" / "mcp.json").unlink()
    (project / ".mcp.json").unlink()
    (project / ".vscode" / "mcp.json").mkdir()  # a folder is not a config file
    assert find_config() == str(project / ".cursor" / "mcp.json")


# -- connecting ---------------------------------------------------------------------------------------


def test_connect_to_the_only_server_of_a_config() -> None:
    with mcpcall.connect({"mcpServers": {"demo": {"command": demo_argv()[0], "args": demo_argv()[1:]}}}) as client:
        assert client.name == "demo"
        assert "echo" in [tool.name for tool in client.list_tools()]


def test_server_config_connect_uses_its_name_and_timeout(tmp_path: Path) -> None:
    path = _write(tmp_path / ".mcp.json", {"mcpServers": {
        "off": {"command": "nothing-here", "disabled": True},
        "demo": {"command": demo_argv()[0], "args": demo_argv()[1:], "timeout": 20, "autoApprove": ["echo"]},
    }})
    config = load_config(path)["demo"]
    with config.connect() as client:
        assert client.name == "demo" and client.timeout == 20.0
        assert client.call_tool("echo", {"message": "hi"}).text == "hi"
    with config.connect(timeout=15, name="other") as client:
        assert client.name == "other" and client.timeout == 15.0
    with mcpcall.connect(json.loads(path.read_text())) as client:  # the disabled one does not count
        assert client.name == "demo" and client.timeout == 20.0


def test_connect_refuses_a_config_with_several_or_no_servers() -> None:
    several = {"mcpServers": {"a": {"command": "x"}, "b": {"url": "https://h/"}}}
    with pytest.raises(ConfigError) as info:
        mcpcall.connect(several)
    assert "2 enabled ('a', 'b')" in str(info.value) and "mcpcall.ToolRegistry" in str(info.value)
    with pytest.raises(ConfigError, match="0 enabled"):
        mcpcall.connect({"servers": {"a": {"command": "x", "disabled": True}}})


def test_server_config_is_a_frozen_dataclass() -> None:
    config = ServerConfig(name="n", spec={"url": "https://u:url-s3cr3t@h/mcp"})
    assert repr(config) == "ServerConfig(name='n', kind='http', url='https://***@h/mcp', disabled=False)"
    with pytest.raises(AttributeError):
        config.name = "m"  # type: ignore[misc]
