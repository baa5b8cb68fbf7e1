"""Configuration of the ``retry`` plugin: the ``[plugins.retry]`` table (SPEC §8)."""

from __future__ import annotations

from typing import Any, Final, get_args

import attrs

from dsh_core.llm import FailureCode

__all__ = ["DEFAULT_CODES", "FAILURE_CODES", "RetryConfig"]

#: Every ``Failure`` code (SPEC §3).
FAILURE_CODES: Final[frozenset[str]] = frozenset(get_args(FailureCode))
#: The codes retried by default: failures that another attempt may well not meet.
DEFAULT_CODES: Final[tuple[FailureCode, ...]] = (
    "RATE_LIMIT",
    "SERVER",
    "TIMEOUT",
    "TRANSPORT",
    "EMPTY_RESPONSE",
)


def _at_least_one(instance: object, attribute: attrs.Attribute[Any], value: int) -> None:
    if value < 1:
        msg = f"max_attempts must be at least 1 (1 means never retry), got {value}"
        raise ValueError(msg)


def _non_negative(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not 0 <= value < float("inf"):
        msg = f"{attribute.name} must be a finite number of seconds >= 0, got {value}"
        raise ValueError(msg)


def _known_codes(instance: object, attribute: attrs.Attribute[Any], value: tuple[FailureCode, ...]) -> None:
    unknown = sorted(set(value) - FAILURE_CODES)
    if unknown:
        msg = (
            f"codes: unknown failure code(s) {', '.join(unknown)}; known: {', '.join(sorted(FAILURE_CODES))}"
        )
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class RetryConfig:
    """The ``[plugins.retry]`` table."""

    #: attempts per model request, the first included: 5 means at most 4 retries
    max_attempts: int = attrs.field(default=5, validator=_at_least_one)
    #: seconds before the first retry; each further retry doubles it
    initial_delay: float = attrs.field(default=0.5, validator=_non_negative)
    #: the longest wait: backoff stops growing here, and a longer ``retry_after`` gives up
    max_delay: float = attrs.field(default=30.0, validator=_non_negative)
    #: the ``Failure`` codes worth another attempt
    codes: tuple[FailureCode, ...] = attrs.field(default=DEFAULT_CODES, validator=_known_codes)
