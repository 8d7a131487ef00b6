"""Tool schemas for Gemini: JSON Schema to the ``Schema`` message of Gemini function declarations.

Gemini's ``parameters`` is a proto message (an OpenAPI 3.0 subset): an
unknown key is an error, so only its fields are written. The rules, and the
Gemini errors behind them, are in the table of :mod:`mcpcall.registry.formats`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["GEMINI_SCHEMA_KEYS", "gemini_schema", "resolve_pointer"]

GEMINI_SCHEMA_KEYS = frozenset({
    "type", "format", "title", "description", "nullable", "enum", "items", "minItems", "maxItems",
    "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength", "pattern",
    "minimum", "maximum", "anyOf", "default", "example",
})  # fmt: skip
"""The keys :func:`gemini_schema` may emit (fields of Gemini's ``Schema`` message)."""

_GEMINI_TYPES = {"string": "STRING", "number": "NUMBER", "integer": "INTEGER", "boolean": "BOOLEAN",
                 "array": "ARRAY", "object": "OBJECT"}  # fmt: skip
_GEMINI_FORMATS = {"STRING": {"enum", "date-time"}, "NUMBER": {"float", "double"}, "INTEGER": {"int32", "int64"}}
_COPIED = ("title", "description", "pattern", "default", "minimum", "maximum")
_COUNTS = ("minItems", "maxItems", "minProperties", "maxProperties", "minLength", "maxLength")
_MAX_NODES = 2000
_MAX_WORK = 200_000  # keys copied in one conversion (a $ref's target is copied each time it is inlined)


def gemini_schema(schema: Any, *, max_ref_depth: int = 8) -> dict[str, Any]:
    """``schema`` (a tool's JSON Schema) as a Gemini ``Schema`` of type OBJECT; see the module docstring."""
    root = schema if isinstance(schema, Mapping) else {}
    out = _Gemini(root, max_ref_depth).convert(root, (), 0)
    if out.get("type") != "OBJECT":
        out = {key: value for key, value in out.items() if key in ("description", "title")}
        out["type"] = "OBJECT"
    out.setdefault("properties", {})
    return out


def resolve_pointer(root: Mapping[str, Any], ref: Any) -> Mapping[str, Any] | None:
    """The schema a local ``$ref`` (``#``, ``#/$defs/X``, any JSON pointer into ``root``) points at.

    None for a reference that is not a string, not local (``other.json#/X``,
    ``https://...``), or that leads nowhere or to something that is not an object.
    """
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    node: Any = root
    for part in ref[1:].lstrip("/").split("/") if ref not in ("#", "#/") else ():
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isascii() and part.isdigit() and len(part) <= 18 and int(part) < len(node):
            node = node[int(part)]  # ASCII digits only ("²".isdigit() is true), and not more than int() reads
        else:
            return None
    return node if isinstance(node, Mapping) else None


class _Gemini:
    """One conversion: the root (for ``$ref``) and the depth limit."""

    def __init__(self, root: Mapping[str, Any], max_ref_depth: int) -> None:
        self.root = root
        self.max_ref_depth = max_ref_depth
        self.budget = _MAX_NODES  # inlined $refs can multiply: past this many nodes, the rest is free-form
        self.work = _MAX_WORK  # and past this many keys copied (a large target inlined many times)

    def resolve(self, ref: Any) -> Mapping[str, Any] | None:
        return resolve_pointer(self.root, ref)

    def convert(self, node: Any, refs: tuple[str, ...], depth: int) -> dict[str, Any]:
        self.budget -= 1
        if not isinstance(node, Mapping) or depth > 64 or self.budget < 0 or self.work < 0:
            return {}
        self.work -= len(node)
        node = dict(node)
        while "$ref" in node:  # inline: the target, with the node's own keywords over it
            ref = node.pop("$ref")
            target = self.resolve(ref)
            if target is None or ref in refs or len(refs) >= self.max_ref_depth:
                return _free_form(node)
            refs = (*refs, ref)
            self.work -= len(target)
            node = {**target, **node}
        branches = node.pop("allOf", None)
        for branch in branches if isinstance(branches, list) else ():  # merged into the node
            for key, value in self.resolve_all(branch, refs).items():
                if key == "properties" and isinstance(value, Mapping) and isinstance(node.get(key), Mapping):
                    node[key] = {**value, **node[key]}
                elif key == "required" and isinstance(value, list) and isinstance(node.get(key), list):
                    node[key] = node[key] + [name for name in value if name not in node[key]]
                else:
                    node.setdefault(key, value)
        return self.convert_plain(node, refs, depth)

    def resolve_all(self, branch: Any, refs: tuple[str, ...]) -> Mapping[str, Any]:
        """``branch`` with its ``$ref`` chain inlined (as far as allowed), without ``$ref``."""
        node: dict[str, Any] = dict(branch) if isinstance(branch, Mapping) else {}
        self.work -= len(node)
        while "$ref" in node and len(refs) < self.max_ref_depth:
            ref = node.pop("$ref")
            target = self.resolve(ref)
            if target is None or ref in refs:
                return node
            refs = (*refs, ref)
            self.work -= len(target)
            node = {**target, **node}
        node.pop("$ref", None)
        return node

    def convert_plain(self, node: dict[str, Any], refs: tuple[str, ...], depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        nullable = False
        kind = node.get("type")
        if isinstance(kind, list):
            nullable = "null" in kind
            kinds = list(dict.fromkeys(k for k in kind if isinstance(k, str) and k in _GEMINI_TYPES))  # each once
            if len(kinds) > 1:
                self.work -= len(node) * len(kinds)
                typed = [self.convert_plain({**node, "type": k, "description": None}, refs, depth + 1) for k in kinds]
                out["anyOf"] = [{k: v for k, v in b.items() if k != "description"} for b in typed]
                kind = None
            else:
                kind = kinds[0] if kinds else None
        elif kind == "null":
            nullable, kind = True, None
        elif not isinstance(kind, str) or kind not in _GEMINI_TYPES:  # an object or a list is no type (and unhashable)
            kind = None
        if "const" in node and "enum" not in node:
            node["enum"] = [node["const"]]
        if kind is None and "anyOf" not in out:
            kind = "object" if "properties" in node else "array" if "items" in node else None
            if kind is None and isinstance(node.get("enum"), list):
                kind = _enum_type([v for v in node["enum"] if v is not None])

        for key in ("anyOf", "oneOf"):
            options = node.get(key)
            if not isinstance(options, list) or "anyOf" in out:
                continue
            converted = []
            for branch in options:
                plain = self.resolve_all(branch, refs)
                if plain.get("type") == "null":
                    nullable = True
                    continue
                branch_schema = self.convert(branch, refs, depth + 1)
                if branch_schema:  # a branch that says nothing Gemini can read (only "required") is left out
                    converted.append(branch_schema)
            if len(converted) == 1 and kind is None:
                merged = dict(converted[0])
                nullable = nullable or merged.pop("nullable", False) is True
                for k in ("description", "title"):
                    if isinstance(node.get(k), str):
                        merged[k] = node[k]
                if nullable:
                    merged["nullable"] = True
                return merged
            if converted:
                out["anyOf"] = converted
            break

        gemini_type = _GEMINI_TYPES.get(kind) if isinstance(kind, str) else None
        description: str = node["description"] if isinstance(node.get("description"), str) else ""
        for key in _COPIED:
            value = node.get(key)
            if key == "description" or value is None:
                continue
            if key in ("minimum", "maximum") and (isinstance(value, bool) or not isinstance(value, (int, float))):
                continue
            if key in ("title", "pattern") and not isinstance(value, str):
                continue
            out[key] = value
        for key, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            value = node.get(key)
            if bound not in out and isinstance(value, (int, float)) and not isinstance(value, bool):
                out[bound] = value
        for key in _COUNTS:
            value = node.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                out[key] = value
        examples = node.get("examples")
        if "example" in node:
            out["example"] = node["example"]
        elif isinstance(examples, list) and examples:
            out["example"] = examples[0]

        enum = node.get("enum")
        if isinstance(enum, list):
            values = [v for v in enum if v is not None]
            nullable = nullable or len(values) < len(enum)
            if values and gemini_type in ("STRING", None) and all(isinstance(v, str) for v in values):
                out["enum"] = values
                gemini_type = "STRING"
            elif values:
                allowed = ", ".join(json.dumps(v, ensure_ascii=False) for v in values[:20])
                description = _note(description, f"one of: {allowed}")

        fmt = node.get("format")
        if gemini_type in _GEMINI_FORMATS and isinstance(fmt, str) and fmt in _GEMINI_FORMATS[gemini_type]:
            out["format"] = fmt

        if gemini_type == "OBJECT":
            properties = node.get("properties")
            converted_props = {name: self.convert(sub, refs, depth + 1)
                               for name, sub in (properties.items() if isinstance(properties, Mapping) else ())}  # fmt: skip
            if converted_props:
                out["properties"] = converted_props
                required = node.get("required")
                if isinstance(required, list):
                    names = [n for n in dict.fromkeys(required) if isinstance(n, str) and n in converted_props]
                    if names:
                        out["required"] = names
            else:  # Gemini refuses an OBJECT without properties: leave the type open
                gemini_type = None
                description = _note(description, "a JSON object")
                for key in ("minProperties", "maxProperties"):
                    out.pop(key, None)
        elif gemini_type == "ARRAY":
            items = node.get("items")
            out["items"] = self.convert(items, refs, depth + 1) if isinstance(items, Mapping) else {}
        if gemini_type is not None:
            out["type"] = gemini_type
        if description:
            out["description"] = description
        if nullable:
            out["nullable"] = True
        return out


def _enum_type(values: list[Any]) -> str | None:
    """The JSON type every value of an enum has, if they share one."""
    if not values:
        return None
    if all(isinstance(v, str) for v in values):
        return "string"
    if all(isinstance(v, bool) for v in values):
        return "boolean"
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
        return None
    return "integer" if all(isinstance(v, int) for v in values) else "number"


def _note(description: str, note: str) -> str:
    """``description`` with ``note`` added: ``"Size (one of: 1, 2)"``, or ``"One of: 1, 2."`` alone."""
    return f"{description} ({note})" if description else note[:1].upper() + note[1:] + "."


def _free_form(node: Mapping[str, Any]) -> dict[str, Any]:
    """What an unresolvable or recursive ``$ref`` becomes: any value, with the node's description."""
    out: dict[str, Any] = {}
    for key in ("title", "description"):
        if isinstance(node.get(key), str):
            out[key] = node[key]
    return out
