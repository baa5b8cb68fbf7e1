"""JSON for attrs value classes, derived once per class from its fields' types: encode and read.

``ObjectCodec.of(cls)`` looks at the resolved type of each attrs field and picks a codec for it:
``str``, ``int``, ``float``, ``bool``, a ``Literal``, ``X | None``, ``tuple[X, ...]``, a frozen JSON
object (``FrozenDict``), or a value class with its own ``to_json``/``from_json``. Field metadata
(``json_field(...)``) adds what a type cannot say: a minimum, a reader for a union of classes, and
whether the key is left out while the field holds its default (the ``key?`` of SPEC §7).

Encoding gives deep-frozen JSON (a ``FrozenDict`` whose values are frozen), keys in field order, so
the text a log writes is stable byte for byte. Reading checks everything and raises
``VocabularyError`` whose ``field`` is the path of the bad spot (``data.message.content[1].type``).
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Callable
from typing import Any, Final, Literal, NoReturn, TypeVar

import attrs

from ._errors import VocabularyError
from ._json import (
    FrozenDict,
    JsonValueError,
    check_keys,
    expect_object,
    freeze_json_object,
    json_type_name,
    refuse,
)

__all__ = ["FieldCodec", "ObjectCodec", "json_field"]

_T = TypeVar("_T")

#: Reads one JSON value at a path (``data.turn``) into a Python value, or raises ``VocabularyError``.
Reader = Callable[[object, str], Any]
#: Turns one Python value into frozen JSON.
Encoder = Callable[[Any], Any]

_META: Final = "dsh.json"


@attrs.frozen
class _FieldOptions:
    omit_default: bool = False
    minimum: float | None = None
    read: Reader | None = None


def json_field(
    *, omit_default: bool = False, minimum: float | None = None, read: Reader | None = None
) -> dict[str, Any]:
    """attrs field metadata for the codec: ``attrs.field(metadata=json_field(omit_default=True))``.

    :param omit_default: leave the key out while the field holds its default (absent reads as it).
    :param minimum: the least value a number may have in JSON.
    :param read: a reader ``(value, path) -> value`` replacing the one the type implies (for a union
        of classes, such as any message or any chunk).
    """
    return {_META: _FieldOptions(omit_default=omit_default, minimum=minimum, read=read)}


# ---------------------------------------------------------------------- scalar readers


def _missing_or(value: object, expected: str) -> str:
    return "missing" if value is None else f"expected {expected}, got {json_type_name(value)}"


def _read_str(value: object, path: str) -> str:
    if type(value) is str:
        return value
    refuse(path, _missing_or(value, "a string"))


def _read_bool(value: object, path: str) -> bool:
    if type(value) is bool:
        return value
    refuse(path, _missing_or(value, "a boolean"))


def _int_reader(minimum: float | None) -> Reader:
    least = 0 if minimum is None else minimum

    def read(value: object, path: str) -> int:
        if type(value) is int and value >= least:
            return value
        if type(value) is int:
            refuse(path, f"expected an integer >= {least:g}, got {value}")
        refuse(path, _missing_or(value, "an integer"))

    return read


def _float_reader(minimum: float | None) -> Reader:
    def read(value: object, path: str) -> float:
        if (type(value) is float or type(value) is int) and math.isfinite(value):
            if minimum is None or value >= minimum:
                return float(value)
            refuse(path, f"expected a finite number >= {minimum}, got {value!r}")
        refuse(path, _missing_or(value, "a number"))

    return read


def _literal_reader(choices: tuple[str, ...]) -> Reader:
    allowed = frozenset(choices)
    listed = ", ".join(sorted(allowed))

    def read(value: object, path: str) -> str:
        if type(value) is str and value in allowed:
            return value
        problem = "missing" if value is None else f"{value!r} is not valid"
        refuse(path, f"{problem}; expected one of {listed}")

    return read


def _read_object(value: object, path: str) -> FrozenDict:
    obj = expect_object(value, path)
    try:
        return freeze_json_object(obj, where=path, root=path)
    except JsonValueError as exc:  # only when handed Python objects rather than parsed JSON
        raise VocabularyError(f"{exc.path}: {exc.problem}", field=exc.path) from exc


def _optional(read: Reader) -> Reader:
    def read_optional(value: object, path: str) -> Any:
        return None if value is None else read(value, path)

    return read_optional


def _tuple_reader(read: Reader) -> Reader:
    def read_items(value: object, path: str) -> tuple[Any, ...]:
        if not isinstance(value, list | tuple):
            refuse(path, _missing_or(value, "an array"))
        return tuple([read(item, f"{path}[{index}]") for index, item in enumerate(value)])

    return read_items


def _class_reader(cls: type) -> Reader:
    from_json = cls.from_json  # type: ignore[attr-defined]

    def read(value: object, path: str) -> Any:
        if value is None:
            refuse(path, "missing")
        return from_json(expect_object(value, path), field=path)

    return read


# ---------------------------------------------------------------------- encoders


def _same(value: Any) -> Any:
    return value


def _tuple_encoder(encode: Encoder) -> Encoder:
    if encode is _same:
        return tuple
    return lambda values: tuple([encode(value) for value in values])


def _optional_encoder(encode: Encoder) -> Encoder:
    if encode is _same:
        return _same
    return lambda value: None if value is None else encode(value)


# ---------------------------------------------------------------------- choosing by type


def _codec_for(tp: Any, options: _FieldOptions, owner: str) -> tuple[Encoder, Reader]:
    """The encoder and reader that a field of type ``tp`` gets (``options`` apply to tuple items)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        members = [arg for arg in args if arg is not type(None)]
        if len(members) < len(args):  # X | None
            inner = members[0] if len(members) == 1 else typing.Union[tuple(members)]  # noqa: UP007
            encode, read = _codec_for(inner, options, owner)
            return _optional_encoder(encode), _optional(read)
        if options.read is None:
            msg = f"{owner}: a union of {members} needs json_field(read=...) saying how to read it"
            raise TypeError(msg)
        for member in members:
            if not (isinstance(member, type) and hasattr(member, "to_json")):
                msg = f"{owner}: a union field holds value classes with to_json(), got {member!r}"
                raise TypeError(msg)
        return _to_json, options.read
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) != 2 or args[1] is not Ellipsis:
            msg = f"{owner}: only tuple[X, ...] is supported, got {tp}"
            raise TypeError(msg)
        encode, read = _codec_for(args[0], options, owner)
        return _tuple_encoder(encode), _tuple_reader(read)
    if isinstance(tp, type) and hasattr(tp, "from_json") and hasattr(tp, "to_json"):
        return _to_json, options.read or _class_reader(tp)
    if options.read is not None:
        return _same, options.read
    if tp is str:
        return _same, _read_str
    if tp is bool:
        return _same, _read_bool
    if tp is int:
        return _same, _int_reader(options.minimum)
    if tp is float:
        return _same, _float_reader(options.minimum)
    if origin is Literal:
        return _same, _literal_reader(typing.get_args(tp))
    if tp is FrozenDict:
        return _same, _read_object
    msg = f"{owner}: no JSON codec for a field of type {tp!r}"
    raise TypeError(msg)


