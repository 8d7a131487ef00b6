"""Checking structured tool results against the tool's ``outputSchema`` (with jsonschema).

The dialect is the schema's ``$schema``, 2020-12 when it names none. A ``$ref``
is resolved within the schema only: nothing is ever fetched from the network,
and a reference that points outside fails the check instead of passing it.
jsonschema is imported on first use, not with mcpcall.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from .errors import ProtocolError

__all__ = ["Check", "output_check"]

log = logging.getLogger("mcpcall.schema")

#: ``check(instance)`` raises ProtocolError when the instance does not match.
Check = Callable[[Any], None]


def _refuse(uri: str) -> Any:
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(uri)  # a network $ref is never fetched


def output_check(schema: Any, *, tool: str, server: str) -> Check | None:
    """A checker for ``schema``, or None when the schema itself is unusable (logged)."""
    if not isinstance(schema, dict):
        return None
    import jsonschema
    from referencing import Registry

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        log.warning("server %r: tool %r has an invalid outputSchema (%s); its results are not checked", server, tool, exc.message)
        return None
    validator = cls(schema, registry=Registry(retrieve=_refuse))  # type: ignore[call-arg]

    def check(instance: Any) -> None:
        try:
            error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
        except Exception as exc:  # referencing raises its own tree (Unresolvable, …)
            raise ProtocolError(
                f"server {server!r}: the outputSchema of tool {tool!r} cannot be applied ({type(exc).__name__}: {exc}); "
                "references outside the schema are never fetched"
            ) from exc
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            raise ProtocolError(
                f"server {server!r}: tool {tool!r} returned structured content that does not match its "
                f"outputSchema at {where}: {error.message}"
            )

    return check
