"""The ``mcpcall`` command: talk to MCP servers from a shell.

::

    mcpcall [OPTIONS] servers [--check]
    mcpcall [OPTIONS] tools [SERVER]
    mcpcall [OPTIONS] call [SERVER] TOOL [JSON | key=value ...]
    mcpcall [OPTIONS] resources [SERVER]
    mcpcall [OPTIONS] read [SERVER] URI
    mcpcall [OPTIONS] prompts [SERVER]
    mcpcall [OPTIONS] get-prompt [SERVER] NAME [JSON | key=value ...]
    mcpcall [OPTIONS] ping [SERVER]
    mcpcall [OPTIONS] info [SERVER]
    mcpcall [OPTIONS] login SERVER      (--client-id ID, --client-secret-env VAR, --scope S, --no-browser, --port N,
    mcpcall [OPTIONS] logout SERVER      --token-file PATH)
    mcpcall demo

OPTIONS (``mcpcall --help`` describes each): ``--config FILE``, ``--input ID=VALUE``, ``--check``,
``--json``, ``--timeout SECONDS``, ``--protocol VERSION``, ``--env K=V``,
``--inherit-env``, ``--cwd DIR``, ``--stderr show|hide``, ``--header
NAME:VALUE``, ``--bearer TOKEN``, the sign-in options above, ``--version``.

Remote servers that ask for OAuth use the token ``mcpcall login`` stored
(:mod:`.login`); without one, a command at a terminal runs the browser sign-in,
and one whose stdin is not a terminal fails and says to run ``mcpcall login``.

A server that asks a question (elicitation: the demo's ``confirm``) is
answered at a terminal: its message on stderr, then accept (one line per form
field), decline or cancel; Ctrl-D or Ctrl-C at the question cancels it. When
stdin is no terminal the question is declined, and stderr says so (:mod:`.ask`).
A VS Code config's ``${input:ID}`` takes ``--input ID=VALUE``; at a terminal
the others are asked for (password inputs without echo), else the file's
default is used, else the command fails naming the input. Listing the
servers needs no input (:mod:`.inputs`).

What a server sends is shown made printable: control characters other than
newline and tab become ``\\xNN`` (no escape sequence reaches the terminal);
``--json`` output is JSON with every control character escaped (:mod:`.output`).

The older order, SERVER first (``mcpcall SERVER tools``, ``mcpcall SERVER call
TOOL k=v``), works as well.

SERVER is a server's name in the config file (``--config FILE``, else the
first of ``.mcp.json``, ``.vscode/mcp.json``, ``.cursor/mcp.json`` here,
``~/.cursor/mcp.json`` or Claude Desktop's, looked at only when a command
needs it), a command line in one argument (``"npx -y @pkg/server"``) or a URL
(``https://host/mcp``). Without one: the only server of ``--config``, every
server for ``tools`` (when there is a config), else the bundled demo server.
``key=value`` values are read as JSON when they parse (``n=3``, ``flag=true``)
unless the tool's schema says the argument is a string.

Exit status: 0 success, 1 the tool reported an error (isError), 2 bad usage or
configuration, 3 the server failed (could not start, closed, broke the
protocol; for ``tools`` and ``servers --check`` over a config: any server), 4
timeout, 5 the server answered with a JSON-RPC error, 74 the output could not
be written (a full disk), 141 the reader of the output went away (``mcpcall
tools | head -1``: 128 + SIGPIPE, as shells report it; nothing is printed).

Modules: :mod:`.words` (options and words), :mod:`.targets` (which server),
:mod:`.commands` (one server), :mod:`.multi` (every server of a config),
:mod:`.progress` (progress bars), :mod:`.ask` (a server's questions),
:mod:`.inputs` (a config's inputs), :mod:`.login` (login, logout, OAuth for
remote servers), :mod:`.output` (stdout, printable text and exit codes),
:mod:`.app` (``main``).

The top floor: it may import every other part of mcpcall; nothing of mcpcall imports it.
"""

from __future__ import annotations

from .app import main, main_exit
from .output import (
    EXIT_BROKEN_PIPE,
    EXIT_OK,
    EXIT_OUTPUT,
    EXIT_RPC,
    EXIT_SERVER,
    EXIT_TIMEOUT,
    EXIT_TOOL_ERROR,
    EXIT_USAGE,
)
from .targets import demo_command
from .words import COMMANDS, parse_arguments, parse_prompt_arguments, parse_value

__all__ = [
    "COMMANDS",
    "EXIT_BROKEN_PIPE",
    "EXIT_OK",
    "EXIT_OUTPUT",
    "EXIT_RPC",
    "EXIT_SERVER",
    "EXIT_TIMEOUT",
    "EXIT_TOOL_ERROR",
    "EXIT_USAGE",
    "demo_command",
    "main",
    "main_exit",
    "parse_arguments",
    "parse_prompt_arguments",
    "parse_value",
]
