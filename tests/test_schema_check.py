"""Tests for dsh_core.tools._schema_check: the fast acceptor never accepts what jsonschema rejects."""

from __future__ import annotations

import enum
from typing import Any, Literal

import attrs
import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_core.tools import compile_acceptor, tool
from dsh_core.vocabulary import thaw_json


class Mode(enum.Enum):
    ON = "on"
    ONE = 1


@attrs.frozen
class Inner:
    n: int
    tags: list[str] = attrs.field(factory=list)


@tool
def sample(
    s: str,
    i: int,
    f: float,
    b: bool,
    o: int | None,
    lit: Literal["x", 1, True],
    mode: Mode,
    xs: list[int],
    inner: Inner | None = None,
    m: dict[str, int] | None = None,
) -> str:
    return ""


SCHEMAS: list[dict[str, Any]] = [
    thaw_json(sample.parameters),
    {"type": "object", "properties": {"a": {"enum": [1, "1", None], "type": ["integer", "null"]}}},
    {
        "type": "object",
        "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "number"}}]}},
    },
    {"type": "object", "additionalProperties": {"type": "boolean"}, "required": ["k"]},
    {
        "type": "object",
        "properties": {
            "i": {"type": "integer"},
            "f": {"type": "number"},
            "b": {"type": "boolean"},
            "s": {"type": "string"},
            "o": {"type": ["integer", "null"]},
            "lit": {"enum": [1, "1", True]},
            "xs": {"type": "array", "items": {"type": "integer"}},
        },
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "i": {"type": "integer", "minimum": -1, "maximum": 2},
            "f": {"type": ["number", "null"], "exclusiveMinimum": 0, "exclusiveMaximum": 2.5},
            "s": {"type": "string", "minLength": 1, "maxLength": 2},
            "o": {"type": ["integer", "string"], "minimum": 0, "maxLength": 0},
        },
    },
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(-3, 3, allow_nan=False)
    | st.sampled_from(["", "x", "on", "1"]),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["n", "tags", "k", "z"]), children, max_size=3)
    ),
    max_leaves=8,
)
field_names = st.sampled_from(["s", "i", "f", "b", "o", "lit", "mode", "xs", "inner", "m", "a", "k", "extra"])
arguments = st.dictionaries(field_names, json_values, max_size=10)
# Mostly valid arguments for ``sample``: each field is a plausible value or any JSON at all.
near_sample = st.fixed_dictionaries(
    {
        "s": st.text(max_size=2) | json_values,
        "i": st.integers(-2, 2) | json_values,
        "f": st.floats(-2, 2, allow_nan=False) | json_values,
        "b": st.booleans() | json_values,
        "o": st.none() | st.integers(-2, 2) | json_values,
        "lit": st.sampled_from(["x", 1, True, 1.0, "1", False]),
        "mode": st.sampled_from(["on", 1, True, "ONE", 1.0]),
        "xs": st.lists(st.integers(-2, 2) | json_values, max_size=3),
    },
    optional={
        "inner": st.none()
        | st.fixed_dictionaries({"n": st.integers() | json_values}, optional={"tags": json_values}),
        "m": st.none() | st.dictionaries(st.text(max_size=1), st.integers() | json_values, max_size=2),
        "extra": json_values,
    },
)


@pytest.mark.parametrize("schema", SCHEMAS)
@settings(max_examples=600, deadline=None)
@given(data=st.data())
def test_acceptor_is_sound(schema: dict[str, Any], data: st.DataObject) -> None:
    """Whatever the acceptor accepts, jsonschema accepts too."""
    own_keys = sorted(schema.get("properties", {})) or ["k", "z"]
    own = st.dictionaries(st.sampled_from(own_keys), json_values, max_size=3)
    value = data.draw(st.one_of(own, own, own, arguments))
    accept = compile_acceptor(schema)
    assert accept is not None
    if accept(value):
        assert jsonschema.Draft202012Validator(schema).is_valid(value), value


@settings(max_examples=1000, deadline=None)
@given(value=near_sample)
def test_acceptor_is_sound_on_nearly_valid_arguments(value: dict[str, Any]) -> None:
    """Arguments close to valid exercise every branch; accepted still means valid."""
    accept = compile_acceptor(SCHEMAS[0])
    assert accept is not None
    if accept(value):
        assert jsonschema.Draft202012Validator(SCHEMAS[0]).is_valid(value), value


def test_acceptor_accepts_ordinary_valid_arguments() -> None:
    """The common case takes the fast path."""
    accept = compile_acceptor(SCHEMAS[0])
    assert accept is not None
    good = {
        "s": "x",
        "i": 1,
        "f": 1,
        "b": True,
        "o": None,
        "lit": 1,
        "mode": "on",
        "xs": [1, 2],
        "inner": {"n": 1},
    }
    assert accept(good)
    assert not accept({**good, "lit": True, "i": True})  # bool is not an integer
    assert not accept({**good, "extra": 1})


