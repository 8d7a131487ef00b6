"""A tool's JSON Schema as a pydantic model, for the frameworks that want one (CrewAI, LlamaIndex).

The conversion keeps what a framework shows the model and checks: required vs
optional, defaults, descriptions, ``null``, enums and ``const`` (as
``Literal``), arrays, nested objects (as nested models), ``anyOf``/``oneOf``
and type lists (as unions), and local ``$ref``/``$defs``. What a model cannot
express falls back to the loosest type (``Any``, ``dict``) instead of dropping
the tool: a recursive ``$ref``, an ``allOf`` of several branches, a node nested
deeper than :data:`MAX_DEPTH`, a schema of more than :data:`MAX_NODES` nodes.
Constraints (``minimum``, ``pattern``, …) are left to the server (and to
``validate_arguments``, which checks them at a bounded cost).

Every model ignores keys it does not know (a framework adds some of its own);
a property whose name is no valid field name (``from``, ``x-y``, ``model_config``,
``_private``) gets another field name with the original as its alias:
:func:`dump` gives the original names back.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping
from typing import Any, Literal, Optional, Union

from ..registry.gemini import resolve_pointer
from ._core import Unique

MAX_DEPTH = 12  # nested schema levels turned into types; deeper ones are Any
MAX_NODES = 2_000  # schema nodes converted per tool; beyond, Any
MAX_ENUM = 500  # enum values as a Literal; a longer enum is its values' type
MAX_UNION = 32  # branches of an anyOf/oneOf or a type list

_SIMPLE: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool}
_NAME = re.compile(r"[^0-9A-Za-z]+")


def model_for(name: str, schema: Any, *, description: str = "", nullable_defaults: bool = False) -> Any:
    """A pydantic model class for an object ``schema`` named after ``name`` (``get-sum`` -> ``GetSum``).

    With ``nullable_defaults``, an optional property with a default also takes ``None`` (for a framework whose
    strict-mode schemas require every property: the model then sends ``null`` to leave it out).
    """
    pydantic = _pydantic()
    converter = _Converter(schema if isinstance(schema, Mapping) else {}, pydantic, nullable_defaults)
    return converter.model(_class_name(name), converter.root, description, 0, ())


def dump(instance: Any) -> dict[str, Any]:
    """A model instance's values by their schema names, only those that were given or have a default."""
    out: dict[str, Any] = instance.model_dump(by_alias=True, exclude_unset=True)
    return out


def _pydantic() -> Any:
    import pydantic  # type: ignore[import-not-found, unused-ignore]  # every framework that wants a model has it

    return pydantic


def _class_name(name: str) -> str:
    words = [w for w in _NAME.split(name) if w]
    out = "".join(w[:1].upper() + w[1:] for w in words) or "Arguments"
    return out if out.isidentifier() and not out[0].isdigit() else "Tool" + out


def _field_name(prop: str, taken: Unique, reserved: set[str]) -> str:
    out = re.sub(r"\W", "_", prop, flags=re.ASCII).lstrip("_") or "field"
    if out[0].isdigit():
        out = "f_" + out
    if keyword.iskeyword(out) or out in reserved or out.startswith("model_"):
        out += "_"
    return taken(out)


