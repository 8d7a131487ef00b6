"""Checking values against a tool's JSON Schemas (with jsonschema): results and, on request, arguments.

The dialect is the schema's ``$schema``, 2020-12 when it names none. A ``$ref``
is resolved within the schema only: nothing is ever fetched from the network,
and a reference that points outside fails the check instead of passing it.
jsonschema is imported on first use, not with mcpcall. A mismatch raises
:class:`~mcpcall.errors.SchemaValidationError` with the JSON path and the reason.

What a server controls is checked at a bounded cost, in one validator class
(:func:`_safe_class`, jsonschema's own extended) used for every check here and
for checking the schema against its meta-schema: ``pattern``,
``patternProperties`` and ``additionalProperties`` match through
:mod:`mcpcall.patterns` (RE2 when installed, else Python's re only where it
cannot backtrack without bound); ``uniqueItems`` compares a canonical, hashable
form of each item (linear, where jsonschema's is quadratic for objects);
``format`` stays an annotation (no format checker is passed), and the meta-schema's
``regex`` format only asks whether a pattern compiles. What cannot be checked
at a bounded cost is skipped, with one log record per schema: a skipped check
never makes a value invalid. A schema nested deeper than :data:`MAX_DEPTH`, or whose patterns total more
than :data:`MAX_PATTERN_TOTAL` characters (compiling them would cost without bound; a set's ranges count by
their size), is not used.

The whole check of one value shares one budget, :data:`MAX_CHECK_STEPS`: each
keyword applied (a ``$ref`` followed, an ``anyOf`` branch tried), each
pattern's estimated regex steps, each error's message (jsonschema's repr the
instance) and each node put in canonical form (``enum``, ``const`` and
``uniqueItems`` compare those, not item by item) spend from it; a value nested
too deeply for jsonschema's recursion passes unchecked too. A check over budget stops and the
value passes unchecked (said once per schema), so neither a ``$ref`` fan-out
(``2**N`` paths) nor many texts each just short enough can make a check unbounded.
A check given a deadline (the call's) stops there too, the same way.
"""

from __future__ import annotations

import json
import logging
import math
import reprlib
import threading
from collections import OrderedDict
from time import monotonic
from typing import Any, Callable

from .errors import ProtocolError, SchemaValidationError

__all__ = ["MAX_DEPTH", "MAX_PATTERN_TOTAL", "Check", "deeper_than", "input_check", "output_check", "schema_check"]

log = logging.getLogger("mcpcall.schema")

#: How deeply a tool definition (and so each of its schemas) may nest: dicts and lists, counted from the tool's own dict.
MAX_DEPTH = 64
#: How many characters of patterns one schema may hold (``pattern`` values, ``patternProperties`` keys): each is
#: compiled to check the schema and to apply it, a cost that grows with their total, so a schema over it is not used.
MAX_PATTERN_TOTAL = 64 * 1024
_MAX_VALIDATORS = 512
_validators: OrderedDict[str, Any] = OrderedDict()  # canonical schema JSON -> validator, or why it is invalid
_lock = threading.Lock()

#: ``check(instance)`` raises SchemaValidationError when the instance does not match.
#: ``check(value, deadline=math.inf)``: raises SchemaValidationError; stops unchecked at ``deadline`` (monotonic).
Check = Callable[..., None]


def _refuse(uri: str) -> Any:
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(uri)  # a network $ref is never fetched


def _json_path(parts: Any) -> str:
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if str(part).isidentifier() else f"[{str(part)!r}]")
    return path


def deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests dicts and lists more than ``limit`` deep (iterative: any depth is safe to ask about)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        depth += 1
        if depth > limit:
            return True
        stack.extend((child, depth) for child in children if isinstance(child, (dict, list, tuple)))
    return False


class _Compiled:
    """A validator with what it cannot check, and whether that was said (once per schema)."""

    __slots__ = ("said", "said_at_run", "said_late", "said_over_budget", "said_too_deep", "skipped", "validator")

    def __init__(self, validator: Any, skipped: list[str]) -> None:
        self.validator = validator
        self.skipped = skipped
        self.said = False
        self.said_at_run = False
        self.said_over_budget = False
        self.said_late = False
        self.said_too_deep = False


