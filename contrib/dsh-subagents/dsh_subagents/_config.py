"""Configuration of the ``subagents`` plugin: the ``[plugins.subagents]`` table (SPEC §8)."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["SubagentsConfig"]


def _non_negative(instance: object, attribute: attrs.Attribute[Any], value: int) -> None:
    if value < 0:
        msg = f"max_depth must be >= 0 (0 turns sub-agents off, 1 allows children but no grandchildren), got {value}"
        raise ValueError(msg)


def _model(instance: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None and ("/" not in value or value.startswith("/") or value.endswith("/")):
        msg = f"model must be 'provider/model' (like 'deepseek/deepseek-v4-flash'), got {value!r}"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class SubagentsConfig:
    """The ``[plugins.subagents]`` table."""

    #: the deepest a sub-agent may be: a top-level agent is at depth 0, its children at 1
    max_depth: int = attrs.field(default=2, validator=_non_negative)
    #: the children's model as ``provider/model``; by default each child uses its parent's model
    model: str | None = attrs.field(default=None, validator=_model)
