"""What a server puts in a schema is checked at a bounded cost: regexes (RE2 or a bounded fallback), uniqueItems.

The costly cases run in a subprocess with a timeout, so that a version that
backtracks for minutes (holding the GIL) fails the test instead of hanging the run.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterator

import pytest

import mcpcall
from mcpcall import patterns, schema
from mcpcall.errors import SchemaValidationError

HAVE_RE2 = importlib.util.find_spec("re2") is not None
ENGINES = ["fallback", pytest.param("re2", marks=pytest.mark.skipif(not HAVE_RE2, reason="google-re2 not installed"))]
EVIL = "^(a+)+$"
EVIL_TEXT = "a" * 34 + "!"  # Python's re: minutes of backtracking inside C, the GIL held


def run_isolated(code: str, engine: str, timeout: float = 30.0) -> str:
    """Run ``code`` in a fresh interpreter (re2 hidden for "fallback"); its stdout. A hang fails, it does not block."""
    prelude = "import sys\n" + ("sys.modules['re2'] = None\n" if engine == "fallback" else "")
    package_root = str(Path(mcpcall.__file__).resolve().parent.parent)
    tests_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_root, tests_root, os.environ.get("PYTHONPATH", "")]))
    try:
        done = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=tests_root)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the check did not return within {timeout} s")
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture()
def fallback(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Python's re only, as without google-re2 (the caches are emptied before and after)."""
    monkeypatch.setattr(patterns, "_re2_loaded", True)
    monkeypatch.setattr(patterns, "_re2", None)
    patterns._cache.clear()
    schema._validators.clear()
    yield
    patterns._cache.clear()
    schema._validators.clear()


def check_of(output_schema: Any) -> Any:
    check = schema.output_check(output_schema, tool="t", server="s")
    assert check is not None
    return check


@pytest.mark.parametrize("engine", ENGINES)
def test_a_catastrophic_pattern_in_a_result_check_returns_promptly(engine: str) -> None:
    out = run_isolated(f"""
        from mcpcall import Client, SchemaValidationError
        from mcpcall.transports.memory import MemoryTransport
        schemas = [
            {{"type": "object", "properties": {{"x": {{"type": "string", "pattern": {EVIL!r}}}}}}},
            {{"type": "object", "patternProperties": {{{EVIL!r}: {{"type": "string"}}}}}},
            {{"type": "object", "patternProperties": {{{EVIL!r}: {{}}}}, "additionalProperties": False}},
            {{"type": "object", "patternProperties": {{{EVIL!r}: {{}}}}, "unevaluatedProperties": False}},
        ]
        values = [{{"x": {EVIL_TEXT!r}}}, {{{EVIL_TEXT!r}: 1}}, {{{EVIL_TEXT!r}: 1}}, {{{EVIL_TEXT!r}: 1}}]
        tools = [{{"name": f"t{{i}}", "inputSchema": {{"type": "object"}}, "outputSchema": s}} for i, s in enumerate(schemas)]
        def serve(m, reply):
            if "id" not in m:
                return
            if m["method"] == "server/discover":
                result = {{"supportedVersions": ["2026-07-28"], "capabilities": {{"tools": {{}}}}}}
            elif m["method"] == "tools/list":
                result = {{"tools": tools}}
            else:
                i = int(m["params"]["name"][1:])
                result = {{"content": [], "structuredContent": values[i]}}
            reply({{"jsonrpc": "2.0", "id": m["id"], "result": dict(result, resultType="complete")}})
        with Client(MemoryTransport(serve), timeout=10).connect() as client:
            client.list_tools()
            for i in range(len(schemas)):
                try:
                    client.call_tool(f"t{{i}}", {{}})
                    print("passed")
                except SchemaValidationError:
                    print("invalid")
    """, engine)
    verdicts = out.split()
    if engine == "fallback":
        assert verdicts == ["passed"] * 4  # not checkable at a bounded cost: skipped, never a false "invalid"
    else:
        # RE2 decides: no match, so the string pattern fails, additionalProperties refuses the key; the
        # patternProperties-only schema has nothing to apply; unevaluatedProperties is not applied next to patterns.
        assert verdicts == ["invalid", "passed", "invalid", "passed"]