#: What checking one value may cost, in regex steps (see :data:`mcpcall.patterns.MAX_STEPS`); a keyword counts as
#: :data:`_KEYWORD_STEPS`.
MAX_CHECK_STEPS = 30_000_000
_KEYWORD_STEPS = 500
_CHAR_STEPS = 5  # per character of an error's message (a repr of the instance, which jsonschema builds for each error)
_NODE_STEPS = 50  # per dict, list or scalar put in canonical form (enum, const, uniqueItems)
_SEARCH_STEPS = 250  # per pattern tried, whatever the text (patternProperties: every pattern against every key)
_COMPILE_STEPS = 1000  # per character of a pattern compiled during a check (about 2 ms for 250 in re, parsing included)

_run = threading.local()  # .skipped: the patterns a check in progress on this thread could not apply; .budget


#: Steps between two looks at the clock, when a check has a deadline.
_CLOCK_STEPS = 200_000


class _Budget:
    __slots__ = ("clock_at", "deadline", "left")

    def __init__(self, left: int, deadline: float) -> None:
        self.left = left
        self.deadline = deadline
        self.clock_at = left - _CLOCK_STEPS if deadline != math.inf else 0  # below 0: over budget

    def spend(self, steps: int) -> None:
        self.left -= steps
        if self.left < self.clock_at:
            if self.left < 0:
                raise _OverBudget()
            self.clock_at = self.left - _CLOCK_STEPS
            if monotonic() > self.deadline:
                raise _OverDeadline()


class _OverBudget(Exception):
    """The check of one value spent :data:`MAX_CHECK_STEPS`: it stops, and the value is not checked."""


class _OverDeadline(_OverBudget):
    """The check of one value reached the caller's deadline: it stops, and the value is not checked."""


def _spend(steps: int) -> None:
    """Spend ``steps`` from the budget of the check in progress on this thread (if any); over it, stop."""
    budget = getattr(_run, "budget", None)
    if budget is not None:
        budget.spend(steps)


def _charged(errors: Any) -> Any:
    for error in errors:
        _spend(_CHAR_STEPS * len(str(error.message)))  # jsonschema's messages repr the instance: a big one, each time
        yield error


