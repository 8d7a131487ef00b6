"""The ``mcpcall`` command: talk to an MCP server from a shell.

::

    mcpcall [OPTIONS] [SERVER] tools
    mcpcall [OPTIONS] [SERVER] call NAME [JSON | key=value ...]
    mcpcall [OPTIONS] [SERVER] info
    mcpcall demo

SERVER is a command line in one argument (``"npx -y @pkg/server"``) or a URL
(``https://host/mcp``: a remote server); without it the bundled demo server
is used. ``key=value`` values are read as JSON when
they parse (``n=3``, ``flag=true``) unless the tool's schema says the argument
is a string.

Exit status: 0 success, 1 the tool reported an error (isError), 2 bad usage or
configuration, 3 the server failed (could not start, closed, broke the
protocol), 4 timeout, 5 the server answered with a JSON-RPC error, 74 the
output could not be written (a full disk), 141 the reader of the output went
away (``mcpcall tools | head -1``: 128 + SIGPIPE, as shells report it;
nothing is printed).
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import math
import os
import shutil
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from . import __version__, connect
from .client import Client
from .config import is_url, redact_url
from .errors import ConfigError, MCPError, RequestTimeout, RPCError
from .types import CallToolResult, TextContent, Tool

COMMANDS = ("tools", "call", "info", "demo")
EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE, EXIT_SERVER, EXIT_TIMEOUT, EXIT_RPC = 0, 1, 2, 3, 4, 5
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a writer whose reader went away
EXIT_OUTPUT = 74  # EX_IOERR (sysexits.h): the output could not be written


class _OutputClosed(Exception):
    """Whoever reads the output stopped reading (``mcpcall tools | head -1``)."""


class _OutputFailed(Exception):
    """The output cannot be written (a full disk, ``> /dev/full``)."""


class _Output:
    """The output stream, with a broken pipe told apart from every other error on the way.

    An unbuffered stream (``python -u``, ``PYTHONUNBUFFERED=1``) is written
    through its raw file, all of it: ``TextIOWrapper`` over a raw file drops
    what a short write to a pipe left over, so a reader that went away
    mid-write would go unnoticed and the output would end silently.
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        buffer = getattr(stream, "buffer", None)
        self._raw = buffer if isinstance(buffer, io.RawIOBase) else None

    def write(self, text: str) -> None:
        try:
            if self._raw is None:
                self.stream.write(text)
                return
            data = memoryview(text.encode(getattr(self.stream, "encoding", None) or "utf-8", "replace"))
            while data:
                written = self._raw.write(data)
                data = data[written or 0 :]
        except BrokenPipeError as exc:
            raise _OutputClosed from exc
        except (OSError, ValueError) as exc:
            raise _OutputFailed(str(exc)) from exc

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError as exc:
            raise _OutputClosed from exc
        except (OSError, ValueError) as exc:
            raise _OutputFailed(str(exc)) from exc


def _discard_rest(stream: TextIO) -> None:
    """Point a broken ``sys.stdout``/``sys.stderr`` at /dev/null.

    What is still buffered then goes nowhere at exit, instead of failing again
    in Python's own flush ("Exception ignored ... BrokenPipeError", status 120).
    Other streams are left alone: they are not flushed by the interpreter at exit.
    """
    if stream not in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        return
    try:
        fd = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError):  # no file descriptor (a StringIO, Jupyter), or closed
        return
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _flushed(stream: TextIO) -> bool:
    """Flush ``stream``; False (and the rest discarded) when its reader went away."""
    try:
        stream.flush()
    except BrokenPipeError:
        _discard_rest(stream)
        return False
    except (OSError, ValueError):
        pass
    return True


