"""The ``[plugins.temporal]`` table (SPEC §9.7): where the engine is and how sessions are served."""

from __future__ import annotations

import math
from typing import Any

import attrs

__all__ = ["TemporalConfig"]


def _non_empty(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        msg = f"{attribute.name} must be a non-empty string, got {value!r}"
        raise ValueError(msg)


def _seconds(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool) or not (math.isfinite(value) and value > 0):
        msg = f"{attribute.name} must be a number of seconds > 0, got {value!r}"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class TemporalConfig:
    """Where the Temporal frontend is, which namespace and task queue, and the heartbeat timeout."""

    #: the frontend's ``host:port``
    address: str = attrs.field(default="127.0.0.1:7233", validator=_non_empty)
    namespace: str = attrs.field(default="default", validator=_non_empty)
    #: the shared task queue every worker serves
    task_queue: str = attrs.field(default="dsh", validator=_non_empty)
    #: seconds without a heartbeat before a turn moves to another worker; fixed per session at create
    heartbeat_timeout: float = attrs.field(default=10.0, validator=_seconds)
