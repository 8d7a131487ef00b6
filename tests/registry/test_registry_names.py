"""Exposed tool names (mcpcall.registry.names): provider-valid, unique, exact both ways, order-free."""

from __future__ import annotations

import hashlib
import json
import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpcall.errors import ConfigError
from mcpcall.registry import NAME_PATTERN, Collision, build_names, sanitize
from mcpcall.registry import names as names_module

QUICK = settings(max_examples=150, deadline=None)

# Names an MCP server may use: ASCII punctuation, separators, non-ASCII, surrogates, empty.
mcp_names = st.one_of(
    st.text(max_size=12),
    st.text(alphabet="ab_.-/: ", max_size=8),
    st.lists(st.sampled_from(["a", "_", "__", ".", "é", "\U0001f600", "-", "\x00"]), max_size=6).map("".join),
    st.text(alphabet="xyz", min_size=50, max_size=90),
)
pair_lists = st.lists(st.tuples(mcp_names, mcp_names), max_size=12)


def test_sanitize() -> None:
    assert sanitize("create_issue-2") == "create_issue-2"
    assert sanitize("a.b c/d:é\U0001f600") == "a_b_c_d___"
    assert sanitize("") == "_"
    assert sanitize("\x00") == "_"


def test_plain_names() -> None:
    table = build_names([("github", "create_issue"), ("fs", "read_file")])
    assert table.names == ("mcp__github__create_issue", "mcp__fs__read_file")
    assert table.name_of("fs", "read_file") == "mcp__fs__read_file"
    assert table.lookup("mcp__github__create_issue") == ("github", "create_issue")
    assert table.lookup("mcp__nope__x") is None
    assert table.collisions == () and table.renamed == ()
    assert len(table) == 2 and "mcp__fs__read_file" in table


def test_options() -> None:
    assert build_names([("s", "t")], prefix="").names == ("s__t",)
    assert build_names([("s", "t")], prefix="x-y", separator="-").names == ("x-y-s-t",)
    assert build_names([("my server", "do.it")]).names == ("mcp__my_server__do_it",)


