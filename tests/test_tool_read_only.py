"""``Tool.read_only``: a tool's own claim that it changes nothing (the permissions plugin honours it)."""

from __future__ import annotations

import pytest

from dsh_core import Tool, tool


def _noop() -> str:
    return "ok"


def test_read_only_defaults_to_false() -> None:
    """A tool is a write unless it says otherwise."""
    assert tool(_noop).read_only is False
    assert Tool(name="noop", function=_noop).read_only is False


def test_decorator_sets_read_only() -> None:
    """@tool(read_only=True) marks the tool."""
    assert tool(read_only=True)(_noop).read_only is True


@pytest.mark.parametrize("value", [1, "yes", None])
def test_read_only_must_be_a_bool(value: object) -> None:
    """Anything but a bool is a TypeError naming the field."""
    with pytest.raises(TypeError, match="tool read_only must be a bool"):
        Tool(name="noop", function=_noop, read_only=value)  # type: ignore[arg-type]
