"""Tool definitions: the ``Tool`` value and the ``@tool`` decorator that derives its JSON Schema.

``@tool`` reads a typed signature and builds the parameters' schema (str, int, float, bool,
``X | None``, ``Literal``, ``enum.Enum``, ``list[T]``, ``tuple[...]``, ``dict[str, T]``, attrs
classes, ``Annotated[T, "description"]``, ``Annotated[T, {"minimum": 1}]`` for extra JSON Schema
keywords such as bounds), the description from the docstring's first paragraph
and per-parameter descriptions from its ``Args:`` (or reST ``:param:``, or numpydoc) section. At call time the validated JSON arguments
are converted back (an enum member, an attrs instance, a tuple) and a parameter annotated
``ToolExecution`` is injected. A plain ``Tool(name=..., parameters={...}, function=...)`` with a
hand-written schema works too: its function is called with the arguments as keywords.
"""

from __future__ import annotations

import enum
import inspect
import math
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, TypeAlias, TypeVar, Union, overload

import attrs
import docstring_parser
import docstring_parser.google
import docstring_parser.numpydoc
import docstring_parser.rest

from dsh_core.vocabulary._json import FrozenDict, freeze_json_object
from dsh_core.vocabulary._tool_types import ToolExecution

__all__ = ["ParallelSafe", "Tool", "tool"]

#: Whether a call may run alongside others: a constant, or decided from the parsed arguments.
ParallelSafe: TypeAlias = "bool | Callable[[Mapping[str, Any]], bool]"

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_F = TypeVar("_F", bound=Callable[..., Any])

#: Converts one validated (frozen) JSON value into what the body expects; ``None`` means as is.
_Convert: TypeAlias = "Callable[[Any], Any] | None"


# ---------------------------------------------------------------------- the value


def _check_name(_instance: object, _attribute: object, value: str) -> None:
    if not isinstance(value, str):
        msg = f"tool name must be a str, got {type(value).__name__}"
        raise TypeError(msg)
    if not _NAME.match(value):
        msg = f"tool name {value!r} must be 1-64 characters of letters, digits, '_' or '-' (model APIs require it)"
        raise ValueError(msg)


