"""Regular expressions a server sends (``pattern``, ``patternProperties``), matched at a bounded cost.

Python's :mod:`re` backtracks, in C code that holds the GIL: ``^(a+)+$``
against 34 ``a`` and a ``!`` runs for minutes and stops every thread of the
process, and even ``\\d+x`` costs the square of the text's length. So a
pattern from a schema runs:

* in RE2 (linear time) when ``google-re2`` is installed (``pip install mcpcall[re2]``)
  and RE2 accepts the pattern;
* otherwise in :mod:`re` only when its structure cannot backtrack more than
  polynomially (no backreference, lookaround or conditional; no repetition
  inside a repetition; no alternation inside a repetition) and the text is
  short enough for that polynomial to stay under :data:`MAX_STEPS`;
* otherwise not at all: :func:`search` answers None ("not checked"), and the
  schema check treats the value as matching. A skipped pattern never makes a
  value invalid.

Either engine matches ``\\s \\d \\w \\b`` as JSON Schema's ECMA-262 regexes do
(Unicode spaces; ASCII digits, words and boundaries), see :func:`_as_ecma`.
"""

from __future__ import annotations

import re
import sys
import threading
from collections import OrderedDict
from typing import Any, Callable, Optional, TypeVar

__all__ = ["MAX_COMPILE_SIZE", "MAX_PATTERN_CHARS", "MAX_STEPS", "cached", "compile_size", "compiles", "cost", "search",
           "status"]

#: A pattern longer than this is never run by :mod:`re` (RE2 bounds its own memory).
MAX_PATTERN_CHARS = 1000
#: Nor one that costs more than this to compile (see :func:`compile_size`): some tens of milliseconds.
MAX_COMPILE_SIZE = 8 * MAX_PATTERN_CHARS
#: The most backtracking steps the :mod:`re` fallback may take on one text (about a tenth of a second).
MAX_STEPS = 10_000_000
_MAX_NESTING = 50

_Search = Callable[[str], Optional[bool]]
_Built = tuple[_Search, int, int]  # the search, and its cost: about factor * len(text) ** power steps
_cache: OrderedDict[str, _Built | None] = OrderedDict()
_sizes: OrderedDict[str, int] = OrderedDict()
_MAX_CACHED = 1024
_lock = threading.Lock()
_re2: Any = None
_re2_loaded = False
_T = TypeVar("_T")


def _kept(cache: OrderedDict[str, _T], pattern: str, make: Callable[[str], _T]) -> _T:
    """``cache``'s value for ``pattern``; on a miss made by ``make`` (outside the lock: it can take long) and kept.
    A cache keeps the ``_MAX_CACHED`` patterns used last."""
    with _lock:
        if pattern in cache:
            cache.move_to_end(pattern)
            return cache[pattern]
    value = make(pattern)
    with _lock:
        cache[pattern] = value
        while len(cache) > _MAX_CACHED:
            cache.popitem(last=False)
    return value


def _load_re2() -> Any:
    """``re2`` when google-re2 is importable (looked up once), else None."""
    global _re2, _re2_loaded
    if not _re2_loaded:
        try:
            import re2  # type: ignore[import-not-found,import-untyped,unused-ignore]

            options = re2.Options()
            options.log_errors = False  # RE2 writes refusals to stderr otherwise
            _re2 = (re2, options)
        except Exception:  # noqa: BLE001 - not installed, or a broken build: the fallback
            _re2 = None
        _re2_loaded = True
    return _re2


def _parse(pattern: str) -> Any:
    if sys.version_info >= (3, 11):
        from re import _parser  # type: ignore[attr-defined,unused-ignore]

        return _parser.parse(pattern)
    import sre_parse  # pragma: no cover - Python < 3.11

    return sre_parse.parse(pattern)  # pragma: no cover


def _constants() -> Any:
    if sys.version_info >= (3, 11):
        from re import _constants  # type: ignore[attr-defined,unused-ignore]

        return _constants
    import sre_constants  # pragma: no cover - Python < 3.11

    return sre_constants  # pragma: no cover


def compile_size(pattern: str) -> int:
    """About what compiling ``pattern`` with :mod:`re` costs, as the length of an ordinary pattern that costs as much.

    Its length, and for each range of a set past Latin-1 (``[\\x00-\\uffff]``) a 32nd of the code points it
    spans below U+10000, twice that under ``(?i)``: re walks every one of them to build the set, so that five
    characters cost what two thousand ordinary ones do (a schema of 64 patterns of such sets took most of a minute).
    """
    if "-" not in pattern:
        return len(pattern)
    return _kept(_sizes, pattern, lambda p: len(p) + _range_size(p))


