"""Which server a command talks to: a config file's server, a URL, a command line, or the demo server.

The config file is ``--config FILE`` when given. Otherwise the one
:func:`~mcpcall.config.find_config` finds is read only when it is needed: to
list its servers (``servers``, ``tools`` with no SERVER), or to look up a word
in SERVER position. A found file that cannot be read is then an error only
for the commands that need it; a lookup goes on without it.

VS Code's ``${input:ID}`` are left as written while the file is read to pick
a server or list them (:mod:`.inputs`); :meth:`Configs.answered` answers them
for the servers a command talks to.
"""

from __future__ import annotations

import logging
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..config import ServerConfig, find_config, is_url, load_config, redact_url
from ..errors import ConfigError
from .inputs import UNANSWERED, Inputs
from .words import UsageError, looks_like_server

__all__ = ["Configs", "Target", "check_words_after_server", "demo_command", "pick_target"]

_log = logging.getLogger("mcpcall.cli")

ONE_OPTIONAL_SERVER = ("tools", "resources", "prompts", "ping", "info")
NAME_FIRST = ("call", "get-prompt")  # [SERVER] NAME [ARGS]


def demo_command() -> list[str]:
    """The argument list that runs the bundled demo server with this Python."""
    return [sys.executable, "-m", "mcpcall.demo_server"]


@dataclass(frozen=True)
class Target:
    """One server to connect to: a config entry, or a spec :func:`mcpcall.connect` takes."""

    label: str
    spec: Any = None
    config: ServerConfig | None = None


class Configs:
    """The config file in play (``--config``, else a found one, read when first needed)."""

    def __init__(self, explicit: str | None, inputs: Inputs | None = None) -> None:
        self.explicit = explicit
        self.inputs = inputs if inputs is not None else Inputs({})
        self._path: str | None = None
        self._servers: dict[str, ServerConfig] | None = None
        self._looked = False

    @property
    def path(self) -> str | None:
        """The file read, if any."""
        return self._path

    def servers(self, *, strict: bool) -> dict[str, ServerConfig] | None:
        """Every server of the file, disabled ones too; None when there is no file (or, not ``strict``, a bad one)."""
        if not self._looked:
            self._looked = True
            path = self.explicit if self.explicit is not None else find_config()
            if path is None:
                return None
            try:
                self._servers = load_config(path, inputs=UNANSWERED, include_disabled=True)
                self._path = path
            except ConfigError as exc:
                if strict or self.explicit is not None:
                    raise
                self._looked = False  # a command that needs the file reads it again, and says what is wrong
                _log.debug("ignoring config %s: %s", path, str(exc))
                return None
        return self._servers

    def answered(self, configs: dict[str, ServerConfig]) -> dict[str, ServerConfig]:
        """``configs`` (of this file) with the inputs they use answered: ``--input``, else asked at a terminal."""
        if self._path is None or not configs:
            return configs
        return self.inputs.answer(self._path, configs)

    def answered_target(self, target: Target) -> Target:
        """``target`` with its config's inputs answered (a target from no config as it is)."""
        if target.config is None:
            return target
        return Target(target.label, target.spec, self.answered({target.label: target.config})[target.label])

    def enabled(self) -> dict[str, ServerConfig]:
        """The enabled servers of the file read (empty when none was)."""
        return {name: c for name, c in (self._servers or {}).items() if not c.disabled}

    def lookup(self, word: str) -> Target | None:
        """The config server named ``word``; None when no config file names it."""
        found = self.servers(strict=False)
        if found is None or word not in found:
            return None
        config = found[word]
        if config.disabled:
            raise UsageError(f"server {word!r} is disabled in {self._path}")
        return Target(word, config=config)

    def unknown(self, word: str) -> UsageError:
        """The error for a name no server in the file has, listing those it has."""
        found = self._servers or {}
        names = [n if not c.disabled else f"{n} (disabled)" for n, c in found.items()]
        return UsageError(f"unknown server {word!r}; servers in {self._path}: {', '.join(names) or '(none)'}")


def _adhoc(word: str) -> Target:
    return Target(redact_url(word), spec=word)


def _plain(word: str) -> bool:
    """Neither a URL, nor a command line, nor a path, nor a program on PATH: only a config could name it."""
    return not (is_url(word) or any(c.isspace() for c in word) or "/" in word or shutil.which(word) is not None)