def _check_timeout(_instance: object, _attribute: object, value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"tool timeout must be a number of seconds or None, got {type(value).__name__}"
        raise TypeError(msg)
    if not 0 < value < float("inf"):
        msg = f"tool timeout must be a positive, finite number of seconds, got {value!r}"
        raise ValueError(msg)


def _check_function(_instance: object, _attribute: object, value: Callable[..., Any]) -> None:
    if not callable(value):
        msg = f"Tool.function must be callable (a def or async def), got {type(value).__name__}"
        raise TypeError(msg)


def _check_description(_instance: object, _attribute: object, value: object) -> None:
    if not isinstance(value, str):
        msg = f"tool description must be a str, got {type(value).__name__}"
        raise TypeError(msg)


def _check_parallel_safe(_instance: object, _attribute: object, value: object) -> None:
    if not isinstance(value, bool) and not callable(value):
        msg = f"parallel_safe must be a bool or a callable of the arguments, got {type(value).__name__}"
        raise TypeError(msg)


def _check_read_only(_instance: object, _attribute: object, value: object) -> None:
    if type(value) is not bool:
        msg = f"tool read_only must be a bool, got {type(value).__name__} {value!r}"
        raise TypeError(msg)


def _freeze_parameters(value: Mapping[str, Any]) -> FrozenDict:
    frozen = freeze_json_object(value, where="Tool", root="parameters")
    kind = frozen.get("type", "object")
    if kind != "object":
        msg = f"Tool.parameters must be a JSON Schema of type 'object' (the arguments are a JSON object), got {kind!r}"
        raise ValueError(msg)
    return frozen


def _empty_parameters() -> FrozenDict:
    return FrozenDict({"type": "object", "properties": {}, "additionalProperties": False})


@attrs.frozen(kw_only=True)
class Tool:
    """A tool the model can call: what it sees (name, description, parameters) and the body.

    ``function`` is called with the validated arguments as keywords (``def`` or ``async def``);
    a parameter annotated ``ToolExecution`` receives the execution (cwd, signal, agent). It
    returns a ``str`` (one text block), a sequence of content blocks, or any JSON value (sent as
    JSON text). ``timeout`` is in seconds; ``parallel_safe`` says whether a call may run
    alongside others (a callable decides from the parsed arguments). ``read_only`` declares that
    the tool changes nothing (the permissions plugin's ``read-only`` mode lets such tools run).
    """

    name: str = attrs.field(validator=_check_name)
    function: Callable[..., Any] = attrs.field(validator=_check_function)
    description: str = attrs.field(default="", validator=_check_description)
    parameters: Mapping[str, Any] = attrs.field(factory=_empty_parameters, converter=_freeze_parameters)
    parallel_safe: ParallelSafe = attrs.field(default=False, validator=_check_parallel_safe)
    timeout: float | None = attrs.field(default=None, validator=_check_timeout)
    read_only: bool = attrs.field(default=False, validator=_check_read_only)
    _invoker: _Invoker = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_invoker", _Invoker.lenient(self.function))

    def is_parallel_safe(self, arguments: Mapping[str, Any]) -> bool:
        """True only when the tool says so for these arguments; a classifier that raises says no."""
        if isinstance(self.parallel_safe, bool):
            return self.parallel_safe
        try:
            return self.parallel_safe(arguments) is True
        except Exception:  # noqa: BLE001 - a classifier bug must not crash the loop; exclusive is safe
            return False

    def keyword_arguments(self, arguments: Mapping[str, Any], execution: ToolExecution) -> dict[str, Any]:
        """The keywords ``function`` is called with: converted arguments plus the injected execution.

        :raises TypeError, ValueError: when a value cannot be converted (an attrs validator refused it).
        """
        return self._invoker.keywords(arguments, execution)

    @property
    def is_async(self) -> bool:
        return self._invoker.is_async

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the body directly, as the undecorated function (handy in unit tests)."""
        return self.function(*args, **kwargs)


class _Invoker:
    """How to call a body: per-parameter converters and the name that receives the execution."""

    __slots__ = ("converters", "inject", "is_async")

    def __init__(
        self, converters: dict[str, Callable[[Any], Any]], inject: str | None, is_async: bool
    ) -> None:
        self.converters = converters
        self.inject = inject
        self.is_async = is_async

    @classmethod
    def lenient(cls, function: Callable[..., Any]) -> _Invoker:
        """Converters for the annotations it understands; anything else is passed as is."""
        converters: dict[str, Callable[[Any], Any]] = {}
        inject: str | None = None
        hints = _hints_or_empty(function)
        try:
            parameters = inspect.signature(function).parameters
        except (TypeError, ValueError):  # builtins without a signature: call with keywords as they are
            parameters = {}  # type: ignore[assignment]
        for name, parameter in parameters.items():
            hint = hints.get(name, parameter.annotation)
            if _is_execution(hint):
                inject = name
                continue
            try:
                convert = _describe(hint, _Where("", name), ()).convert
            except TypeError:
                continue
            if convert is not None:
                converters[name] = convert
        return cls(converters, inject, _is_async_callable(function))

    def keywords(self, arguments: Mapping[str, Any], execution: ToolExecution) -> dict[str, Any]:
        if self.converters:
            converters = self.converters
            kwargs = {
                key: (value if (convert := converters.get(key)) is None else convert(value))
                for key, value in arguments.items()
            }
        else:
            kwargs = dict(arguments)
        if self.inject is not None:
            kwargs[self.inject] = execution
        return kwargs


def _is_async_callable(function: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004 - an object whose __call__ is async
    )


def _hints_or_empty(function: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(function, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable annotations: fall back to the raw ones
        return {}


# ---------------------------------------------------------------------- the decorator


@overload
def tool(function: _F, /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    parallel_safe: ParallelSafe = False,
    timeout: float | None = None,
    read_only: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parallel_safe: ParallelSafe = False,
    timeout: float | None = None,
    read_only: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a ``Tool`` from a typed ``def`` or ``async def``; usable bare or with options.

    The name defaults to the function's, the description to the docstring's first paragraph.

    :raises TypeError: naming the function, parameter and type, for an annotation with no JSON
        Schema (or a missing one, ``*args``/``**kwargs``, or positional-only parameters).
    """

    def decorate(fn: Callable[..., Any]) -> Tool:
        if not callable(fn):
            msg = f"@tool decorates a function, got {fn!r}"
            raise TypeError(msg)
        summary, param_docs = _parse_docstring(inspect.getdoc(fn) or "")
        return Tool(
            name=name if name is not None else fn.__name__,
            description=description if description is not None else summary,
            parameters=_signature_schema(fn, param_docs),
            function=fn,
            parallel_safe=parallel_safe,
            timeout=timeout,
            read_only=read_only,
        )

    return decorate if function is None else decorate(function)


def _signature_schema(fn: Callable[..., Any], param_docs: Mapping[str, str]) -> dict[str, Any]:
    qualname = getattr(fn, "__qualname__", repr(fn))
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        msg = f"@tool {qualname}: cannot resolve its annotations ({exc!r}); import the names they use"
        raise TypeError(msg) from exc
    properties: dict[str, Any] = {}
    required: list[str] = []
    for pname, parameter in inspect.signature(fn).parameters.items():
        where = _Where(qualname, pname)
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD, parameter.POSITIONAL_ONLY):
            msg = f"@tool {qualname}: parameter {pname!r} must be an ordinary named parameter (arguments are passed by name)"
            raise TypeError(msg)
        if pname not in hints:
            msg = f"@tool {qualname}: parameter {pname!r} has no annotation; annotate it so its JSON Schema can be built"
            raise TypeError(msg)
        hint = hints[pname]
        if _is_execution(hint):
            continue
        described = _describe(hint, where, ())
        schema = dict(described.schema)
        if "description" not in schema and pname in param_docs:
            schema["description"] = param_docs[pname]
        if parameter.default is parameter.empty:
            required.append(pname)
        elif (default := _json_default(parameter.default)) is not _NO_DEFAULT:
            schema["default"] = default
        properties[pname] = schema
    result: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        result["required"] = required
    result["additionalProperties"] = False
    return result


