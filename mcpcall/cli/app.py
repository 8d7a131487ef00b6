"""``main``: from argv to an exit status; every error becomes one line on stderr and its status."""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import shlex
import sys
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

from .. import connect
from ..config import find_config, is_url
from ..config.transports import _default_name
from ..errors import ConfigError, MCPError, RequestTimeout, RPCError
from .ask import Asker
from .commands import COMMANDS_ON_ONE_SERVER, check_no_words, demo
from .inputs import Inputs
from .login import (
    login_command,
    logout_command,
    needs_login_hint,
    sign_in_where_needed,
    with_oauth,
    with_oauth_everywhere,
)
from .multi import servers_command, tools_everywhere
from .output import (
    EXIT_BROKEN_PIPE,
    EXIT_OUTPUT,
    EXIT_RPC,
    EXIT_SERVER,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    Output,
    OutputClosed,
    OutputFailed,
    discard_rest,
    flushed,
    printable,
    say,
)
from .progress import WaitNotice, screen
from .targets import Configs, Target, pick_target
from .words import COMMANDS, UsageError, build_parser, for_the_shell, split_words

__all__ = ["main", "main_exit"]


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; returns the exit status.

    ``out`` (default: ``sys.stdout``) gets the results. When its reader goes
    away (``mcpcall tools | head -1``) nothing more is printed, ``sys.stdout``
    is pointed at /dev/null, and the status is :data:`EXIT_BROKEN_PIPE` (141).
    """
    stream = sys.stdout if out is None else out
    output = Output(stream)
    try:
        with _warnings_on_stderr():
            code = _main(argv, output)
        output.flush()
    except OutputClosed:
        discard_rest(stream)
        return EXIT_BROKEN_PIPE
    except OutputFailed as exc:
        discard_rest(stream)
        say(f"mcpcall: cannot write the output: {exc}\n")
        return EXIT_OUTPUT
    return code


class _Say(logging.Handler):
    """Log records as Python's last-resort handler shows them (warnings and worse, on stderr), but through say()."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            say(self.format(record) + "\n")
        except Exception:  # noqa: BLE001 - as logging's own handlers: a record that cannot be shown is dropped
            self.handleError(record)


@contextlib.contextmanager
def _warnings_on_stderr() -> Iterator[None]:
    """While the command runs, unless logging is set up: the library's warnings on stderr, made printable.

    They can carry what a server sent (a bad line, a log message), which Python's own last-resort handler would
    write to the terminal as it is, escape sequences and all.
    """
    root = logging.getLogger()
    if root.handlers:
        yield
        return
    handler = _Say(logging.WARNING)
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


def main_exit() -> None:
    """Entry point of the ``mcpcall`` console script."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # a reader gone in a way main() did not see: still quiet, still 141
        discard_rest(sys.stdout)
        code = EXIT_BROKEN_PIPE
    sys.exit(code)


def _config_note(argv: Sequence[str]) -> str:
    """For ``--help``: the config file a command would use."""
    explicit = None
    for i, word in enumerate(argv):
        if word == "--config" and i + 1 < len(argv):
            explicit = argv[i + 1]
        elif word.startswith("--config="):
            explicit = word.split("=", 1)[1]
    if explicit is not None:
        return f"config: {explicit} (--config)"
    try:
        found = find_config()
    except OSError:
        found = None
    return f"config: {found} (found)" if found else "config: none found (looked for .mcp.json, .vscode/mcp.json, " \
        ".cursor/mcp.json here, ~/.cursor/mcp.json, Claude Desktop's config)"


def _pairs(values: Sequence[str], sep: str, option: str, form: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for pair in values:
        key, has, value = pair.partition(sep)
        if not has or not key.strip():
            raise ConfigError(f"{option} takes {form}, not {pair!r}")
        found[key.strip() if sep == ":" else key] = value.strip() if sep == ":" else value
    return found


def _connect_options(args: argparse.Namespace) -> dict[str, Any]:
    """What the options ask of every connect (no timeout: each caller sets that)."""
    options: dict[str, Any] = {"protocol": args.protocol}
    env = _pairs(args.env, "=", "--env", "K=V")
    headers = _pairs(args.header, ":", "--header", "NAME:VALUE")
    bearer = args.bearer or os.environ.get("MCPCALL_BEARER") or None
    if env:
        options["env"] = env
    if headers:
        options["headers"] = headers
    if bearer:
        options["auth"] = bearer
    if args.inherit_env:
        options["inherit_env"] = True
    if args.cwd is not None:
        options["cwd"] = args.cwd
    if args.stderr == "show":
        options["stderr"] = show_stderr_line
    return options


def show_stderr_line(line: str) -> None:
    """``--stderr show``: a server's stderr line on ours (callbacks thread), made printable, never across a prompt or bar."""
    with screen(), contextlib.suppress(Exception):  # a closed stderr: the command goes on
        sys.stderr.write(printable(line) + "\n")
        sys.stderr.flush()


def _server_name(target: Target) -> str:
    """The name the client will have: a config's name, else the one connect() derives from the command."""
    spec = target.spec
    if target.config is not None or (isinstance(spec, str) and is_url(spec)):
        return target.label
    try:
        argv = shlex.split(spec) if isinstance(spec, str) else list(spec)
    except (TypeError, ValueError):
        return target.label
    return _default_name(argv) if argv and all(isinstance(w, str) for w in argv) else target.label


