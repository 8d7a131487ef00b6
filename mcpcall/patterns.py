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
"""

from __future__ import annotations

import re
import sys
import threading
from collections import OrderedDict
from typing import Any, Callable, Optional

__all__ = ["MAX_PATTERN_CHARS", "MAX_STEPS", "compiles", "cost", "search", "status"]

#: A pattern longer than this is never run by :mod:`re` (RE2 bounds its own memory).
MAX_PATTERN_CHARS = 1000
#: The most backtracking steps the :mod:`re` fallback may take on one text (about a tenth of a second).
MAX_STEPS = 10_000_000
_MAX_NESTING = 50

_Search = Callable[[str], Optional[bool]]
_Built = tuple[_Search, int, int]  # the search, and its cost: about factor * len(text) ** power steps
_cache: OrderedDict[str, _Built | None] = OrderedDict()
_MAX_CACHED = 1024
_lock = threading.Lock()
_re2: Any = None
_re2_loaded = False


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


def _degree(pattern: str) -> tuple[int, int, bool] | None:
    """``(d, k, anchored)``: :mod:`re` backtracks at most about ``k * n**d`` steps per start; None when not bounded so.

    ``d`` counts the variable repetitions in sequence; ``k`` is what does not
    grow with the text but still multiplies the work: a fixed count (``x{1000}``
    tries its body 1000 times, nested counts multiply) and alternatives in
    sequence (``(?:a|aa)`` 23 times may try 2**23 ways). A ``k`` over
    :data:`MAX_STEPS` is refused, with RE2 installed too (RE2 refuses some such
    patterns as too big, and then this fallback decides).
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        return None
    try:
        tree = _parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError, TypeError):
        return None
    c = _constants()
    repeats = {c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT)}
    unsafe = {c.GROUPREF, c.GROUPREF_EXISTS, c.ASSERT, c.ASSERT_NOT, getattr(c, "GROUPREF_IGNORE", c.GROUPREF)}

    def walk(items: Any, in_repeat: bool, nesting: int) -> tuple[int, int] | None:
        if nesting > _MAX_NESTING:
            return None
        total, factor = 0, 1
        for op, av in items:
            if op in unsafe:
                return None
            if op in repeats:
                low, high, body = av
                found = walk(body, in_repeat or high != 1, nesting + 1)
                if found is None:
                    return None
                inner, inner_factor = found
                if inner and (in_repeat or high != 1):
                    return None  # a repetition inside a repetition
                if high != low:
                    if in_repeat:
                        return None
                    total += 1
                    factor *= inner_factor
                else:
                    factor *= inner_factor * max(1, high)  # x{1000}: the body, 1000 times
            elif op is c.SUBPATTERN or (getattr(c, "ATOMIC_GROUP", None) is not None and op is c.ATOMIC_GROUP):
                found = walk(av[-1] if op is c.SUBPATTERN else av, in_repeat, nesting + 1)
                if found is None:
                    return None
                total += found[0]
                factor *= found[1]
            elif op is c.BRANCH:
                if in_repeat:
                    return None  # (a|a)* and the like
                worst, ways = 0, 0
                for branch in av[1]:
                    found = walk(branch, in_repeat, nesting + 1)
                    if found is None:
                        return None
                    worst = max(worst, found[0])
                    ways += found[1]  # each alternative may be tried in turn
                total += worst
                factor *= ways
            if factor > MAX_STEPS:
                return None  # (?:a{1000}){1000}, (?:a|aa)(?:a|aa)...: too many ways before the text even counts
        return total, factor

    found = walk(tree, False, 0)
    if found is None:
        return None
    first = tree[0] if len(tree) else None
    anchored = first is not None and first[0] is c.AT and first[1] in (c.AT_BEGINNING, c.AT_BEGINNING_STRING)
    return found[0], found[1], anchored


def _build(pattern: str) -> _Built | None:
    loaded = _load_re2()
    if loaded is not None:
        re2, options = loaded
        try:
            compiled2 = re2.compile(pattern, options)
        except Exception:  # noqa: BLE001 - RE2 refuses it (a lookaround, a backreference): try the fallback
            compiled2 = None
        if compiled2 is not None:
            return (lambda text: compiled2.search(text) is not None), 1, 1  # linear
    shape = _degree(pattern)
    if shape is None:
        return None
    try:
        compiled = re.compile(pattern)
    except (re.error, RecursionError, OverflowError, ValueError):
        return None
    degree, factor, anchored = shape
    power = degree + (0 if anchored else 1)
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
    with _lock:
        if pattern in _cache:
            _cache.move_to_end(pattern)
            return _cache[pattern]
    built = _build(pattern)
    with _lock:
        _cache[pattern] = built
        while len(_cache) > _MAX_CACHED:
            _cache.popitem(last=False)
    return built


def search(pattern: str, text: str) -> bool | None:
    """Whether ``pattern`` matches somewhere in ``text``; None when that cannot be decided at a bounded cost."""
    matcher = _matcher(pattern)
    return None if matcher is None else matcher[0](text)


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
    if len(pattern) > 100 * MAX_PATTERN_CHARS:
        return True  # not parsed (never run either): no verdict on it
    try:
        re.compile(pattern)
    except (re.error, OverflowError, ValueError):
        return False
    except RecursionError:
        return True
    return True