@pytest.mark.parametrize("engine", ENGINES)
def test_unique_items_on_twenty_thousand_objects_is_linear(engine: str) -> None:
    out = run_isolated("""
        from mcpcall.schema import output_check
        check = output_check({"type": "array", "uniqueItems": True}, tool="t", server="s")
        items = [{"id": i, "tags": [str(i), {"n": i}]} for i in range(20000)]
        check(items)
        try:
            check(items + [{"tags": [str(7), {"n": 7.0}], "id": 7}])
        except Exception as exc:
            print(type(exc).__name__)
    """, engine)
    assert out.split() == ["SchemaValidationError"]


def test_a_draft_04_enum_of_many_objects_is_checked_against_its_meta_schema_in_linear_time() -> None:
    out = run_isolated("""
        from mcpcall.schema import output_check
        check = output_check({"$schema": "http://json-schema.org/draft-04/schema#", "enum": [{"i": i} for i in range(20000)]},
                             tool="t", server="s")
        check({"i": 19999})
        print("ok")
    """, "fallback")
    assert out.split() == ["ok"]


def test_unique_items_keeps_json_equality() -> None:
    check = check_of({"type": "array", "uniqueItems": True})
    check([1, True, "1", None, False, 0, [1], {"a": 1}, {"a": True}])  # distinct in JSON Schema
    for repeated in ([1, 1.0], [{"a": 1, "b": [2]}, {"b": [2.0], "a": 1}], [[], []], [None, None]):
        with pytest.raises(SchemaValidationError, match="non-unique"):
            check(repeated)
    deep: Any = 0
    for _ in range(5000):
        deep = [deep]
    check([deep, 1])  # no recursion on items however deep


def test_safe_patterns_still_decide_in_the_fallback(fallback: None) -> None:
    check = check_of({"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-\\d+$"}},
                      "patternProperties": {"^x-[a-z]+$": {"type": "integer"}}, "additionalProperties": False})
    check({"code": "ABC-12", "x-one": 1})
    for bad in ({"code": "abc"}, {"x-one": "no"}, {"other": 1}):
        with pytest.raises(SchemaValidationError):
            check(bad)


