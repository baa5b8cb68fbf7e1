"""JSON for attrs value classes, derived once per class from its fields' types: encode and read.

``ObjectCodec(cls)`` looks at the resolved type of each attrs field and picks a codec for it:
``str``, ``int``, ``float``, ``bool``, a ``Literal``, ``X | None``, ``tuple[X, ...]`` (or
``Sequence[X]``), a frozen JSON object (``FrozenDict``), or a value class with its own JSON (a class
with a codec of its own, or with ``to_json``/``from_json``). Field options (``json_field(...)``, as
attrs metadata or given to the codec) add what a type cannot say: a minimum, a reader for a union
of classes (``TaggedUnion``), whether the key is left out while the field holds its default (the
``key?`` of SPEC §7) and whether it must be present although the class has a default. A class may
carry a tag (``{"type": "text-delta", ...}``), write its keys in an order of its own, leave fields
out of its JSON, and add a rule across fields (``check``).

The encoders are compiled once per class into one plain function (no loop over fields at run
time): ``encode`` gives deep-frozen JSON (a ``FrozenDict`` whose values are frozen), ``encode_plain``
plain dicts and lists; keys come in order (the tag first), so the text a log writes is stable byte
for byte. Reading checks everything and raises ``VocabularyError`` whose ``field`` is the path of
the bad spot (``data.message.content[1].type``). An absent key reads as the field's default; a
``null`` is read by the field's type (so it is refused unless the type admits ``None``).
"""

from __future__ import annotations

import collections.abc
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
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

__all__ = ["TRUSTS_READERS", "FieldCodec", "ObjectCodec", "TaggedUnion", "codec_of", "json_field"]

#: Reads one JSON value at a path (``data.turn``) into a Python value, or raises ``VocabularyError``.
Reader = Callable[[object, str], Any]
#: Turns one Python value into JSON (frozen or plain).
Encoder = Callable[[Any], Any]

_META: Final = "dsh.json"

#: A class attribute: ``True`` says that the readers its fields' types imply (with their
#: ``json_field`` options) check everything its validators and converters check, so a value read
#: from JSON is built without running them again (kept: same run, load 4, AssistantMessage.from_json
#: 1.98 us vs 3.13 through __init__, SessionEvent 2.98 vs 3.95, an assistant/chunk payload 1.09 vs
#: 1.67). Only for classes
#: whose checks are per field and implied by the field's type; a rule across fields, or a
#: validator the reader does not mirror, needs the class's own ``__init__``.
TRUSTS_READERS: Final = "_codec_trusts_readers"

#: The codec of each class that has one (the first made for it), so that a field of that class is
#: encoded and read by it directly.
_CODECS: dict[type, ObjectCodec] = {}


def codec_of(cls: type) -> ObjectCodec | None:
    """The codec made for ``cls``, if any."""
    return _CODECS.get(cls)


@attrs.frozen
class _FieldOptions:
    omit_default: bool = False
    minimum: float | None = None
    read: Reader | None = None
    required: bool = False
    expected: str | None = None
    refuse: Reader | None = None


def json_field(
    *,
    omit_default: bool = False,
    minimum: float | None = None,
    read: Reader | None = None,
    required: bool = False,
    expected: str | None = None,
    refuse: Reader | None = None,
) -> dict[str, Any]:
    """Field options for the codec: ``attrs.field(metadata=json_field(omit_default=True))``, or in
    ``ObjectCodec(cls, fields={"name": json_field(...)})``.

    :param omit_default: leave the key out while the field holds its default (absent reads as it).
    :param minimum: the least value a number may have in JSON.
    :param read: a reader ``(value, path) -> value`` replacing the one the type implies (for a union
        of classes, such as any message or any chunk; of a tuple's items, for a tuple).
    :param required: the key must be present although the class has a default (a message's ``id``).
    :param expected: what the JSON should be, for messages (``"an array of blocks"``).
    :param refuse: for a str, bool, int or ``Literal`` field, a reader called only for a value its
        type (and ``minimum``) refuses, to say what is wrong in words of its own; a value the type
        takes passes as is, checked inline.
    """
    options = _FieldOptions(omit_default, minimum, read, required, expected, refuse)
    return {_META: options}


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


