"""Configuration of the ``workspace`` plugin: the ``[plugins.workspace]`` table."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import attrs

__all__ = ["SearchBackend", "WorkspaceConfig"]

#: How ``grep`` searches: ripgrep when installed (``auto``), always ripgrep, or always Python.
SearchBackend: TypeAlias = Literal["auto", "ripgrep", "python"]


def _positive(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value > 0:
        msg = f"{attribute.name} must be greater than 0, got {value!r}"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class WorkspaceConfig:
    """The ``[plugins.workspace]`` table; every key is optional."""

    #: lines ``read_file`` returns when the call gives no ``limit``
    max_read_lines: int = attrs.field(default=2000, validator=_positive)
    #: characters of file text ``read_file`` returns at most; the rest is left for a next call
    max_read_chars: int = attrs.field(default=100_000, validator=_positive)
    #: entries ``list_dir`` and ``glob`` list, and matches ``grep`` shows, at most
    max_results: int = attrs.field(default=500, validator=_positive)
    #: seconds a ``bash`` command may run when the call gives no ``timeout``
    bash_timeout: float = attrs.field(default=120.0, validator=_positive)
    #: the largest ``timeout`` a ``bash`` call may ask for
    bash_max_timeout: float = attrs.field(default=600.0, validator=_positive)
    #: bytes of ``bash`` output kept (half from the start, half from the end)
    max_output_bytes: int = attrs.field(default=30_000, validator=_positive)
    #: the shell that runs ``bash`` commands (a name looked up on PATH, or a path)
    shell: str = "bash"
    #: the ``grep`` backend
    search: SearchBackend = "auto"

    def __attrs_post_init__(self) -> None:
        if self.bash_timeout > self.bash_max_timeout:
            msg = (
                f"bash_timeout ({self.bash_timeout:g} s) is longer than bash_max_timeout "
                f"({self.bash_max_timeout:g} s); raise bash_max_timeout or lower bash_timeout"
            )
            raise ValueError(msg)