# ---------------------------------------------------------------------- annotation -> schema


@attrs.frozen
class _Where:
    function: str
    parameter: str

    def unsupported(self, annotation: object, why: str = "") -> TypeError:
        shown = getattr(annotation, "__name__", None) or repr(annotation)
        hint = why or (
            "supported: str, int, float, bool, X | None, Literal[...], Enum, list[T], tuple[...], "
            "dict[str, T], attrs classes, Annotated[T, 'description']"
        )
        msg = f"@tool {self.function}: parameter {self.parameter!r} has type {shown}, which has no JSON Schema; {hint}"
        return TypeError(msg)


@attrs.frozen
class _Described:
    schema: Mapping[str, Any]
    convert: _Convert = None


_SCALARS: dict[object, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_NO_DEFAULT = object()


def _strip_annotated(hint: object) -> object:
    while typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]
    return hint


def _is_execution(hint: object) -> bool:
    """``ToolExecution`` (or ``ToolExecution | None``): the parameter that receives the execution."""
    hint = _strip_annotated(hint)
    if typing.get_origin(hint) in (Union, types.UnionType):
        members = {_strip_annotated(arg) for arg in typing.get_args(hint)} - {type(None)}
        return members == {ToolExecution}
    return hint is ToolExecution


def _describe(hint: Any, where: _Where, seen: tuple[type, ...]) -> _Described:
    """The JSON Schema of one annotation and the converter back from validated JSON."""
    origin = typing.get_origin(hint)
    if origin is Annotated:
        inner, *metadata = typing.get_args(hint)
        described = _describe(inner, where, seen)
        text = next((item for item in metadata if isinstance(item, str)), None)
        # A mapping adds JSON Schema keywords, e.g. bounds: Annotated[int, {"minimum": 1}]
        keywords = {key: value for item in metadata if isinstance(item, Mapping) for key, value in item.items()}
        if text is None and not keywords:
            return described
        schema = {**described.schema, **keywords}
        if text is not None:
            schema["description"] = text
        return _Described(schema, described.convert)
    if hint in _SCALARS:
        return _Described({"type": _SCALARS[hint]}, _to_float if hint is float else None)
    if origin is Union or origin is types.UnionType:
        return _describe_union(hint, where, seen)
    if origin is Literal:
        return _describe_literal(hint, where)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _describe_enum(hint, where)
    if isinstance(hint, type) and attrs.has(hint):
        return _describe_attrs(hint, where, seen)
    if hint is list or hint is tuple or origin is list or origin is tuple or origin is Sequence:
        return _describe_array(hint, where, seen)
    if hint is dict or origin is dict or origin is Mapping:
        return _describe_object(hint, where, seen)
    raise where.unsupported(hint)


