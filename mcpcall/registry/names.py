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
- in the (astronomically unlikely) event that two names still clash, their
  suffixes grow until they differ (and, past 64 hex digits, are numbered).

Without ``keep`` the names depend only on the set of pairs and the options,
never on their order. A name an LLM has already seen must not change while the
conversation goes on, though: when a server adds ``search_issues`` next to
``search.issues``, the older tool must keep ``mcp__github__search_issues``. So
``build_names(..., keep=previous.by_pair)`` gives every pair of the previous
table that is still present the name it had (when that name is still one these
options could give the pair), and computes names only for the other pairs; a
newcomer whose name would be a kept name, or shared with another pair, gets the
hash suffix. With ``keep`` the names therefore depend on the history (which
pairs came first), still never on the order of ``pairs``.

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
_HEX = re.compile(r"[0-9a-f]+")
_HASH_LENGTHS = (8, 16, 32, 64)
_MIN_LENGTH = 10  # one character, "_" and 8 hex digits

Pair = tuple[str, str]


def sanitize(text: str) -> str:
    """``text`` with every character outside ``[A-Za-z0-9_-]`` (non-ASCII too) replaced by ``_``; ``""`` → ``"_"``."""
    return _OUTSIDE.sub("_", text) or "_"


@record
class Collision:
    """Different (server, tool) pairs whose base names are the same ``name``.

    None of them got ``name``, except ``kept_by``: a pair that had it in the
    previous table (``keep`` of :func:`build_names`) and keeps it.
    """

    name: str
    pairs: tuple[Pair, ...]
    kept_by: Pair | None = None


@record
class Renamed:
    """A pair whose exposed ``name`` is not its plain ``base`` name, and why.

    ``"kept"``: the hashed name a previous table gave it (``keep``), for a
    collision that has since gone away.
    """

    server: str
    tool: str
    base: str
    name: str
    reason: Literal["too long", "collision", "kept"]


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
    """Every pair's exposed name: pass it as ``keep`` to the next :func:`build_names` to keep the names stable."""
    by_name: Mapping[str, Pair] = field(default_factory=dict, repr=False, compare=False)
    """Every exposed name's pair (what :meth:`lookup` reads)."""

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
    keep: Mapping[Pair, str] | None = None,
) -> NameTable:
    """Exposed names for (server, tool) pairs given with their exact MCP names.

    A pair given twice counts once. ``keep`` maps pairs to the names a previous
    table gave them (its :attr:`NameTable.by_pair`): a pair of ``pairs`` found
    there keeps that name when it is still one these options could give it
    (its base name or its hash-suffixed name; a name claimed by two pairs of
    ``keep`` is kept by neither); every other pair is named as without ``keep``,
    except that a kept name is never given again. Pairs of ``keep`` that are not
    in ``pairs`` are ignored.

    Raises :class:`~mcpcall.errors.ConfigError` for a prefix or separator
    outside ``[A-Za-z0-9_-]``, or a ``max_length`` too small to hold a hash
    suffix (under 10).
    """
    _check_options(prefix, separator, max_length)
    unique: dict[Pair, None] = {}
    for server, tool in pairs:
        unique[(str(server), str(tool))] = None
    order = list(unique)

    head = prefix + separator if prefix else ""
    base = {pair: head + sanitize(pair[0]) + separator + sanitize(pair[1]) for pair in order}
    digest = {pair: _digest(pair) for pair in order}
    sharing: dict[str, list[Pair]] = {}
    for pair in order:
        sharing.setdefault(base[pair], []).append(pair)
    shared = {name: group for name, group in sharing.items() if len(group) > 1}

    kept = _kept(order, keep, base, digest, max_length)
    reserved = set(kept.values())
    fresh = [pair for pair in order if pair not in kept]

    # level 0 = plain base name; level i >= 1 = hash suffix of _HASH_LENGTHS[i - 1] digits
    level = {pair: 1 if base[pair] in shared or base[pair] in reserved or len(base[pair]) > max_length else 0
             for pair in fresh}  # fmt: skip

    def name(pair: Pair) -> str:
        if level[pair] == 0:
            return base[pair]
        return _hashed(base[pair], digest[pair], _HASH_LENGTHS[level[pair] - 1], max_length)

    names = {**kept, **_resolve(fresh, level, name, reserved)}

    def reason(pair: Pair) -> Literal["too long", "collision", "kept"]:
        if base[pair] in shared:
            return "collision"
        return "too long" if len(base[pair]) > max_length else "kept"

    renamed = tuple(
        Renamed(pair[0], pair[1], base[pair], names[pair], reason(pair)) for pair in order if names[pair] != base[pair]
    )
    collisions = tuple(
        Collision(shared_name, tuple(sorted(group)), next((p for p in group if names[p] == shared_name), None))
        for shared_name, group in sorted(shared.items())
    )
    return NameTable(
        names=tuple(names[pair] for pair in order),
        collisions=collisions,
        renamed=renamed,
        by_pair={pair: names[pair] for pair in order},
        by_name={names[pair]: pair for pair in order},
    )


def _kept(
    order: list[Pair], keep: Mapping[Pair, str] | None, base: Mapping[Pair, str], digest: Mapping[Pair, str], max_length: int
) -> dict[Pair, str]:
    """The pairs of ``order`` that keep their name from ``keep``, with that name."""
    if not keep:
        return {}
    claims: dict[str, list[Pair]] = {}
    for pair in order:
        name = keep.get(pair)
        if isinstance(name, str) and _could_be(name, base[pair], digest[pair], max_length):
            claims.setdefault(name, []).append(pair)
    return {group[0]: name for name, group in claims.items() if len(group) == 1}


def _could_be(name: str, base: str, digest: str, max_length: int) -> bool:
    """Whether ``name`` is one :func:`build_names` could give a pair of this ``base`` and ``digest`` with these options."""
    if name == base:
        return len(name) <= max_length
    *lengths, longest = (min(digits, len(digest), max_length - 2) for digits in _HASH_LENGTHS)
    if any(name == base[: max_length - 1 - digits] + "_" + digest[:digits] for digits in lengths):
        return True
    # the longest suffix, possibly numbered at its end (identical digests): same stem, lowercase hex after it
    stem = base[: max_length - 1 - longest] + "_"
    tail = name[len(stem) :]
    return name.startswith(stem) and len(tail) == longest and _HEX.fullmatch(tail) is not None


def _resolve(order: list[Pair], level: dict[Pair, int], name: Callable[[Pair], str], reserved: set[str]) -> dict[Pair, str]:
    """Raise the suffix level of every pair whose name is taken twice, or ``reserved``, until all names differ."""
    while True:
        taken: dict[str, list[Pair]] = {}
        for pair in order:
            taken.setdefault(name(pair), []).append(pair)
        clashes = [group for exposed, group in taken.items() if len(group) > 1 or exposed in reserved]
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
            clashing = {pair for group in clashes for pair in group}
            used = reserved | {result[pair] for pair in order if pair not in clashing}
            for group in clashes:
                index = 0
                for pair in sorted(group):
                    while True:
                        text = f"{index:x}"
                        index += 1
                        candidate = result[pair][: -len(text)] + text
                        if candidate not in used:
                            break
                    result[pair] = candidate
                    used.add(candidate)
            return result
