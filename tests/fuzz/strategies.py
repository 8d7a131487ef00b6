"""What a hostile server may send, as Hypothesis strategies: text, numbers, JSON values, schemas, regexes.

The values are the ones a real transport can deliver (``json`` reads NaN, Infinity, integers of up to
4300 digits, lone surrogates from ``\\ud800`` escapes, nesting to about a thousand levels), plus, for the
functions that take Python values, nesting deeper than any JSON text gives.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

from hypothesis import strategies as st

from mcpcall.schema import MAX_DEPTH

# -- text -------------------------------------------------------------------------------------------

ODD_TEXT = [
    "", " ", "\x00", "\ud800", "\udfff", "a\udc80b", "\ufeff", "\u2028", "\u2029", "\u202e", "e\u0301", "\u00b2", "\u0663",
    "\uff11", "\U0001f600", "NaN", "Infinity", "-0", "1e400", "${HOME}", "${", "${a:-b}", "%s%n", "{}", "\\", '"', "'",
    "<script>alert(1)</script>", "../../etc/passwd", "#/", "#/$defs/a", "javascript:alert(1)", "data:,x", "http://",
    "https://user:pw@example.com/mcp?token=abc#x", "\r\n", "\t", "mcp__a__b", "self", "model_config", "__class__",
    "from", "x-y", "0", "-", "_", "a" * 65, "é" * 70, "a.b", "a_b", "a-b", "\x7f", "\u0085",
]
#: Any text, surrogates included (a ``\\ud800`` escape in JSON gives one).
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=24)
texts = st.one_of(st.text(max_size=16), any_text, st.sampled_from(ODD_TEXT))
#: A long text, up to ``size`` characters: what a server fills a field with.
def long_texts(size: int = 100_000) -> st.SearchStrategy[str]:
    return st.tuples(st.sampled_from(["x", "é", "\ud800", "a ", '"', "\\", "${a}", "%", "/", "[", "0"]),
                     st.integers(0, size)).map(lambda t: (t[0] * (t[1] // len(t[0]) + 1))[: t[1]])


hostile_text = st.one_of(texts, long_texts(20_000))

# -- numbers ----------------------------------------------------------------------------------------

BIG_INTS = [10**400, -(10**400), 10**4299, 2**63, -(2**63) - 1, 2**53 + 1, 2**31, -(2**31) - 1]
numbers = st.one_of(
    st.integers(),
    st.sampled_from(BIG_INTS),
    st.floats(),  # NaN, infinities, -0.0, subnormals
    st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1e308, 5e-324, 0.5, 1.0]),
    st.booleans(),
)

# -- JSON values ------------------------------------------------------------------------------------

#: Words of the wire, as values: a block type, a role, a status, base64.
WIRE_WORDS = ["text", "image", "audio", "resource", "resource_link", "aGVsbG8=", "user", "assistant", "working",
              "completed", "input_required", "object", "string", "2.0", "complete", "task"]
leaves = st.one_of(st.none(), numbers, texts, st.sampled_from(WIRE_WORDS))
keys = st.one_of(st.text(max_size=8), st.sampled_from(ODD_TEXT),
                 st.sampled_from(["type", "text", "content", "uri", "name", "$ref", "properties", "items", "anyOf",
                                  "_meta", "result", "error", "id", "method", "nextCursor", "mimeType", "data", "blob",
                                  "resource", "messages", "role", "contents", "completion", "values", "total", "hasMore",
                                  "isError", "structuredContent", "annotations", "arguments", "required", "size", "taskId",
                                  "status", "inputSchema", "resultType", "ttlMs"]))
json_values = st.recursive(leaves, lambda inner: st.one_of(st.lists(inner, max_size=5),
                                                           st.dictionaries(keys, inner, max_size=5)), max_leaves=16)
json_objects = st.dictionaries(keys, json_values, max_size=6)


def nested(depth: int, kind: str = "list", leaf: Any = 0) -> Any:
    """A value ``depth`` levels deep (built without recursion: any depth)."""
    value: Any = leaf
    for i in range(depth):
        if kind == "list" or (kind == "mixed" and i % 2):
            value = [value]
        else:
            value = {"a": value}
    return value


#: Depths around and past the package's limits: MAX_DEPTH (tool definitions), 100 (the cache), and what json parses:
#: about as deep as the recursion limit, from a reader thread's short stack. A negative depth counts from that limit,
#: as it is when the value is made (Hypothesis raises the limit while a test runs: a fixed 990 would nest too little).
DEPTHS = [MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 100, 101, 500, 990, -30, -60]
# A deep value is drawn as a marker that materialize() replaces: Hypothesis prints (and shrinks) the marker,
# where printing the value itself would recurse past Python's limit.
_DEEP = "\ue000deep:"
_MARKER = re.compile(re.escape(_DEEP) + r"(-?[0-9]+):(list|dict|mixed)")


def deep_marker(depth: int, kind: str) -> str:
    return f"{_DEEP}{depth}:{kind}"


deep_values = st.builds(deep_marker, st.sampled_from(DEPTHS), st.sampled_from(["list", "dict", "mixed"]))
#: Deeper than any JSON text decodes to: for the functions that take Python values.
very_deep_values = st.builds(deep_marker, st.sampled_from([2_000, 5_000]), st.sampled_from(["list", "dict", "mixed"]))


def materialize(value: Any) -> Any:
    """``value`` with every deep marker (see :data:`deep_values`) replaced by the value it stands for."""
    marker = _MARKER.fullmatch(value) if isinstance(value, str) else None
    if marker is not None:  # only a marker as deep_marker makes it: Hypothesis also makes texts that start like one
        depth, kind = int(marker.group(1)), marker.group(2)
        return nested(depth if depth > 0 else sys.getrecursionlimit() + depth, kind)
    if isinstance(value, list):
        return [materialize(item) for item in value]
    if isinstance(value, dict):
        return {key: materialize(item) for key, item in value.items()}
    return value


def wire(value: Any) -> Any:
    """``value`` as a transport delivers it: written as JSON text (NaN as NaN) and read back."""
    return json.loads(json.dumps(value))


def field_values(good: st.SearchStrategy[Any] | None = None) -> st.SearchStrategy[Any]:
    """What a server may put in one field: what belongs there, or anything else (huge, deep, odd)."""
    wrong = st.one_of(leaves, json_values, deep_values, long_texts(), st.sampled_from(BIG_INTS))
    return wrong if good is None else st.one_of(good, good, wrong)


def shaped(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """A dict with some of ``fields`` (each right or wrong) and a few foreign keys."""
    return st.builds(lambda known, extra: {**extra, **known},
                     st.fixed_dictionaries({}, optional={name: field_values(good) for name, good in fields.items()}),
                     st.dictionaries(keys, json_values, max_size=2))


# -- regular expressions (a schema's pattern, patternProperties) ------------------------------------

_ATOMS = ["a", "b", "1", ".", "\\d", "\\D", "\\w", "\\s", "\\S", "\\b", "[ab]", "[^a]", "[a-z]", "[\\s,]", "x", "^", "$",
          "\\Z", "(?=a)", "(?!b)", "(?<=a)", "\\1", "[\x00-\uffff]", "[\u0100-\uffff]", "\\u00e9", "\\x41", "é", "\\.",
          "[]a]", "\\p{L}", "\\Q.\\E"]
_QUANTIFIERS = ["*", "+", "?", "{2}", "{1,3}", "{0,}", "*?", "+?", "{1000}", "{2,40}", "{0,1}", "{3,}"]


def _group(parts: list[str]) -> str:
    return "(?:" + "|".join(parts) + ")"


regex_bodies = st.recursive(
    st.sampled_from(_ATOMS),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(_QUANTIFIERS)).map("".join),
        st.lists(inner, min_size=1, max_size=4).map("".join),
        st.lists(inner, min_size=2, max_size=3).map(_group),
        inner.map(lambda body: f"({body})"),
    ),
    max_leaves=10,
)
regexes = st.one_of(
    st.tuples(st.sampled_from(["", "", "^", "(?i)", "(?m)^", "(?s)", "(?x)"]), regex_bodies, st.sampled_from(["", "", "$", "\\Z"]))
    .map("".join),
    st.sampled_from(["(unclosed", "[", "*", "(?P<a>x)(?P=a)", "\\", "a{99999}", "(?x) a # [", "^(a+)+$", "(a|a)*b",
                     "(?:a|aa)" * 23 + "c", "(" * 60 + "a" + ")" * 60, "a" * 1001,
                     "a{99999999999999999999}", "(" * 3000 + "a" + ")" * 3000, "(?i)" + "[\x00-\uffff]" * 40]),
    texts,
)
#: Texts to match patterns against: runs of the characters patterns care about.
regex_texts = st.one_of(
    st.text(st.sampled_from("ab1 !\n\u00a0\u00e9_x-."), max_size=40),
    st.tuples(st.text(st.sampled_from("ab1 !\n"), min_size=1, max_size=3), st.integers(1, 3000)).map(lambda t: t[0] * t[1]),
    texts,
)

# -- JSON Schemas -----------------------------------------------------------------------------------

_TYPES = ["string", "number", "integer", "boolean", "array", "object", "null", "any", "String", "OBJECT"]
REFS = ["#", "#/", "#/$defs/d0", "#/$defs/d1", "#/$defs/d2", "#/definitions/x", "#/properties/a", "#/enum/0", "#/enum/\u00b2",
        "#/enum/" + "1" * 5000, "#/required/" + "0" * 50, "other.json#/a", "https://example.com/s.json", "#/$defs/d~1",
        "#/%24defs/d0", "#/$defs/d0/anyOf/0", "#/$defs/d1/properties/x", "", "#/items", "#/$defs"]

_schema_leaf = st.fixed_dictionaries({}, optional={
    "type": st.one_of(st.sampled_from(_TYPES), st.lists(st.one_of(st.sampled_from(_TYPES), json_values), max_size=6),
                      json_values),
    "description": hostile_text,
    "title": texts,
    "enum": st.one_of(st.lists(json_values, max_size=6), leaves),
    "const": json_values,
    "format": st.sampled_from(["date-time", "email", "uri", "int32", "float", "enum", "regex", ""]),
    "pattern": regexes,
    "minimum": numbers, "maximum": numbers, "exclusiveMinimum": numbers, "exclusiveMaximum": numbers,
    "minItems": numbers, "maxLength": numbers, "minProperties": numbers, "multipleOf": numbers,
    "default": json_values,
    "examples": st.lists(json_values, max_size=3),
    "nullable": leaves,
    "required": st.one_of(st.lists(st.one_of(st.sampled_from(["a", "b", "self", "x"]), texts, numbers), max_size=5), leaves),
    "$ref": st.one_of(st.sampled_from(REFS), leaves),
    "uniqueItems": st.booleans(),
    "x-mcp-header": texts,
})


#: Keywords the exports drop or pass on as they are.
_OTHER_KEYWORDS = st.sampled_from([
    "$schema", "$id", "$comment", "additionalProperties", "examples", "default", "title", "description", "format",
    "minimum", "exclusiveMaximum", "multipleOf", "minLength", "pattern", "uniqueItems", "not", "if", "then", "else",
    "patternProperties", "propertyNames", "contentEncoding", "deprecated", "readOnly", "minItems", "definitions",
    "dependentRequired", "unevaluatedProperties", "prefixItems", "contains",
])
_schema_leaf = st.tuples(st.dictionaries(_OTHER_KEYWORDS, json_values, max_size=3), _schema_leaf).map(
    lambda t: {**t[0], **t[1]})


def _with_children(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    children = st.fixed_dictionaries({}, optional={
        "properties": st.one_of(st.dictionaries(st.one_of(st.sampled_from(["a", "b", "self", "x", "self_"]), keys), inner,
                                                max_size=4), leaves),
        "items": st.one_of(inner, st.lists(inner, max_size=2)),
        "anyOf": st.lists(st.one_of(inner, leaves), max_size=4),
        "oneOf": st.lists(inner, max_size=3),
        "allOf": st.lists(inner, max_size=3),
        "not": inner,
        "additionalProperties": st.one_of(st.booleans(), inner),
        "patternProperties": st.dictionaries(regexes, inner, max_size=2),
        "$defs": st.dictionaries(st.sampled_from(["d0", "d1", "d2", "d~1"]), inner, max_size=3),
    })
    return st.tuples(_schema_leaf, children).map(lambda t: {**t[0], **t[1]})


schema_nodes = st.recursive(_schema_leaf, _with_children, max_leaves=12)


def fan_out(levels: int, fan: int, combinator: str = "anyOf", leaf: Any = None) -> dict[str, Any]:
    """A schema whose definitions each name the next ``fan`` times: inlined naively, ``fan ** levels`` copies."""
    defs: dict[str, Any] = {f"d{i}": {combinator: [{"$ref": f"#/$defs/d{i + 1}"}] * fan} for i in range(levels)}
    defs[f"d{levels}"] = leaf if leaf is not None else {"type": "object", "properties": {"a": {"type": "string"}}}
    return {"type": "object", combinator: [{"$ref": "#/$defs/d0"}], "properties": {"x": {"$ref": "#/$defs/d0"}},
            "$defs": defs}


schemas = st.one_of(
    schema_nodes,
    st.builds(lambda root, defs: {**root, "$defs": defs}, schema_nodes,
              st.dictionaries(st.sampled_from(["d0", "d1", "d2"]), schema_nodes, max_size=3)),
    st.builds(fan_out, st.integers(1, 12), st.integers(1, 6), st.sampled_from(["anyOf", "oneOf", "allOf"])),
    st.builds(lambda depth, kind: {"type": "object", "properties": {"x": nested(depth, kind, {"type": "string"})}},
              st.sampled_from(DEPTHS), st.sampled_from(["dict", "mixed"])),
    leaves,
)
