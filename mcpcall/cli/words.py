"""The command line's words: options, commands, and tool or prompt arguments."""

from __future__ import annotations

import argparse
import difflib
import json
import math
import re
import shutil
from collections.abc import Sequence
from typing import Any

from .. import __version__
from ..config import is_url, redact_url
from ..errors import ConfigError
from ..types import Tool

__all__ = [
    "COMMANDS",
    "SIGN_IN_COMMANDS",
    "UsageError",
    "build_parser",
    "for_the_shell",
    "looks_like_server",
    "parse_arguments",
    "parse_prompt_arguments",
    "parse_value",
    "split_words",
]

COMMANDS = ("servers", "tools", "call", "resources", "read", "prompts", "get-prompt", "ping", "info", "demo")
#: Sign-in commands (``mcpcall login URL``); kept apart so the "commands:" line of errors stays as scripts know it.
SIGN_IN_COMMANDS = ("login", "logout")
_ALL = COMMANDS + SIGN_IN_COMMANDS
_NO_SERVER = ("demo", "servers")  # commands that take no SERVER
_KNOWN = f"commands: {', '.join(COMMANDS)}"

USAGE = "mcpcall [OPTIONS] COMMAND [SERVER] ARGS   (or, as before: mcpcall [OPTIONS] SERVER COMMAND ARGS)"
DESCRIPTION = """\
Talk to MCP servers: list and call tools, read resources, get prompts.

commands:
  servers [--check]                  the servers of the config (--check: connect to each)
  tools [SERVER]                     a server's tools; with a config and no SERVER, every server's
  call [SERVER] TOOL [JSON | k=v...] call a tool (a progress bar on stderr when it reports progress)
  resources [SERVER]                 list resources
  read [SERVER] URI                  read a resource
  prompts [SERVER]                   list prompts
  get-prompt [SERVER] NAME [k=v...]  a prompt's messages
  ping [SERVER]                      round-trip time
  info [SERVER]                      server name, protocol, capabilities
  login SERVER                       sign in to a remote server (OAuth, in a browser); the token is kept
  logout SERVER                      forget the stored token of a remote server
  demo                               a tour of the bundled demo server

SERVER is a name in the config file, a URL (https://host/mcp) or a command line in one argument
("npx -y @pkg/server"). Without one: for tools, every server of the config (--config, else a found
one); for the others, the only server of --config; else the bundled demo server.

A server's questions (elicitation) are asked at a terminal and declined elsewhere. A config's ${input:ID}
takes --input ID=VALUE; at a terminal the others are asked for.

Remote servers that ask for OAuth use the token `mcpcall login URL` stored (refreshed when it can be);
without one, a command run at a terminal opens the browser, and one run from a script fails and says
to run `mcpcall login`."""


class UsageError(ConfigError):
    """The words of the command line make no command (shown as ``mcpcall: error: ...``, exit status 2)."""


