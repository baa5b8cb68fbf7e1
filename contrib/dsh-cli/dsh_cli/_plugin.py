"""The ``cli`` plugin: the ``[plugins.cli]`` table, and the ``approval`` service while a human is at the keyboard.

Found through the entry point ``cli`` it is inert: it only validates ``[plugins.cli]``, so that the
table belongs to a plugin and a harness embedding dsh never gets a terminal approval channel it did
not ask for (an ``Ask`` then fails closed, as SPEC §4 wants). The ``dsh`` command passes its own
instance, ``CliPlugin(approval=...)``, which replaces the discovered one and provides ``approval``
for as long as the command runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import attrs

from ._config import DEFAULT_MODEL

if TYPE_CHECKING:
    from dsh_core import Context

    from ._approval import Approver

__all__ = ["CliConfig", "CliPlugin", "ReasoningDisplay"]

#: How ``dsh chat`` shows the model's reasoning: one dim summary line per block (``/reasoning``
#: expands the last one), the whole text dimmed, or nothing.
ReasoningDisplay: TypeAlias = Literal["collapsed", "shown", "hidden"]


def _model_string(instance: object, attribute: attrs.Attribute[Any], value: str) -> None:
    provider, slash, model = value.partition("/")
    if not (slash and provider and model):
        msg = f"expected a model string 'provider/model' like {DEFAULT_MODEL!r}, got {value!r}"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class CliConfig:
    """The ``[plugins.cli]`` table."""

    #: the model of new agents, ``provider/model``
    model: str = attrs.field(default=DEFAULT_MODEL, validator=_model_string)
    #: how ``dsh chat`` shows reasoning
    reasoning: ReasoningDisplay = "collapsed"
    #: render answers as Markdown in ``dsh chat``, and in ``dsh run`` when stdout is a terminal
    markdown: bool = True


class CliPlugin:
    """Entry point ``cli``; with ``approval`` it provides the ``approval`` service (SPEC §4, ``Ask``)."""

    name = "cli"
    Config = CliConfig

    def __init__(self, approval: Approver | None = None) -> None:
        self._approval = approval
        #: read by the host on the instance: the service exists only when a channel was given
        self.provides: tuple[str, ...] = ("approval",) if approval is not None else ()

    def start(self, ctx: Context) -> None:
        if self._approval is not None:
            ctx.provide("approval", self._approval)