def _wait_notice(target: Target, seconds: float) -> WaitNotice:
    """After 3 s without an answer, one line on stderr (a terminal, or ``MCPCALL_PROGRESS=plain``)."""
    limit = "no timeout" if math.isinf(seconds) else f"timeout {seconds:g} s"
    return WaitNotice(sys.stderr, f"mcpcall: waiting for server {_server_name(target)!r} ({limit}; --timeout to change)")


def _run_on(target: Target, command: str, words: Sequence[str], args: argparse.Namespace, out: Output) -> int:
    options = _connect_options(args)
    target, auth = with_oauth(target, args, options)
    if auth is None:
        return _run_with(target, command, words, args, options, out)
    if target.config is None:
        options["auth"] = auth
    try:
        with auth:
            return _run_with(target, command, words, args, options, out)
    except MCPError as exc:
        needs_login_hint(target, auth, exc)
        raise


def _run_with(target: Target, command: str, words: Sequence[str], args: argparse.Namespace, options: dict[str, Any],
              out: Output) -> int:
    if args.timeout is not None:
        options["timeout"] = args.timeout
    elif target.config is None or target.config.timeout is None:
        options["timeout"] = 60.0
    notice = _wait_notice(target, options.get("timeout") or (target.config.timeout if target.config else None) or 60.0)
    asker = Asker(_server_name(target))
    options["elicitation"] = asker
    try:
        with asker.ctrl_c():
            client = target.config.connect(**options) if target.config is not None else connect(target.spec, **options)
            with client:
                try:
                    if command == "call":
                        notice.stop()  # a tool may take its time; its progress bar, if any, tells how it goes
                    return COMMANDS_ON_ONE_SERVER[command](client, words, args.json, out)
                finally:
                    asker.stop()  # a question still shown ends before close() waits for the callbacks thread
    finally:
        asker.stop()
        notice.stop()


def _dispatch(args: argparse.Namespace, words: list[str], out: Output) -> int:
    before, command, rest = split_words(words)
    if args.check and command != "servers":
        raise UsageError("--check goes with the servers command only")
    if command == "demo":
        check_no_words(command, rest if before is None else [before, *rest])
        return demo(args.timeout or 60.0, args.protocol, out)
    configs = Configs(args.config, Inputs(_pairs(args.input, "=", "--input", "ID=VALUE")))
    if command == "servers":
        if before is not None:
            raise UsageError(f"servers takes no SERVER; got {before!r}")
        check_no_words(command, rest)
        found = configs.servers(strict=True)
        if found is None or configs.path is None:
            raise ConfigError("no config file: give --config FILE, or write one of .mcp.json, .vscode/mcp.json, "
                              ".cursor/mcp.json here, ~/.cursor/mcp.json (or Claude Desktop's)")
        options = _connect_options(args)
        if not args.check:
            return servers_command(configs.path, found, False, args.timeout, options, args.json, out)
        found = {**found, **configs.answered({n: c for n, c in found.items() if not c.disabled})}  # no input for a disabled one
        found, made = with_oauth_everywhere(found, args, options)
        try:
            sign_in_where_needed(found, made)
            return servers_command(configs.path, found, True, args.timeout, options, args.json, out)
        finally:
            for auth in made:
                auth.close()
    if command in ("login", "logout"):
        words_given = rest if before is None else [before, *rest]
        run = login_command if command == "login" else logout_command
        return run(args, words_given, configs, out)
    target, rest = pick_target(command, before, rest, configs)
    if command in ("tools", "info", "resources", "prompts", "ping"):
        check_no_words(command, rest)
    if target is None:
        options = _connect_options(args)
        servers, made = with_oauth_everywhere(configs.answered(configs.enabled()), args, options)
        try:
            sign_in_where_needed(servers, made)
            return tools_everywhere(servers, args.timeout, options, args.json, out)
        finally:
            for auth in made:
                auth.close()
    return _run_on(configs.answered_target(target), command, rest, args, out)


def _main(argv: Sequence[str] | None, out: Output) -> int:
    words_in = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_config_note(words_in) if "-h" in words_in or "--help" in words_in else "")
    try:
        with contextlib.redirect_stdout(out.stream):  # main(argv, out=...) gets --help and --version too
            args = parser.parse_intermixed_args(words_in)
    except SystemExit as exc:  # --help, --version (on the output) or a usage error (on stderr)
        flushed(sys.stderr)
        if not flushed(out.stream):
            return EXIT_BROKEN_PIPE
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    words: list[str] = list(args.words)
    if not words:
        parser.print_usage(sys.stderr)
        say(f"mcpcall: error: name a command: {', '.join(COMMANDS)}\n")
        return EXIT_USAGE
    try:
        return _dispatch(args, words, out)
    except ConfigError as exc:
        say(f"mcpcall: error: {exc}\n" if isinstance(exc, UsageError) else f"mcpcall: {for_the_shell(str(exc))}\n")
        return EXIT_USAGE
    except RequestTimeout as exc:
        say(f"mcpcall: {for_the_shell(str(exc))}\n")
        return EXIT_TIMEOUT
    except RPCError as exc:
        say(f"mcpcall: {for_the_shell(str(exc))}\n")
        return EXIT_RPC
    except MCPError as exc:
        say(f"mcpcall: {for_the_shell(str(exc))}\n")
        return EXIT_SERVER
    except KeyboardInterrupt:
        return 130

