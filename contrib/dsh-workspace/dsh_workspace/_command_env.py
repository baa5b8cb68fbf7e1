"""Extra environment for ``bash`` commands, set by another plugin for the duration of one call.

A plugin that wraps ``tools/execute`` (tracing, say, which hands a command its ``TRACEPARENT``)
sets ``COMMAND_ENV`` around ``call_next()``; the ``bash`` tool merges the mapping into the
command's environment, after the harness's own (credentials removed) and the no-pager settings.
A context variable, so concurrent calls each see only their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar

__all__ = ["COMMAND_ENV"]

#: variables added to the environment of a ``bash`` command run in the current context
COMMAND_ENV: ContextVar[Mapping[str, str] | None] = ContextVar("dsh_workspace.COMMAND_ENV", default=None)