def _say(text: str) -> None:
    """A message on stderr. A closed stderr is no error of its own: the exit status still tells."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except BrokenPipeError:
        _discard_rest(sys.stderr)


def demo_command() -> list[str]:
    """The argument list that runs the bundled demo server with this Python."""
    return [sys.executable, "-m", "mcpcall.demo_server"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mcpcall",
        description="Call tools on an MCP server (no SERVER: the bundled demo server).",
        epilog="exit status: 0 ok, 1 tool error, 2 usage, 3 server failure, 4 timeout, 5 JSON-RPC error, "
               "74 output not writable, 141 output pipe closed (| head)",
    )
    p.add_argument("words", nargs="*", metavar="[SERVER] COMMAND ARGS", help="tools | call NAME [ARGS] | info | demo")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument("--timeout", type=_seconds, default=60.0, help="seconds per request (default 60; inf for none)")
    p.add_argument("--protocol", default="auto", help="auto, legacy, modern, or an exact version")
    p.add_argument("--env", action="append", default=[], metavar="K=V", help="set a variable for the server")
    p.add_argument("--inherit-env", action="store_true", help="pass this whole environment to the server")
    p.add_argument("--cwd", help="working directory of the server")
    p.add_argument("--stderr", choices=("show", "hide"), default="hide", help="show the server's stderr")
    p.add_argument("--header", action="append", default=[], metavar="NAME:VALUE", help="an HTTP header for a remote server")
    p.add_argument("--bearer", metavar="TOKEN", help="a bearer token for a remote server (or MCPCALL_BEARER)")
    p.add_argument("--version", action="version", version=f"mcpcall {__version__}")
    return p


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


def parse_arguments(words: Sequence[str], tool: Tool | None) -> dict[str, Any]:
    """Tool arguments from one JSON object or from ``key=value`` words."""
    if len(words) == 1 and words[0].lstrip().startswith("{"):
        try:
            value = json.loads(words[0])
        except ValueError as exc:
            raise ConfigError(f"the arguments are not valid JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise ConfigError("the JSON arguments must be an object")
        return value
    props = tool.input_schema.get("properties", {}) if tool is not None else {}
    args: dict[str, Any] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise ConfigError(f"expected key=value or one JSON object, got {word!r}")
        if key in args:
            raise ConfigError(f"argument {key!r} is given twice")
        args[key] = parse_value(value, props.get(key) if isinstance(props, dict) else None)
    return args


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _print_result(result: CallToolResult, out: _Output) -> None:
    for block in result.content:
        if isinstance(block, TextContent):
            out.write(block.text + "\n")
        else:
            out.write(f"[{block.type} content: {json.dumps(dict(block.raw), ensure_ascii=False)[:200]}]\n")
    if result.structured_content is not None and not any(isinstance(b, TextContent) for b in result.content):
        out.write(json.dumps(result.structured_content, indent=2, ensure_ascii=False) + "\n")


def _tools(client: Client, as_json: bool, out: _Output) -> int:
    tools = client.list_tools()
    if as_json:
        out.write(json.dumps([dict(t.raw) for t in tools], indent=2, ensure_ascii=False) + "\n")
        return EXIT_OK
    width = max((len(t.name) for t in tools), default=0)
    for tool in tools:
        summary = tool.description.strip().splitlines()[0] if tool.description.strip() else ""
        out.write(f"{tool.name.ljust(width)}  {summary}\n")
    return EXIT_OK


def _call(client: Client, words: Sequence[str], as_json: bool, out: _Output) -> int:
    if not words:
        raise ConfigError("call needs a tool name: mcpcall call NAME [JSON | key=value ...]")
    name, rest = words[0], words[1:]
    tool = None
    if rest and not rest[0].lstrip().startswith("{"):
        tool = next((t for t in client.list_tools() if t.name == name), None)
    arguments = parse_arguments(rest, tool)
    started = time.perf_counter()
    result = client.call_tool(name, arguments)
    elapsed = time.perf_counter() - started
    if as_json:
        out.write(json.dumps(dict(result.raw), indent=2, ensure_ascii=False) + "\n")
    else:
        _print_result(result, out)
        _say(f"({name}: {_ms(elapsed)}{', tool reported an error' if result.is_error else ''})\n")
    return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


def _info(client: Client, as_json: bool, out: _Output) -> int:
    info = {
        "server": dict(client.server_info.raw) if client.server_info else None,
        "era": client.era,
        "protocolVersion": client.protocol_version,
        "supportedVersions": client.supported_versions,
        "capabilities": client.capabilities,
        "instructions": client.instructions,
    }
    if as_json:
        out.write(json.dumps(info, indent=2, ensure_ascii=False) + "\n")
        return EXIT_OK
    server = client.server_info
    out.write(f"server:       {server.name} {server.version}\n" if server else "server:       (unnamed)\n")
    out.write(f"protocol:     {client.protocol_version} ({client.era})\n")
    out.write(f"capabilities: {', '.join(sorted(client.capabilities)) or '(none)'}\n")
    if client.instructions:
        out.write(f"instructions: {client.instructions}\n")
    return EXIT_OK


def _demo(args: argparse.Namespace, out: _Output) -> int:
    command = demo_command()
    out.write(f"Starting the bundled demo server: {' '.join(command)}\n")
    started = time.perf_counter()
    with connect(command, timeout=args.timeout, protocol=args.protocol) as client:
        out.write(f"Connected in {_ms(time.perf_counter() - started)}: {client.server_info.name if client.server_info else '?'}, "
                  f"protocol {client.protocol_version} ({client.era} era)\n\n")
        started = time.perf_counter()
        tools = client.list_tools()
        out.write(f"{len(tools)} tools ({_ms(time.perf_counter() - started)}):\n")
        for tool in tools:
            out.write(f"  {tool.name:<8} {tool.description.splitlines()[0] if tool.description else ''}\n")
        out.write("\n")
        for name, arguments in (("echo", {"message": "hello from mcpcall"}), ("add", {"a": 2, "b": 3})):
            started = time.perf_counter()
            result = client.call_tool(name, arguments)
            elapsed = time.perf_counter() - started
            out.write(f"call {name} {json.dumps(arguments)} -> {result.text!r}  ({_ms(elapsed)})\n")
        progress: list[str] = []
        started = time.perf_counter()
        result = client.call_tool(
            "slow", {"seconds": 0.3, "steps": 3}, on_progress=lambda p, t, m: progress.append(f"{p:g}/{t:g}" if t else f"{p:g}")
        )
        out.write(f"call slow -> {result.text!r} with progress {', '.join(progress)}  ({_ms(time.perf_counter() - started)})\n")
        rounds = 200
        started = time.perf_counter()
        for i in range(rounds):
            client.call_tool("add", {"a": i, "b": 1})
        per_call = (time.perf_counter() - started) / rounds
        out.write(f"\n{rounds} sequential calls: {_ms(per_call)} per call ({1 / per_call:,.0f} calls/s)\n")
    return EXIT_OK


def _did_you_mean(word: str) -> str:
    close = difflib.get_close_matches(word.lower(), COMMANDS, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _looks_like_server(word: str) -> bool:
    """A URL, a command line with arguments, or a path: no misspelt command."""
    return is_url(word) or any(c.isspace() for c in word) or "/" in word


def _split_words(words: Sequence[str]) -> tuple[str | None, str, list[str]]:
    """``[SERVER] COMMAND ARGS`` -> (server or None, command, args); a ConfigError says what is wrong."""
    if words[0] in COMMANDS:
        return None, words[0], list(words[1:])
    if len(words) > 1 and words[1] in COMMANDS:
        return words[0], words[1], list(words[2:])
    first, known = words[0], f"commands: {', '.join(COMMANDS)}"
    typo = _did_you_mean(first)
    if typo and not _looks_like_server(first):
        raise ConfigError(f"unknown command {first!r}{typo}; {known}")
    if len(words) > 1:
        raise ConfigError(f"after server {redact_url(first)!r}: unknown command {words[1]!r}{_did_you_mean(words[1])}; {known}")
    if _looks_like_server(first) or shutil.which(first) is not None:
        raise ConfigError(f"no command after server {redact_url(first)!r}; {known}")
    raise ConfigError(f"unknown command {first!r}; {known}")


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; returns the exit status.

    ``out`` (default: ``sys.stdout``) gets the results. When its reader goes
    away (``mcpcall tools | head -1``) nothing more is printed, ``sys.stdout``
    is pointed at /dev/null, and the status is :data:`EXIT_BROKEN_PIPE` (141).
    """
    stream = sys.stdout if out is None else out
    output = _Output(stream)
    try:
        code = _main(argv, output)
        output.flush()
    except _OutputClosed:
        _discard_rest(stream)
        return EXIT_BROKEN_PIPE
    except _OutputFailed as exc:
        _discard_rest(stream)
        _say(f"mcpcall: cannot write the output: {exc}\n")
        return EXIT_OUTPUT
    return code


