"""Configuration of the ``compaction`` plugin: the ``[plugins.compaction]`` table (SPEC §8)."""

from __future__ import annotations

from typing import Any, Final

import attrs

__all__ = ["DEFAULT_KEEP_RATIO", "DEFAULT_SUMMARY_RATIO", "CompactionConfig"]

#: The recent tail kept verbatim when ``keep_recent_tokens`` is not set: this share of the window.
DEFAULT_KEEP_RATIO: Final = 0.2
#: The summary's length limit when ``summary_max_tokens`` is not set: this share of the window
#: (never more than the model's output limit).
DEFAULT_SUMMARY_RATIO: Final = 0.1


def _ratio(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not 0.0 < value <= 1.0:
        msg = f"threshold must be a ratio of the context window in (0, 1], such as 0.8; got {value}"
        raise ValueError(msg)


def _optional_tokens(instance: object, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is not None and value < 0:
        msg = f"{attribute.name} must be a number of tokens >= 0 (or left out for the default), got {value}"
        raise ValueError(msg)


def _positive_tokens(instance: object, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is not None and value < 1:
        msg = f"{attribute.name} must be a number of tokens >= 1 (or left out for the default), got {value}"
        raise ValueError(msg)


def _model_string(instance: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is None:
        return
    provider, slash, model = value.partition("/")
    if not (provider and slash and model):
        msg = f"model must be a model string 'provider/model', such as 'deepseek/deepseek-v4-flash'; got {value!r}"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class CompactionConfig:
    """The ``[plugins.compaction]`` table."""

    #: compact before a step whose request is estimated above this share of the context window
    threshold: float = attrs.field(default=0.8, validator=_ratio)
    #: tokens of the most recent history always kept verbatim; default: 20% of the window
    keep_recent_tokens: int | None = attrs.field(default=None, validator=_optional_tokens)
    #: the model that writes summaries (``provider/model``); default: the agent's own model
    model: str | None = attrs.field(default=None, validator=_model_string)
    #: the summary's length limit (the summarisation call's ``max_tokens``); default: 10% of the
    #: window, capped by the model's output limit
    summary_max_tokens: int | None = attrs.field(default=None, validator=_positive_tokens)
