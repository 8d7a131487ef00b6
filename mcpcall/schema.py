"""Checking values against a tool's JSON Schemas (with jsonschema): results and, on request, arguments.

The dialect is the schema's ``$schema``, 2020-12 when it names none. A ``$ref``
is resolved within the schema only: nothing is ever fetched from the network,
and a reference that points outside fails the check instead of passing it.
jsonschema is imported on first use, not with mcpcall. A mismatch raises
:class:`~mcpcall.errors.SchemaValidationError` with the JSON path and the reason.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from typing import Any, Callable

from .errors import ProtocolError, SchemaValidationError

__all__ = ["Check", "input_check", "output_check", "schema_check"]

log = logging.getLogger("mcpcall.schema")

_MAX_VALIDATORS = 512
_validators: OrderedDict[str, Any] = OrderedDict()  # canonical schema JSON -> validator, or why it is invalid
_lock = threading.Lock()

#: ``check(instance)`` raises SchemaValidationError when the instance does not match.
Check = Callable[[Any], None]


def _refuse(uri: str) -> Any:
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(uri)  # a network $ref is never fetched


def _json_path(parts: Any) -> str:
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if str(part).isidentifier() else f"[{str(part)!r}]")
    return path


def schema_check(schema: Any, *, what: str, tool: str, server: str) -> Check | None:
    """A checker of values against ``schema`` (the tool's ``what``: "outputSchema" or "inputSchema").

    None when the schema itself is unusable (logged: such values go unchecked).
    """
    if not isinstance(schema, dict):
        return None
    import jsonschema

    compiled = _compiled(schema)
    if isinstance(compiled, str):
        log.warning("server %r: tool %r has an invalid %s (%s); it is not checked", server, tool, what, compiled)
        return None
    validator = compiled
    subject = "returned structured content" if what == "outputSchema" else "was given arguments"

    def check(instance: Any) -> None:
        try:
            error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
        except Exception as exc:  # referencing raises its own tree (Unresolvable, …)
            raise ProtocolError(
                f"server {server!r}: the {what} of tool {tool!r} cannot be applied ({type(exc).__name__}: {exc}); "
                "references outside the schema are never fetched"
            ) from exc
        if error is not None:
            path = _json_path(error.absolute_path)
            raise SchemaValidationError(
                f"server {server!r}: tool {tool!r} {subject} that do not match its {what} at {path}: {error.message}"
                if what == "inputSchema" else
                f"server {server!r}: tool {tool!r} {subject} that does not match its {what} at {path}: {error.message}",
                path=path, reason=error.message, tool=tool, server=server,
            )

    return check


def _compiled(schema: dict[str, Any]) -> Any:
    """A validator of ``schema``, or why the schema is invalid; the same schema is compiled once.

    Checking a schema against its meta-schema costs milliseconds, and every
    listing of the tools brings the same schemas again. Validators are
    immutable, so clients and threads share them; each holds its own copy of
    the schema, keyed by its canonical JSON.
    """
    try:
        key = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        key = None  # not JSON (a client-side dict given by hand): compiled every time
    if key is not None:
        with _lock:
            hit = _validators.get(key)
            if hit is not None:
                _validators.move_to_end(key)
                return hit
    import jsonschema
    from referencing import Registry

    own = json.loads(key) if key is not None else schema
    cls = jsonschema.validators.validator_for(own, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(own)
    except jsonschema.SchemaError as exc:
        compiled: Any = exc.message
    else:
        compiled = cls(own, registry=Registry(retrieve=_refuse))  # type: ignore[call-arg]
    if key is not None:
        with _lock:
            _validators[key] = compiled
            while len(_validators) > _MAX_VALIDATORS:
                _validators.popitem(last=False)
    return compiled


def output_check(schema: Any, *, tool: str, server: str) -> Check | None:
    """A checker of structured results against a tool's ``outputSchema``."""
    return schema_check(schema, what="outputSchema", tool=tool, server=server)


def input_check(schema: Any, *, tool: str, server: str) -> Check | None:
    """A checker of arguments against a tool's ``inputSchema``."""
    return schema_check(schema, what="inputSchema", tool=tool, server=server)