def _main(argv: Sequence[str] | None, out: _Output) -> int:
    parser = _parser()
    try:
        args = parser.parse_intermixed_args(argv)
    except SystemExit as exc:  # --help, --version (on stdout) or a usage error (on stderr)
        _flushed(sys.stderr)
        if not _flushed(sys.stdout):
            return EXIT_BROKEN_PIPE
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    words: list[str] = list(args.words)
    if not words:
        parser.print_usage(sys.stderr)
        _say("mcpcall: error: name a command: tools, call, info or demo\n")
        return EXIT_USAGE
    try:
        server, command, rest = _split_words(words)
    except ConfigError as exc:
        _say(f"mcpcall: error: {exc}\n")
        return EXIT_USAGE
    if command in ("tools", "info", "demo") and rest:
        _say(f"mcpcall: error: {command} takes no arguments; got {' '.join(map(repr, rest))}\n")
        return EXIT_USAGE
    try:
        if command == "demo":
            return _demo(args, out)
        env = {}
        for pair in args.env:
            key, sep, value = pair.partition("=")
            if not sep:
                raise ConfigError(f"--env takes K=V, not {pair!r}")
            env[key] = value
        headers = {}
        for pair in args.header:
            key, sep, value = pair.partition(":")
            if not sep or not key.strip():
                raise ConfigError(f"--header takes NAME:VALUE, not {pair!r}")
            headers[key.strip()] = value.strip()
        with connect(
            server if server is not None else demo_command(),
            headers=headers or None,
            auth=args.bearer or os.environ.get("MCPCALL_BEARER") or None,
            timeout=args.timeout,
            protocol=args.protocol,
            env=env,
            inherit_env=args.inherit_env or None,
            cwd=args.cwd,
            stderr="inherit" if args.stderr == "show" else None,
        ) as client:
            if command == "tools":
                return _tools(client, args.json, out)
            if command == "call":
                return _call(client, rest, args.json, out)
            return _info(client, args.json, out)
    except ConfigError as exc:
        _say(f"mcpcall: {exc}\n")
        return EXIT_USAGE
    except RequestTimeout as exc:
        _say(f"mcpcall: {str(exc).replace('raise timeout=', 'raise --timeout')}\n")
        return EXIT_TIMEOUT
    except RPCError as exc:
        _say(f"mcpcall: {exc}\n")
        return EXIT_RPC
    except MCPError as exc:
        _say(f"mcpcall: {exc}\n")
        return EXIT_SERVER
    except KeyboardInterrupt:
        return 130


def main_exit() -> None:
    """Entry point of the ``mcpcall`` console script."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # a reader gone in a way main() did not see: still quiet, still 141
        _discard_rest(sys.stdout)
        code = EXIT_BROKEN_PIPE
    sys.exit(code)
