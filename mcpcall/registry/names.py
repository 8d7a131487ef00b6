"""The names an LLM sees for MCP tools: ``mcp__<server>__<tool>``, valid for every provider.

Provider rules for a function/tool name (the common set is what this module emits):

==========  =======================================================
OpenAI      ``^[a-zA-Z0-9_-]{1,64}$`` (Chat Completions and Responses)
Anthropic   ``^[a-zA-Z0-9_-]{1,64}$``
Gemini      letters, digits, ``_ - . :``, at most 64; must start with a letter or ``_``
==========  =======================================================

:func:`build_names` maps every exact (server, tool) pair to one name made of
``[A-Za-z0-9_-]`` only, at most ``max_length`` characters, and back again:

- the base name is ``prefix + sep + sanitize(server) + sep + sanitize(tool)``
  (just ``sanitize(server) + sep + sanitize(tool)`` when ``prefix`` is empty);
- a base name longer than ``max_length`` is cut, and a base name shared by
  different pairs (tools ``a.b`` and ``a_b``; a separator inside a name) is
  given to none of them: each of those names gets a stable hash suffix,
  ``_`` + hex digits of SHA-256 over the pair;
- the names depend only on the set of pairs and the options, never on their
  order; in the (astronomically unlikely) event that two names still clash,
  their suffixes grow until they differ.

With the default prefix ``mcp`` every name starts with a letter, as Gemini wants;
with ``prefix=""`` a server name that starts with a digit gives a name Gemini refuses.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Callable, Literal

from ..errors import ConfigError
from ..types._record import record

__all__ = ["NAME_PATTERN", "Collision", "NameTable", "Renamed", "build_names", "sanitize"]

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""The tool-name rule OpenAI and Anthropic share (Gemini accepts a superset of it)."""

_OUTSIDE = re.compile(r"[^A-Za-z0-9_-]")
_ALLOWED = re.compile(r"[A-Za-z0-9_-]*")
_HASH_LENGTHS = (8, 16, 32, 64)
_MIN_LENGTH = 10  # one character, "_" and 8 hex digits

Pair = tuple[str, str]


def sanitize(text: str) -> str:
    """``text`` with every character outside ``[A-Za-z0-9_-]`` (non-ASCII too) replaced by ``_``; ``""`` → ``"_"``."""
    return _OUTSIDE.sub("_", text) or "_"


@record
class Collision:
    """Different (server, tool) pairs whose base names are the same ``name``; none of them got it."""

    name: str
    pairs: tuple[Pair, ...]


@record
class Renamed:
    """A pair whose exposed ``name`` is not its plain ``base`` name, and why."""

    server: str
    tool: str
    base: str
    name: str
    reason: Literal["too long", "collision"]


@record
class NameTable:
    """Exposed names for (server, tool) pairs, both ways. Built by :func:`build_names`."""

    names: tuple[str, ...]
    """Every exposed name, in the order the pairs were first given."""
    collisions: tuple[Collision, ...] = ()
    """Base names shared by different pairs (each of those pairs got a hash suffix)."""
    renamed: tuple[Renamed, ...] = ()
    """Pairs whose exposed name is not the plain base name."""
    by_pair: Mapping[Pair, str] = field(default_factory=dict, repr=False, compare=False)
    by_name: Mapping[str, Pair] = field(default_factory=dict, repr=False, compare=False)

    def name_of(self, server: str, tool: str) -> str:
        """The exposed name of ``tool`` of ``server``; ``KeyError`` when the pair is not in the table."""
        try:
            return self.by_pair[(server, tool)]
        except KeyError:
            raise KeyError(f"no exposed name for tool {tool!r} of server {server!r}") from None

    def lookup(self, name: str) -> Pair | None:
        """The exact (server, tool) pair behind an exposed ``name``, or None when no pair has it."""
        return self.by_name.get(name)

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self.by_name


