"""JSON for attrs value classes, derived once per class from its fields' types: encode and read.

``ObjectCodec(cls)`` looks at the resolved type of each attrs field and picks a codec for it:
``str``, ``int``, ``float``, ``bool``, a ``Literal``, ``X | None``, ``tuple[X, ...]``, a frozen JSON
object (``FrozenDict``), or a value class with its own JSON (a class with a codec of its own, or with
``to_json``/``from_json``). Field metadata (``json_field(...)``) adds what a type cannot say: a
minimum, a reader for a union of classes, and whether the key is left out while the field holds
its default (the ``key?`` of SPEC §7). A class may carry a tag (``{"type": "text-delta", ...}``).

The encoders are compiled once per class into one plain function (no loop over fields at run
time): ``encode`` gives deep-frozen JSON (a ``FrozenDict`` whose values are frozen), ``encode_plain``
plain dicts and lists; keys come in field order (the tag first), so the text a log writes is stable
byte for byte. Reading checks everything and raises ``VocabularyError`` whose ``field`` is the path
of the bad spot (``data.message.content[1].type``).
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Callable
from typing import Any, Final, Literal, NoReturn

import attrs

from dsh_core.vocabulary._errors import VocabularyError
from dsh_core.vocabulary._json import (
    FrozenDict,
    JsonValueError,
    check_keys,
    expect_object,
    freeze_json_object,
    json_type_name,
    refuse,
    thaw_json,
)

__all__ = ["FieldCodec", "ObjectCodec", "json_field"]

#: Reads one JSON value at a path (``data.turn``) into a Python value, or raises ``VocabularyError``.
Reader = Callable[[object, str], Any]
#: Turns one Python value into JSON (frozen or plain).
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


def _read_optional_str(value: object, path: str) -> str | None:
    if value is None or type(value) is str:
        return value
    refuse(path, f"expected a string or null, got {json_type_name(value)}")


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
    if read is _read_str:
        return _read_optional_str

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
# Each field gets a pair: (frozen, plain). ``None`` means "the value is JSON as it is".

_Pair = tuple[Encoder | None, Encoder | None]


def _class_pair(cls: type) -> tuple[Encoder, Encoder]:
    codec = getattr(cls, "_json_codec", None)
    if isinstance(codec, ObjectCodec):
        return codec.encode, codec.encode_plain

    def frozen(value: Any) -> FrozenDict:
        return freeze_json_object(value.to_json(), where=cls.__name__, root="value")

    return frozen, lambda value: value.to_json()


def _union_pair(members: list[type]) -> tuple[Encoder, Encoder]:
    pairs = {member: _class_pair(member) for member in members}
    frozen = {member: pair[0] for member, pair in pairs.items()}
    plain = {member: pair[1] for member, pair in pairs.items()}
    return (lambda value: frozen[value.__class__](value)), (lambda value: plain[value.__class__](value))


def _tuple_pair(pair: _Pair) -> _Pair:
    frozen, plain = pair
    return (
        tuple if frozen is None else (lambda values: tuple([frozen(value) for value in values])),
        list if plain is None else (lambda values: [plain(value) for value in values]),
    )


def _optional_pair(pair: _Pair) -> _Pair:
    frozen, plain = pair
    return (
        None if frozen is None else (lambda value: None if value is None else frozen(value)),
        None if plain is None else (lambda value: None if value is None else plain(value)),
    )


# ---------------------------------------------------------------------- choosing by type


def _codec_for(tp: Any, options: _FieldOptions, owner: str) -> tuple[_Pair, Reader]:
    """The encoders and the reader that a field of type ``tp`` gets (``options`` apply to tuple items)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        members = [arg for arg in args if arg is not type(None)]
        if len(members) < len(args):  # X | None
            inner = members[0] if len(members) == 1 else typing.Union[tuple(members)]  # noqa: UP007
            pair, read = _codec_for(inner, options, owner)
            return _optional_pair(pair), _optional(read)
        if options.read is None:
            msg = f"{owner}: a union of {members} needs json_field(read=...) saying how to read it"
            raise TypeError(msg)
        for member in members:
            if not (isinstance(member, type) and hasattr(member, "to_json")):
                msg = f"{owner}: a union field holds value classes with to_json(), got {member!r}"
                raise TypeError(msg)
        return _union_pair(members), options.read
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) != 2 or args[1] is not Ellipsis:
            msg = f"{owner}: only tuple[X, ...] is supported, got {tp}"
            raise TypeError(msg)
        pair, read = _codec_for(args[0], options, owner)
        return _tuple_pair(pair), _tuple_reader(read)
    if tp is FrozenDict:
        return (None, thaw_json), options.read or _read_object
    if isinstance(tp, type) and hasattr(tp, "from_json") and hasattr(tp, "to_json"):
        return _class_pair(tp), options.read or _class_reader(tp)
    if options.read is not None:
        return (None, None), options.read
    if tp is str:
        return (None, None), _read_str
    if tp is bool:
        return (None, None), _read_bool
    if tp is int:
        return (None, None), _int_reader(options.minimum)
    if tp is float:
        return (None, None), _float_reader(options.minimum)
    if origin is Literal:
        return (None, None), _literal_reader(typing.get_args(tp))
    msg = f"{owner}: no JSON codec for a field of type {tp!r}"
    raise TypeError(msg)