def _range_size(pattern: str) -> int:
    try:
        tree = _parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError, TypeError):
        return 0  # re refuses it as fast
    c = _constants()
    ranges = (c.RANGE, getattr(c, "RANGE_UNI_IGNORE", c.RANGE))
    state = getattr(tree, "state", None) or getattr(tree, "pattern", None)
    folded = bool(getattr(state, "flags", 0) & c.SRE_FLAG_IGNORECASE)
    span = 0
    stack: list[Any] = [tree]
    while stack:  # every (op, value) of the tree, at any depth (sets are in IN items, anywhere)
        node = stack.pop()
        for item in getattr(node, "data", node):
            if not isinstance(item, (tuple, list)) and not hasattr(item, "data"):
                continue
            if isinstance(item, tuple) and len(item) == 2 and any(item[0] is op for op in ranges):
                low, high = item[1]
                if high > 0xFF:  # a range within Latin-1 fills a map of 256: as cheap as a character
                    span += max(0, min(high, 0xFFFF) - low + 1)
                continue
            if isinstance(item, tuple) and len(item) == 2 and item[0] is c.SUBPATTERN and item[1][1] & c.SRE_FLAG_IGNORECASE:
                folded = True
            stack.append(item)
    return span // 32 * (2 if folded else 1)


_Poly = tuple[int, int]  # (d, k): at most k * n**d, n the text's length
_MAX_DEGREE = 12


def _add(a: _Poly, b: _Poly) -> _Poly:
    return max(a[0], b[0]), a[1] + b[1]


def _mul(a: _Poly, b: _Poly) -> _Poly:
    return a[0] + b[0], a[1] * b[1]


def _shape(pattern: str) -> tuple[int, int] | None:
    """``(d, k)``: one :mod:`re` search backtracks at most about ``k * n**d`` steps; None when not bounded so.

    Each part of the pattern has its *ways* (how many ways it can match at
    one place, which everything after it may try in turn) and its *work* (the
    steps of one attempt), both polynomials in the text's length ``n``. A
    sequence tries each item once per way of the items before it, so every
    item counts, a literal too (``\\d*`` then 900 literals is 900 steps per
    backtrack); a variable repetition has about ``n`` ways (a few for a small
    span such as ``{1,3}``) and its body must have one; a fixed count tries its
    body that many times; alternatives add their ways. An unanchored search
    starts at every position (``^`` under ``(?m)`` at every line). A ``k`` over
    :data:`MAX_STEPS` is refused, with RE2 installed too (RE2 refuses some such
    patterns as too big, and then this fallback decides).
    """
    try:
        tree = _parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError, TypeError):
        return None
    c = _constants()
    repeats = {c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT)}
    unsafe = {c.GROUPREF, c.GROUPREF_EXISTS, c.ASSERT, c.ASSERT_NOT, getattr(c, "GROUPREF_IGNORE", c.GROUPREF)}
    atomic = getattr(c, "ATOMIC_GROUP", None)
    one: _Poly = (0, 1)

    def bounded(p: _Poly) -> bool:
        return p[0] <= _MAX_DEGREE and p[1] <= MAX_STEPS

    def walk(items: Any, nesting: int) -> tuple[_Poly, _Poly] | None:
        """``(ways, work)`` of a sequence."""
        if nesting > _MAX_NESTING:
            return None
        ways, work = one, (0, 0)
        for op, av in items:
            if op in unsafe:
                return None
            if op in repeats:
                low, high, body = av
                found = walk(body, nesting + 1)
                if found is None:
                    return None
                body_ways, body_work = found
                if high == 0:
                    item_ways, item_work = one, one
                elif high == 1:  # x? or x{1}: the body's ways (and not taking it, one more)
                    item_ways, item_work = (body_ways if low == 1 else _add(one, body_ways)), body_work
                elif low == high and body_ways[0] == 0 and (body_ways[1] == 1 or high <= 64):
                    # x{1000}: the body, 1000 times; (?:\.\d{1,3}){3}: 3**3 ways
                    item_ways = (0, body_ways[1] ** high)
                    item_work = (body_work[0], body_work[1] * high * item_ways[1])
                elif body_ways != one:
                    return None  # a repetition or an alternation inside a repetition: exponential
                elif high != c.MAXREPEAT and high - low < 16:  # x{1,3}: a few ways
                    item_ways, item_work = (0, high - low + 1), (body_work[0], body_work[1] * high)
                else:  # about n ways, each up to n bodies
                    item_ways, item_work = (1, 2), (body_work[0] + 1, body_work[1])
            elif op is c.SUBPATTERN or (atomic is not None and op is atomic):
                found = walk(av[-1] if op is c.SUBPATTERN else av, nesting + 1)
                if found is None:
                    return None
                item_ways, item_work = found
            elif op is c.BRANCH:
                item_ways, item_work = (0, 0), (0, 0)
                for branch in av[1]:
                    found = walk(branch, nesting + 1)
                    if found is None:
                        return None
                    item_ways, item_work = _add(item_ways, found[0]), _add(item_work, found[1])  # tried in turn
            elif op is c.IN:
                item_ways, item_work = one, (0, max(1, len(av)))  # a set is tested item by item
            else:
                item_ways, item_work = one, one
            work = _add(work, _mul(ways, item_work))  # tried once per way of what comes before it
            ways = _mul(ways, item_ways)
            if not (bounded(ways) and bounded(work)):
                return None  # (?:a{1000}){1000}, (?:a|aa)(?:a|aa)...: too many ways before the text even counts
        return ways, work

    found = walk(tree, 0)
    if found is None:
        return None
    degree, factor = found[1]
    first = tree[0] if len(tree) else None
    state = getattr(tree, "state", None) or getattr(tree, "pattern", None)
    multiline = bool(getattr(state, "flags", c.SRE_FLAG_MULTILINE) & c.SRE_FLAG_MULTILINE)
    anchored = first is not None and first[0] is c.AT and (
        first[1] is c.AT_BEGINNING_STRING or (first[1] is c.AT_BEGINNING and not multiline))  # (?m)^: every line
    return degree + (0 if anchored else 1), max(1, factor)


