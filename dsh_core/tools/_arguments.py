"""Tool arguments from the model: parse, refuse what no tool should see, validate against the schema.

The arguments string is whatever the model sent (SPEC §9.2): any length, any nesting, any
characters. Nothing in it may end a turn, so every problem becomes an ``INVALID_ARGS`` result
whose text tells the model what to change:

* not JSON, or not a JSON object (``NaN``, ``Infinity``, an integer with more digits than Python
  converts, control characters inside strings), or a number too large for a float (``1e400``);
* nested deeper than ``MAX_ARGUMENT_DEPTH`` (the C parser's ``RecursionError`` is caught, and a
  cheap bracket count decides whether the depth must be measured at all);
* a NUL character or a lone surrogate in any string, key or value (raw, or escaped as ``\\u0000``
  and ``\\ud800``): no file name, command or UTF-8 text can hold them;
* a value breaking the schema's types or bounds (listed, each with its path).

The common case costs one ``json.loads``, two ``str.count`` and the schema's fast acceptor.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Final

from dsh_core.tools._schema_check import Acceptor
from dsh_core.tools._validator import SchemaValidator
from dsh_core.vocabulary._content import Text
from dsh_core.vocabulary._json import FrozenDict, JsonValueError, freeze_json_object
from dsh_core.vocabulary._tool_types import ToolErrorCode, ToolResult

__all__ = ["MAX_ARGUMENT_DEPTH", "parse_arguments"]

#: How deep tool arguments may nest: far beyond any real tool's parameters, and shallow enough
#: that the schema validator (recursive) never comes near Python's recursion limit.
MAX_ARGUMENT_DEPTH: Final = 64
#: Schema problems listed in one message, and characters shown of each.
_MAX_PROBLEMS: Final = 10
_MAX_PROBLEM_CHARS: Final = 300
#: Characters no string argument may hold: NUL, and surrogates (paired ones never survive parsing).
_BAD_CHAR: Final = re.compile("[\x00\ud800-\udfff]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_RETRY: Final = "Send them as one JSON object that matches the tool's parameters."


def _error(message: str, code: ToolErrorCode = "INVALID_ARGS") -> ToolResult:
    return ToolResult(content=(Text(message),), is_error=True, error_code=code)


class _Refused(ValueError):
    """A value the parser meets that tool arguments may not hold."""


def _refuse_constant(name: str) -> Any:
    msg = f"{name} is not a JSON number"
    raise _Refused(msg)


#: ``json.loads(text, parse_constant=...)`` builds a decoder per call; one serves every call.
_DECODER: Final = json.JSONDecoder(parse_constant=_refuse_constant)


def parse_arguments(
    name: str, arguments: object, validator: SchemaValidator, accept: Acceptor | None
) -> FrozenDict | ToolResult:
    """The arguments of a call of tool ``name`` as a frozen object, or the ``INVALID_ARGS`` result saying why not.

    ``validator`` (a ``jsonschema`` validator, or anything with its ``iter_errors``) runs only when
    ``accept`` is ``None`` or does not accept the value. Never raises for anything in ``arguments``.
    """
    if not isinstance(arguments, str):
        return _error(
            f"Error: the arguments for tool {name!r} must be JSON text, got {type(arguments).__name__}."
        )
    if not arguments.strip():
        value: Any = {}  # models send "" for a call without arguments
    else:
        try:
            value = _DECODER.decode(arguments)
        except RecursionError:
            return _too_deep(name)
        except ValueError as exc:  # JSONDecodeError, _Refused, and int() refusing over 4300 digits
            if isinstance(exc, json.JSONDecodeError):
                detail = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
            else:
                detail = str(exc).partition("; use sys.set_int_max_str_digits")[0]
            return _error(f"Error: the arguments for tool {name!r} are not valid JSON ({detail}). {_RETRY}")
    if type(value) is not dict:
        return _error(
            f"Error: the arguments for tool {name!r} must be a JSON object, got {_json_kind(value)}. {_RETRY}"
        )
    # A string can hold NUL or a surrogate only through an escape (the parser refuses raw control
    # characters), or when the text itself holds a raw surrogate (never in ASCII text, and
    # isascii() is a flag lookup); nesting needs as many brackets.
    suspicious = "\\u" in arguments or (not arguments.isascii() and _SURROGATE.search(arguments) is not None)
    nested = arguments.count("[") + arguments.count("{") > MAX_ARGUMENT_DEPTH
    if suspicious or nested:
        problem = _scan(value)
        if problem is not None:
            return _error(
                f"Error: invalid arguments for tool {name!r}: {problem}. Fix this and call the tool again."
            )
    if accept is None or not accept(value):
        try:
            problems = sorted(validator.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
        except (
            RecursionError
        ):  # a recursive schema over a value within the depth limit; still the model's to fix
            return _too_deep(name)
        if problems:
            return _schema_error(name, problems)
    try:
        return freeze_json_object(value, where=f"tool {name}", root="arguments")
    except JsonValueError as exc:
        return _error(
            f"Error: the arguments for tool {name!r} hold a value that is not lossless JSON "
            f"({exc.path}: {exc.problem}). Send ordinary numbers and strings."
        )


def _too_deep(name: str) -> ToolResult:
    return _error(
        f"Error: the arguments for tool {name!r} nest more than {MAX_ARGUMENT_DEPTH} levels deep. {_RETRY}"
    )


def _scan(value: Any) -> str | None:
    """The first string holding NUL or a surrogate, or nesting past the limit; iterative, so any depth is safe."""
    stack: list[tuple[Any, str, int]] = [(value, "arguments", 0)]
    while stack:
        item, path, depth = stack.pop()
        kind = type(item)
        if kind is str:
            if (bad := _BAD_CHAR.search(item)) is not None:
                return f"{path} holds {_describe_char(bad.group())} at character {bad.start()}, which no argument may contain"
            continue
        if kind is not dict and kind is not list:
            continue
        if depth >= MAX_ARGUMENT_DEPTH:
            return f"{path} nests more than {MAX_ARGUMENT_DEPTH} levels deep"
        if kind is dict:
            for key, child in item.items():
                if (bad := _BAD_CHAR.search(key)) is not None:
                    return (
                        f"a key of {path} holds {_describe_char(bad.group())}, which no argument may contain"
                    )
                stack.append((child, _child_path(path, key), depth + 1))
        else:
            stack.extend((child, f"{path}[{index}]", depth + 1) for index, child in enumerate(item))
    return None


def _describe_char(char: str) -> str:
    if char == "\x00":
        return "a NUL character (\\u0000)"
    return f"a lone surrogate (\\u{ord(char):04x})"


def _child_path(path: str, key: str) -> str:
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{key!r}]"


def _schema_error(name: str, problems: list[Any]) -> ToolResult:
    lines = [
        f"- at {_path(error.absolute_path)}: {_clip(error.message)}" for error in problems[:_MAX_PROBLEMS]
    ]
    if len(problems) > _MAX_PROBLEMS:
        lines.append(f"- and {len(problems) - _MAX_PROBLEMS} more problems")
    text = "\n".join(lines)
    return _error(f"Error: invalid arguments for tool {name!r}:\n{text}\nFix these and call the tool again.")


def _clip(message: str) -> str:
    # jsonschema quotes the offending value; a 100 kB string must not come back in full.
    if len(message) <= _MAX_PROBLEM_CHARS:
        return message
    half = _MAX_PROBLEM_CHARS // 2
    return f"{message[:half]} [...] {message[-half:]}"


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return "a boolean" if isinstance(value, bool) else "a number"


def _path(path: Iterable[str | int]) -> str:
    out = "arguments"
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{part}"
        else:
            out += f"[{part!r}]"
    return out
