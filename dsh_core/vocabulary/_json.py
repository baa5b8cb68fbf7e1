"""Lossless JSON values: check them, deep-freeze them, thaw them, dump them, and refuse bad ones.

Session event data, message sources and tool schemas are JSON by contract. ``freeze_json`` refuses
anything that would not survive a trip through JSON text unchanged (NaN, bytes, sets, objects,
non-str keys, cycles, absurd nesting) with a ``JsonValueError`` naming where the value came from and
the path inside it, and returns a deep-frozen copy: dicts become ``FrozenDict``, lists become tuples.

``FrozenDict`` is a ``dict`` subclass whose mutators raise. Being a real dict keeps reads and
``json.dumps`` at C speed, lets it compare equal to a plain dict with the same items, and makes
freezing a small dict cost one scan plus one C-level copy. Every ``FrozenDict`` holds frozen JSON
only (its constructor freezes), so re-freezing one returns it as it is.

The helpers at the end are for readers of parsed JSON (the codec's, and the readers given to it):
each refuses a bad spot with a ``VocabularyError`` naming its path (``chunk.index``).
"""

from __future__ import annotations

import json
import json.encoder
import math
from collections.abc import Callable, Mapping
from typing import Any, NoReturn, TypeAlias, final

from dsh_core.vocabulary._errors import DshError, VocabularyError

__all__ = [
    "MAX_DEPTH",
    "FrozenDict",
    "JsonValue",
    "JsonValueError",
    "check_keys",
    "dumps_json",
    "expect_object",
    "freeze_json",
    "freeze_json_object",
    "frozen_trusted",
    "json_type_name",
    "loads_json",
    "refuse",
    "str_field",
    "thaw_json",
]

#: How deep JSON may nest. Far beyond real data, and well under Python's recursion limit, so that
#: freezing, thawing and dumping never hit ``RecursionError`` even from inside a deep async stack.
MAX_DEPTH = 200

#: A deep-frozen JSON value, as ``freeze_json`` returns it.
JsonValue: TypeAlias = "str | int | float | bool | tuple[JsonValue, ...] | FrozenDict | None"


class JsonValueError(DshError, ValueError):
    """A value that is not lossless JSON.

    ``where`` names its owner (an event type, ``UserMessage.source``), ``path`` the spot inside it
    (``data.arguments[2]``) and ``problem`` what is wrong there; the message is all three.
    """

    def __init__(self, message: str, *, where: str, path: str, problem: str = "") -> None:
        super().__init__(message)
        self.where = where
        self.path = path
        self.problem = problem


@final
class FrozenDict(dict[str, "JsonValue"]):
    """An immutable, hashable JSON object: a ``dict`` whose mutators raise ``TypeError``.

    ``FrozenDict(mapping)`` freezes its input like ``freeze_json`` (so it raises ``JsonValueError``
    for anything that is not JSON). It equals a plain dict with the same items; ``.copy()`` and
    ``|`` give plain, mutable dicts, which is the way to build a changed copy.
    """

    __slots__ = ("_hash",)

    def __new__(cls, *args: Any, **kwargs: Any) -> FrozenDict:
        if len(args) == 1 and not kwargs and type(args[0]) is FrozenDict:
            return args[0]  # immutable: as good as a copy (so FrozenDict is a cheap attrs converter)
        try:
            return _freeze_dict(dict(*args, **kwargs), 0)
        except _NotJson:
            pass
        raise _explain(dict(*args, **kwargs), "FrozenDict", "value")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Everything happened in __new__; dict.__init__ would insert the unfrozen values again.
        pass

    def __hash__(self) -> int:  # type: ignore[override]  # dict sets __hash__ = None; we are immutable
        try:
            return self._hash
        except AttributeError:
            self._hash: int = hash(frozenset(self.items()))
            return self._hash

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[str, JsonValue]]]:
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: object) -> FrozenDict:
        return self

    def _immutable(self, *args: Any, **kwargs: Any) -> NoReturn:
        msg = "FrozenDict is immutable; build a changed copy instead, e.g. FrozenDict({**value, 'key': 1})"
        raise TypeError(msg)

    __setitem__ = __delitem__ = __ior__ = _immutable
    clear = pop = popitem = setdefault = update = _immutable


