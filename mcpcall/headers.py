"""HTTP header rules of the modern era, as pure functions.

- ``Mcp-Method`` / ``Mcp-Name`` mirror the request's method and name (or URI).
- ``Mcp-Param-{Name}`` mirrors tool arguments whose schema property carries an
  ``x-mcp-header`` annotation; :func:`header_params` checks a tool's
  annotations (a tool with an invalid one must be left out of ``tools/list``)
  and :func:`param_headers` builds the headers for one call.
- Values that are not plain visible ASCII are sent as ``=?base64?…?=``.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["InvalidHeaderAnnotation", "encode_value", "header_params", "param_headers", "standard_headers"]

# Used with fullmatch(): "$" would also match before a trailing newline.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_SAFE = re.compile(r"(?:[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?)?")  # empty is fine too
_MAX_SAFE_INT = 2**53 - 1
_NESTED_KEYWORDS = ("items", "prefixItems", "additionalProperties", "patternProperties", "oneOf", "anyOf", "allOf",
                    "not", "if", "then", "else", "$defs", "definitions", "dependentSchemas", "contains")

#: (header name, property path) pairs for one tool.
HeaderParams = list[tuple[str, tuple[str, ...]]]


class InvalidHeaderAnnotation(ValueError):
    """A tool's ``x-mcp-header`` annotation breaks the rules; the tool is unusable over HTTP."""


def encode_value(value: str) -> str:
    """A header value: as is when plain visible ASCII, else the base64 sentinel form.

    Plain means printable ASCII and spaces, with no space at either end. A value
    that itself looks like the sentinel form is encoded too, so it reads back
    unchanged. A ``str`` holding a lone surrogate is not Unicode and cannot be
    sent: ``UnicodeEncodeError`` (a ``ValueError``).
    """
    if _SAFE.fullmatch(value) and not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def standard_headers(message: Mapping[str, Any]) -> dict[str, str]:
    """``Mcp-Method`` and, for tools/call, resources/read, prompts/get and tasks/*, ``Mcp-Name``."""
    method = message.get("method")
    if not isinstance(method, str):
        return {}
    headers = {"Mcp-Method": method}
    params = message.get("params")
    if isinstance(params, Mapping):
        name: Any = None
        if method in ("tools/call", "prompts/get"):
            name = params.get("name")
        elif method == "resources/read":
            name = params.get("uri")
        elif method in ("tasks/get", "tasks/update", "tasks/cancel"):
            name = params.get("taskId")  # the tasks extension: routes a task's requests to its server instance
        if isinstance(name, str):
            headers["Mcp-Name"] = encode_value(name)
    return headers


def header_params(input_schema: Any) -> HeaderParams:
    """The ``x-mcp-header`` annotations of a tool's input schema, checked.

    Raises :class:`InvalidHeaderAnnotation` when one is empty, not an HTTP
    token, repeated (case-insensitively), on a non-primitive or ``number``
    property, or not reachable from the root through ``properties`` alone.
    """
    found: HeaderParams = []
    seen: set[str] = set()
    if not isinstance(input_schema, Mapping):
        return found

    def walk(schema: Mapping[str, Any], path: tuple[str, ...], reachable: bool) -> None:
        if "x-mcp-header" in schema and path:
            name = schema["x-mcp-header"]
            where = ".".join(path)
            if not reachable:
                raise InvalidHeaderAnnotation(f"x-mcp-header on {where} is not reachable through properties alone")
            if not isinstance(name, str) or not name:
                raise InvalidHeaderAnnotation(f"x-mcp-header on {where} must be a non-empty string")
            if not _TOKEN.fullmatch(name):
                raise InvalidHeaderAnnotation(f"x-mcp-header {name!r} on {where} is not a valid HTTP header token")
            if name.lower() in seen:
                raise InvalidHeaderAnnotation(f"x-mcp-header {name!r} is used twice")
            kind = schema.get("type")
            if kind not in ("string", "integer", "boolean"):
                raise InvalidHeaderAnnotation(f"x-mcp-header {name!r} is on {where} of type {kind!r}; only string, integer, boolean")
            seen.add(name.lower())
            found.append((name, path))
        elif "x-mcp-header" in schema and not path:
            raise InvalidHeaderAnnotation("x-mcp-header on the schema root")
        props = schema.get("properties")
        if isinstance(props, Mapping):
            for key, sub in props.items():
                if isinstance(sub, Mapping):
                    walk(sub, (*path, str(key)), reachable)
        for keyword in _NESTED_KEYWORDS:
            sub = schema.get(keyword)
            subs = sub if isinstance(sub, list) else list(sub.values()) if keyword in ("$defs", "definitions", "patternProperties", "dependentSchemas") and isinstance(sub, Mapping) else [sub]
            for item in subs:
                if isinstance(item, Mapping):
                    walk(item, (*path, keyword), False)

    try:
        walk(input_schema, (), True)
    except RecursionError:
        raise InvalidHeaderAnnotation("the input schema is nested too deeply to check") from None
    return found


def _lookup(arguments: Any, path: tuple[str, ...]) -> Any:
    value = arguments
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def param_headers(params: HeaderParams, arguments: Mapping[str, Any] | None) -> dict[str, str]:
    """``Mcp-Param-*`` headers for one call; absent and null values are left out.

    Raises ``ValueError`` (and nothing else) for a value that cannot go in a
    header: not a string, integer (an integral float counts) or boolean; an
    integer outside the JSON safe range (2**53 - 1); a string that is not
    valid Unicode (a lone surrogate).
    """
    headers: dict[str, str] = {}
    for name, path in params:
        value = _lookup(arguments, path)
        if value is None:
            continue
        where = ".".join(path)
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int):
            if not -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT:
                raise ValueError(f"argument {where} is outside the safe integer range for a header")
            text = str(int(value))  # int(): an IntEnum's str() is its name on Python < 3.11
        elif isinstance(value, float) and value.is_integer() and abs(value) <= _MAX_SAFE_INT:
            text = str(int(value))
        elif isinstance(value, str):
            text = value
        else:
            raise ValueError(f"argument {where} must be a string, integer or boolean to go in a header, "
                             f"not {type(value).__name__}")
        try:
            headers[f"Mcp-Param-{name}"] = encode_value(text)
        except UnicodeEncodeError:
            raise ValueError(f"argument {where} is not valid Unicode (it holds a lone surrogate)") from None
    return headers