def _digest(pair: Pair) -> str:
    # json.dumps of the pair is unambiguous (no separator can be forged) and never fails to encode
    return hashlib.sha256(json.dumps(list(pair)).encode("ascii")).hexdigest()


def _hashed(base: str, digest: str, digits: int, max_length: int) -> str:
    digits = min(digits, len(digest), max_length - 2)
    return base[: max_length - 1 - digits] + "_" + digest[:digits]


def _check_options(prefix: str, separator: str, max_length: int) -> None:
    if not isinstance(prefix, str) or not _ALLOWED.fullmatch(prefix):
        raise ConfigError(f"the name prefix {prefix!r} may hold only letters, digits, '_' and '-'")
    if not isinstance(separator, str) or not separator or not _ALLOWED.fullmatch(separator):
        raise ConfigError(f"the name separator {separator!r} must be non-empty and hold only letters, digits, '_' and '-'")
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < _MIN_LENGTH:
        raise ConfigError(f"max_length must be an integer of at least {_MIN_LENGTH}, not {max_length!r}")


def build_names(
    pairs: Iterable[Pair],
    *,
    prefix: str = "mcp",
    separator: str = "__",
    max_length: int = 64,
) -> NameTable:
    """Exposed names for (server, tool) pairs given with their exact MCP names.

    A pair given twice counts once. Raises :class:`~mcpcall.errors.ConfigError`
    for a prefix or separator outside ``[A-Za-z0-9_-]``, or a ``max_length``
    too small to hold a hash suffix (under 10).
    """
    _check_options(prefix, separator, max_length)
    unique: dict[Pair, None] = {}
    for server, tool in pairs:
        unique[(str(server), str(tool))] = None
    order = list(unique)

    head = prefix + separator if prefix else ""
    base = {pair: head + sanitize(pair[0]) + separator + sanitize(pair[1]) for pair in order}
    sharing: dict[str, list[Pair]] = {}
    for pair in order:
        sharing.setdefault(base[pair], []).append(pair)
    shared = {name: group for name, group in sharing.items() if len(group) > 1}

    # level 0 = plain base name; level i >= 1 = hash suffix of _HASH_LENGTHS[i - 1] digits
    level = {pair: 1 if base[pair] in shared or len(base[pair]) > max_length else 0 for pair in order}
    digest = {pair: _digest(pair) for pair in order}

    def name(pair: Pair) -> str:
        if level[pair] == 0:
            return base[pair]
        return _hashed(base[pair], digest[pair], _HASH_LENGTHS[level[pair] - 1], max_length)

    names = _resolve(order, level, name)

    renamed = tuple(
        Renamed(pair[0], pair[1], base[pair], names[pair], "collision" if base[pair] in shared else "too long")
        for pair in order
        if names[pair] != base[pair]
    )
    collisions = tuple(Collision(shared_name, tuple(sorted(group))) for shared_name, group in sorted(shared.items()))
    return NameTable(
        names=tuple(names[pair] for pair in order),
        collisions=collisions,
        renamed=renamed,
        by_pair=dict(names),
        by_name={exposed: pair for pair, exposed in names.items()},
    )


def _resolve(order: list[Pair], level: dict[Pair, int], name: Callable[[Pair], str]) -> dict[Pair, str]:
    """Raise the suffix level of every pair whose name is taken twice until all names differ."""
    while True:
        taken: dict[str, list[Pair]] = {}
        for pair in order:
            taken.setdefault(name(pair), []).append(pair)
        clashes = [group for group in taken.values() if len(group) > 1]
        if not clashes:
            return {pair: name(pair) for pair in order}
        stuck = True
        for group in clashes:
            for pair in group:
                if level[pair] < len(_HASH_LENGTHS):
                    level[pair] += 1
                    stuck = False
        if stuck:  # even the longest suffixes clash: number them, ordered by pair (not by input order)
            result = {pair: name(pair) for pair in order}
            for group in clashes:
                for index, pair in enumerate(sorted(group)):
                    text = f"{index:x}"
                    result[pair] = result[pair][: -len(text)] + text
            return result
