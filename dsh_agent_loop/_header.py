"""The request header: what a request carries besides history, logged only when it changes.

The first request of an agent instance logs ``request/header`` with every field; a later request
logs ``request/header-delta`` with the fields that changed, and nothing when none did. Together
with the log's messages this lets every request be rebuilt from the log alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsh_core.llm import LlmCallConfig
from dsh_core.services.sessions import Session
from dsh_core.session_log import RequestHeaderDeltaEvent, RequestHeaderEvent
from dsh_core.vocabulary import Message

__all__ = ["HeaderLog"]


class HeaderLog:
    """Remembers the last header this agent instance logged; compares by identity first."""

    def __init__(self) -> None:
        self._config: LlmCallConfig | None = None
        self._system: str | None = None
        self._tools: Sequence[Any] | None = None
        self._prefix: tuple[Message, ...] | None = None
        self._logged = False

    def record(
        self,
        session: Session,
        config: LlmCallConfig,
        system: str,
        tools: Sequence[Any],
        prefix: tuple[Message, ...],
    ) -> None:
        if not self._logged:
            session.append(RequestHeaderEvent(config=config, system=system, tools=tools, prefix=prefix))
            self._logged = True
        else:
            new_config = config is not self._config and config != self._config
            new_system = system != self._system
            new_tools = tools is not self._tools and tuple(tools) != tuple(self._tools or ())
            new_prefix = prefix is not self._prefix and prefix != self._prefix
            if new_config or new_system or new_tools or new_prefix:
                session.append(
                    RequestHeaderDeltaEvent(
                        config=config if new_config else None,
                        system=system if new_system else None,
                        tools=tools if new_tools else None,
                        prefix=prefix if new_prefix else None,
                    )
                )
        self._config, self._system, self._tools, self._prefix = config, system, tools, prefix