def _tuple_reader(read: Reader, expected: str) -> Reader:
    def read_items(value: object, path: str) -> tuple[Any, ...]:
        if value.__class__ is not list and value.__class__ is not tuple and not isinstance(value, list | tuple):
            refuse(path, _missing_or(value, expected))
        try:
            # The items' paths (``path[7]``) are built only for an error: read again with them.
            return tuple([read(item, path) for item in value])
        except VocabularyError:
            for index, item in enumerate(value):
                read(item, f"{path}[{index}]")
            raise

    return read_items


def _class_reader(cls: type) -> Reader:
    codec = _CODECS.get(cls)
    if codec is not None:
        read_codec = codec.read

        def read_value(value: object, path: str) -> Any:
            if value is None:
                refuse(path, "missing")
            return read_codec(value, path)

        return read_value
    from_json = cls.from_json  # type: ignore[attr-defined]

    def read(value: object, path: str) -> Any:
        if value is None:
            refuse(path, "missing")
        return from_json(expect_object(value, path), field=path)

    return read


# ---------------------------------------------------------------------- inline checks


@attrs.frozen
class _Check:
    """A test compiled into a reader: true when the JSON value is *not* already the field's value
    (then the field's reader runs: it raises, or gives the value). ``{v}`` is the value, ``{c}``
    the constant."""

    test: str
    constant: Any = None

    def optional(self) -> _Check:
        return _Check(f"{{v}} is not None and ({self.test})", self.constant)


_STR: Final = _Check("{v}.__class__ is not str")
_BOOL: Final = _Check("{v}.__class__ is not bool")


# ---------------------------------------------------------------------- encoders
# A field's encoder is a line of source for the compiled encoder: a template where ``{v}`` is the
# value and ``{c}`` one constant (an encoder function, or a dict of them by class), with that
# constant; ``None`` means "the value is JSON as it is". Each field gets a pair: (frozen, plain).


@attrs.frozen
class _Enc:
    template: str
    constant: Any = None

    def items(self, *, frozen: bool) -> _Enc:
        """This encoder over each item of a tuple."""
        each = self.template.format(v="x", c="{c}")
        listed = f"[{each} for x in {{v}}]"
        return _Enc(f"tuple({listed})" if frozen else listed, self.constant)

    def optional(self) -> _Enc:
        return _Enc(f"(None if {{v}} is None else {self.template})", self.constant)


_Pair = tuple[_Enc | None, _Enc | None]


def _class_encoders(cls: type) -> tuple[Encoder, Encoder]:
    codec = _CODECS.get(cls)
    if codec is not None:
        return codec.encode, codec.encode_plain

    def frozen(value: Any) -> FrozenDict:
        return freeze_json_object(value.to_json(), where=cls.__name__, root="value")

    return frozen, lambda value: value.to_json()


def _class_pair(cls: type) -> _Pair:
    frozen, plain = _class_encoders(cls)
    return _Enc("{c}({v})", frozen), _Enc("{c}({v})", plain)


def _union_pair(members: list[type]) -> _Pair:
    encoders = {member: _class_encoders(member) for member in members}
    frozen = {member: pair[0] for member, pair in encoders.items()}
    if all(_to_json_is_plain(member) for member in members):
        # each member's own to_json (the same JSON; a method call costs less than a lookup by class)
        return _Enc("{c}[{v}.__class__]({v})", frozen), _Enc("{v}.to_json()")
    plain = {member: pair[1] for member, pair in encoders.items()}
    return _Enc("{c}[{v}.__class__]({v})", frozen), _Enc("{c}[{v}.__class__]({v})", plain)


def _to_json_is_plain(cls: type) -> bool:
    """Whether ``cls.to_json`` is its codec's plain encoder (installed), or it has no codec."""
    method = getattr(cls, "to_json", None)
    codec = _CODECS.get(cls)
    return method is not None and (codec is None or method is codec.encode_plain)


def _tuple_pair(pair: _Pair) -> _Pair:
    frozen, plain = pair
    return (
        _Enc("tuple({v})") if frozen is None else frozen.items(frozen=True),
        _Enc("list({v})") if plain is None else plain.items(frozen=False),
    )


