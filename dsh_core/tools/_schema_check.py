"""A fast, conservative acceptor for simple JSON Schemas, run before the full jsonschema validator.

Validating ``{"a": 2, "b": 3}`` with jsonschema costs about 9 us, half of a tool call's pipeline.
Most tool schemas use a small subset (objects of scalars with numeric and length bounds, enums,
nullable values, arrays, nested objects), for which ``compile_acceptor`` builds a plain-Python check once per tool. The check is
*sound, not complete*: when it says ``True`` the value is valid; when it says ``False`` (or the
schema uses anything outside the subset, so no acceptor is built) the full validator decides and
explains. Accepting is deliberately stricter than JSON Schema (``1.0`` is not accepted as an
``integer`` here), which only sends rare values down the slow path.

An acceptor is built only for a schema that is also well-formed under the JSON Schema 2020-12
meta-schema (a ``type`` of known, distinct names, a ``required`` list of distinct strings, a
non-empty ``anyOf``, non-negative lengths, string descriptions, ...). So a caller that gets one may
skip ``check_schema``, and the common tool never imports ``jsonschema`` at all.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias, TypeGuard

__all__ = ["Acceptor", "compile_acceptor"]

#: True when the value is certainly valid; False when the full validator must decide.
Acceptor: TypeAlias = Callable[[Any], bool]

# Keywords that never constrain a value, each with the JSON type the meta-schema wants it to have.
_ANNOTATION_TYPES: dict[str, type | None] = {
    "description": str,
    "title": str,
    "$comment": str,
    "examples": list,
    "default": None,  # any JSON value
}
_ANNOTATIONS = frozenset(_ANNOTATION_TYPES)
#: Bounds the fast path checks, each as the comparison a valid value passes.
_NUMBER_BOUNDS: dict[str, Callable[[Any, Any], bool]] = {
    "minimum": operator.ge,
    "maximum": operator.le,
    "exclusiveMinimum": operator.gt,
    "exclusiveMaximum": operator.lt,
}
_LENGTH_BOUNDS: dict[str, Callable[[Any, Any], bool]] = {"minLength": operator.ge, "maxLength": operator.le}
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
    if schema is True:
        return _anything
    if not isinstance(schema, Mapping):
        raise _Unsupported
    for key, wanted in _ANNOTATION_TYPES.items():
        if wanted is not None and key in schema and type(schema[key]) is not wanted:
            raise _Unsupported  # ill-formed: leave it to check_schema to say so
    keys = set(schema) - _ANNOTATIONS
    if not keys:
        return _anything
    if "anyOf" in keys:
        if keys != {"anyOf"} or not _is_list(schema["anyOf"]) or not schema["anyOf"]:
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
    if "type" not in keys or not keys <= {"type", *_NUMBER_BOUNDS, *_LENGTH_BOUNDS}:
        raise _Unsupported
    kinds = [kind] if isinstance(kind, str) else list(kind) if _is_list(kind) else None
    if not kinds or any(type(k) is not str or k not in _SCALAR_TYPES for k in kinds) or len(set(kinds)) != len(kinds):
        raise _Unsupported
    accepted = frozenset(t for k in kinds for t in _SCALAR_TYPES[k])
    in_bounds = _bounds(schema, keys)
    if in_bounds is None:
        return lambda value: type(value) in accepted
    return lambda value: type(value) in accepted and in_bounds(value)


def _bounds(schema: Mapping[str, Any], keys: set[str]) -> Acceptor | None:
    """The numeric and length bounds of a scalar schema as one check (``None`` when it has none).

    As in JSON Schema, number bounds constrain only numbers and length bounds only strings.
    """
    checks: list[Acceptor] = []
    for key in sorted(keys & _NUMBER_BOUNDS.keys()):
        if type(schema[key]) not in (int, float):
            raise _Unsupported
        checks.append(_number_bound(_NUMBER_BOUNDS[key], schema[key]))
    for key in sorted(keys & _LENGTH_BOUNDS.keys()):
        if type(schema[key]) is not int or schema[key] < 0:
            raise _Unsupported
        checks.append(_length_bound(_LENGTH_BOUNDS[key], schema[key]))
    if not checks:
        return None
    if len(checks) == 1:
        return checks[0]
    return lambda value: all(check(value) for check in checks)


def _number_bound(compare: Callable[[Any, Any], bool], limit: float) -> Acceptor:
    return lambda value: type(value) not in (int, float) or compare(value, limit)


def _length_bound(compare: Callable[[Any, Any], bool], limit: int) -> Acceptor:
    return lambda value: type(value) is not str or compare(len(value), limit)


def _anything(value: object) -> bool:
    return True


def _is_list(value: object) -> TypeGuard[list[Any] | tuple[Any, ...]]:
    return isinstance(value, list | tuple)


def _enum(values: object) -> Acceptor:
    if not _is_list(values):
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
    declared = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(declared, Mapping) or not _is_list(required):
        raise _Unsupported
    if not all(type(name) is str for name in required) or len(set(required)) != len(required):
        raise _Unsupported
    properties = {name: _compile(sub) for name, sub in declared.items()}
    required = tuple(required)
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