# Schemas of the acceptor's subset, with any keyword sometimes holding a value of the wrong shape.
_junk = (
    st.none()
    | st.booleans()
    | st.integers(-2, 3)
    | st.floats(-1, 2, allow_nan=False)
    | st.sampled_from(["", "x", "string", "object"])
    | st.lists(st.sampled_from(["string", "integer", "null", "x", 1, "a"]), max_size=3)
    | st.lists(st.dictionaries(st.sampled_from(["type", "x"]), st.sampled_from(["string", 1])), max_size=2)
    | st.dictionaries(st.sampled_from(["a", "b"]), st.just({}), max_size=2)
)
_type_names = st.sampled_from(["string", "integer", "number", "boolean", "null"])
_scalar_schemas = st.just(True) | st.just(False) | st.fixed_dictionaries(
    {},
    optional={
        "type": _type_names | st.lists(_type_names, max_size=3) | _junk,
        "enum": st.lists(st.none() | st.booleans() | st.integers(0, 2) | st.sampled_from(["a", "b"]), max_size=3)
        | _junk,
        "minimum": st.integers(-1, 1) | _junk,
        "exclusiveMaximum": st.floats(0, 2) | _junk,
        "minLength": st.integers(-1, 2) | _junk,
        "maxLength": st.integers(-1, 2) | _junk,
        "description": st.text(max_size=2) | _junk,
        "title": st.just("t") | _junk,
        "examples": st.lists(st.integers(), max_size=1) | _junk,
        "$comment": st.just("c") | _junk,
        "default": _junk,
    },
)
_names = st.sampled_from(["a", "b", "c"])
subset_schemas = st.recursive(
    _scalar_schemas,
    lambda children: (
        st.fixed_dictionaries(
            {"type": st.just("object")},
            optional={
                "properties": st.dictionaries(_names, children, max_size=3) | _junk,
                "required": st.lists(_names, max_size=3) | _junk,
                "additionalProperties": children | _junk,
                "description": st.just("d") | _junk,
            },
        )
        | st.fixed_dictionaries({"type": st.just("array")}, optional={"items": children | _junk})
        | st.fixed_dictionaries({"anyOf": st.lists(children, max_size=3) | _junk})
    ),
    max_leaves=6,
)


@settings(max_examples=1500, deadline=None)
@given(schema=subset_schemas)
def test_an_acceptor_means_a_well_formed_schema(schema: Any) -> None:
    """compile_acceptor never raises, and builds an acceptor only for a schema the 2020-12 meta-schema accepts."""
    accept = compile_acceptor(schema if isinstance(schema, dict) else {"anyOf": [schema]})
    if accept is not None:
        jsonschema.Draft202012Validator.check_schema(schema if isinstance(schema, dict) else {"anyOf": [schema]})


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "required": "a"},
        {"type": "object", "required": ["a", "a"]},
        {"type": "object", "required": [1]},
        {"type": "object", "properties": ["a"]},
        {"type": "object", "properties": {"a": {"type": "strin"}}},
        {"type": "object", "properties": {"a": {"type": ["string", "string"]}}},
        {"type": "object", "properties": {"a": {"type": []}}},
        {"type": "object", "properties": {"a": {"type": [{"x": 1}]}}},
        {"type": "object", "properties": {"a": {"type": "string", "minLength": -1}}},
        {"type": "object", "properties": {"a": {"type": "integer", "minimum": "0"}}},
        {"type": "object", "properties": {"a": {"anyOf": []}}},
        {"type": "object", "properties": {"a": {"enum": "ab"}}},
        {"type": "object", "description": 5},
        {"type": "object", "properties": {"a": {"title": None}}},
        {"type": "object", "properties": {"a": {"examples": 1}}},
    ],
)
def test_ill_formed_schemas_get_no_acceptor(schema: dict[str, Any]) -> None:
    """A schema the meta-schema refuses gets no acceptor, so jsonschema's check_schema sees it."""
    assert compile_acceptor(schema) is None
    with pytest.raises(jsonschema.SchemaError):
        jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {}}},
        {"type": "object", "patternProperties": {"^a": {}}},
        {"type": "object", "properties": {"t": {"type": "array", "prefixItems": [{}], "items": False}}},
    ],
)
def test_unsupported_keywords_leave_it_to_jsonschema(schema: dict[str, Any]) -> None:
    """Any keyword outside the subset means no acceptor (the full validator runs)."""
    assert compile_acceptor(schema) is None


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ({"i": 0, "f": 1.5, "s": "x", "o": 3}, True),
        ({"i": -2}, False),
        ({"i": 3}, False),
        ({"f": 0}, False),
        ({"f": 2.5}, False),
        ({"f": None}, True),
        ({"s": ""}, False),
        ({"s": "xyz"}, False),
        ({"o": -1}, False),
        ({"o": ""}, True),
        ({"o": "a"}, False),
    ],
)
def test_acceptor_checks_bounds(value: dict[str, Any], accepted: bool) -> None:
    """Numeric and length bounds take the fast path; a value outside them goes to the full validator."""
    accept = compile_acceptor(SCHEMAS[-1])
    assert accept is not None
    assert accept(value) is accepted
    assert jsonschema.Draft202012Validator(SCHEMAS[-1]).is_valid(value) is accepted
