"""A fast, conservative acceptor for simple JSON Schemas, run before the full jsonschema validator.

Validating ``{"a": 2, "b": 3}`` with jsonschema costs about 9 us, half of a tool call's pipeline.
Most tool schemas use a small subset (objects of scalars, enums, nullable values, arrays, nested
objects), for which ``compile_acceptor`` builds a plain-Python check once per tool. The check is
*sound, not complete*: when it says ``True`` the value is valid; when it says ``False`` (or the
schema uses anything outside the subset, so no acceptor is built) the full validator decides and
explains. Accepting is deliberately stricter than JSON Schema (``1.0`` is not accepted as an
``integer`` here), which only sends rare values down the slow path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

__all__ = ["Acceptor", "compile_acceptor"]

#: True when the value is certainly valid; False when the full validator must decide.
Acceptor: TypeAlias = Callable[[Any], bool]

# Keywords that never constrain a value.
_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment"})
_SCALAR_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def compile_acceptor(schema: Mapping[str, Any]) -> Acceptor | None:
    """An acceptor for ``schema``, or ``None`` when it uses anything outside the simple subset."""
    try:
        return _compile(schema)
    except _Unsupported:
        return None


class _Unsupported(Exception):
    """The schema uses a keyword or shape the fast path does not handle."""


def _compile(schema: object) -> Acceptor:
    if schema is True or (isinstance(schema, Mapping) and not (set(schema) - _ANNOTATIONS)):
        return _anything
    if not isinstance(schema, Mapping):
        raise _Unsupported
    keys = set(schema) - _ANNOTATIONS
    if "anyOf" in keys:
        if keys != {"anyOf"}:
            raise _Unsupported
        options = [_compile(option) for option in schema["anyOf"]]
        return lambda value: any(accept(value) for accept in options)
    if "enum" in keys:
        if not keys <= {"enum", "type"}:
            raise _Unsupported
        in_enum = _enum(schema["enum"])
        if "type" not in keys:
            return in_enum
        of_type = _compile({"type": schema["type"]})
        return lambda value: of_type(value) and in_enum(value)
    kind = schema.get("type")
    if kind == "object":
        return _object(schema, keys)
    if kind == "array":
        return _array(schema, keys)
    if keys != {"type"}:
        raise _Unsupported
    kinds = [kind] if isinstance(kind, str) else list(kind) if isinstance(kind, list | tuple) else None
    if not kinds or any(k not in _SCALAR_TYPES for k in kinds):
        raise _Unsupported
    accepted = frozenset(t for k in kinds for t in _SCALAR_TYPES[k])
    return lambda value: type(value) in accepted


def _anything(value: object) -> bool:
    return True


def _enum(values: object) -> Acceptor:
    if not isinstance(values, list | tuple):
        raise _Unsupported
    # Compare type and value both: JSON Schema tells 1 from true, Python's == does not.
    members = frozenset((type(v), v) for v in values if type(v) in (str, int, float, bool) or v is None)
    if len(members) != len(values):
        raise _Unsupported
    plain = (str, int, float, bool, type(None))
    return lambda value: type(value) in plain and (type(value), value) in members


def _object(schema: Mapping[str, Any], keys: set[str]) -> Acceptor:
    if not keys <= {"type", "properties", "required", "additionalProperties"}:
        raise _Unsupported
    properties = {name: _compile(sub) for name, sub in schema.get("properties", {}).items()}
    required = tuple(schema.get("required", ()))
    extra = schema.get("additionalProperties", True)
    if extra is False:
        closed = True
        extra_accept: Acceptor = _anything
    else:
        closed = False
        extra_accept = _compile(extra)

    def accept(value: object) -> bool:
        if type(value) is not dict:
            return False
        for name in required:
            if name not in value:
                return False
        for name, item in value.items():
            check = properties.get(name)
            if check is None:
                if closed or not extra_accept(item):
                    return False
            elif not check(item):
                return False
        return True

    return accept


def _array(schema: Mapping[str, Any], keys: set[str]) -> Acceptor:
    if not keys <= {"type", "items"}:
        raise _Unsupported
    item_accept = _compile(schema.get("items", True))
    return lambda value: type(value) is list and all(item_accept(item) for item in value)
