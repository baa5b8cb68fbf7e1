"""Tests for dsh_core.tools._definition: the Tool value, the @tool decorator and its JSON Schemas."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import attrs
import jsonschema
import pytest

from dsh_core.tools import Tool, tool
from dsh_core.vocabulary import FrozenDict, ToolExecution, thaw_json


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Weird(enum.Enum):
    A = (1, 2)


@attrs.frozen
class Point:
    """A point on the plane."""

    x: int
    y: int = 0


@attrs.frozen
class Shape:
    name: str
    corners: list[Point]


def _execution() -> ToolExecution:
    return ToolExecution(call_id="c1", name="t", arguments="{}")


def _props(t: Tool) -> Mapping[str, Any]:
    properties = t.parameters["properties"]
    assert isinstance(properties, Mapping)
    return properties


def test_scalars_are_required_without_default() -> None:
    """str, int, float and bool map to their JSON types; parameters without default are required."""

    @tool
    def t(a: str, b: int, c: float, d: bool = False) -> str:
        return ""

    assert t.parameters == {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "integer"},
            "c": {"type": "number"},
            "d": {"type": "boolean", "default": False},
        },
        "required": ("a", "b", "c"),
        "additionalProperties": False,
    }
    assert isinstance(t.parameters, FrozenDict)


def test_optional_with_default_is_not_required_and_allows_null() -> None:
    """`X | None = None` is optional and accepts null; `X | None` without default is required."""

    @tool
    def t(a: int | None, b: str | None = None) -> str:
        return ""

    props = _props(t)
    assert props["a"] == {"type": ("integer", "null")}
    assert props["b"]["type"] == ("string", "null")
    assert t.parameters["required"] == ("a",)
    validator = jsonschema.Draft202012Validator(thaw_json(t.parameters))
    assert validator.is_valid({"a": None})
    assert not validator.is_valid({"b": None})


def test_literal_becomes_enum() -> None:
    """Literal[...] becomes an enum with its JSON type."""

    @tool
    def t(mode: Literal["fast", "slow"]) -> str:
        return mode

    assert _props(t)["mode"] == {"enum": ("fast", "slow"), "type": "string"}


def test_enum_becomes_values_and_body_receives_member() -> None:
    """An Enum parameter is described by its values; the body gets the member back."""

    @tool
    def t(color: Color, level: Level = Level.LOW) -> str:
        return ""

    props = _props(t)
    assert props["color"] == {"enum": ("red", "blue"), "type": "string"}
    assert props["level"] == {"enum": (1, 2), "type": "integer", "default": 1}
    kwargs = t.keyword_arguments({"color": "blue", "level": 2}, _execution())
    assert kwargs == {"color": Color.BLUE, "level": Level.HIGH}
    assert isinstance(kwargs["color"], Color)


def test_lists_tuples_and_dicts() -> None:
    """list[T], tuple[T, ...], fixed tuples and dict[str, T] map to arrays and objects."""

    @tool
    def t(a: list[int], b: tuple[str, ...], c: tuple[str, int], d: dict[str, float]) -> str:
        return ""

    props = _props(t)
    assert props["a"] == {"type": "array", "items": {"type": "integer"}}
    assert props["b"] == {"type": "array", "items": {"type": "string"}}
    assert props["c"] == {
        "type": "array",
        "prefixItems": ({"type": "string"}, {"type": "integer"}),
        "items": False,
        "minItems": 2,
    }
    assert props["d"] == {"type": "object", "additionalProperties": {"type": "number"}}
    kwargs = t.keyword_arguments({"a": (1, 2), "b": ("x",), "c": ("x", 1), "d": {"k": 1}}, _execution())
    assert kwargs == {"a": [1, 2], "b": ("x",), "c": ("x", 1), "d": {"k": 1.0}}
    assert type(kwargs["a"]) is list
    assert type(kwargs["d"]["k"]) is float
    validator = jsonschema.Draft202012Validator(thaw_json(t.parameters))
    assert not validator.is_valid({"a": [], "b": [], "c": ["x", 1, 2], "d": {}})


def test_attrs_class_becomes_object_and_body_receives_instance() -> None:
    """An attrs class becomes an object schema of its fields; nested ones convert too."""

    @tool
    def t(shape: Shape, where: Point | None = None) -> str:
        return ""

    props = _props(t)
    assert props["shape"] == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "corners": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
                    "required": ("x",),
                    "additionalProperties": False,
                    "description": "A point on the plane.",
                },
            },
        },
        "required": ("name", "corners"),
        "additionalProperties": False,
    }
    kwargs = t.keyword_arguments(
        {"shape": {"name": "tri", "corners": ({"x": 1}, {"x": 2, "y": 3})}, "where": None}, _execution()
    )
    assert kwargs["shape"] == Shape("tri", [Point(1), Point(2, 3)])
    assert kwargs["where"] is None
    assert t.keyword_arguments({"shape": {"name": "s", "corners": ()}, "where": {"x": 5}}, _execution())[
        "where"
    ] == Point(5)


def test_annotated_and_docstring_descriptions() -> None:
    """The docstring's first paragraph describes the tool; Annotated and Args: describe parameters."""

    @tool
    def t(path: Annotated[str, "the file to read"], limit: int = 10, offset: int = 0) -> str:
        """Read a file
        from disk.

        Longer explanation that is not part of the description.

        Args:
            path: overridden by Annotated.
            limit: how many lines
                at most.
            offset (int): the first line.

        Returns:
            the text.
        """
        return ""

    assert t.description == "Read a file from disk."
    props = _props(t)
    assert props["path"]["description"] == "the file to read"
    assert props["limit"]["description"] == "how many lines at most."
    assert props["offset"]["description"] == "the first line."