def _to_float(value: Any) -> Any:
    return float(value) if type(value) is int else value


def _describe_union(hint: Any, where: _Where, seen: tuple[type, ...]) -> _Described:
    members = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    nullable = len(members) < len(typing.get_args(hint))
    described = [_describe(member, where, seen) for member in members]
    if len(described) == 1:
        inner = described[0]
        schema = inner.schema
    else:
        if any(item.convert is not None for item in described):
            raise where.unsupported(
                hint, "a union may mix only str, int, bool and None (its values need no conversion)"
            )
        inner = _Described({"anyOf": [item.schema for item in described]})
        schema = inner.schema
    if not nullable:
        return inner
    convert = inner.convert
    if set(schema) == {"type"} and isinstance(schema["type"], str):
        nullable_schema: Mapping[str, Any] = {"type": [schema["type"], "null"]}
    elif "enum" in schema and set(schema) <= {"enum", "type"}:
        nullable_schema = {"enum": [*schema["enum"], None]}
    else:
        nullable_schema = {"anyOf": [schema, {"type": "null"}]}
    if convert is None:
        return _Described(nullable_schema)
    return _Described(nullable_schema, lambda value: None if value is None else convert(value))


def _json_scalar_type(values: Sequence[object]) -> str | None:
    kinds = {type(value) for value in values}
    if len(kinds) == 1:
        return _SCALARS.get(kinds.pop())
    return None


def _describe_literal(hint: Any, where: _Where) -> _Described:
    values = list(typing.get_args(hint))
    for value in values:
        if value is not None and type(value) not in (str, int, bool):
            raise where.unsupported(hint, f"Literal values must be str, int, bool or None, not {value!r}")
    schema: dict[str, Any] = {"enum": values}
    if (kind := _json_scalar_type(values)) is not None:
        schema["type"] = kind
    return _Described(schema)


def _describe_enum(cls: type[enum.Enum], where: _Where) -> _Described:
    values = [member.value for member in cls]
    for value in values:
        if type(value) not in (str, int, float, bool):
            why = f"enum {cls.__name__} has the value {value!r}; enum values must be str, int, float or bool"
            raise where.unsupported(cls, why)
    schema: dict[str, Any] = {"enum": values}
    if (kind := _json_scalar_type(values)) is not None:
        schema["type"] = kind
    return _Described(schema, cls)


def _describe_array(hint: Any, where: _Where, seen: tuple[type, ...]) -> _Described:
    origin = typing.get_origin(hint) or hint
    args = typing.get_args(hint)
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        if args == ((),):  # tuple[()]: the empty tuple
            args = ()
        items = [_describe(arg, where, seen) for arg in args]
        schema: dict[str, Any] = {
            "type": "array",
            "prefixItems": [item.schema for item in items],
            "items": False,
            "minItems": len(items),
        }
        converters = [item.convert for item in items]

        def to_fixed_tuple(value: Sequence[Any]) -> tuple[Any, ...]:
            return tuple(v if c is None else c(v) for v, c in zip(value, converters, strict=True))

        return _Described(schema, to_fixed_tuple)
    make: Callable[[Any], Any] = tuple if origin is tuple else list
    if not args:
        return _Described({"type": "array"}, make)
    item = _describe(args[0], where, seen)
    convert = item.convert
    if convert is None:
        return _Described({"type": "array", "items": item.schema}, make)
    return _Described({"type": "array", "items": item.schema}, lambda value: make(convert(v) for v in value))


def _describe_object(hint: Any, where: _Where, seen: tuple[type, ...]) -> _Described:
    args = typing.get_args(hint)
    if not args:
        return _Described({"type": "object"}, dict)
    key, value_hint = args
    if key is not str:
        raise where.unsupported(hint, "a dict's keys must be str (JSON object keys are strings)")
    item = _describe(value_hint, where, seen)
    convert = item.convert
    schema = {"type": "object", "additionalProperties": item.schema}
    if convert is None:
        return _Described(schema, dict)
    return _Described(schema, lambda value: {k: convert(v) for k, v in value.items()})


