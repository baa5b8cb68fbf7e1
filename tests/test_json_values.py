"""Lossless JSON: freeze_json, FrozenDict, thaw_json, dumps_json and loads_json."""

from __future__ import annotations

import copy
import enum
import json
import math
import pickle
from collections import OrderedDict
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_core.vocabulary import (
    MAX_DEPTH,
    DshError,
    FrozenDict,
    JsonValueError,
    dumps_json,
    freeze_json,
    freeze_json_object,
    loads_json,
    thaw_json,
)

from .strategies import json_objects, json_values


def _assert_deeply_frozen(value: object) -> None:
    assert type(value) in (str, int, float, bool, type(None), tuple, FrozenDict), type(value)
    if type(value) is tuple:
        for item in value:
            _assert_deeply_frozen(item)
    elif type(value) is FrozenDict:
        for key, item in value.items():
            assert type(key) is str
            _assert_deeply_frozen(item)


class TestFreeze:
    @given(json_values)
    def test_freeze_then_thaw_gives_the_value_back(self, value: Any) -> None:
        """Freezing loses nothing: thawing the frozen copy gives an equal plain value."""
        assert thaw_json(freeze_json(value, where="test")) == value

    @given(json_values)
    def test_frozen_values_are_deeply_frozen_and_hashable(self, value: Any) -> None:
        """Every container in a frozen value is a tuple or a FrozenDict, so the whole is hashable."""
        frozen = freeze_json(value, where="test")
        _assert_deeply_frozen(frozen)
        hash(frozen)

    @given(json_values)
    def test_freezing_a_frozen_value_returns_it(self, value: Any) -> None:
        """Re-freezing is free: the very same object comes back."""
        frozen = freeze_json(value, where="test")
        assert freeze_json(frozen, where="test") is frozen

    @given(json_values)
    def test_json_text_round_trip_is_exact(self, value: Any) -> None:
        """dumps_json then loads_json gives an equal frozen value (floats included)."""
        frozen = freeze_json(value, where="test")
        assert loads_json(dumps_json(frozen), where="test") == frozen

    def test_input_is_copied_not_captured(self) -> None:
        """Mutating the input after freezing does not change the frozen copy."""
        data: dict[str, Any] = {"items": [1, 2], "meta": {"a": 1}}
        frozen = freeze_json(data, where="test")
        data["items"].append(3)
        data["meta"]["b"] = 2
        assert frozen == {"items": (1, 2), "meta": {"a": 1}}

    def test_tuples_of_frozen_values_are_shared(self) -> None:
        """A tuple whose items are already frozen is returned as it is, not copied."""
        inner = freeze_json({"a": 1}, where="test")
        items = (inner, "x", 2)
        assert freeze_json(items, where="test") is items

    def test_tuple_holding_a_list_is_copied(self) -> None:
        """A tuple with an unfrozen item becomes a new, frozen tuple."""
        frozen = freeze_json(([1],), where="test")
        assert frozen == ((1,),)

    def test_subclasses_become_plain_types(self) -> None:
        """StrEnum and IntEnum values (keys too) become plain str and int, as JSON would give back."""

        class Color(enum.StrEnum):
            RED = "red"

        class Level(enum.IntEnum):
            HIGH = 3

        frozen = freeze_json({Color.RED: [Level.HIGH, Color.RED]}, where="test")
        assert type(frozen) is FrozenDict
        (key,) = frozen
        assert type(key) is str
        assert [type(item) for item in frozen["red"]] == [int, str]  # type: ignore[union-attr]

    def test_other_mappings_are_accepted(self) -> None:
        """Any str-keyed mapping freezes to a FrozenDict with the same items."""
        assert freeze_json(MappingProxyType({"a": [1]}), where="t") == {"a": (1,)}
        assert type(freeze_json(OrderedDict(a=1), where="t")) is FrozenDict

    def test_booleans_stay_booleans(self) -> None:
        """True is not turned into 1."""
        assert freeze_json([True, 1], where="t") == (True, 1)
        assert [type(item) for item in freeze_json([True, 1], where="t")] == [bool, int]  # type: ignore[union-attr]


