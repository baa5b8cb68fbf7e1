"""The ``subagents`` plugin: registers the in-process provider and the global ``task`` tool."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from dsh_core import SubagentRegistry

from ._config import SubagentsConfig
from ._provider import PROVIDER_NAME, InProcessProvider
from ._task import task

if TYPE_CHECKING:
    from dsh_core import Context

__all__ = ["SubagentsPlugin"]


class SubagentsPlugin:
    """Entry point ``subagents``: ``ctx.subagents``, its ``in-process`` provider and the ``task`` tool.

    It provides the core ``SubagentRegistry`` as ``ctx.subagents`` (so other provider plugins
    ``requires = ("subagents",)``), then registers the in-process provider into it. Configured by
    ``[plugins.subagents]``: ``max_depth`` (default 2) and ``model`` (default: the parent's).
    """

    name = "subagents"
    provides: ClassVar[tuple[str, ...]] = ("subagents",)
    requires: ClassVar[tuple[str, ...]] = ("agents", "tools")
    Config = SubagentsConfig

    def __init__(self) -> None:
        self.provider: InProcessProvider | None = None

    def start(self, ctx: Context) -> None:
        config = ctx.config if isinstance(ctx.config, SubagentsConfig) else SubagentsConfig()
        self.provider = InProcessProvider(config)
        ctx.provide("subagents", SubagentRegistry())
        ctx.subagents.register_provider(PROVIDER_NAME, self.provider)
        if config.max_depth > 0:  # with delegation off, offering the tool would only invite refusals
            ctx.tools.register(task)