def _counted(keyword: Any) -> Any:
    """``keyword`` (a jsonschema keyword function), spending from the budget of the check in progress."""

    def spend(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        if getattr(_run, "budget", None) is None:
            return keyword(validator, value, instance, schema)
        _spend(_KEYWORD_STEPS)
        errors = keyword(validator, value, instance, schema)
        return None if errors is None else _charged(errors)

    return spend


def _skipped(pattern: str) -> None:
    found = getattr(_run, "skipped", None)
    if found is not None and len(found) < 8:
        found.append(pattern)


def _search(pattern: Any, text: Any) -> bool | None:
    if not isinstance(pattern, str) or not isinstance(text, str):
        return None
    from .patterns import cached, cost, search

    budget = getattr(_run, "budget", None)
    if budget is not None:
        if not cached(pattern):  # more patterns than the cache keeps (2000 patternProperties): compiled again each time
            _spend(_COMPILE_STEPS * len(pattern))
        steps = _SEARCH_STEPS + cost(pattern, text)
        if steps > MAX_CHECK_STEPS:
            _skipped(pattern)  # more than a whole check may cost: not applied (the rest of the value still is)
            return None
        budget.spend(steps)  # what is left of the budget is too little: the check stops, the value passes unchecked
    matched = search(pattern, text)
    if matched is None:
        _skipped(pattern)
    return matched


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Any:
    if validator.is_type(instance, "string") and _search(pattern, instance) is False:
        from jsonschema.exceptions import ValidationError

        yield ValidationError(f"{_short(instance)} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Any:
    if not validator.is_type(instance, "object") or not isinstance(patterns, dict):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):  # None (not decidable): that subschema is not applied
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Any:
    if not validator.is_type(instance, "object"):
        return
    from jsonschema.exceptions import ValidationError

    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extras = []
    for key in instance:
        if key in properties:
            continue
        verdicts = [_search(pattern, key) for pattern in patterns]
        if any(verdict is not False for verdict in verdicts):
            continue  # matched, or not decidable: never counted as additional
        extras.append(key)
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        joined = ", ".join(_short(each) for each in sorted(extras, key=str)[:20])
        if patterns:
            yield ValidationError(f"{joined} do(es) not match any of the regexes: {', '.join(map(_short, sorted(patterns)[:20]))}")
        else:
            yield ValidationError(f"Additional properties are not allowed ({joined} unexpected)")


def _canonical(value: Any) -> Any:
    """A hashable form of a JSON value, equal where JSON Schema calls values equal (1 == 1.0, True != 1); iterative."""
    out: list[Any] = []
    stack: list[tuple[Any, bool]] = [(value, False)]
    nodes = 0
    while stack:
        node, built = stack.pop()
        nodes += 1
        if isinstance(node, (dict, list, tuple)):
            if not built:
                stack.append((node, True))
                children = list(node.values()) if isinstance(node, dict) else list(node)
                stack.extend((child, False) for child in reversed(children))
                continue
            count = len(node)
            parts = out[len(out) - count:] if count else []
            del out[len(out) - count:]
            if isinstance(node, dict):
                out.append(("object", frozenset(zip(node.keys(), parts))))
            else:
                out.append(("array", tuple(parts)))
        elif isinstance(node, bool):
            out.append(("bool", node))
        elif isinstance(node, (int, float)):
            out.append(("number", node))
        elif isinstance(node, str) or node is None:
            out.append(("leaf", node))
        else:
            out.append(("other", repr(node)))
    _spend(_NODE_STEPS * nodes)
    return out[0]


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Any:
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for index, item in enumerate(instance):
        key = _canonical(item)
        if key in seen:
            from jsonschema.exceptions import ValidationError

            yield ValidationError(f"{_short(instance)} has non-unique elements (item {index} repeats an earlier one)")
            return
        seen.add(key)


_enums: OrderedDict[int, tuple[Any, frozenset[Any]]] = OrderedDict()  # id(enum list) -> (the list, kept alive; its forms)


def _enum_forms(enums: list[Any]) -> frozenset[Any]:
    with _lock:
        hit = _enums.get(id(enums))
        if hit is not None and hit[0] is enums:
            _enums.move_to_end(id(enums))
            return hit[1]
    saved = getattr(_run, "budget", None)
    _run.budget = None  # once per schema, linear in its size: not the value's cost
    try:
        forms = frozenset(_canonical(each) for each in enums)
    finally:
        _run.budget = saved
    with _lock:
        _enums[id(enums)] = (enums, forms)
        while len(_enums) > _MAX_VALIDATORS:
            _enums.popitem(last=False)
    return forms


def _enum(validator: Any, enums: Any, instance: Any, schema: Any) -> Any:
    if not isinstance(enums, list):
        if enums != instance:
            from jsonschema.exceptions import ValidationError

            yield ValidationError(f"{_short(instance)} is not {_short(enums)}")
        return
    if _canonical(instance) not in _enum_forms(enums):
        from jsonschema.exceptions import ValidationError

        yield ValidationError(f"{_short(instance)} is not one of {_short(enums)}")


def _const(validator: Any, const: Any, instance: Any, schema: Any) -> Any:
    if _canonical(instance) != _canonical(const):
        from jsonschema.exceptions import ValidationError

        yield ValidationError(f"{_short(const)} was expected")


def _not_applied(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
    return iter(())  # unevaluatedProperties next to an unsafe patternProperties: jsonschema would run it with re


_repr = reprlib.Repr()
_repr.maxlevel, _repr.maxstring, _repr.maxother, _repr.maxlong = 4, 120, 120, 60
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 12


def _short(value: Any) -> str:
    """A repr of ``value`` at most about 200 characters long, at a cost that does not grow with the value."""
    text = _repr.repr(value)
    return text if len(text) <= 200 else text[:200] + "…"


_classes: dict[tuple[Any, bool], Any] = {}


def _safe_class(base: Any, *, unevaluated: bool = True) -> Any:
    """``base`` (a jsonschema validator class) with the keywords whose cost a server could drive replaced."""
    with _lock:
        cls = _classes.get((base, unevaluated))
        if cls is not None:
            return cls
    import jsonschema

    keywords = dict(base.VALIDATORS)
    keywords.update({"pattern": _pattern, "patternProperties": _pattern_properties,
                     "additionalProperties": _additional_properties, "uniqueItems": _unique_items})
    if "enum" in keywords:
        keywords["enum"] = _enum
    if "const" in keywords:
        keywords["const"] = _const
    if not unevaluated:
        keywords["unevaluatedProperties"] = _not_applied
    keywords = {name: _counted(keyword) for name, keyword in keywords.items()}  # every keyword spends from the budget
    cls = jsonschema.validators.extend(base, keywords)  # type: ignore[no-untyped-call]
    with _lock:
        _classes[(base, unevaluated)] = cls
    return cls


def _pattern_total(schema: Any) -> int:
    """What compiling every ``pattern`` value and ``patternProperties`` key in ``schema`` costs, in characters of
    ordinary patterns (:func:`mcpcall.patterns.compile_size`: a set's ranges count by their size); iterative."""
    from .patterns import compile_size

    total = 0
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            pattern = node.get("pattern")
            if isinstance(pattern, str):
                total += compile_size(pattern)
            keyed = node.get("patternProperties")
            if isinstance(keyed, dict):
                total += sum(compile_size(key) for key in keyed if isinstance(key, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return total


def _scan(schema: Any) -> tuple[list[str], bool]:
    """The patterns of ``schema`` that are never applied (and why), and whether it has patternProperties."""
    from .patterns import status

    notes: list[str] = []
    has_pattern_properties = False
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            patterns = []
            if isinstance(node.get("pattern"), str):
                patterns.append(node["pattern"])
            if isinstance(node.get("patternProperties"), dict):
                has_pattern_properties = True
                patterns.extend(key for key in node["patternProperties"] if isinstance(key, str))
            for pattern in patterns:
                why = status(pattern)
                if why is not None and len(notes) < 8:
                    notes.append(f"{pattern[:80]!r}: {why}")
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return notes, has_pattern_properties


def _has_key(schema: Any, name: str) -> bool:
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if name in node:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _best_match(errors: Any) -> Any:
    """jsonschema's ``best_match`` of ``errors``, whose ranking never raises.

    Its ranking asks whether each error's instance is of a type its schema's
    ``type`` names; draft 3 lets a ``type`` list hold schemas (its meta-schema
    does so), which that reads as type names: TypeError, unhashable dict. Such
    an error ranks below every other.
    """
    from jsonschema.exceptions import best_match, relevance

    def ranked(error: Any) -> tuple[Any, ...]:
        try:
            return (True, relevance(error))
        except _OverBudget:
            raise
        except Exception:  # noqa: BLE001 - a type that is a schema, or a name jsonschema does not know
            return (False,)

    return best_match(errors, key=ranked)


def _log_here(logger: logging.Logger, level: int, msg: str, *args: Any) -> None:
    logger.log(level, msg, *args)


#: ``emit(logger, level, msg, *args)``: how a check logs (a client passes ``CallbackRunner.log``, never on an I/O thread).
Emit = Callable[..., None]


def schema_check(schema: Any, *, what: str, tool: str, server: str, emit: Emit | None = None) -> Check | None:
    """A checker of values against ``schema`` (the tool's ``what``: "outputSchema" or "inputSchema").

    None when the schema itself is unusable (logged: such values go unchecked).
    ``emit`` logs what a check says (default: ``logger.log`` on the checking thread).
    """
    say = emit if emit is not None else _log_here
    if not isinstance(schema, dict):
        return None
    compiled = _compiled(schema)
    if isinstance(compiled, str):
        log.warning("server %r: tool %r has an invalid %s (%s); it is not checked", server, tool, what, compiled)
        return None
    if compiled.skipped and not compiled.said:
        compiled.said = True
        log.warning("server %r: tool %r: part of its %s is never checked (values pass it): %s",
                    server, tool, what, "; ".join(compiled.skipped))
    from .patterns import status

    validator = compiled.validator
    subject = "returned structured content" if what == "outputSchema" else "was given arguments"

    def check(instance: Any, deadline: float = math.inf) -> None:
        skipped: list[str] = []
        _run.skipped = skipped
        _run.budget = _Budget(MAX_CHECK_STEPS, deadline)
        try:
            error = _best_match(validator.iter_errors(instance))
        except _OverDeadline:
            if not compiled.said_late:
                compiled.said_late = True
                say(log, logging.WARNING, "server %r: tool %r: a value passed its %s unchecked: the caller's deadline "
                    "came before the check could finish (said once per schema)", server, tool, what)
            return  # never a false "invalid"
        except _OverBudget:
            if not compiled.said_over_budget:
                compiled.said_over_budget = True
                say(log, logging.WARNING, "server %r: tool %r: a value passed its %s unchecked: checking it would cost more "
                    "than %d steps (a $ref fan-out or a large value; said once per schema)", server, tool, what,
                    MAX_CHECK_STEPS)
            return  # never a false "invalid"
        except RecursionError:  # a recursive $ref follows the value down, several frames a level: too deep to check
            if not compiled.said_too_deep:
                compiled.said_too_deep = True
                say(log, logging.WARNING, "server %r: tool %r: a value passed its %s unchecked: it nests too deeply to "
                    "check (said once per schema)", server, tool, what)
            return
        except Exception as exc:  # referencing raises its own tree (Unresolvable, …)
            raise ProtocolError(
                f"server {server!r}: the {what} of tool {tool!r} cannot be applied ({type(exc).__name__}: {exc}); "
                "references outside the schema are never fetched"
            ) from exc
        finally:
            _run.skipped = None
            _run.budget = None
        if skipped and not compiled.said_at_run and any(status(pattern) is None for pattern in skipped):
            compiled.said_at_run = True
            say(log, logging.INFO, "server %r: tool %r: a value too long to match at a bounded cost passed the pattern %r "
                "of its %s unchecked (install google-re2 to check it; said once per schema)", server, tool,
                next(pattern for pattern in skipped if status(pattern) is None)[:80], what)
        if error is not None:
            path = _json_path(error.absolute_path)
            reason = error.message if len(error.message) <= 300 else error.message[:300] + "…"  # a repr of the value
            raise SchemaValidationError(
                f"server {server!r}: tool {tool!r} {subject} that do not match its {what} at {path}: {reason}"
                if what == "inputSchema" else
                f"server {server!r}: tool {tool!r} {subject} that does not match its {what} at {path}: {reason}",
                path=path, reason=reason, tool=tool, server=server, schema=what,
            )

    return check


_formats: Any = None


def _schema_formats() -> Any:
    """The only format checked in a schema (against its meta-schema): ``regex``, by compiling and never running it."""
    global _formats
    if _formats is None:
        import jsonschema

        from .patterns import compiles

        checker = jsonschema.FormatChecker(formats=())
        checker.checks("regex")(lambda value: not isinstance(value, str) or compiles(value))
        _formats = checker
    return _formats


def _compiled(schema: dict[str, Any]) -> _Compiled | str:
    """A validator of ``schema``, or why the schema is invalid; the same schema is compiled once.

    Checking a schema against its meta-schema costs milliseconds, and every
    listing of the tools brings the same schemas again. Validators are
    immutable, so clients and threads share them; each holds its own copy of
    the schema, keyed by its canonical JSON.
    """
    if deeper_than(schema, MAX_DEPTH):
        return f"nested deeper than {MAX_DEPTH} levels"
    total = _pattern_total(schema)
    if total > MAX_PATTERN_TOTAL:
        return (f"its patterns total {total} characters (a set's ranges counted by their size), more than "
                f"{MAX_PATTERN_TOTAL} can be compiled at a bounded cost")
    try:
        key = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        key = None  # not JSON (a client-side dict given by hand): compiled every time
    if key is not None:
        with _lock:
            hit = _validators.get(key)
            if hit is not None:
                _validators.move_to_end(key)
                return hit  # type: ignore[no-any-return]
    import jsonschema
    from referencing import Registry

    own = json.loads(key) if key is not None else schema
    dialect = own.get("$schema") if isinstance(own, dict) else None
    if dialect is None or isinstance(dialect, str):
        base = jsonschema.validators.validator_for(own, default=jsonschema.Draft202012Validator)
    else:  # jsonschema's lookup fails on a "$schema" that is no string (a list, a number): the meta-schema says so
        base = jsonschema.Draft202012Validator
    meta_base = jsonschema.validators.validator_for(base.META_SCHEMA, default=base)
    meta = _safe_class(meta_base)(base.META_SCHEMA, format_checker=_schema_formats())
    error = _best_match(meta.iter_errors(own))
    compiled: _Compiled | str
    if error is not None:
        compiled = error.message
    else:
        skipped, has_pattern_properties = _scan(own)
        unevaluated = not (has_pattern_properties and _has_key(own, "unevaluatedProperties"))
        if not unevaluated:
            skipped.append("unevaluatedProperties: next to patternProperties it would run them with Python's re")
        cls = _safe_class(base, unevaluated=unevaluated)
        compiled = _Compiled(cls(own, registry=Registry(retrieve=_refuse)), skipped)  # type: ignore[call-arg]
    if key is not None:
        with _lock:
            _validators[key] = compiled
            while len(_validators) > _MAX_VALIDATORS:
                _validators.popitem(last=False)
    return compiled


def output_check(schema: Any, *, tool: str, server: str, emit: Emit | None = None) -> Check | None:
    """A checker of structured results against a tool's ``outputSchema``."""
    return schema_check(schema, what="outputSchema", tool=tool, server=server, emit=emit)


def input_check(schema: Any, *, tool: str, server: str) -> Check | None:
    """A checker of arguments against a tool's ``inputSchema``."""
    return schema_check(schema, what="inputSchema", tool=tool, server=server)