def _to_json(value: Any) -> FrozenDict:
    """A value class's JSON, frozen."""
    return freeze_json_object(value.to_json(), where=type(value).__name__, root="value")


# ---------------------------------------------------------------------- one class


@attrs.frozen
class FieldCodec:
    """How one attrs field becomes a JSON key and back."""

    name: str
    key: str
    encode: Encoder
    read: Reader
    #: the default value (or factory result) when the key may be absent; ``attrs.NOTHING`` if required
    default: Any
    omit_default: bool


class ObjectCodec:
    """Encode an attrs instance as a frozen JSON object, and read one back, checking every field."""

    __slots__ = ("_cls", "_encoders", "_fields", "_keys", "_name")

    def __init__(self, cls: type, *, extra_keys: tuple[str, ...] = ()) -> None:
        attrs.resolve_types(cls)
        self._cls = cls
        self._name = cls.__name__
        fields: list[FieldCodec] = []
        for attribute in attrs.fields(cls):
            if not attribute.init:
                continue
            options: _FieldOptions = attribute.metadata.get(_META, _FieldOptions())
            encode, read = _codec_for(attribute.type, options, f"{cls.__name__}.{attribute.name}")
            default = attribute.default
            if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                default = default.factory()
            fields.append(
                FieldCodec(
                    attribute.alias or attribute.name,
                    attribute.name,
                    encode,
                    read,
                    default,
                    options.omit_default,
                )
            )
        self._fields = tuple(fields)
        self._keys = frozenset([field.key for field in fields] + list(extra_keys))
        self._encoders = tuple(
            (field.name, field.key, field.encode, field.omit_default, field.default) for field in fields
        )

    @property
    def fields(self) -> tuple[FieldCodec, ...]:
        return self._fields

    def encode(self, value: Any) -> FrozenDict:
        """``value`` as a frozen JSON object (keys in field order; omitted defaults left out)."""
        out: dict[str, Any] = {}
        for name, key, encode, omit, default in self._encoders:
            item = getattr(value, name)
            if omit and (item is default or item == default):
                continue
            out[key] = encode(item)
        return _frozen(out)

    def read(self, data: object, field: str) -> Any:
        """Read and check a JSON object into an instance. :raises VocabularyError: naming the field."""
        obj = expect_object(data, field)
        kwargs: dict[str, Any] = {}
        for codec in self._fields:
            value = obj.get(codec.key)
            if value is None and codec.default is not attrs.NOTHING:
                continue  # absent (or null) reads as the default
            kwargs[codec.name] = codec.read(value, f"{field}.{codec.key}")
        check_keys(obj, self._keys, field)  # after the fields: a missing one is the likelier mistake
        try:
            return self._cls(**kwargs)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, VocabularyError):
                raise
            _refuse_value(field, exc)

    def __repr__(self) -> str:
        return f"<ObjectCodec {self._name}>"


def _refuse_value(field: str, exc: Exception) -> NoReturn:
    """A value that reads as the right JSON types but that the class refuses (a rule across fields)."""
    raise VocabularyError(f"{field}: {exc}", field=field) from exc


def _frozen(items: dict[str, Any]) -> FrozenDict:
    """A ``FrozenDict`` of values this module froze itself (no second scan)."""
    frozen = dict.__new__(FrozenDict)
    dict.update(frozen, items)
    return frozen
