"""Configuration of the ``serve`` plugin: the ``[plugins.serve]`` table (SPEC §10.2)."""

from __future__ import annotations

from typing import Any, Final

import attrs

__all__ = ["DEFAULT_PORT", "ServeConfig"]

#: The upstream DeepSeek Harness's port for ``dsh web``.
DEFAULT_PORT: Final = 3080


def _positive(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if isinstance(value, bool) or not 0 < value < float("inf"):
        msg = f"{attribute.name} must be a finite number > 0, got {value!r}"
        raise ValueError(msg)


def _token(instance: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None and (not value.strip() or any(c.isspace() for c in value)):
        msg = f"token must be a non-empty string without whitespace, got {value!r}"
        raise ValueError(msg)


def _origins(instance: object, attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    for origin in value:
        if origin != "*" and "://" not in origin:
            msg = f"allowed_origins: {origin!r} is not an origin such as 'https://app.example.com'"
            raise ValueError(msg)


def _niceness(instance: object, attribute: attrs.Attribute[Any], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 19:
        msg = f"{attribute.name} must be an integer from 0 to 19, got {value!r}"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class ServeConfig:
    """The ``[plugins.serve]`` table."""

    #: the access token; ``None`` takes ``DSH_SERVE_TOKEN``, else one is generated (loopback only)
    token: str | None = attrs.field(default=None, validator=_token)
    #: origins a cross-site page may call the API from (CORS); empty: CORS off
    allowed_origins: tuple[str, ...] = attrs.field(default=(), converter=tuple, validator=_origins)
    #: the largest request body accepted, in bytes (413 beyond)
    max_body_bytes: int = attrs.field(default=1024 * 1024, validator=_positive)
    #: seconds between the comment lines that keep an idle SSE stream open
    heartbeat: float = attrs.field(default=10.0, validator=_positive)
    #: seconds a write to one SSE follower may take before that follower is dropped
    send_timeout: float = attrs.field(default=10.0, validator=_positive)
    #: the nice value of the thread that writes to the sockets (Linux): 0 to 19; with the CPU
    #: short, the agents' work goes first and the followers' writes wait
    io_niceness: int = attrs.field(default=10, validator=_niceness)