def test_a_pattern_never_applied_is_said_once_per_schema(fallback: None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mcpcall.schema")
    evil = {"type": "object", "properties": {"x": {"type": "string", "pattern": EVIL}}}
    for _ in range(3):
        check_of(evil)({"x": EVIL_TEXT})  # passes: a skipped check never makes a value invalid
        check_of(evil)({"x": "aaa"})
    said = [r.getMessage() for r in caplog.records if "never checked" in r.getMessage()]
    assert len(said) == 1 and "'^(a+)+$'" in said[0] and "google-re2" in said[0] and "server 's'" in said[0]


def test_a_text_too_long_for_the_fallback_passes_unchecked_and_is_said_once(fallback: None,
                                                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mcpcall.schema")
    check = check_of({"type": "string", "pattern": "\\d+x"})  # quadratic in re when unanchored
    check("1" * 100_000)
    check("2" * 100_000)
    with pytest.raises(SchemaValidationError):
        check("1" * 100)  # short enough: decided
    said = [r.getMessage() for r in caplog.records if "too long" in r.getMessage()]
    assert len(said) == 1 and "\\\\d+x" in said[0]


@pytest.mark.parametrize("pattern", [EVIL, "(a|a)*b", "(a*)*", "(x+x+)+y", "(a)\\1", "(?=a)a*", "(?<!b)a", "(a?){20}a{20}",
                                     "(" * 60 + "a" + ")" * 60, "a" * (patterns.MAX_PATTERN_CHARS + 1)])
def test_the_fallback_refuses_what_can_backtrack_without_bound(fallback: None, pattern: str) -> None:
    assert patterns.search(pattern, "aaaa") is None
    assert patterns.status(pattern) is not None


@pytest.mark.parametrize(("pattern", "text", "expected"), [
    ("^[a-z]+$", "abc", True), ("^[a-z]+$", "ab1", False), ("\\d{3}", "x123", True), ("(ab|cd)e", "cde", True),
    ("^(foo|bar)+$", "foobar", None),  # an alternation inside a repetition: refused
    ("^\\w+@\\w+\\.com$", "a@b.com", True), ("(?i)^hello", "HELLO", True),
])
def test_the_fallback_answers_for_what_cannot_explode(fallback: None, pattern: str, text: str, expected: Any) -> None:
    assert patterns.search(pattern, text) is expected


def test_an_invalid_regex_makes_the_schema_invalid_and_unchecked(caplog: pytest.LogCaptureFixture) -> None:
    assert schema.output_check({"type": "string", "pattern": "(unclosed"}, tool="t", server="s") is None
    assert "invalid outputSchema" in caplog.text


@pytest.mark.parametrize("engine", ENGINES)
def test_fixed_counts_and_alternatives_in_sequence_count_in_the_fallbacks_bound(engine: str) -> None:
    # (?:a{1000}){1000}: RE2 refuses it as too big, so the fallback decides, and re took > 20 s on one search;
    # (?:a|aa) 23 times: every extra group doubled re's work (5 s here). Each is bounded now, or not applied.
    out = run_isolated("""
        from mcpcall import patterns
        for pattern, text in [("(?:a{1000}){1000}", ("a" * 999999 + "b") * 2), ("(?:a|aa)" * 23 + "c", "a" * 46),
                              ("(?:a|aa)" * 30 + "c", "a" * 60)]:
            print(patterns.search(pattern, text))
        print(patterns.search("(?:ab|a)(?:ab|a)c", "aababc"), patterns.search("^(?:x{3}){4}$", "x" * 12))  # still decided
    """, engine, timeout=20)
    lines = out.split("\n")
    if engine == "fallback":
        assert lines[:3] == ["None", "None", "None"]  # the texts are too long for that many ways: not checked
    else:
        assert lines[:3] == ["None", "False", "False"]  # RE2 refuses the first (the fallback too), decides the others
    assert lines[3] == "True True"


FAN_OUT = """
    N = 30
    defs = {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]} for i in range(N)}
    defs[f"d{N}"] = {"type": "string", "pattern": "^x$"}
    FAN = {"type": "object", "properties": {"v": {"$ref": "#/$defs/d0"}}, "$defs": defs}
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_one_values_check_has_one_budget_and_stops_unchecked_over_it(engine: str) -> None:
    # A $ref fan-out costs 2**N descents; 100 texts each just short enough for the fallback cost 5 s together.
    out = run_isolated(FAN_OUT + """
    import logging
    logging.basicConfig(level=logging.INFO, format="LOG %(message)s", stream=sys.stdout)
    from mcpcall.schema import output_check
    check = output_check(FAN, tool="t", server="s")
    check({"v": "y"})
    print("fan passed")
    items = output_check({"type": "array", "items": {"type": "string", "pattern": "\\\\d+x"}}, tool="t", server="s")
    from mcpcall import SchemaValidationError
    try:
        items(["1" * 3161] * 100)
        print("array passed")
    except SchemaValidationError:
        print("array invalid")  # RE2: linear, so within the budget, and decided
    """, engine, timeout=25)
    assert "fan passed" in out  # never a false "invalid"
    assert ("array passed" if engine == "fallback" else "array invalid") in out
    assert "checking it would cost more than" in out and "server 's'" in out


def test_a_call_returns_by_its_deadline_whatever_the_check_costs_and_logs_off_the_reader() -> None:
    out = run_isolated(FAN_OUT + """
    import logging, threading, time
    from mcpcall import Client, RequestTimeout
    from mcpcall.transports.memory import MemoryTransport
    threads = []
    class Where(logging.Handler):
        def emit(self, record):
            threads.append(threading.current_thread().name)
    logging.getLogger("mcpcall.schema").addHandler(Where())
    def serve(m, reply):
        if "id" not in m or "method" not in m:
            return
        method, params = m["method"], m.get("params") or {}
        if method == "server/discover":
            reply({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "nf"}})
            return
        result = {}
        if method == "initialize":
            result = {"protocolVersion": params["protocolVersion"], "serverInfo": {"name": "x", "version": "1"},
                      "capabilities": {"tools": {}}}
        elif method == "tools/list":
            result = {"tools": [{"name": "t", "inputSchema": {"type": "object"}, "outputSchema": FAN}]}
        elif method == "tools/call":
            result = {"content": [], "structuredContent": {"v": "y"}}
        reply({"jsonrpc": "2.0", "id": m["id"], "result": result})
    with Client(MemoryTransport(serve, name="fan"), protocol="legacy").connect() as client:
        client.list_tools(timeout=10)
        started = time.monotonic()
        try:
            client.call_tool("t", {}, timeout=2)
            print("returned")
        except RequestTimeout as exc:
            print("timeout", "server 'fan'" in str(exc))
        print("within", time.monotonic() - started < 2 + 1.5)
        client.list_tools(timeout=20)
        client.call_tool("t", {}, timeout=20)  # the check finishes (over budget: unchecked), said once
    print("threads", sorted(set(threads)))
    """, "fallback", timeout=50)
    assert "within True" in out, out
    assert "returned" in out or "timeout True" in out
    said = out.split("threads ")[1]
    assert "MainThread" in said and "reader" not in said, out  # checked, and said, on the caller's thread


@pytest.mark.parametrize("engine", ENGINES)
def test_the_fallbacks_bound_counts_what_an_optional_group_holds_multiline_starts_and_every_literal(engine: str) -> None:
    # The review's cases, each minutes in re although the fallback ran them: (...)? and (...){1} counted their body's
    # repetitions as none or one; ^ under (?m) anchors every line; a literal after \d* is compared at every backtrack
    # (900 of them: 15 s on 3000 characters), a run of 240 sets 3 s on a million. \Z makes RE2 refuse each (the fallback
    # decides there too); without \Z RE2 runs them, linear.
    out = run_isolated(r"""
        from mcpcall import patterns
        cases = [(r"(?:\d*\d*\d*\d*)?x", "1" * 200), (r"(?:\d*\d*\d*\d*){1}x", "1" * 200),
                 (r"(?m)^[\d\n]*[\d\n]*x", "1\n" * 1500), (r"\d*" + "1" * 900 + "x", "1" * 3000),
                 ("[ab]" * 240 + "x", "a" * 1_000_000)]
        for pattern, text in cases:
            for tail in ("", r"\Z"):
                print(pattern[:12], tail, patterns.search(pattern + tail, text), flush=True)
        print(patterns.search(r"^-?\d+(?:\.\d+)?$", "12.5"), patterns.search(r"^\d{1,3}(?:\.\d{1,3}){3}$", "1.2.3.4"),
              patterns.search(r"(?m)^ab$", "x\nab"), patterns.search(r"^ab$", "x\nab"))  # still decided
    """, engine, timeout=20)
    lines = out.strip().split("\n")
    assert len(lines) == 11
    for line in lines[:10]:
        assert line.endswith(("None", "False")), line  # never a false "invalid" (no match), never minutes
    assert lines[10] == "True True True False"


@pytest.mark.parametrize("engine", ENGINES)
def test_spaces_digits_words_and_boundaries_match_as_json_schemas_ecma_regexes_do(engine: str) -> None:
    # RE2's \s is [\t\n\f\r ] only: "a\u00a0b" (a no-break space, common in formatted text) was "invalid" against
    # ^\S+\s\S+$, and so were \v, U+2028, U+3000, U+FEFF. Python's \d \w \b are Unicode where ECMA's are ASCII:
    # "٣" was refused by ^\D+$ and "éfoo" by \bfoo. (A mismatch there is a false "invalid".)
    out = run_isolated(r"""
        from mcpcall import patterns
        for space in ["\u00a0", "\v", "\u2028", "\u3000", "\ufeff", "\t"]:
            print(patterns.search(r"^\S+\s\S+$", "a" + space + "b"), patterns.search(r"^[\s,]+$", space + ","), end=" ")
        print()
        print(patterns.search(r"^\D+$", "\u0663"), patterns.search(r"\bfoo", "\u00e9foo"), patterns.search(r"^[^\s]$", "\u00a0"),
              patterns.search(r"^\w+$", "\u00e9"), patterns.search(r"^[\w.-]+@[\w-]+$", "a.b@c-d"),
              patterns.search(r"^\d{3}$", "123"), patterns.search(r"\\s", "\\s"), patterns.search(r"^[]a]+$", "]a"))
        print(patterns.search("^" + r"\w\s" * 15 + "$", "a\u00a0" * 15))  # longer than MAX_PATTERN_CHARS once spelled out
    """, engine, timeout=20)
    first, second, third = out.strip().split("\n")
    assert third == "True"
    assert first.split() == ["True"] * 12
    assert second.split() == ["True", "True", "False", "False", "True", "True", "True", "True"]


def test_a_check_pays_for_error_messages_and_enum_comparisons_and_a_deep_value_passes_unchecked() -> None:
    # The review's cases: every jsonschema error message reprs the instance, so 1000 anyOf branches over a list of
    # 100,000 numbers built 1000 reprs of it (31 s) on 1000 keyword steps of the budget; enum compared a 1000-element
    # list with each entry in Python and repr'd the whole enum per failing item (40 s for 10 items of 1000 entries); a value
    # 400 deep under a recursive $ref raised RecursionError, turned into a ProtocolError: a valid value failed the call.
    out = run_isolated("""
        import json
        from mcpcall.schema import output_check
        from mcpcall import SchemaValidationError
        def verdict(schema, value):
            try:
                output_check(schema, tool="t", server="s")(value)
                return "passed"
            except SchemaValidationError as exc:
                assert len(str(exc)) < 1000, len(str(exc))
                return "invalid"
        print(verdict({"anyOf": [{"type": "string"}] * 1000}, list(range(100_000))), flush=True)
        big = [list(range(1000)) for _ in range(200)]
        for i, entry in enumerate(big):
            entry[-1] = -1 - i
        print(verdict({"type": "array", "items": {"enum": big}}, [list(range(1000))] * 200), flush=True)
        deep = []
        for _ in range(400):
            deep = [deep]
        tree = {"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"}
        print(verdict(tree, json.loads(json.dumps(deep))), verdict(tree, [[], [[]]]), verdict(tree, [[1]]))
        # enum and const keep JSON equality: 1 == 1.0, True != 1, key order does not matter
        print(verdict({"enum": [1, {"a": [1, 2], "b": None}]}, 1.0), verdict({"enum": [1]}, True),
              verdict({"enum": [{"a": [1, 2], "b": None}]}, {"b": None, "a": [1.0, 2]}), verdict({"const": [True]}, [1]),
              verdict({"const": {"x": "y"}}, {"x": "y"}), verdict({"enum": [[1, 2]]}, [2, 1]))
        print(verdict({"type": "string"}, list(range(100_000))))  # the message holds a short repr, not 600 KB of it
    """, "fallback", timeout=15)
    lines = out.split("\n")
    assert lines[0] in ("passed", "invalid")  # over budget it passes unchecked; either way promptly
    assert lines[1:5] == ["invalid", "passed passed invalid", "passed invalid passed invalid passed invalid", "invalid"]


@pytest.mark.skipif(not HAVE_RE2, reason="google-re2 not installed")
def test_an_re2_pattern_whose_dfa_outgrows_its_memory_counts_its_program_size_in_the_budget() -> None:
    # RE2 is linear in the text, times the program's size once the DFA blows up and RE2 simulates the program:
    # this pattern took 2.4 s per million characters, so a 10-million-character text (cost 10**7, in the budget) took
    # about 25 s in one check. Counted as program size times length, it is over the budget: not checked, at once.
    out = run_isolated("""
        import random
        from mcpcall.schema import output_check
        rnd = random.Random(7)
        text = rnd.randbytes(10_000_000).translate(bytes(97 + (i & 1) for i in range(256))).decode()  # a and b
        pattern = "(?:[ab]*a[ab]{20}c|[ab]*b[ab]{20}c|[ab]*a[ab]{19}b[ab]c){5}"
        output_check({"type": "string", "pattern": pattern}, tool="t", server="s")(text)
        print("passed")
        check = output_check({"type": "string", "pattern": "^[ab]+$"}, tool="t", server="s")
        check(text[:1_000_000])  # a small program: still decided on a long text
        try:
            check(text[:1_000_000] + "c")
        except Exception as exc:
            print(type(exc).__name__)
    """, "re2", timeout=15)
    assert out.split() == ["passed", "SchemaValidationError"]


@pytest.mark.parametrize("engine", ENGINES)
def test_patterns_compiled_again_during_a_check_spend_from_its_budget(engine: str) -> None:
    # 1100 patternProperties are more than the pattern cache keeps (1024): every key against every pattern compiled
    # it again, uncounted (the budget saw only a few steps per short key). 100 keys took 7.4 s in the fallback and
    # 3.9 s with RE2 (2000 patterns), 5000 keys fifty times that, on the reader thread.
    out = run_isolated("""
        from mcpcall.schema import output_check
        pp = {f"^k{i}_" + "[a-z]x" * 8 + "$": {"type": "integer"} for i in range(1100)}  # under MAX_PATTERN_TOTAL
        check = output_check({"type": "object", "patternProperties": pp}, tool="t", server="s")
        check({f"key{j}": 1 for j in range(5000)})
        print("passed")
    """, engine, timeout=30)
    assert out.split() == ["passed"]


def test_long_patterns_are_not_compiled_to_check_a_schema_against_its_meta_schema() -> None:
    # The meta-schema's "regex" format compiled every pattern up to 100,000 characters with re (about a second each,
    # on the thread that lists the tools, past its deadline); a pattern longer than MAX_PATTERN_CHARS is never run
    # by re, so its verdict does not matter: 40 such patterns took 40 s to list.
    out = run_isolated("""
        from mcpcall.schema import output_check
        props = {f"p{i}": {"type": "string", "pattern": f"(a{i})" * 3000} for i in range(3)}  # under MAX_PATTERN_TOTAL
        print(output_check({"type": "object", "properties": props}, tool="t", server="s") is not None)
    """, "fallback", timeout=20)
    assert out.split() == ["True"]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_schema_whose_patterns_total_too_much_is_not_used(engine: str) -> None:
    # Compiling a schema's patterns (to check it against its meta-schema, then to apply it) costs time in their total:
    # 2000 patternProperties of 245 characters took 5.4 s (RE2: up to 3.5 s) on the thread listing the tools, past its
    # deadline, and a 64 MB listing could hold a thousand times that. Over MAX_PATTERN_TOTAL the schema is not used.
    out = run_isolated("""
        import logging, sys, time
        logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stdout)
        from mcpcall.schema import MAX_PATTERN_TOTAL, output_check
        pp = {f"^k{i}_" + "[a-z]x" * 40 + "$": {"type": "integer"} for i in range(2000)}
        started = time.monotonic()
        print(output_check({"type": "object", "patternProperties": pp}, tool="t", server="s"), time.monotonic() - started < 2)
        ok = {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-z]{3}$"}}}
        check = output_check(ok, tool="u", server="s")
        check({"id": "abc"})
        try:
            check({"id": "abcd"})
        except Exception as exc:
            print(type(exc).__name__)
    """, engine, timeout=30)
    assert "None True" in out and "SchemaValidationError" in out, out
    assert "server 's': tool 't' has an invalid outputSchema (its patterns total" in out, out


DRAFT3 = "http://json-schema.org/draft-03/schema#"


@pytest.mark.parametrize("given", [{"items": 1}, {"dependencies": {"a": 1}}, {"type": {"type": "string"}, "properties": {"x": {"items": 1}}}])
def test_a_draft_03_schema_the_meta_schema_refuses_is_not_used(given: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    """Draft 3's meta-schema lists schemas among a "type"'s names; jsonschema's ranking of errors (best_match) read one
    as a type name and raised TypeError out of the check's making (a listing of tools failed with it)."""
    caplog.set_level(logging.WARNING, "mcpcall")
    assert schema.output_check(dict(given, **{"$schema": DRAFT3}), tool="t", server="s") is None
    assert any("has an invalid outputSchema" in r.getMessage() for r in caplog.records)


def test_a_draft_03_value_of_the_wrong_type_is_a_schema_validation_error() -> None:
    """A value that matches none of a draft-3 "type" list's schemas is refused as such, not as a schema that "cannot be
    applied" (the ranking of its errors raised TypeError)."""
    check = schema.output_check({"$schema": DRAFT3, "type": "object",
                                 "properties": {"x": {"type": [{"type": "string"}, "null"]}}}, tool="t", server="s")
    assert check is not None
    check({"x": "a"})
    with pytest.raises(SchemaValidationError, match=r"at \$\.x: "):
        check({"x": 1})
