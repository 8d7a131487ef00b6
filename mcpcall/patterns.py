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

__all__ = ["MAX_PATTERN_CHARS", "MAX_STEPS", "compiles", "search", "status"]

#: A pattern longer than this is never run by :mod:`re` (RE2 bounds its own memory).
MAX_PATTERN_CHARS = 1000
#: The most backtracking steps the :mod:`re` fallback may take on one text (about a tenth of a second).
MAX_STEPS = 10_000_000
_MAX_NESTING = 50

_Search = Callable[[str], Optional[bool]]
_cache: OrderedDict[str, _Search | None] = OrderedDict()
_MAX_CACHED = 1024
_lock = threading.Lock()
_re2: Any = None
_re2_loaded = False


def _load_re2() -> Any:
    """``re2`` when google-re2 is importable (looked up once), else None."""
    global _re2, _re2_loaded
    if not _re2_loaded:
        try:
            import re2  # type: ignore[import-not-found,unused-ignore]

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


def _degree(pattern: str) -> tuple[int, bool] | None:
    """``(d, anchored)``: :mod:`re` backtracks at most about ``n**d`` steps per start; None when not bounded so."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return None
    try:
        tree = _parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError, TypeError):
        return None
    c = _constants()
    repeats = {c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT)}
    unsafe = {c.GROUPREF, c.GROUPREF_EXISTS, c.ASSERT, c.ASSERT_NOT, getattr(c, "GROUPREF_IGNORE", c.GROUPREF)}

    def walk(items: Any, in_repeat: bool, nesting: int) -> int | None:
        if nesting > _MAX_NESTING:
            return None
        total = 0
        for op, av in items:
            if op in unsafe:
                return None
            if op in repeats:
                low, high, body = av
                inner = walk(body, in_repeat or high != 1, nesting + 1)
                if inner is None or (inner and (in_repeat or high != 1)):
                    return None  # a repetition inside a repetition
                if high != low:
                    if in_repeat:
                        return None
                    total += 1
            elif op is c.SUBPATTERN:
                inner = walk(av[-1], in_repeat, nesting + 1)
                if inner is None:
                    return None
                total += inner
            elif getattr(c, "ATOMIC_GROUP", None) is not None and op is c.ATOMIC_GROUP:
                inner = walk(av, in_repeat, nesting + 1)
                if inner is None:
                    return None
                total += inner
            elif op is c.BRANCH:
                if in_repeat:
                    return None  # (a|a)* and the like
                worst = 0
                for branch in av[1]:
                    inner = walk(branch, in_repeat, nesting + 1)
                    if inner is None:
                        return None
                    worst = max(worst, inner)
                total += worst
        return total

    degree = walk(tree, False, 0)
    if degree is None:
        return None
    first = tree[0] if len(tree) else None
    anchored = first is not None and first[0] is c.AT and first[1] in (c.AT_BEGINNING, c.AT_BEGINNING_STRING)
    return degree, anchored


def _build(pattern: str) -> _Search | None:
    loaded = _load_re2()
    if loaded is not None:
        re2, options = loaded
        try:
            compiled2 = re2.compile(pattern, options)
        except Exception:  # noqa: BLE001 - RE2 refuses it (a lookaround, a backreference): try the fallback
            compiled2 = None
        if compiled2 is not None:
            return lambda text: compiled2.search(text) is not None
    shape = _degree(pattern)
    if shape is None:
        return None
    try:
        compiled = re.compile(pattern)
    except (re.error, RecursionError, OverflowError, ValueError):
        return None
    degree, anchored = shape
    power = degree + (0 if anchored else 1)
    if power == 0:
        return lambda text: compiled.search(text) is not None
    longest = int(MAX_STEPS ** (1.0 / power))
    while (longest + 1) ** power > MAX_STEPS:
        longest -= 1

    def fallback(text: str) -> bool | None:
        if len(text) > longest:
            return None  # too long for a backtracking engine: not checked
        return compiled.search(text) is not None

    return fallback


def _matcher(pattern: str) -> _Search | None:
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
    return None if matcher is None else matcher(text)


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