# JSON Schema patterns are ECMA-262 regexes: \s is every Unicode space and line end, \d \w \b are ASCII. RE2's \s is
# only [\t\n\f\r ] (no \v, U+00A0, U+2028, U+FEFF: a valid value was "invalid"); Python's \d \w \b are Unicode ("\D+"
# refused "٣", "\bfoo" refused "éfoo"). Each engine gets the pattern with these classes spelled out, so both match as
# ECMA does. Per escape: (outside a set, inside one); None keeps it as it is.
_SPACES_RE2 = r"\t\n\x0b\x0c\r\x20\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}"
_SPACES_RE = "\\t\\n\\x0b\\x0c\\r\\x20\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
_ECMA_RE2 = {"s": (f"[{_SPACES_RE2}]", _SPACES_RE2), "S": (f"[^{_SPACES_RE2}]", None)}
_ECMA_RE = {"s": (f"[{_SPACES_RE}]", _SPACES_RE), "S": (f"[^{_SPACES_RE}]", None),
            "d": ("[0-9]", "0-9"), "D": ("[^0-9]", None), "w": ("[A-Za-z0-9_]", "A-Za-z0-9_"),
            "W": ("[^A-Za-z0-9_]", None), "b": ("(?a:\\b)", None), "B": ("(?a:\\B)", None)}


_VERBOSE = re.compile(r"\(\?[a-zA-Z]*x")