def test_rest_docstring_describes_parameters() -> None:
    """reST ``:param [type] name:`` fields describe parameters, continuation lines joined."""

    @tool
    def t(path: str, limit: int = 10) -> str:
        """Read a file
        from disk.

        :param path: the file
            to read.
        :param int limit: how many lines.
        :returns: the text.
        """
        return ""

    assert t.description == "Read a file from disk."
    props = _props(t)
    assert props["path"]["description"] == "the file to read."
    assert props["limit"]["description"] == "how many lines."


def test_numpy_docstring_describes_parameters() -> None:
    """A numpydoc ``Parameters`` section describes parameters; its ``Returns`` is not one."""

    @tool
    def t(path: str, limit: int = 10) -> str:
        """Read a file.

        Parameters
        ----------
        path : str
            the file
            to read.
        limit : int, optional
            how many lines.

        Returns
        -------
        str
            the text.
        """
        return ""

    assert t.description == "Read a file."
    props = _props(t)
    assert props["path"]["description"] == "the file to read."
    assert props["limit"]["description"] == "how many lines."


def test_google_keyword_args_and_starred_names() -> None:
    """``Keyword Args:`` entries describe parameters too, and a documented ``*name`` is ``name``."""

    @tool
    def t(pattern: str, glob: str = "*") -> str:
        """Search.

        Args:
            *pattern: a regex; e.g. `key: value`.

        Keyword Args:
            glob (str, optional): only files matching it.

        Attributes:
            pattern: not a parameter description.
        """
        return ""

    props = _props(t)
    assert props["pattern"]["description"] == "a regex; e.g. `key: value`."
    assert props["glob"]["description"] == "only files matching it."


def test_malformed_docstring_keeps_its_summary() -> None:
    """An ``Args:`` entry without a colon describes nothing, and the tool is still made."""

    @tool
    def t(path: str) -> str:
        """Read a file.

        Args:
            path without a colon
        """
        return ""

    assert t.description == "Read a file."
    assert "description" not in _props(t)["path"]


def test_execution_parameter_is_injected_not_described() -> None:
    """A parameter annotated ToolExecution is left out of the schema and receives the execution."""

    @tool
    async def t(text: str, execution: ToolExecution) -> str:
        return text

    assert set(_props(t)) == {"text"}
    execution = _execution()
    assert t.keyword_arguments({"text": "x"}, execution) == {"text": "x", "execution": execution}
    assert t.is_async


def test_decorator_options() -> None:
    """name=, description=, parallel_safe= and timeout= override the defaults."""

    @tool(name="renamed", description="Described.", parallel_safe=True, timeout=2.5)
    def t() -> str:
        """Ignored."""
        return ""

    assert (t.name, t.description, t.timeout) == ("renamed", "Described.", 2.5)
    assert t.is_parallel_safe({})
    assert t.parameters == {"type": "object", "properties": {}, "additionalProperties": False}
    assert t() == ""