def _optional_pair(pair: _Pair) -> _Pair:
    frozen, plain = pair
    return (None if frozen is None else frozen.optional(), None if plain is None else plain.optional())


# ---------------------------------------------------------------------- choosing by type

_Chosen = tuple[_Pair, Reader, "_Check | None"]


def _codec_for(tp: Any, options: _FieldOptions, owner: str) -> _Chosen:
    """The encoders, the reader and the inline check that a field of type ``tp`` gets
    (``options`` apply to tuple items)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        members = [arg for arg in args if arg is not type(None)]
        if len(members) < len(args):  # X | None
            inner = members[0] if len(members) == 1 else typing.Union[tuple(members)]  # noqa: UP007
            pair, read, check = _codec_for(inner, options, owner)
            return _optional_pair(pair), _optional(read), None if check is None else check.optional()
        if options.read is None:
            msg = f"{owner}: a union of {members} needs json_field(read=...) saying how to read it"
            raise TypeError(msg)
        for member in members:
            if not (isinstance(member, type) and (member in _CODECS or hasattr(member, "to_json"))):
                msg = f"{owner}: a union field holds value classes with a codec or to_json(), got {member!r}"
                raise TypeError(msg)
        return _union_pair(members), options.read, None
    if origin is tuple or origin is collections.abc.Sequence:
        args = typing.get_args(tp)
        if origin is tuple and (len(args) != 2 or args[1] is not Ellipsis):
            msg = f"{owner}: only tuple[X, ...] is supported, got {tp}"
            raise TypeError(msg)
        pair, read, _ = _codec_for(args[0], options, owner)
        return _tuple_pair(pair), _tuple_reader(read, options.expected or "an array"), None
    if tp is FrozenDict:
        return (None, _Enc("{c}({v})", thaw_json)), options.read or _read_object, None
    if isinstance(tp, type) and (tp in _CODECS or (hasattr(tp, "from_json") and hasattr(tp, "to_json"))):
        return _class_pair(tp), options.read or _class_reader(tp), None
    if options.read is not None:
        return (None, None), options.read, None
    if options.refuse is not None:
        _, _, check = _codec_for(tp, attrs.evolve(options, refuse=None), owner)
        if check is None:
            msg = f"{owner}: refuse= is for a str, bool, int or Literal field, got {tp!r}"
            raise TypeError(msg)
        return (None, None), options.refuse, check
    if tp is str:
        return (None, None), _read_str, _STR
    if tp is bool:
        return (None, None), _read_bool, _BOOL
    if tp is int:
        least = 0 if options.minimum is None else options.minimum
        return (None, None), _int_reader(options.minimum), _Check("{v}.__class__ is not int or {v} < {c}", least)
    if tp is float:
        return (None, None), _float_reader(options.minimum), None
    if origin is Literal:
        choices = typing.get_args(tp)
        return (None, None), _literal_reader(choices), _Check("{v}.__class__ is not str or {v} not in {c}", frozenset(choices))
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
    #: the keyword the class's ``__init__`` takes the field by
    alias: str = ""
    #: makes the value of an absent key: the field's default, or a fresh one from its factory
    default_of: Callable[[], Any] = attrs.field(default=lambda: attrs.NOTHING, eq=False, repr=False)


class ObjectCodec:
    """Encode an attrs instance as a JSON object, and read one back, checking every field.

    :param tag: ``(key, value)`` written first and required on read, e.g. ``("type", "text-delta")``.
    :param errors_at: the field that a rule across fields (the class refusing a value) is about.
    :param keys: the fields in the order their keys are written and read, if not the class's order.
    :param exclude: fields left out of the JSON (read back as their defaults).
    :param fields: ``json_field`` options by field name, for classes whose fields carry none.
    :param trusted: whether values read are built without the class's checks (``TRUSTS_READERS``;
        by default the class attribute says).
    :param check: a rule across fields, ``check(path, *values)`` with the values read in key order,
        run before the value is built; it raises ``VocabularyError`` (``refuse``) naming the field.
    """

    __slots__ = (
        "_check",
        "_cls",
        "_errors_at",
        "_fields",
        "_keys",
        "_name",
        "_pairs",
        "_paths",
        "_tag",
        "_values_encoder",
        "encode",
        "encode_plain",
        "read",
        "read_body",
    )

    def __init__(
        self,
        cls: type,
        *,
        tag: tuple[str, str] | None = None,
        errors_at: str | None = None,
        keys: Sequence[str] | None = None,
        exclude: Iterable[str] = (),
        fields: Mapping[str, dict[str, Any]] | None = None,
        trusted: bool | None = None,
        check: Callable[..., None] | None = None,
    ) -> None:
        attrs.resolve_types(cls)
        self._cls = cls
        self._name = cls.__name__
        self._tag = tag
        self._errors_at = errors_at
        self._check = check
        given = {} if fields is None else {name: options[_META] for name, options in fields.items()}
        skipped = set(exclude)
        attributes = [attribute for attribute in attrs.fields(cls) if attribute.init and attribute.name not in skipped]
        if keys is not None:
            by_name = {attribute.name: attribute for attribute in attributes}
            if sorted(keys) != sorted(by_name):
                msg = f"{cls.__name__}: keys= lists every field in JSON, {sorted(by_name)}; got {list(keys)}"
                raise TypeError(msg)
            attributes = [by_name[name] for name in keys]
        codecs: list[FieldCodec] = []
        pairs: list[_Pair] = []
        checks: list[_Check | None] = []
        required: list[bool] = []
        nullable: list[bool] = []
        for attribute in attributes:
            options: _FieldOptions = given.get(attribute.name) or attribute.metadata.get(_META, _FieldOptions())
            pair, read, inline = _codec_for(attribute.type, options, f"{cls.__name__}.{attribute.name}")
            default = attribute.default
            default_of = _default_maker(default)
            if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                default = default.factory()
            if options.required:
                default_of = lambda: attrs.NOTHING  # noqa: E731
            alias = attribute.alias or attribute.name
            codecs.append(
                FieldCodec(attribute.name, alias, read, default, options.omit_default, alias, default_of)
            )
            pairs.append(pair)
            checks.append(inline)
            must = options.required or attribute.default is attrs.NOTHING
            # a key that must be there but may hold null reads as null when absent (counted apart)
            required.append(must and type(None) not in typing.get_args(attribute.type))
            nullable.append(must and not required[-1])
        self._fields = tuple(codecs)
        self._keys = frozenset([field.key for field in codecs] + ([tag[0]] if tag else []))
        self._paths: dict[str, tuple[str, ...]] = {}
        #: ``value`` as a frozen JSON object
        self.encode: Callable[[Any], FrozenDict] = self._compile(pairs, frozen=True)
        #: ``value`` as a plain JSON object (dicts and lists)
        self.encode_plain: Callable[[Any], dict[str, Any]] = self._compile(pairs, frozen=False)
        self._pairs = pairs
        self._values_encoder: Callable[[tuple[Any, ...]], dict[str, Any]] | None = None
        trust = bool(getattr(cls, TRUSTS_READERS, False)) if trusted is None else trusted
        trust = trust and _trustable(cls, skipped)
        #: read and check a JSON object at ``field`` (a path) into an instance
        self.read: Callable[[object, str], Any] = self._compile_read(checks, required, nullable, trusted=trust, tagged=True)
        #: ``read`` for an object whose tag was already checked (by a ``TaggedUnion``)
        self.read_body: Callable[[object, str], Any] = (
            self.read if tag is None else self._compile_read(checks, required, nullable, trusted=trust, tagged=False)
        )
        _CODECS.setdefault(cls, self)

    @property
    def fields(self) -> tuple[FieldCodec, ...]:
        return self._fields

    def install_to_json(self) -> None:
        """Make ``encode_plain`` the class's own ``to_json`` (its docstring kept).

        The class writes ``to_json`` as a one-line delegate for readers and type checkers; calling
        the compiled encoder directly saves that call (kept: a two-block message's to_json 0.43 us vs
        0.52 through the delegate, same run).
        """
        delegate = getattr(self._cls, "to_json", None)
        encode = self.encode_plain
        encode.__doc__ = getattr(delegate, "__doc__", None)
        encode.__qualname__ = f"{self._cls.__qualname__}.to_json"
        encode.__name__ = "to_json"
        setattr(self._cls, "to_json", encode)  # noqa: B010 - replacing a method type checkers know

    @property
    def tag(self) -> tuple[str, str] | None:
        return self._tag

    def encode_values(self, values: tuple[Any, ...]) -> dict[str, Any]:
        """``encode_plain`` of the instance whose field values are ``values`` (all of them, in
        ``attrs.fields`` order), without building it: a deferred payload written by persistence
        (0.1 us against 0.6 to build the instance first). Compiled at first use."""
        encoder = self._values_encoder
        if encoder is None:
            encoder = self._values_encoder = self._compile(self._pairs, frozen=False, from_values=True)
        return encoder(values)

    def _compile(self, pairs: list[_Pair], *, frozen: bool, from_values: bool = False) -> Any:
        """One function with a line per field, keys in order: the cost of a hand-written ``to_json``.

        ``from_values``: it takes the tuple of the instance's field values instead of the instance.
        """
        namespace: dict[str, Any] = {"_frozen": _frozen}
        literal: list[str] = [] if self._tag is None else [f"{self._tag[0]!r}: {self._tag[1]!r}"]
        lines: list[str] = []  # once a key may be left out, the rest follow one by one (to keep the order)
        position = {attribute.name: index for index, attribute in enumerate(attrs.fields(self._cls))}
        for index, (field, pair) in enumerate(zip(self._fields, pairs, strict=True)):
            encode = pair[0] if frozen else pair[1]
            value = f"self[{position[field.name]}]" if from_values else f"self.{field.name}"
            shown = value
            if encode is not None:
                namespace[f"_e{index}"] = encode.constant
                shown = encode.template.format(v=value, c=f"_e{index}")
            if field.omit_default:
                namespace[f"_d{index}"] = field.default
                lines.append(f"    if not ({value} is _d{index} or {value} == _d{index}):")
                lines.append(f"        out[{field.key!r}] = {shown}")
            elif lines:
                lines.append(f"    out[{field.key!r}] = {shown}")
            else:
                literal.append(f"{field.key!r}: {shown}")
        source = "def encode(self):\n    out = {" + ", ".join(literal) + "}\n" + "".join(f"{line}\n" for line in lines)
        source += "    return _frozen(out)\n" if frozen else "    return out\n"
        if not lines and not frozen:
            source = "def encode(self):\n    return {" + ", ".join(literal) + "}\n"
        exec(source, namespace)  # the source is built above from attrs field names only
        return namespace["encode"]

    def _compile_read(
        self,
        checks: list[_Check | None],
        required: list[bool],
        nullable: list[bool],
        *,
        trusted: bool,
        tagged: bool,
    ) -> Any:
        """One function reading every field in a line of its own, checking as it goes.

        A field whose type has an inline check (a str, a bool, an int, a ``Literal``) is checked
        in place, its reader called only to raise. The paths of the other fields (``data.turn``)
        are made once per ``field`` prefix and cached, so a read that succeeds builds no string.
        With ``trusted`` the instance is built straight into its slots; otherwise through the
        class, whose own refusals (a rule across fields) become a ``VocabularyError`` at
        ``errors_at``.
        """
        namespace: dict[str, Any] = {
            "_expect": expect_object,
            "_check_keys": check_keys,
            "_keys": self._keys,
            "_paths": self._paths,
            "_make_paths": self._make_paths,
            "_dict": dict,
            "_FrozenDict": FrozenDict,
            "_build_error": self._build_error,
            "_ABSENT": _ABSENT,
        }
        lines = [
            "def read(data, field):",
            "    obj = data if data.__class__ is _dict or data.__class__ is _FrozenDict else _expect(data, field)",
        ]
        if tagged and self._tag is not None:
            namespace["_tag_key"], namespace["_tag_value"] = self._tag
            namespace["_refuse_tag"] = self._refuse_tag
            lines.append("    if obj.get(_tag_key) != _tag_value:")
            lines.append("        _refuse_tag(obj, field)")
        lines.append("    get = obj.get")
        if any(check is None for check in checks):
            lines.append("    paths = _paths.get(field) or _make_paths(field)")
        for index, (codec, check) in enumerate(zip(self._fields, checks, strict=True)):
            namespace[f"_r{index}"] = codec.read
            value = f"a{index}"
            if check is None:
                use = [f"{value} = _r{index}({value}, paths[{index}])"]
            else:
                namespace[f"_c{index}"] = check.constant
                use = [
                    f"if {check.test.format(v=value, c=f'_c{index}')}:",
                    f"    {value} = _r{index}({value}, field + {'.' + codec.key!r})",
                ]
            if required[index]:
                lines.append(f"    {value} = get({codec.key!r})")
                lines.extend(f"    {line}" for line in use)
                continue
            lines.append(f"    {value} = get({codec.key!r}, _ABSENT)")
            lines.append(f"    if {value} is _ABSENT:")
            namespace[f"_d{index}"] = (lambda: None) if nullable[index] else codec.default_of
            lines.append(f"        {value} = _d{index}()")
            lines.append("    else:")
            lines.append("        present += 1")
            lines.extend(f"        {line}" for line in use)
        # After the fields (a missing one is the likelier mistake): an object with as many keys as
        # were read (the tag and the required ones, plus the optional ones present) has no other.
        known = sum(required) + (self._tag is not None)
        lines.insert(lines.index("    get = obj.get") + 1, f"    present = {known}")
        lines.append("    if len(obj) != present:")
        lines.append("        _check_keys(obj, _keys, field)")
        values = ", ".join(f"a{index}" for index in range(len(self._fields)))
        if self._check is not None:
            namespace["_rule"] = self._check
            lines.append(f"    _rule(field, {values})")
        if trusted:
            namespace["_new"] = object.__new__
            namespace["_cls"] = self._cls
            lines.append("    value = _new(_cls)")
            for index, codec in enumerate(self._fields):
                namespace[f"_s{index}"] = _slot_setter(self._cls, codec.name)
                lines.append(f"    _s{index}(value, a{index})")
            for attribute in attrs.fields(self._cls):
                if attribute.name not in {codec.name for codec in self._fields}:
                    namespace[f"_s_{attribute.name}"] = _slot_setter(self._cls, attribute.name)
                    namespace[f"_v_{attribute.name}"] = attribute.default
                    lines.append(f"    _s_{attribute.name}(value, _v_{attribute.name})")
            lines.append("    return value")
        else:
            namespace["_init"] = self._cls
            keywords = ", ".join(f"{codec.alias}=a{index}" for index, codec in enumerate(self._fields))
            lines.append("    try:")
            lines.append(f"        return _init({keywords})")
            lines.append("    except (TypeError, ValueError) as exc:")
            lines.append("        _build_error(field, exc)")
        source = "\n".join(lines) + "\n"
        exec(source, namespace)  # the source is built above from attrs field names only
        return namespace["read"]

    def _make_paths(self, field: str) -> tuple[str, ...]:
        paths = tuple([f"{field}.{codec.key}" for codec in self._fields])
        if len(self._paths) < 64:  # a bounded cache: item paths (``prefix[7]``) are many
            self._paths[field] = paths
        return paths

    def _refuse_tag(self, obj: Any, field: str) -> NoReturn:
        key, value = self._tag  # type: ignore[misc]  # only compiled in with a tag
        refuse(f"{field}.{key}", f"expected {value!r}, got {obj.get(key)!r}")

    def _build_error(self, field: str, exc: Exception) -> NoReturn:
        if isinstance(exc, VocabularyError):
            raise exc
        _refuse_value(f"{field}.{self._errors_at}" if self._errors_at else field, exc)

    def __repr__(self) -> str:
        return f"<ObjectCodec {self._name}>"


class _Absent:
    """The value of a key that is not there (``None`` is JSON's ``null``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<absent>"


_ABSENT: Final = _Absent()


def _slot_setter(cls: type, name: str) -> Callable[[object, object], None]:
    setter: Callable[[object, object], None] = cls.__dict__[name].__set__  # a slot descriptor
    return setter


def _default_maker(default: Any) -> Callable[[], Any]:
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        if default.takes_self:
            msg = "a codec field's default factory may not take self"
            raise TypeError(msg)
        factory: Callable[[], Any] = default.factory
        return factory
    return lambda: default


def _trustable(cls: type, excluded: set[str]) -> bool:
    """Whether instances may be built straight into their slots: every field is set by the codec
    (read, or given its plain default when the codec does not read it), and nothing runs after
    ``__init__`` (``__attrs_post_init__``)."""

    def settable(attribute: attrs.Attribute[Any]) -> bool:
        if attribute.init and attribute.name not in excluded:
            return True
        default = attribute.default
        return default is not attrs.NOTHING and not isinstance(default, attrs.Factory)  # type: ignore[arg-type]

    return (
        "__slots__" in cls.__dict__
        and not hasattr(cls, "__attrs_post_init__")
        and not hasattr(cls, "__attrs_pre_init__")
        and all(settable(attribute) for attribute in attrs.fields(cls))
    )


def _refuse_value(field: str, exc: Exception) -> NoReturn:
    """A value that reads as the right JSON types but that the class refuses (a rule across fields)."""
    raise VocabularyError(f"{field}: {exc}", field=field) from exc


def _frozen(items: dict[str, Any]) -> FrozenDict:
    """A ``FrozenDict`` of values this module froze itself (no second scan: an assistant/chunk's
    ``to_data`` 0.58 us vs 1.49 with ``FrozenDict(plain)``, same run)."""
    frozen = dict.__new__(FrozenDict)
    dict.update(frozen, items)
    return frozen


# ---------------------------------------------------------------------- tagged unions


class TaggedUnion:
    """Read any of several classes from JSON, choosing by the tag their codecs carry.

    ``TaggedUnion("role", "role", (UserMessage, AssistantMessage, ToolResultMessage))``: an object
    whose ``role`` is ``user`` is read by ``UserMessage``'s codec, and so on. ``read`` takes any
    member; ``reader(only=...)`` makes a reader of some members, for a field that may hold only
    those (``refuse_other(tag)`` says why another member is refused).

    :param key: the tag's key (every member's codec has a tag with this key).
    :param noun: what the tag names, for messages: ``unknown {noun} 'x'; expected one of ...``.
    """

    __slots__ = ("_key", "_listed", "_noun", "_readers", "read")

    def __init__(self, key: str, noun: str, members: Sequence[type]) -> None:
        readers: dict[str, Reader] = {}
        for member in members:
            codec = _CODECS.get(member)
            if codec is None or codec.tag is None or codec.tag[0] != key:
                msg = f"TaggedUnion({key!r}): {member.__name__} needs an ObjectCodec tagged with {key!r}"
                raise TypeError(msg)
            readers[codec.tag[1]] = codec.read_body
        self._key = key
        self._noun = noun
        self._readers = readers
        self._listed = ", ".join(readers)
        #: read any member at a path
        self.read: Reader = self.reader()

    def reader(self, only: Iterable[str] | None = None, refuse_other: Callable[[str], str] | None = None) -> Reader:
        """A reader of the members tagged ``only`` (all by default)."""
        allowed = set(self._readers if only is None else only)
        readers = {tag: read for tag, read in self._readers.items() if tag in allowed}
        key = self._key
        slow = self._slow

        def read(value: Any, path: str) -> Any:
            cls = value.__class__
            tag = value.get(key) if cls is dict or cls is FrozenDict else None
            read_one = readers.get(tag) if tag.__class__ is str else None
            if read_one is None:
                return slow(value, path, readers, refuse_other)
            return read_one(value, path)

        return read

    def _slow(
        self, value: object, path: str, readers: dict[str, Reader], refuse_other: Callable[[str], str] | None
    ) -> Any:
        """Any other mapping is read; anything else refused, saying why."""
        obj = expect_object(value, path)
        tag = obj.get(self._key)
        if type(tag) is str and tag in readers:
            return readers[tag](obj, path)
        if type(tag) is str and tag in self._readers:
            problem = refuse_other(tag) if refuse_other is not None else f"{tag!r} is not allowed here"
            refuse(f"{path}.{self._key}", problem)
        problem = "missing" if tag is None else f"unknown {self._noun} {tag!r}"
        refuse(f"{path}.{self._key}", f"{problem}; expected one of {self._listed}")