@pytest.mark.parametrize(
    "options",
    [{"prefix": "mcp."}, {"prefix": "é"}, {"separator": ""}, {"separator": "::"}, {"max_length": 9}, {"max_length": True}],
)
def test_bad_options(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        build_names([("s", "t")], **options)


def test_unknown_pair_is_a_key_error() -> None:
    with pytest.raises(KeyError, match="'x'"):
        build_names([("s", "t")]).name_of("s", "x")


def digest8(server: str, tool: str) -> str:
    return hashlib.sha256(json.dumps([server, tool]).encode("ascii")).hexdigest()[:8]


def test_collision_every_member_gets_a_suffix() -> None:
    table = build_names([("gh", "a.b"), ("gh", "a_b"), ("gh", "c")])
    assert table.name_of("gh", "a.b") == "mcp__gh__a_b_" + digest8("gh", "a.b")
    assert table.name_of("gh", "a_b") == "mcp__gh__a_b_" + digest8("gh", "a_b")
    assert table.name_of("gh", "c") == "mcp__gh__c"
    assert table.collisions == (Collision("mcp__gh__a_b", (("gh", "a.b"), ("gh", "a_b"))),)
    assert {(r.server, r.tool, r.reason) for r in table.renamed} == {("gh", "a.b", "collision"), ("gh", "a_b", "collision")}


def test_separator_inside_names_collides() -> None:
    table = build_names([("a__b", "c"), ("a", "b__c")])
    assert len(table.collisions) == 1 and table.collisions[0].name == "mcp__a__b__c"
    assert table.lookup(table.name_of("a__b", "c")) == ("a__b", "c")
    assert table.lookup(table.name_of("a", "b__c")) == ("a", "b__c")


def test_too_long_is_cut_with_a_stable_suffix() -> None:
    server, tool = "s" * 40, "t" * 40
    table = build_names([(server, tool)])
    name = table.name_of(server, tool)
    assert len(name) == 64 and NAME_PATTERN.match(name)
    assert name.endswith("_" + digest8(server, tool))
    assert name.startswith("mcp__" + "s" * 40 + "__t")
    assert [(r.reason, r.base) for r in table.renamed] == [("too long", f"mcp__{server}__{tool}")]
    assert build_names([(server, tool)], max_length=30).name_of(server, tool).endswith(digest8(server, tool))
    assert len(build_names([(server, tool)], max_length=30).name_of(server, tool)) == 30


def test_name_equal_to_another_pairs_hashed_name() -> None:
    # a tool literally named like another pair's hashed name: neither keeps it, both stay unique
    hashed = "a_b_" + digest8("gh", "a.b")
    pairs = [("gh", "a.b"), ("gh", "a_b"), ("gh", hashed)]
    table = build_names(pairs)
    assert len(set(table.names)) == 3
    assert all(table.lookup(table.name_of(*p)) == p for p in pairs)
    assert table.name_of("gh", hashed) != "mcp__gh__" + hashed


def test_forced_hash_clash_gets_longer_suffixes(monkeypatch: pytest.MonkeyPatch) -> None:
    # make every pair's first 8 hex digits the same: the suffixes must grow until the names differ
    def fake(pair: tuple[str, str]) -> str:
        real = hashlib.sha256(json.dumps(list(pair)).encode("ascii")).hexdigest()
        return "0" * 8 + real[8:]

    monkeypatch.setattr(names_module, "_digest", fake)
    table = build_names([("gh", "a.b"), ("gh", "a_b")])
    assert len(set(table.names)) == 2
    assert all(len(n) == len("mcp__gh__a_b_") + 16 for n in table.names)


def test_identical_digests_still_unique(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(names_module, "_digest", lambda pair: "f" * 64)
    pairs = [("gh", "a.b"), ("gh", "a_b"), ("gh", "a:b")]
    table = build_names(pairs)
    assert len(set(table.names)) == 3
    assert all(table.lookup(table.name_of(*p)) == p for p in pairs)
    assert all(len(n) <= 64 for n in table.names)


def test_duplicate_pairs_count_once() -> None:
    table = build_names([("s", "t"), ("s", "t")])
    assert table.names == ("mcp__s__t",) and table.collisions == ()


@QUICK
@given(pair_lists, st.sampled_from([("mcp", "__", 64), ("", "__", 64), ("x", "-", 20), ("mcp", "__", 10)]))
def test_properties(pairs: list[tuple[str, str]], options: tuple[str, str, int]) -> None:
    prefix, separator, max_length = options
    table = build_names(pairs, prefix=prefix, separator=separator, max_length=max_length)
    unique = list(dict.fromkeys(pairs))
    assert len(table.names) == len(unique)
    assert len(set(table.names)) == len(table.names)
    for pair in unique:
        name = table.name_of(*pair)
        assert NAME_PATTERN.match(name) and re.fullmatch(r"[A-Za-z0-9_-]+", name)
        assert len(name) <= max_length
        assert table.lookup(name) == pair
    # order never matters
    shuffled = unique[:]
    random.Random(len(unique)).shuffle(shuffled)
    again = build_names(shuffled, prefix=prefix, separator=separator, max_length=max_length)
    assert all(again.name_of(*pair) == table.name_of(*pair) for pair in unique)
    assert again.collisions == table.collisions
    assert sorted(again.renamed, key=repr) == sorted(table.renamed, key=repr)


@QUICK
@given(st.tuples(mcp_names, mcp_names))
def test_a_lone_pair_gets_its_base_name_when_it_fits(pair: tuple[str, str]) -> None:
    base = "mcp__" + sanitize(pair[0]) + "__" + sanitize(pair[1])
    name = build_names([pair]).name_of(*pair)
    assert name == base if len(base) <= 64 else name.endswith("_" + digest8(*pair))


# ---------------------------------------------------------------- stable names (keep)


def test_kept_name_survives_a_new_colliding_tool() -> None:
    first = build_names([("github", "search.issues")])
    old = first.name_of("github", "search.issues")
    assert old == "mcp__github__search_issues"
    second = build_names([("github", "search.issues"), ("github", "search_issues")], keep=first.by_pair)
    assert second.name_of("github", "search.issues") == old
    assert second.lookup(old) == ("github", "search.issues")
    assert second.name_of("github", "search_issues") == "mcp__github__search_issues_" + digest8("github", "search_issues")
    assert second.collisions == (
        Collision(old, (("github", "search.issues"), ("github", "search_issues")), kept_by=("github", "search.issues")),
    )
    assert [(r.tool, r.reason) for r in second.renamed] == [("search_issues", "collision")]
    # without keep: order-free, neither gets the plain name
    plain = build_names([("github", "search_issues"), ("github", "search.issues")])
    assert old not in plain and plain.collisions[0].kept_by is None


def test_kept_hashed_name_outlives_its_collision() -> None:
    first = build_names([("gh", "a.b"), ("gh", "a_b")])
    second = build_names([("gh", "a.b")], keep=first.by_pair)
    assert second.names == (first.name_of("gh", "a.b"),)
    assert [(r.reason, r.base) for r in second.renamed] == [("kept", "mcp__gh__a_b")]
    assert second.collisions == ()


def test_newcomer_named_like_a_kept_hashed_name() -> None:
    first = build_names([("gh", "a.b"), ("gh", "a_b")])
    taken = first.name_of("gh", "a.b")
    newcomer = ("gh", taken.removeprefix("mcp__gh__"))  # its base name is exactly the kept name
    second = build_names([("gh", "a.b"), newcomer], keep=first.by_pair)
    assert second.name_of("gh", "a.b") == taken
    assert second.name_of(*newcomer) == taken + "_" + digest8(*newcomer)
    assert second.lookup(taken) == ("gh", "a.b")


def test_keep_is_ignored_where_it_does_not_fit() -> None:
    pairs = [("s", "t"), ("s", "u")]
    # other options: the old names are not ones these options give
    assert build_names(pairs, prefix="x", keep=build_names(pairs).by_pair).names == ("x__s__t", "x__s__u")
    # a name that belongs to another pair, garbage, two pairs claiming one name, pairs no longer present
    forged: dict[tuple[str, str], Any] = {("s", "t"): "mcp__s__u", ("s", "u"): 5, ("gone", "x"): "mcp__s__t"}
    assert build_names(pairs, keep=forged).names == ("mcp__s__t", "mcp__s__u")
    twice = {("s", "t"): "mcp__s__t", ("s", "u"): "mcp__s__t"}
    table = build_names(pairs, keep=twice)
    assert table.names == ("mcp__s__t", "mcp__s__u")


def test_kept_numbered_names_stay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(names_module, "_digest", lambda pair: "f" * 64)
    first = build_names([("gh", "a.b"), ("gh", "a_b")])
    second = build_names([("gh", "a_b"), ("gh", "a:b"), ("gh", "a.b")], keep=first.by_pair)
    assert second.name_of("gh", "a.b") == first.name_of("gh", "a.b")
    assert second.name_of("gh", "a_b") == first.name_of("gh", "a_b")
    assert len(set(second.names)) == 3 and all(second.lookup(second.name_of(*p)) == p for p in second.by_pair)


OPTIONS = st.sampled_from([("mcp", "__", 64), ("", "__", 64), ("x", "-", 20), ("mcp", "__", 10)])


def check_table(table: object, pairs: list[tuple[str, str]], max_length: int) -> None:
    from mcpcall.registry import NameTable

    assert isinstance(table, NameTable)
    unique = list(dict.fromkeys(pairs))
    assert len(table.names) == len(unique) == len(set(table.names))
    for pair in unique:
        name = table.name_of(*pair)
        assert NAME_PATTERN.match(name) and len(name) <= max_length
        assert table.lookup(name) == pair
    assert dict(table.by_pair) == {pair: table.name_of(*pair) for pair in unique}


@QUICK
@given(pair_lists, pair_lists, pair_lists, OPTIONS, st.randoms(use_true_random=False))
def test_keep_properties(
    first: list[tuple[str, str]], later: list[tuple[str, str]], third: list[tuple[str, str]],
    options: tuple[str, str, int], rnd: random.Random,
) -> None:  # fmt: skip
    prefix, separator, max_length = options
    kwargs = {"prefix": prefix, "separator": separator, "max_length": max_length}
    old = build_names(first, **kwargs)  # type: ignore[arg-type]
    # the next list: some old pairs (any of them may be gone) and new ones
    now = [pair for pair in first if rnd.random() < 0.7] + later
    rnd.shuffle(now)
    new = build_names(now, keep=old.by_pair, **kwargs)  # type: ignore[arg-type]
    check_table(new, now, max_length)
    for pair in set(now) & set(old.by_pair):
        assert new.name_of(*pair) == old.name_of(*pair)
    # order of the pairs still never matters, given the same keep
    again = build_names(list(reversed(now)), keep=old.by_pair, **kwargs)  # type: ignore[arg-type]
    assert dict(again.by_pair) == dict(new.by_pair)
    # and a third generation keeps what the second had
    last_pairs = [pair for pair in now if rnd.random() < 0.7] + third
    last = build_names(last_pairs, keep=new.by_pair, **kwargs)  # type: ignore[arg-type]
    check_table(last, last_pairs, max_length)
    for pair in set(last_pairs) & set(now):
        assert last.name_of(*pair) == new.name_of(*pair)
