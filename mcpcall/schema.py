"""Checking values against a tool's JSON Schemas (with jsonschema): results and, on request, arguments.

The dialect is the schema's ``$schema``, 2020-12 when it names none. A ``$ref``
is resolved within the schema only: nothing is ever fetched from the network,
and a reference that points outside fails the check instead of passing it.
jsonschema is imported on first use, not with mcpcall. A mismatch raises
:class:`~mcpcall.errors.SchemaValidationError` with the JSON path and the reason.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from .errors import ProtocolError, SchemaValidationError

__all__ = ["Check", "input_check", "output_check", "schema_check"]

log = logging.getLogger("mcpcall.schema")

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
    from referencing import Registry

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        log.warning("server %r: tool %r has an invalid %s (%s); it is not checked", server, tool, what, exc.message)
        return None
    validator = cls(schema, registry=Registry(retrieve=_refuse))  # type: ignore[call-arg]
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


def output_check(schema: Any, *, tool: str, server: str) -> Check | None:
    """A checker of structured results against a tool's ``outputSchema``."""
    return schema_check(schema, what="outputSchema", tool=tool, server=server)


def input_check(schema: Any, *, tool: str, server: str) -> Check | None:
    """A checker of arguments against a tool's ``inputSchema``."""
    return schema_check(schema, what="inputSchema", tool=tool, server=server)