class TestRefusals:
    @pytest.mark.parametrize(
        ("value", "path", "problem"),
        [
            (
                {"arguments": [1, 2, b"x"]},
                "data.arguments[2]",
                "bytes is not JSON; encode binary data as a base64 str",
            ),
            ({"a": math.nan}, "data.a", "float nan is not JSON"),
            ({"a": [math.inf]}, "data.a[0]", "float inf is not JSON"),
            ({"a": -math.inf}, "data.a", "float -inf is not JSON"),
            ({"tags": {1, 2}}, "data.tags", "set is not JSON; use a list"),
            ({"obj": object()}, "data.obj", "object is not JSON"),
            ({"x": {1: "a"}}, "data.x", "key 1 (int) is not a str"),
            ({"x": {("a",): 1}}, "data.x", "key ('a',) (tuple) is not a str"),
            ({"my key": bytearray()}, "data['my key']", "bytearray is not JSON"),
            ({"a": [{"b": {"c": None, "d": frozenset()}}]}, "data.a[0].b.d", "frozenset is not JSON"),
        ],
    )
    def test_refusal_names_where_and_path(self, value: Any, path: str, problem: str) -> None:
        """The error says who owns the value, the path inside it, and what is wrong there."""
        with pytest.raises(JsonValueError) as caught:
            freeze_json(value, where="tool/call", root="data")
        assert caught.value.where == "tool/call"
        assert caught.value.path == path
        assert str(caught.value).startswith(f"tool/call: {path}: {problem}")
        assert problem in caught.value.problem

    def test_refusal_is_a_value_error_and_a_dsh_error(self) -> None:
        """Callers can catch it as ValueError or as DshError."""
        with pytest.raises(ValueError, match="bytes"):
            freeze_json(b"x", where="w")
        with pytest.raises(DshError):
            freeze_json(b"x", where="w")

    def test_top_level_refusal_names_the_root(self) -> None:
        """A bad value at the top is named by its root."""
        with pytest.raises(JsonValueError, match=r"^w: value: float nan is not JSON"):
            freeze_json(math.nan, where="w")

    def test_list_cycle_is_refused(self) -> None:
        """A list that contains itself is a cycle, named as such (not a RecursionError)."""
        loop: list[Any] = [1]
        loop.append(loop)
        with pytest.raises(JsonValueError) as caught:
            freeze_json({"a": loop}, where="ev", root="data")
        assert caught.value.path == "data.a[1]"
        assert "cycle: refers back to data.a" in str(caught.value)

    def test_dict_cycle_is_refused(self) -> None:
        """A dict reachable from itself is a cycle, named at the spot that closes it."""
        data: dict[str, Any] = {"x": {}}
        data["x"]["back"] = data
        with pytest.raises(JsonValueError) as caught:
            freeze_json(data, where="ev", root="data")
        assert caught.value.path == "data.x.back"
        assert "cycle: refers back to data," in str(caught.value)

    def test_shared_substructure_is_not_a_cycle(self) -> None:
        """The same list twice (a DAG) is fine; only a container inside itself is a cycle."""
        shared = [1]
        assert freeze_json({"a": shared, "b": shared}, where="t") == {"a": (1,), "b": (1,)}

    def test_too_deep_nesting_is_refused(self) -> None:
        """Nesting beyond MAX_DEPTH levels is refused with a clear message."""
        deep: list[Any] = []
        node = deep
        for _ in range(MAX_DEPTH + 5):
            node.append([])
            node = node[0]
        with pytest.raises(JsonValueError, match=f"nested deeper than {MAX_DEPTH} levels"):
            freeze_json(deep, where="t")

    def test_max_depth_nesting_is_accepted(self) -> None:
        """Exactly MAX_DEPTH levels of containers still freeze."""
        deep: list[Any] = []
        node = deep
        for _ in range(MAX_DEPTH - 1):
            node.append([])
            node = node[0]
        freeze_json(deep, where="t")

    @given(json_objects, st.data())
    def test_a_bad_value_anywhere_is_found_at_its_path(
        self, value: dict[str, Any], data: st.DataObject
    ) -> None:
        """Put bytes at a random spot of a random JSON object: the error names exactly that spot."""
        path = "data"
        node: Any = value
        while True:
            if isinstance(node, dict) and node and data.draw(st.booleans()):
                key = data.draw(st.sampled_from(sorted(node)))
                if isinstance(node[key], dict | list) and data.draw(st.booleans()):
                    path += f".{key}" if key.isidentifier() else f"[{key!r}]"
                    node = node[key]
                    continue
            break
        key = "\x00bad"
        if isinstance(node, dict):
            node[key] = b"bytes"
            path += f"[{key!r}]"
        else:
            node.append(b"bytes")
            path += f"[{len(node) - 1}]"
        with pytest.raises(JsonValueError) as caught:
            freeze_json(value, where="ev", root="data")
        assert caught.value.path == path

    def test_freeze_json_object_refuses_non_objects(self) -> None:
        """freeze_json_object wants a mapping; a list is refused, naming where."""
        with pytest.raises(JsonValueError, match=r"^tool/call: data: expected a JSON object"):
            freeze_json_object([1], where="tool/call", root="data")