def _named(word: str, configs: Configs, command: str) -> Target | None:
    """``word`` as a server: a config name, else a URL or command; None when it can be neither."""
    target = configs.lookup(word)
    if target is not None:
        return target
    if not _plain(word):
        return _adhoc(word)
    if configs.path is not None:
        raise configs.unknown(word)
    return None


def _default(command: str, configs: Configs) -> Target | None:
    """The server when none is named; None (``tools`` only): every server of the config."""
    if configs.explicit is None and command != "tools":
        return Target("demo", spec=demo_command())
    servers = configs.servers(strict=True)  # tools with no SERVER needs the file: a bad one is an error
    enabled = configs.enabled()
    if servers is None or (configs.explicit is None and not enabled):
        return Target("demo", spec=demo_command())
    if command == "tools" and enabled:
        return None
    if len(enabled) == 1:
        name, config = next(iter(enabled.items()))
        return Target(name, config=config)
    if not enabled:
        raise UsageError(f"config {configs.path} has no enabled server")
    raise UsageError(f"{command}: name a server; servers in {configs.path}: {', '.join(enabled)}")


def _names_a_server(rest: Sequence[str], configs: Configs) -> bool:
    """For ``call``/``get-prompt``: is ``rest[0]`` a server (rather than the tool or prompt)?

    It is when a config names it; when it is a URL, a command line or a path
    (tool names hold no spaces or slashes); and always with a ``--config`` of
    several servers, where no default server could be meant.
    """
    first = rest[0]
    if configs.lookup(first) is not None or looks_like_server(first):
        return True
    return configs.explicit is not None and len(configs.enabled()) != 1


def pick_target(command: str, before: str | None, rest: list[str], configs: Configs) -> tuple[Target | None, list[str]]:
    """(the server, the remaining words) of a command; ConfigError for bad usage.

    ``before`` is the SERVER of the older order (``mcpcall SERVER COMMAND``).
    """
    if before is not None:
        target = configs.lookup(before)
        if target is None and _plain(before) and configs.explicit is not None:
            raise configs.unknown(before)
        check_words_after_server(command, rest)
        return (target or _adhoc(before)), rest
    if command in ONE_OPTIONAL_SERVER:
        if len(rest) > 1:
            raise UsageError(f"{command} takes one SERVER at most; got {' '.join(map(repr, rest))}")
        if rest:
            target = _named(rest[0], configs, command)
            if target is None:
                raise UsageError(f"{command} [SERVER]: {rest[0]!r} is not a server: no config names it, and it is "
                                 "neither a URL nor a command line (without a SERVER: see mcpcall --help)")
            return target, []
        return _default(command, configs), []
    if command == "read":
        if len(rest) not in (1, 2):
            raise UsageError(f"read takes [SERVER] URI; got {' '.join(map(repr, rest)) or 'nothing'}")
        if len(rest) == 2:
            return _named_or_command(rest[0], configs, command), rest[1:]
        if configs.lookup(rest[0]) is not None or any(c.isspace() for c in rest[0]):  # a server, not a URI
            check_words_after_server(command, [])
        return _default(command, configs), rest
    if command in NAME_FIRST:
        if rest and _names_a_server(rest, configs):
            target = _named_or_command(rest[0], configs, command)
            check_words_after_server(command, rest[1:])
            return target, rest[1:]
        if not rest:
            raise UsageError(f"{command} needs a {_WHAT[command][0]} name: mcpcall {command} [SERVER] {_WHAT[command][1]}")
        return _default(command, configs), rest
    raise UsageError(f"{command} takes no SERVER")


_WHAT = {"call": ("tool", "TOOL [JSON | key=value ...]"), "get-prompt": ("prompt", "NAME [JSON | key=value ...]"),
         "read": ("resource", "URI")}


def check_words_after_server(command: str, rest: Sequence[str]) -> None:
    """UsageError when the words after the SERVER lack what ``command`` needs (a tool or prompt name, a URI)."""
    if command not in _WHAT:
        return
    what, form = _WHAT[command]
    if not rest:
        needed = "a URI" if command == "read" else f"a {what} name"
        raise UsageError(f"{command} needs {needed} after the server: mcpcall {command} SERVER {form}")
    if command == "read" and len(rest) > 1:
        raise UsageError(f"read takes one URI after the server; got {' '.join(map(repr, rest))}")


def _named_or_command(word: str, configs: Configs, command: str) -> Target:
    """``word`` as a server; a bare word no config names is run as a program (its failure says so)."""
    return _named(word, configs, command) or _adhoc(word)
