"""The ``serve`` plugin: owns the ``[plugins.serve]`` table; ``dsh serve``/``dsh web`` run the app with it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._config import ServeConfig

if TYPE_CHECKING:
    from dsh_core import Context

__all__ = ["ServePlugin"]


class ServePlugin:
    """Entry point ``serve``. Loading it costs a harness nothing: it listens to no event until
    an app is opened (``dsh_serve.open_app``), which registers the live log's listener."""

    name = "serve"
    Config = ServeConfig

    def __init__(self) -> None:
        self.config = ServeConfig()

    def start(self, ctx: Context) -> None:
        self.config = ctx.config