class TestFrozenDict:
    def test_equals_a_plain_dict_both_ways(self) -> None:
        """A FrozenDict compares equal to a dict with the same items, from either side."""
        frozen = FrozenDict(a=1, b=[2])
        assert frozen == {"a": 1, "b": (2,)}
        assert {"a": 1, "b": (2,)} == frozen
        assert frozen != {"a": 1}

    def test_hash_follows_equality(self) -> None:
        """Equal FrozenDicts hash equal whatever their insertion order; usable in sets."""
        assert hash(FrozenDict(a=1, b=2)) == hash(FrozenDict(b=2, a=1))
        assert len({FrozenDict(a=1, b=2), FrozenDict(b=2, a=1)}) == 1

    @pytest.mark.parametrize(
        "mutate",
        [
            lambda d: d.__setitem__("a", 2),
            lambda d: d.__delitem__("a"),
            lambda d: d.clear(),
            lambda d: d.pop("a"),
            lambda d: d.popitem(),
            lambda d: d.setdefault("z", 1),
            lambda d: d.update(z=1),
            lambda d: d.__ior__({"z": 1}),
        ],
    )
    def test_every_mutator_raises(self, mutate: Any) -> None:
        """No public way to change a FrozenDict; the message says how to make a changed copy."""
        frozen = FrozenDict(a=1)
        with pytest.raises(TypeError, match="immutable; build a changed copy"):
            mutate(frozen)
        assert frozen == {"a": 1}

    def test_changed_copies_are_plain_dicts(self) -> None:
        """copy() and | give plain, mutable dicts."""
        frozen = FrozenDict(a=1)
        assert type(frozen.copy()) is dict
        assert type(frozen | {"b": 2}) is dict
        assert frozen | {"b": 2} == {"a": 1, "b": 2}

    def test_constructor_freezes_and_checks(self) -> None:
        """FrozenDict(...) freezes nested values and refuses non-JSON."""
        frozen = FrozenDict({"a": {"b": [1]}})
        assert type(frozen["a"]) is FrozenDict
        assert frozen["a"] == {"b": (1,)}
        with pytest.raises(JsonValueError, match=r"FrozenDict: value\.a: bytes"):
            FrozenDict(a=b"x")

    def test_constructing_from_a_frozen_dict_returns_it(self) -> None:
        """FrozenDict(frozen) is frozen itself (cheap as an attrs converter); extra keys make a new one."""
        frozen = FrozenDict(a=1)
        assert FrozenDict(frozen) is frozen
        assert FrozenDict(frozen, b=2) == {"a": 1, "b": 2}
        assert frozen == {"a": 1}

    def test_copy_pickle_and_deepcopy(self) -> None:
        """copy/deepcopy return the same object; pickling round-trips to an equal FrozenDict."""
        frozen = FrozenDict(a=[1, {"b": 2}])
        assert copy.copy(frozen) is frozen
        assert copy.deepcopy(frozen) is frozen
        restored = pickle.loads(pickle.dumps(frozen))
        assert type(restored) is FrozenDict
        assert restored == frozen

    def test_repr_names_the_class(self) -> None:
        """The repr shows it is frozen."""
        assert repr(FrozenDict(a=1)) == "FrozenDict({'a': 1})"


class TestThawAndDump:
    def test_thaw_gives_mutable_plain_containers(self) -> None:
        """thaw_json turns FrozenDict into dict and tuples into lists, all the way down."""
        plain = thaw_json(freeze_json({"a": [{"b": (1,)}]}, where="t"))
        assert plain == {"a": [{"b": [1]}]}
        assert type(plain) is dict
        assert type(plain["a"]) is list
        assert type(plain["a"][0]) is dict

    def test_dumps_is_compact_and_keeps_unicode(self) -> None:
        """No spaces, non-ASCII kept as is, key order kept."""
        frozen = freeze_json({"z": "é", "a": [1, 2.5, None, True]}, where="t")
        assert dumps_json(frozen) == '{"z":"é","a":[1,2.5,null,true]}'
        assert dumps_json("plain") == '"plain"'

    def test_dumps_refuses_nan_and_objects(self) -> None:
        """dumps_json never writes NaN (ValueError) or repr()s an object (TypeError)."""
        with pytest.raises(ValueError, match="JSON"):
            dumps_json({"a": math.nan})
        with pytest.raises(TypeError, match="object is not JSON"):
            dumps_json({"a": object()})

    @given(json_values)
    def test_dumps_matches_the_stdlib(self, value: Any) -> None:
        """dumps_json writes what json.dumps writes with the same settings."""
        expected = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        assert dumps_json(freeze_json(value, where="t")) == expected

    def test_loads_refuses_nan_and_bad_text(self) -> None:
        """loads_json refuses the NaN/Infinity extensions and malformed text, naming where."""
        with pytest.raises(JsonValueError, match=r"^log\.jsonl:3: value: not valid JSON text: NaN"):
            loads_json('{"a": NaN}', where="log.jsonl:3")
        with pytest.raises(JsonValueError, match="not valid JSON text"):
            loads_json("{", where="x")