# Building a FrozenDict without running its validating __new__: freeze_json has already checked.
_new_frozen = dict.__new__
_fill = dict.update
_set = dict.__setitem__
#: Types that are JSON as they are (float is not here: it must also be finite).
_PLAIN: frozenset[type] = frozenset({str, int, bool, type(None)})


class _NotJson(Exception):
    """Internal signal from the fast path; the slow path then works out what and where."""


def freeze_json(value: object, *, where: str, root: str = "value") -> JsonValue:
    """Return a deep-frozen copy of ``value``, refusing anything that is not lossless JSON.

    Accepts str, int, bool, finite float, None, lists and tuples (which become tuples) and
    mappings with str keys (which become ``FrozenDict``). Subclasses of str, int and float (such as
    enums) become the plain type. Frozen values come back as they are, without a copy.

    :param where: who owns the value, for the error message (an event type, ``UserMessage.source``).
    :param root: the name of the value itself in the path (``data`` for event data).
    :raises JsonValueError: naming ``where`` and the path, e.g.
        ``tool/call: data.arguments[2]: bytes is not JSON; encode binary data as a base64 str``.
    """
    try:
        frozen: JsonValue = _freeze(value, 0)
    except _NotJson:
        raise _explain(value, where, root) from None
    return frozen


def frozen_trusted(value: dict[str, JsonValue]) -> FrozenDict:
    """Wrap a dict whose values are already frozen JSON (scalars, ``FrozenDict``s, tuples).

    No check at all: only for values already known to be frozen JSON, such as a JSON decoder's
    objects whose arrays were made tuples (the persistence loaders' ``object_hook``: a stored
    ``tool/result`` line 4.2 us vs 5.5 with ``json.loads`` + ``freeze_json``, same run). Anything
    else goes through ``freeze_json``.
    """
    frozen = _new_frozen(FrozenDict)
    _fill(frozen, value)
    return frozen


def freeze_json_object(value: object, *, where: str, root: str = "value") -> FrozenDict:
    """Like ``freeze_json``, for a value that must be a JSON object (a str-keyed mapping)."""
    if type(value) is FrozenDict:
        return value
    if isinstance(value, Mapping):
        try:
            return _freeze_dict(value, 0)
        except _NotJson:
            pass
        raise _explain(value, where, root)
    problem = f"expected a JSON object (a mapping with str keys), got {type(value).__name__}"
    raise JsonValueError(f"{where}: {root}: {problem}", where=where, path=root, problem=problem)


def thaw_json(value: Any) -> Any:
    """Return a plain, mutable deep copy: ``FrozenDict`` and mappings become dicts, tuples lists."""
    cls = type(value)
    if cls is str or cls is int or cls is float or cls is bool or value is None:
        return value
    if cls is FrozenDict or isinstance(value, Mapping):
        return {k: thaw_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw_json(v) for v in value]
    return value


def _not_json(value: object) -> NoReturn:
    msg = f"{type(value).__name__} is not JSON; freeze_json the value first to find where it is"
    raise TypeError(msg)


# json.dumps builds a new encoder on every call; building the C encoder once saves about a third.
# No cycle markers: frozen values cannot hold a cycle (a cyclic plain value hits RecursionError).
_make_c_encoder: Callable[..., Callable[[Any, int], list[str]]] | None = getattr(
    json.encoder, "c_make_encoder", None
)
_c_encoder = (
    None
    if _make_c_encoder is None
    else _make_c_encoder(
        # markers, default, encoder, indent, key/item separators, sort_keys, skipkeys, allow_nan
        None,
        _not_json,
        json.encoder.encode_basestring,
        None,
        ":",
        ",",
        False,
        False,
        False,
    )
)
_py_encode = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_not_json
).encode