class _Converter:
    def __init__(self, root: Mapping[str, Any], pydantic: Any, nullable_defaults: bool = False) -> None:
        self.root = root
        self.pydantic = pydantic
        self.nullable_defaults = nullable_defaults
        self.nodes = 0
        self.names = Unique()  # the models' class names
        self.reserved = set(dir(pydantic.BaseModel))

    def model(self, name: str, schema: Mapping[str, Any], description: str, depth: int, refs: tuple[str, ...]) -> Any:
        pydantic = self.pydantic
        props = schema.get("properties")
        props = props if isinstance(props, Mapping) else {}
        required = schema.get("required")
        required = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
        fields: dict[str, Any] = {}
        taken = Unique()
        for prop, sub in props.items():
            if not isinstance(prop, str):
                continue
            sub = sub if isinstance(sub, Mapping) else {}
            kind = self.type_of(sub, f"{name}{_class_name(prop)}", depth + 1, refs)
            field_name = _field_name(prop, taken, self.reserved)
            options: dict[str, Any] = {}
            if field_name != prop:
                options["alias"] = prop
            text = sub.get("description")
            if isinstance(text, str) and text:
                options["description"] = text
            if prop in required:
                default: Any = ...
            elif "default" in sub:
                default = sub["default"]
                if self.nullable_defaults:
                    kind = Optional[kind]
            else:
                default = None
                kind = Optional[kind]
            fields[field_name] = (kind, pydantic.Field(default, **options))
        unique = self.names(name)
        config = pydantic.ConfigDict(extra="ignore", populate_by_name=True, arbitrary_types_allowed=True)
        model = pydantic.create_model(unique, __config__=config, **fields)
        if description:
            model.__doc__ = description
        return model

    def type_of(self, schema: Mapping[str, Any], name: str, depth: int, refs: tuple[str, ...]) -> Any:
        self.nodes += 1
        if depth > MAX_DEPTH or self.nodes > MAX_NODES:
            return Any
        ref = schema.get("$ref")
        if ref is not None:
            target = resolve_pointer(self.root, ref)
            if target is None or ref in refs:  # unknown, not local, or recursive
                return Any
            merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
            return self.type_of(merged, name, depth + 1, (*refs, ref))
        if "const" in schema:
            return self.literal([schema["const"]]) or Any
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            return self.literal(enum) or Any
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                kinds = [self.type_of({**_without(schema, key), **b}, f"{name}{i + 1}", depth + 1, refs)
                         for i, b in enumerate(branches[:MAX_UNION]) if isinstance(b, Mapping)]
                return self.union(kinds)
        every = schema.get("allOf")
        if isinstance(every, list) and every:
            if len(every) == 1 and isinstance(every[0], Mapping):
                return self.type_of({**_without(schema, "allOf"), **every[0]}, name, depth + 1, refs)
            return Any
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [self.one_type(k, schema, name, depth, refs) for k in kind[:MAX_UNION] if isinstance(k, str)]
            return self.union(kinds)
        if isinstance(kind, str):
            return self.one_type(kind, schema, name, depth, refs)
        if isinstance(schema.get("properties"), Mapping):
            return self.one_type("object", schema, name, depth, refs)
        if "items" in schema:
            return self.one_type("array", schema, name, depth, refs)
        return Any

    def one_type(self, kind: str, schema: Mapping[str, Any], name: str, depth: int, refs: tuple[str, ...]) -> Any:
        if kind in _SIMPLE:
            return _SIMPLE[kind]
        if kind == "null":
            return type(None)
        if kind == "array":
            items = schema.get("items")
            item = self.type_of(items, f"{name}Item", depth + 1, refs) if isinstance(items, Mapping) else Any
            return list[item]  # type: ignore[valid-type]
        if kind == "object":
            props = schema.get("properties")
            if isinstance(props, Mapping) and props:
                text = schema.get("description")
                return self.model(name, schema, text if isinstance(text, str) else "", depth, refs)
            return dict[str, Any]
        return Any

    def literal(self, values: list[Any]) -> Any:
        plain = [v for v in values[:MAX_ENUM] if v is None or isinstance(v, (str, int, float, bool))]
        if len(plain) != len(values):
            return None
        return Literal[tuple(plain)] if plain else None

    def union(self, kinds: list[Any]) -> Any:
        kinds = list(dict.fromkeys(kinds))  # the same type twice is one
        if not kinds or Any in kinds:
            return Any
        return kinds[0] if len(kinds) == 1 else Union[tuple(kinds)]


def _without(schema: Mapping[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k != key}