# ---------------------------------------------------------------------- one class


@attrs.frozen
class FieldCodec:
    """How one attrs field becomes a JSON key and back."""

    name: str
    key: str
    read: Reader
    #: the default value (or factory result) when the key may be absent; ``attrs.NOTHING`` if required
    default: Any
    omit_default: bool


class ObjectCodec:
    """Encode an attrs instance as a JSON object, and read one back, checking every field.

    :param tag: ``(key, value)`` written first and required on read, e.g. ``("type", "text-delta")``.
    :param errors_at: the field that a rule across fields (the class refusing a value) is about.
    """

    __slots__ = ("_cls", "_errors_at", "_fields", "_keys", "_name", "_tag", "encode", "encode_plain")

    def __init__(self, cls: type, *, tag: tuple[str, str] | None = None, errors_at: str | None = None) -> None:
        attrs.resolve_types(cls)
        self._cls = cls
        self._name = cls.__name__
        self._tag = tag
        self._errors_at = errors_at
        fields: list[FieldCodec] = []
        pairs: list[_Pair] = []
        for attribute in attrs.fields(cls):
            if not attribute.init:
                continue
            options: _FieldOptions = attribute.metadata.get(_META, _FieldOptions())
            pair, read = _codec_for(attribute.type, options, f"{cls.__name__}.{attribute.name}")
            default = attribute.default
            if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                default = default.factory()
            fields.append(FieldCodec(attribute.name, attribute.alias or attribute.name, read, default, options.omit_default))
            pairs.append(pair)
        self._fields = tuple(fields)
        keys = [field.key for field in fields]
        self._keys = frozenset(keys + ([tag[0]] if tag else []))
        #: ``value`` as a frozen JSON object
        self.encode: Callable[[Any], FrozenDict] = self._compile(pairs, frozen=True)
        #: ``value`` as a plain JSON object (dicts and lists)
        self.encode_plain: Callable[[Any], dict[str, Any]] = self._compile(pairs, frozen=False)

    def _compile(self, pairs: list[_Pair], *, frozen: bool) -> Any:
        """One function with a line per field, keys in field order: the cost of a hand-written ``to_json``."""
        namespace: dict[str, Any] = {"_frozen": _frozen}
        literal: list[str] = [] if self._tag is None else [f"{self._tag[0]!r}: {self._tag[1]!r}"]
        lines: list[str] = []  # once a key may be left out, the rest follow one by one (to keep the order)
        for index, (field, pair) in enumerate(zip(self._fields, pairs, strict=True)):
            encode = pair[0] if frozen else pair[1]
            if encode is not None:
                namespace[f"_e{index}"] = encode
            value = f"v.{field.name}"
            shown = f"_e{index}({value})" if encode is not None else value
            if field.omit_default:
                namespace[f"_d{index}"] = field.default
                lines.append(f"    if not ({value} is _d{index} or {value} == _d{index}):")
                lines.append(f"        out[{field.key!r}] = {shown}")
            elif lines:
                lines.append(f"    out[{field.key!r}] = {shown}")
            else:
                literal.append(f"{field.key!r}: {shown}")
        source = "def encode(v):\n    out = {" + ", ".join(literal) + "}\n" + "".join(f"{line}\n" for line in lines)
        source += "    return _frozen(out)\n" if frozen else "    return out\n"
        exec(source, namespace)  # the source is built above from attrs field names only
        return namespace["encode"]

    @property
    def fields(self) -> tuple[FieldCodec, ...]:
        return self._fields

    def read(self, data: object, field: str) -> Any:
        """Read and check a JSON object into an instance. :raises VocabularyError: naming the field."""
        obj = expect_object(data, field)
        tag = self._tag
        if tag is not None and obj.get(tag[0]) != tag[1]:
            refuse(f"{field}.{tag[0]}", f"expected {tag[1]!r}, got {obj.get(tag[0])!r}")
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
            _refuse_value(f"{field}.{self._errors_at}" if self._errors_at else field, exc)

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