def dumps_json(value: Any) -> str:
    """Compact JSON text (UTF-8 kept, no spaces, NaN refused); works on frozen values directly.

    :raises TypeError: for a value that is not JSON. :raises ValueError: for NaN or infinity.
    """
    if _c_encoder is None or type(value) is str:
        return _py_encode(value)
    return "".join(_c_encoder(value, 0))


def _refuse_constant(name: str) -> NoReturn:
    msg = f"{name} is not JSON (only finite numbers are)"
    raise ValueError(msg)


def loads_json(text: str | bytes, *, where: str, root: str = "value") -> JsonValue:
    """Parse JSON text into a frozen value; ``NaN`` and ``Infinity`` are refused.

    :raises JsonValueError: for text that is not JSON, naming ``where``.
    """
    try:
        parsed = json.loads(text, parse_constant=_refuse_constant)
    except ValueError as exc:
        problem = f"not valid JSON text: {exc}"
        raise JsonValueError(f"{where}: {root}: {problem}", where=where, path=root, problem=problem) from exc
    return freeze_json(parsed, where=where, root=root)


# ---------------------------------------------------------------------- fast path
# Exact-type checks first (``type(x) is str`` costs a pointer compare); everything unusual goes to
# _freeze_other. Any failure raises _NotJson and lets _explain find the spot, so the fast path
# never builds paths or messages.


def _freeze(value: Any, depth: int) -> Any:
    # Containers first: callers already handle scalars inline, so what arrives here is mostly nested.
    cls = type(value)
    if cls is dict:
        return _freeze_dict(value, depth)
    if cls is FrozenDict:
        return value
    if cls is list:
        return _freeze_list(value, depth)
    if cls is tuple:
        return _freeze_tuple(value, depth)
    if cls is str or cls is int or cls is bool or value is None:
        return value
    if cls is float:
        if value - value == 0.0:  # false for inf and nan
            return value
        raise _NotJson
    return _freeze_other(value, depth)


def _freeze_dict(value: Mapping[Any, Any], depth: int) -> FrozenDict:
    if depth >= MAX_DEPTH:
        raise _NotJson
    # One scan notes the keys whose values need freezing; one C-level copy takes the rest as is.
    nested: list[str] | None = None
    for key, item in value.items():
        if type(key) is not str:
            return _freeze_dict(_plain_keys(value), depth)
        cls = type(item)
        if cls is str or cls is int or cls is bool or item is None or (cls is float and item - item == 0.0):
            continue
        if nested is None:
            nested = [key]
        else:
            nested.append(key)
    frozen = _new_frozen(FrozenDict)
    _fill(frozen, value)
    if nested is not None:
        depth += 1
        for key in nested:
            _set(frozen, key, _freeze(value[key], depth))
    return frozen