def test_parallel_safe_callable_and_failing_classifier() -> None:
    """A callable decides per call; anything but exactly True, or a raise, means not parallel safe."""

    def classify(arguments: Mapping[str, Any]) -> bool:
        if arguments.get("boom"):
            raise RuntimeError("classifier bug")
        return arguments.get("mode") == "read"

    @tool(parallel_safe=classify)
    def t(mode: str, boom: bool = False) -> str:
        return mode

    assert t.is_parallel_safe({"mode": "read"})
    assert not t.is_parallel_safe({"mode": "write"})
    assert not t.is_parallel_safe({"mode": "read", "boom": True})


@pytest.mark.parametrize(
    ("annotation", "named"),
    [(set, "set"), (bytes, "bytes"), (dict[int, str], "dict[int, str]"), (object, "object"), (Any, "Any")],
)
def test_unsupported_annotation_names_function_parameter_and_type(annotation: Any, named: str) -> None:
    """An annotation without a JSON Schema is a TypeError naming the function, parameter and type."""

    def bad(value: int) -> str:
        return ""

    bad.__annotations__["value"] = annotation
    with pytest.raises(TypeError, match=r"@tool .*bad: parameter 'value' has type") as caught:
        tool(bad)
    assert named.split("[")[0] in str(caught.value)


def test_missing_annotation_and_var_args_are_refused() -> None:
    """An unannotated parameter or *args is a TypeError at decoration."""

    def unannotated(value) -> str:  # type: ignore[no-untyped-def]
        return ""

    def star(*values: int) -> str:
        return ""

    with pytest.raises(TypeError, match="'value' has no annotation"):
        tool(unannotated)
    with pytest.raises(TypeError, match="'values' must be an ordinary named parameter"):
        tool(star)


def test_enum_with_non_json_values_is_refused() -> None:
    """An enum whose values are not JSON scalars cannot be described."""

    def t(value: Weird) -> str:
        return ""

    with pytest.raises(TypeError, match="enum values must be"):
        tool(t)


def test_plain_tool_with_hand_written_schema() -> None:
    """Tool(name=..., parameters=..., function=...) works; the function gets keywords."""
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}

    def search(q: str) -> str:
        return q.upper()

    t = Tool(name="search", parameters=schema, function=search)
    assert thaw_json(t.parameters) == schema
    assert t.keyword_arguments({"q": "x"}, _execution()) == {"q": "x"}
    assert not t.is_parallel_safe({"q": "x"})


def test_tool_value_checks() -> None:
    """Bad names, timeouts and non-object schemas are refused at construction."""
    with pytest.raises(ValueError, match="tool name"):
        Tool(name="has space", function=print)
    with pytest.raises(ValueError, match="timeout"):
        Tool(name="t", function=print, timeout=0)
    with pytest.raises(ValueError, match="type 'object'"):
        Tool(name="t", function=print, parameters={"type": "array"})


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"description": 5}, TypeError),
        ({"parallel_safe": "yes"}, TypeError),
        ({"timeout": "5"}, TypeError),
        ({"timeout": -1}, ValueError),
        ({"name": 5}, TypeError),
        ({"name": "has space"}, ValueError),
    ],
)
def test_bad_tool_options_fail_at_definition(options: dict[str, object], error: type[Exception]) -> None:
    """A wrong type is a TypeError and a malformed value a ValueError, when the tool is made."""
    with pytest.raises(error):

        @tool(**options)  # type: ignore[arg-type]
        def noop() -> str:
            """Nothing."""
            return ""


def test_a_tool_function_must_be_callable() -> None:
    """Tool(function=5) is refused where it is built, not when a model calls it."""
    from dsh_core import Tool

    with pytest.raises(TypeError, match="callable"):
        Tool(name="x", function=5)  # type: ignore[arg-type]


def test_annotated_mapping_adds_schema_keywords() -> None:
    """A mapping in Annotated adds JSON Schema keywords (bounds) next to the type and description."""

    @tool
    def t(
        limit: Annotated[int | None, {"minimum": 1}, "how many"] = None,
        name: Annotated[str, {"minLength": 1, "maxLength": 8}] = "x",
    ) -> str:
        return ""

    properties = thaw_json(t.parameters["properties"])
    assert properties["limit"] == {
        "type": ["integer", "null"],
        "minimum": 1,
        "description": "how many",
        "default": None,
    }
    assert properties["name"] == {"type": "string", "minLength": 1, "maxLength": 8, "default": "x"}