def build_parser(config_note: str) -> argparse.ArgumentParser:
    """The option parser; ``config_note`` (which config file is used) goes into ``--help``."""
    p = argparse.ArgumentParser(
        prog="mcpcall",
        usage=USAGE,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"{config_note}\n"
               "exit status: 0 ok, 1 tool error, 2 usage, 3 server failure, 4 timeout, 5 JSON-RPC error,\n"
               "74 output not writable, 141 output pipe closed (| head)\n"
               "progress bars, and a line when a server is slow to answer: MCPCALL_PROGRESS=auto (default: on a\n"
               "terminal), plain, tqdm or off",
    )
    p.add_argument("words", nargs="*", metavar="COMMAND [SERVER] ARGS", help="see above")
    p.add_argument("--config", metavar="FILE", help="a config file (mcpServers / VS Code servers); "
                   "default: .mcp.json, .vscode/mcp.json, .cursor/mcp.json here, ~/.cursor/mcp.json, Claude Desktop's")
    p.add_argument("--input", action="append", default=[], metavar="ID=VALUE",
                   help="the value of a config's ${input:ID} (VS Code inputs; repeatable); at a terminal the others are asked")
    p.add_argument("--check", action="store_true", help="servers: connect to each (in parallel) and report")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument("--version", action="version", version=f"mcpcall {__version__}")
    talk = p.add_argument_group("every server")
    talk.add_argument("--timeout", type=_seconds, default=None, help="seconds per request (default 60, or the config's; inf for none)")
    talk.add_argument("--protocol", default="auto", help="auto, legacy, modern, or an exact version")
    local = p.add_argument_group("local servers (a command)")
    local.add_argument("--env", action="append", default=[], metavar="K=V", help="set a variable for the server")
    local.add_argument("--inherit-env", action="store_true", help="pass this whole environment to the server")
    local.add_argument("--cwd", metavar="DIR", help="working directory of the server")
    local.add_argument("--stderr", choices=("show", "hide"), default="hide", help="show the server's stderr")
    remote = p.add_argument_group("remote servers (a URL)")
    remote.add_argument("--header", action="append", default=[], metavar="NAME:VALUE", help="an HTTP header for a remote server")
    remote.add_argument("--bearer", metavar="TOKEN", help="a bearer token for a remote server (or MCPCALL_BEARER)")
    oauth = p.add_argument_group("sign-in (OAuth: login, and remote servers that ask for it)")
    oauth.add_argument("--client-id", metavar="ID", help="a pre-registered OAuth client id (default: register one)")
    oauth.add_argument("--client-secret-env", metavar="VAR", help="the environment variable holding that client's secret")
    oauth.add_argument("--scope", action="append", default=[], metavar="SCOPE",
                       help="a scope to ask for when the server names none (repeatable)")
    oauth.add_argument("--no-browser", action="store_true",
                       help="print the sign-in link and ask for the address the browser ends on")
    oauth.add_argument("--port", type=_port, metavar="N", help="the port of the local sign-in listener (default: any free one)")
    oauth.add_argument("--token-file", metavar="PATH", help="where tokens are kept (default: ~/.cache/mcpcall/tokens.json)")
    return p


def _port(text: str) -> int:
    """``--port``: 1-65535."""
    if not text.isdigit() or not 0 < int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number (1-65535), not {text!r}")
    return int(text)