def _describe_attrs(cls: type, where: _Where, seen: tuple[type, ...]) -> _Described:
    if cls in seen:
        raise where.unsupported(
            cls, f"{cls.__name__} refers to itself; a recursive type has no finite schema"
        )
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception as exc:
        raise where.unsupported(cls, f"its field annotations cannot be resolved ({exc!r})") from exc
    properties: dict[str, Any] = {}
    required: list[str] = []
    converters: dict[str, Callable[[Any], Any]] = {}
    inner_seen = (*seen, cls)
    for field in attrs.fields(cls):
        if not field.init:
            continue
        key = field.alias or field.name
        hint = hints.get(field.name, field.type)
        if hint is None:
            raise where.unsupported(cls, f"field {cls.__name__}.{field.name} has no annotation")
        described = _describe(hint, _Where(where.function, f"{where.parameter}.{key}"), inner_seen)
        schema = dict(described.schema)
        if "description" not in schema and isinstance(field.metadata.get("description"), str):
            schema["description"] = field.metadata["description"]
        if field.default is attrs.NOTHING:
            required.append(key)
        elif (default := _json_default(field.default)) is not _NO_DEFAULT:  # a Factory is no JSON default
            schema["default"] = default
        properties[key] = schema
        if described.convert is not None:
            converters[key] = described.convert
    result: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        result["required"] = required
    result["additionalProperties"] = False
    if cls.__doc__ and not cls.__doc__.startswith(f"{cls.__name__}("):  # attrs' generated repr-like doc
        summary, _ = _parse_docstring(inspect.cleandoc(cls.__doc__))
        if summary:
            result["description"] = summary

    def build(value: Mapping[str, Any]) -> Any:
        return cls(**{k: (v if (c := converters.get(k)) is None else c(v)) for k, v in value.items()})

    return _Described(result, build)


def _json_default(value: object) -> object:
    """A parameter default as JSON for the schema, or ``_NO_DEFAULT`` when it is not plain JSON."""
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or type(value) in (str, int, bool) or (type(value) is float and math.isfinite(value)):
        return value
    return _NO_DEFAULT


# ---------------------------------------------------------------------- docstrings

def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph (joined into one line) and the parameter descriptions it documents.

    Google (``Args:``, ``Keyword Args:``), reST (``:param x:``) and numpydoc (``Parameters`` over
    ``----------``) styles are read by ``docstring_parser``; as its ``parse`` does, the style that
    finds the most fields wins. A docstring no style can parse still gives its first paragraph.
    """
    parsed: list[docstring_parser.Docstring] = []
    for parse in _PARSERS:
        try:
            parsed.append(parse(doc))
        except docstring_parser.ParseError:
            continue
    if not parsed:
        return _one_line(doc.split("\n\n", 1)[0]), {}
    best = max(parsed, key=lambda candidate: len(candidate.meta))  # the first of equals: Google
    params = {
        param.arg_name.lstrip("*"): _one_line(param.description or "")
        for param in best.params
        if param.args and param.args[0] in _PARAM_KINDS
    }
    return _one_line((best.description or "").split("\n\n", 1)[0]), params


def _one_line(text: str) -> str:
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


#: The field kinds that describe an argument (reST ``:keyword x:`` included).
_PARAM_KINDS = frozenset({"param", "parameter", "arg", "argument", "key", "keyword", "kwarg"})

# docstring_parser's Google sections lack the keyword-argument ones that Google's guide allows.
_GOOGLE = docstring_parser.google.GoogleParser(
    [
        *docstring_parser.google.DEFAULT_SECTIONS,
        *(
            docstring_parser.google.Section(title, "param", docstring_parser.google.SectionType.MULTIPLE)
            for title in ("Keyword Args", "Keyword Arguments")
        ),
    ]
)
_PARSERS: tuple[Callable[[str], docstring_parser.Docstring], ...] = (
    _GOOGLE.parse,
    docstring_parser.rest.parse,
    docstring_parser.numpydoc.parse,
)