def _as_ecma(pattern: str, table: dict[str, tuple[str, str | None]], re2: bool) -> str:
    """``pattern`` with the escapes of ``table`` replaced (outside and inside sets; RE2's \\Q..\\E and [:alpha:] kept)."""
    out: list[str] = []
    i, n, in_set = 0, len(pattern), False
    while i < n:
        ch = pattern[i]
        if ch == "\\" and i + 1 < n:
            escaped = pattern[i + 1]
            if re2 and escaped == "Q":  # \Q...\E: literal text
                end = pattern.find("\\E", i + 2)
                end = n if end < 0 else end + 2
                out.append(pattern[i:end])
                i = end
                continue
            spelled = table.get(escaped)
            replacement = None if spelled is None else spelled[1 if in_set else 0]
            out.append(replacement if replacement is not None else pattern[i:i + 2])
            i += 2
            continue
        if in_set:
            if ch == "]":
                in_set = False
            elif re2 and pattern.startswith("[:", i) and pattern.find(":]", i + 2) > 0:
                end = pattern.find(":]", i + 2) + 2
                out.append(pattern[i:end])
                i = end
                continue
            out.append(ch)
            i += 1
            continue
        if ch == "[":
            in_set = True
            start = i + 1
            if start < n and pattern[start] == "^":
                start += 1
            if start < n and pattern[start] == "]":
                start += 1  # []a] and [^]a]: a literal ]
            out.append(pattern[i:start])
            i = start
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _build(pattern: str) -> _Built | None:
    loaded = _load_re2()
    if loaded is not None:
        re2, options = loaded
        try:
            compiled2 = re2.compile(_as_ecma(pattern, _ECMA_RE2, True), options)
        except Exception:  # noqa: BLE001 - RE2 refuses it (a lookaround, a backreference): try the fallback
            compiled2 = None
        if compiled2 is not None:
            # Linear in the text, but times the program's size once its DFA outgrows RE2's memory and it falls back
            # to simulating the program: (?:[ab]*a[ab]{20}c|...){5} took 2.4 s a million characters (369 instructions).
            size = getattr(compiled2, "programsize", None)
            steps = size if isinstance(size, int) and size > 0 else max(1, len(pattern))
            return (lambda text: compiled2.search(text) is not None), steps, 1
    if len(pattern) > MAX_PATTERN_CHARS:
        return None
    # (?x) ignores what follows a # up to the line's end, where a [ is no set: left as written there
    spelled = pattern if _VERBOSE.search(pattern) else _as_ecma(pattern, _ECMA_RE, False)
    if compile_size(spelled) > MAX_COMPILE_SIZE:
        return None
    shape = _shape(spelled)  # of what runs (the length limit is the server's pattern's)
    if shape is None:
        return None
    try:
        compiled = re.compile(spelled)
    except (re.error, RecursionError, OverflowError, ValueError):
        return None
    power, factor = shape
    if power == 0:
        return (lambda text: compiled.search(text) is not None), factor, 0
    allowed = MAX_STEPS // factor
    longest = int(allowed ** (1.0 / power))
    while longest > 0 and (longest + 1) ** power > allowed:
        longest -= 1
    while (longest + 1) ** power <= allowed:
        longest += 1

    def fallback(text: str) -> bool | None:
        if len(text) > longest:
            return None  # too long for a backtracking engine: not checked
        return compiled.search(text) is not None

    return fallback, factor, power


def _matcher(pattern: str) -> _Built | None:
    return _kept(_cache, pattern, _build)


def cached(pattern: str) -> bool:
    """Whether ``pattern`` was compiled already (and is still kept): else the next use compiles it, at a cost."""
    with _lock:
        return pattern in _cache


def search(pattern: str, text: str) -> bool | None:
    """Whether ``pattern`` matches somewhere in ``text``; None when that cannot be decided at a bounded cost.

    A lone surrogate in ``text`` (a ``\\ud800`` escape of JSON gives one) has no UTF-8, which RE2 reads: RE2
    is given U+FFFD in its place."""
    matcher = _matcher(pattern)
    if matcher is None:
        return None
    try:
        return matcher[0](text)
    except UnicodeEncodeError:  # RE2 reads UTF-8: each lone surrogate is read as U+FFFD, as a decoder would
        return matcher[0](text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace"))


def cost(pattern: str, text: str) -> int:
    """About how many steps :func:`search` may take on ``text`` (0 when it does not run the pattern)."""
    matcher = _matcher(pattern)
    if matcher is None:
        return 0
    _, factor, power = matcher
    return int(factor * max(1, len(text)) ** power)


def status(pattern: str) -> str | None:
    """None when ``pattern`` can be applied (to texts short enough, without RE2), else why it never is."""
    if _matcher(pattern) is not None:
        return None
    return ("RE2 does not accept it and Python's re could backtrack on it without bound"
            if _load_re2() is not None else
            "Python's re could backtrack on it without bound (install google-re2 to check it)")


def compiles(pattern: str) -> bool:
    """Whether ``pattern`` is a regular expression that Python's re or RE2 accepts (the ``regex`` format)."""
    loaded = _load_re2()
    if loaded is not None:
        try:
            loaded[0].compile(pattern, loaded[1])
        except Exception:  # noqa: BLE001 - not RE2 syntax: Python's, perhaps
            loaded = None
        if loaded is not None:
            return True
    if len(pattern) > MAX_PATTERN_CHARS or compile_size(pattern) > MAX_COMPILE_SIZE:
        return True  # never run by re, and compiling 100,000 characters took a second: no verdict on it
    try:
        re.compile(pattern)
    except (re.error, OverflowError, ValueError):
        return False
    except RecursionError:
        return True
    return True