def _seconds(text: str) -> float:
    """``--timeout``: positive seconds, or ``inf``."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0:  # also NaN
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds (or inf for none), not {text!r}")
    return value


def parse_value(text: str, schema: dict[str, Any] | None) -> Any:
    """A ``key=value`` value: JSON when it parses, unless the schema wants a string."""
    if isinstance(schema, dict) and schema.get("type") == "string":
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _json_object(word: str) -> dict[str, Any]:
    try:
        value = json.loads(word)
    except ValueError as exc:
        raise ConfigError(f"the arguments are not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ConfigError("the JSON arguments must be an object")
    return value


def _pairs(words: Sequence[str]) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise ConfigError(f"expected key=value or one JSON object, got {word!r}")
        if any(key == k for k, _ in pairs):
            raise ConfigError(f"argument {key!r} is given twice")
        pairs.append((key, value))
    return pairs


def parse_arguments(words: Sequence[str], tool: Tool | None) -> dict[str, Any]:
    """Tool arguments from one JSON object or from ``key=value`` words."""
    if len(words) == 1 and words[0].lstrip().startswith("{"):
        return _json_object(words[0])
    props = tool.input_schema.get("properties", {}) if tool is not None else {}
    return {key: parse_value(value, props.get(key) if isinstance(props, dict) else None) for key, value in _pairs(words)}


def parse_prompt_arguments(words: Sequence[str]) -> dict[str, str]:
    """Prompt arguments (strings, as MCP wants them) from one JSON object or ``key=value`` words."""
    if len(words) == 1 and words[0].lstrip().startswith("{"):
        value = _json_object(words[0])
        bad = [key for key, item in value.items() if not isinstance(item, str)]
        if bad:
            raise ConfigError(f"prompt arguments are strings; {', '.join(map(repr, bad))} "
                              f"{'is' if len(bad) == 1 else 'are'} not")
        return value
    return dict(_pairs(words))


def did_you_mean(word: str) -> str:
    """`` (did you mean 'tools'?)`` for a near miss of a command, else ``""``."""
    close = difflib.get_close_matches(word.lower(), _ALL, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def looks_like_server(word: str) -> bool:
    """A URL, a command line with arguments, or a path: no misspelt command."""
    return is_url(word) or any(c.isspace() for c in word) or "/" in word


def split_words(words: Sequence[str]) -> tuple[str | None, str, list[str]]:
    """``COMMAND ARGS`` or ``SERVER COMMAND ARGS`` -> (server before the command or None, command, args).

    A ConfigError says what is wrong: a misspelt command names the near miss and the known ones.
    """
    if words[0] in _ALL:
        if words[0] in _NO_SERVER and len(words) > 1 and words[1] in _ALL:
            return words[0], words[1], list(words[2:])  # a server named like a command: "mcpcall demo tools"
        return None, words[0], list(words[1:])
    if len(words) > 1 and words[1] in _ALL:
        return words[0], words[1], list(words[2:])
    first = words[0]
    typo = did_you_mean(first)
    if typo and not looks_like_server(first):
        raise UsageError(f"unknown command {first!r}{typo}; {_KNOWN}")
    if len(words) > 1:
        raise UsageError(f"after server {redact_url(first)!r}: unknown command {words[1]!r}{did_you_mean(words[1])}; {_KNOWN}")
    if looks_like_server(first) or shutil.which(first) is not None:
        raise UsageError(f"no command after server {redact_url(first)!r}; {_KNOWN}")
    raise UsageError(f"unknown command {first!r}; {_KNOWN}")


# What the library's messages advise a Python caller, and what the command line says instead (the library speaks
# to code; at a shell the same advice names an option or a command). Every error the CLI shows goes through
# for_the_shell(); a message with none of these is shown as it is.
_FOR_THE_SHELL: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), r) for p, r in (
    (r"raise timeout=", "raise --timeout"),
    (r"raise max_message_bytes= if it is legitimate", "the command line's limit for one message"),
    (r"; check client\.capabilities before asking", "; `mcpcall info SERVER` shows what it offers"),
    (r"pass it with load_config\(\.\.\., inputs=\{'((?:[^'\\]|\\.)*)': \.\.\.\}\)",
     r"give --input \1=VALUE (or run the command at a terminal to be asked)"),
    (r"\(give connect\(\) sampling=, elicitation=, roots= or handlers=\{method: fn\}\)",
     "(the mcpcall command answers only elicitation; use the Python API for the rest)"),
    ((r"call auth\.login\(url\) \(or run `mcpcall login URL`\) from your own code; mcpcall never opens a browser or "
      r"prompts from inside a request"), "run `mcpcall login URL` at a terminal"),
    ((r"log in once with `mcpcall login URL` \(a token file\) or OAuth\(token_store=\.\.\.\)\.login\(url\) \(any store, "
      r"RedisTokenStore included\) and share that store, or pass redirect_handler="),
     "run `mcpcall login URL` at a terminal first"),
    (r"pass redirect_uri= with redirect_handler= \(or a handler that has a redirect_uri attribute\)",
     "give --port N for the sign-in listener, or an oauth redirectUri in the config"),
    (r"pass client_id= or client_metadata_url=", "give --client-id ID (or an oauth clientId in the config)"),
    (r"pass client_id=", "give --client-id ID (or an oauth clientId in the config)"),
    (r"\(pass issuer= to say which server they belong to, or register a client there\)",
     "(leave out --client-id, or the config's oauth clientId, to register a client there)"),
))


def for_the_shell(text: str) -> str:
    """A library message worded for the command line: Python advice (``timeout=``, ``client.capabilities``) as options."""
    for pattern, replacement in _FOR_THE_SHELL:
        text = pattern.sub(replacement, text)
    return text
