"""VS Code's ``${input:ID}`` in a config file: ``--input ID=VALUE``, else asked at a terminal.

A config file is read twice. First with every input left as it is written
(:data:`UNANSWERED`: ``${input:ID}`` stays in the values), which is all that
choosing a server and listing the servers (``mcpcall servers``) need: no
secret is asked for to show names. Then, for the server(s) a command talks to,
again with the inputs those servers use answered (:func:`answer_inputs`):
from ``--input ID=VALUE`` (repeatable), else asked on stderr when stdin is a
terminal (an input with ``"password": true`` without echo, through
:mod:`getpass`), else its ``default`` in the file, else the reading fails with
a message that names the input and the option. Each input is asked for once per command.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from ..config import ServerConfig, load_config
from ..config.reading import _read_json
from ..errors import ConfigError
from .output import printable
from .progress import screen

__all__ = ["UNANSWERED", "Inputs", "placeholder"]


def placeholder(key: str) -> str:
    """What an input reads as until it is answered: as written in the file."""
    return "${input:" + key + "}"


class _Unanswered(Mapping[str, str]):
    """Every input, answered with itself (``${input:ID}``)."""

    def __getitem__(self, key: str) -> str:
        return placeholder(key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __bool__(self) -> bool:  # load_config(inputs=...) takes a falsy mapping for none
        return True


UNANSWERED: Mapping[str, str] = _Unanswered()


def _uses(value: Any, found: set[str]) -> None:
    """The inputs a value read with :data:`UNANSWERED` holds (``${input:ID}`` in its strings)."""
    if isinstance(value, str):
        start = value.find("${input:")
        while start >= 0:
            end = value.find("}", start)
            if end < 0:
                return
            found.add(value[start + len("${input:"):end])
            start = value.find("${input:", end)
    elif isinstance(value, Mapping):
        for item in value.values():
            _uses(item, found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _uses(item, found)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            _uses(getattr(value, field.name), found)


class _Answers(Mapping[str, str]):
    """The inputs of the servers in use answered (given, or asked); the others left as written."""

    def __init__(self, inputs: Inputs, needed: set[str]) -> None:
        self._inputs = inputs
        self._needed = needed

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        return key in self._inputs.given or key not in self._needed or self._inputs.can_answer(key)

    def __getitem__(self, key: str) -> str:
        if key in self._inputs.given:
            return self._inputs.given[key]
        if key not in self._needed:
            return placeholder(key)
        return self._inputs.ask(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._inputs.given)

    def __len__(self) -> int:
        return len(self._inputs.given)

    def __bool__(self) -> bool:
        return True


class Inputs:
    """The answers to a config file's inputs: ``--input`` values, then what the person at the terminal types."""

    def __init__(self, given: Mapping[str, str], stdin: Any = None) -> None:
        self.given: dict[str, str] = dict(given)
        self._stdin = sys.stdin if stdin is None else stdin
        self._described: dict[str, Mapping[str, Any]] = {}

    @property
    def interactive(self) -> bool:
        """Whether inputs not given are asked for (stdin is a terminal)."""
        try:
            return bool(self._stdin.isatty())
        except (AttributeError, ValueError, OSError):
            return False

    def can_answer(self, key: str) -> bool:
        """Whether input ``key`` gets a value when asked: at a terminal, or from the file's ``default``."""
        return self.interactive or isinstance(self._described.get(key, {}).get("default"), str)

    def answer(self, path: str, configs: Mapping[str, ServerConfig]) -> dict[str, ServerConfig]:
        """``configs`` (read from ``path`` with :data:`UNANSWERED`) read again, their inputs answered."""
        needed: set[str] = set()
        for config in configs.values():
            _uses(config.spec, needed)
        if not needed:
            return dict(configs)
        self._described = _definitions(path)
        again = load_config(path, inputs=_Answers(self, needed), include_disabled=True)
        return {name: again[name] for name in configs}

    def ask(self, key: str) -> str:
        """The value typed for input ``key`` (once per command); ConfigError on end of input."""
        about = self._described.get(key, {})
        description = about.get("description")
        secret = about.get("password") is True
        default = str(about["default"]) if isinstance(about.get("default"), str) else None
        options = [str(o.get("value", o) if isinstance(o, Mapping) else o) for o in about.get("options", [])] \
            if isinstance(about.get("options"), list) else []
        if not self.interactive and default is not None:
            return default  # no one to ask: the file's default, as VS Code would offer it
        prompt = f"mcpcall: input {printable(key)!r}"
        if isinstance(description, str) and description.strip():
            prompt += f" ({printable(description.strip()[:200])})"
        if options:
            prompt += f", one of {printable(', '.join(options))}"
        if default is not None and not secret:
            prompt += f" [{printable(default)}]"
        prompt += ": "
        with screen():
            try:
                if secret:
                    value = getpass.getpass(prompt, stream=sys.stderr)
                else:
                    sys.stderr.write(prompt)
                    sys.stderr.flush()
                    line = self._stdin.readline()
                    if not line:
                        raise EOFError
                    value = line.rstrip("\r\n")
            except EOFError:
                sys.stderr.write("\n")
                raise ConfigError(f"no value for input {key!r}: give --input {key}=VALUE") from None
        if not value and default is not None:
            value = default
        self.given[key] = value
        return value


def _definitions(path: str) -> dict[str, Mapping[str, Any]]:
    """The file's ``inputs`` list by id (VS Code: ``description``, ``password``, ``default``, ``options``)."""
    try:
        data = _read_json(os.path.abspath(os.path.expanduser(path)))
    except ConfigError:
        return {}
    items = data.get("inputs") if isinstance(data, Mapping) else None
    return {i["id"]: i for i in items if isinstance(i, Mapping) and isinstance(i.get("id"), str)} \
        if isinstance(items, list) else {}