def _plain_keys(value: Mapping[Any, Any]) -> dict[str, Any]:
    """A str subclass key (a StrEnum) becomes a plain str; any other key is not JSON."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise _NotJson
        out[str.__str__(key)] = item
    return out


def _freeze_list(value: list[Any] | tuple[Any, ...], depth: int) -> tuple[Any, ...]:
    if depth >= MAX_DEPTH:
        raise _NotJson
    depth += 1
    out = []
    for item in value:  # a loop, not a comprehension: 3.11 pays a function call for those
        out.append(item if type(item) in _PLAIN else _freeze(item, depth))
    return tuple(out)


def _freeze_tuple(value: tuple[Any, ...], depth: int) -> tuple[Any, ...]:
    frozen = _freeze_list(value, depth)
    for new, old in zip(frozen, value, strict=True):
        if new is not old:
            return frozen
    return value  # already frozen: keep the original, share it


def _freeze_other(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):  # bool is final, so this is an int subclass such as an IntEnum
        return int.__int__(value)
    if isinstance(value, float):
        plain = float.__float__(value)
        if plain - plain == 0.0:
            return plain
        raise _NotJson
    if isinstance(value, Mapping):
        return _freeze_dict(value, depth)
    if isinstance(value, list | tuple):
        return _freeze_list(value, depth)
    raise _NotJson


# ---------------------------------------------------------------------- slow path: what and where


def _explain(value: object, where: str, root: str) -> JsonValueError:
    found = _find_problem(value, root, {}, 0)
    path, problem = found if found is not None else (root, "is not lossless JSON")
    return JsonValueError(f"{where}: {path}: {problem}", where=where, path=path, problem=problem)


def _find_problem(value: object, path: str, open_: dict[int, str], depth: int) -> tuple[str, str] | None:
    """The first spot in ``value`` that is not JSON, as (path, problem); ``open_`` maps containers
    being walked (by id) to their paths, to tell a cycle from deep nesting."""
    if value is None or isinstance(value, str | int):
        return None
    if isinstance(value, float):
        if math.isfinite(value):
            return None
        return path, f"float {value!r} is not JSON (only finite numbers are)"
    if not isinstance(value, Mapping | list | tuple):
        return path, _type_problem(value)
    if id(value) in open_:
        return path, f"cycle: refers back to {open_[id(value)]}, which contains it; JSON cannot hold a cycle"
    if depth >= MAX_DEPTH:
        return path, f"nested deeper than {MAX_DEPTH} levels"
    open_[id(value)] = path
    try:
        if isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str):
                    kind = type(key).__name__
                    return path, f"key {key!r} ({kind}) is not a str; JSON object keys are strings"
                child = f"{path}.{key}" if key.isidentifier() else f"{path}[{key!r}]"
                if (found := _find_problem(item, child, open_, depth + 1)) is not None:
                    return found
        else:
            for index, item in enumerate(value):
                if (found := _find_problem(item, f"{path}[{index}]", open_, depth + 1)) is not None:
                    return found
    finally:
        del open_[id(value)]
    return None


def _type_problem(value: object) -> str:
    name = type(value).__name__
    if isinstance(value, bytes | bytearray | memoryview):
        return f"{name} is not JSON; encode binary data as a base64 str"
    if isinstance(value, set | frozenset):
        return f"{name} is not JSON; use a list (sorted, if its order must be stable)"
    if callable(getattr(value, "to_json", None)):
        return f"{name} is not JSON; store its .to_json() instead"
    return f"{name} is not JSON; use str, int, float, bool, None, lists and str-keyed dicts"


# ---------------------------------------------------------------------- reading parsed JSON
# Paths are built only when something is wrong: ``field`` is the object's own path.


def refuse(field: str, problem: str) -> NoReturn:
    """Raise ``VocabularyError`` for the JSON at ``field``."""
    raise VocabularyError(f"{field}: {problem}", field=field)


def json_type_name(value: object) -> str:
    """The JSON name of a parsed value's type, for messages about JSON input."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    return type(value).__name__


def expect_object(data: object, field: str) -> Mapping[str, Any]:
    """``data`` if it is a JSON object (any str-keyed mapping), else ``VocabularyError``."""
    if type(data) is dict or type(data) is FrozenDict or isinstance(data, Mapping):
        return data
    refuse(field, f"expected a JSON object, got {json_type_name(data)}")


def check_keys(data: Mapping[str, Any], allowed: frozenset[str], field: str) -> None:
    """Refuse a key outside ``allowed``: an unknown field would otherwise be silently dropped."""
    if not data.keys() <= allowed:
        unknown = next(key for key in data if key not in allowed)
        refuse(f"{field}.{unknown}", f"unknown field; expected only {', '.join(sorted(allowed))}")


def _missing_or(value: object, expected: str) -> str:
    return "missing" if value is None else f"expected {expected}, got {json_type_name(value)}"


def str_field(data: Mapping[str, Any], key: str, field: str) -> str:
    value = data.get(key)
    if type(value) is str:
        return value
    refuse(f"{field}.{key}", _missing_or(value, "a string"))
