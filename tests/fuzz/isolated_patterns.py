"""Regular expressions from a server's schemas, run by test_fuzz_schema.py in a child interpreter, one per engine.

Python's re backtracks in C with the GIL held: a pattern that escaped mcpcall.patterns' bounds would hang the
process where no timeout of pytest's could stop it. So these properties run in a child the parent gives a
deadline (``MCPCALL_FUZZ_ENGINE``: ``fallback`` hides google-re2, ``re2`` uses it).

Properties: ``search`` answers True, False or None and never raises; when it answers (it runs the pattern),
it takes about the time its bound allows, however the text is built to make it backtrack; compiling a
pattern (``compiles``, ``status``) takes a bounded time per character of the pattern; a whole schema's
patterns are compiled in a bounded time; and a check of any value raises only SchemaValidationError.
"""

from __future__ import annotations

import os
import time
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from mcpcall import patterns, schema
from mcpcall.errors import ProtocolError, SchemaValidationError
from tests.fuzz.profiles import fuzz
from tests.fuzz.strategies import json_values, materialize, regex_texts, regexes, schemas

ENGINE = os.environ.get("MCPCALL_FUZZ_ENGINE", "re2")
if ENGINE == "fallback":  # Python's re alone, as without google-re2
    patterns._re2_loaded = True
    patterns._re2 = None

#: What one search may take when mcpcall runs it: MAX_STEPS is about a tenth of a second; a loaded machine, slack.
SEARCH_SECONDS = 2.0
#: What compiling one pattern may take (an ordinary one of MAX_PATTERN_CHARS characters: a few milliseconds).
COMPILE_SECONDS = 0.5
#: What one schema's patterns may take to compile, and one check of a value (its budget is MAX_CHECK_STEPS).
SCHEMA_SECONDS = 5.0


def _timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, time.perf_counter() - started


def _longest(pattern: str) -> int:
    """The longest text mcpcall would run ``pattern`` on (its bound), found from cost()."""
    if patterns.cost(pattern, "") == 0:
        return 0
    low, high = 1, 1 << 22
    while low < high:
        middle = (low + high + 1) // 2
        if patterns.cost(pattern, "a" * middle) <= patterns.MAX_STEPS:
            low = middle
        else:
            high = middle - 1
    return low


def _adversarial(pattern: str, unit: str, length: int) -> str:
    """A text of ``length`` built from ``unit`` and the pattern's own characters, ending in what fails it."""
    letters = "".join(c for c in pattern if c.isalnum())[:4] or "a"
    body = (unit or letters) * (length // max(1, len(unit or letters)) + 1)
    return body[: max(0, length - 1)] + "!"


@fuzz(150)
@given(regexes, regex_texts)
@example("^(a+)+$", "a" * 34 + "!")
@example("(?:a|aa)" * 23 + "c", "a" * 46)
@example("(a|a)*b", "a" * 40)
@example("\\d*" + "1" * 900 + "x", "1" * 3000)
@example("", "\ud800")  # RE2 reads UTF-8, and a lone surrogate (a JSON escape may give one) has none
def test_a_search_answers_in_bounded_time(pattern: str, text: str) -> None:
    verdict, spent = _timed(patterns.search, pattern, text)
    assert verdict in (True, False, None)
    assert spent < SEARCH_SECONDS, f"{pattern!r} on {len(text)} characters: {spent:.2f} s"
    longest = _longest(pattern)
    if longest:
        hard = _adversarial(pattern, text[:3], min(longest, 200_000))
        verdict, spent = _timed(patterns.search, pattern, hard)
        assert verdict is not None or len(hard) > longest
        assert spent < SEARCH_SECONDS, f"{pattern!r} on {len(hard)} characters built to backtrack: {spent:.2f} s"


@fuzz(150)
@given(regexes)
@example("(?i)" + "[\x00-\uffff]" * 199)  # each set's range walked code point by code point: a second to compile
@example("(?=x)(?i)" + "[\x00-\uffff]" * 198)  # RE2 refuses the lookahead: re compiled it to check the schema
def test_compiling_a_pattern_takes_a_bounded_time(pattern: str) -> None:
    _, spent = _timed(lambda: (patterns.compiles(pattern), patterns.status(pattern)))
    assert spent < COMPILE_SECONDS, f"{pattern[:60]!r} ({len(pattern)} characters): {spent:.2f} s to compile"


@fuzz(20)
@given(st.sampled_from(["[\x00-\uffff]", "(?i)[\u0100-\uffff]", "[\x00-\U0010ffff]", "[a-z\u4e00-\u9fff]", "\\d{2,5}"]),
       st.sampled_from(["", "(?=x)", "(?i)"]))
def test_a_schema_of_many_patterns_compiles_in_bounded_time(unit: str, head: str) -> None:
    # Patterns totalling MAX_PATTERN_TOTAL characters: 8 of ~1000 characters of large ranges took 6 s (RE2 too, when
    # it refused them), 64 of them most of a minute, on the thread listing the tools.
    per = max(1, (patterns.MAX_PATTERN_CHARS - 20) // len(unit))
    keys = {f"{head}(?:{i})?" + unit * per: {} for i in range(schema.MAX_PATTERN_TOTAL // patterns.MAX_PATTERN_CHARS)}
    _, spent = _timed(schema.output_check, {"type": "object", "patternProperties": keys}, tool="t", server="s")
    assert spent < SCHEMA_SECONDS, f"{len(keys)} patterns of {unit!r}: {spent:.2f} s to compile the schema"


@fuzz(120)
@given(schemas, st.one_of(json_values, st.dictionaries(st.sampled_from(["a", "b", "x", "self"]), json_values)))
@example({"$schema": [1], "type": "object"}, {})  # jsonschema's validator_for: TypeError, unhashable list
@example({"$schema": 0, "type": "object"}, {})  # and AttributeError for a number
@example({"$schema": "http://json-schema.org/draft-03/schema#", "items": 1}, {})  # best_match's ranking: TypeError
def test_a_check_of_any_value_raises_only_schema_validation_errors(value_schema: Any, value: Any) -> None:
    value_schema, value = materialize(value_schema), materialize(value)
    for make in (schema.output_check, schema.input_check):  # results, and arguments (validate_arguments)
        check, spent = _timed(make, value_schema, tool="t", server="s")
        assert spent < SCHEMA_SECONDS
        if check is None:
            continue
        started = time.perf_counter()
        try:
            check(value)
        except SchemaValidationError as exc:
            assert len(str(exc)) < 2_000
        except ProtocolError as exc:  # a $ref outside the schema (never fetched)
            assert "cannot be applied" in str(exc)
        assert time.perf_counter() - started < SCHEMA_SECONDS
