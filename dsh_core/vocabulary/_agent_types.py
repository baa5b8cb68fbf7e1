"""What every agent looks like from outside the loop: the ``Agent`` and ``AgentHandle`` protocols."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Protocol, Self, TypeAlias

import attrs

from dsh_core.vocabulary._content import AssistantMessage, Image, Text

if TYPE_CHECKING:
    from dsh_core.host._context import Context
    from dsh_core.services.approvals import PendingApproval
    from dsh_core.services.sessions import Session
    from dsh_core.session_log._event import SessionEvent

__all__ = ["Agent", "AgentHandle", "AgentOptions", "AgentStatus", "Setup", "TurnOutcome"]

AgentStatus: TypeAlias = Literal["idle", "running", "disposed"]

#: Composition code run against an unpublished agent's context during create/resume.
Setup: TypeAlias = Callable[["Context"], "Awaitable[None] | None"]


def _model_string(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    # Hand-written: the 'provider/model' shape (attrs' matches_re would say only "must match").
    if value is None:
        return
    if not isinstance(value, str):
        msg = f"AgentOptions.model must be a 'provider/model' string, got {type(value).__name__}"
        raise TypeError(msg)
    provider, slash, model = value.partition("/")
    if not (provider and slash and model):
        msg = f"AgentOptions.model must look like 'provider/model' (e.g. 'deepseek/deepseek-v4-flash'), got {value!r}"
        raise ValueError(msg)


def _positive_int(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    # Hand-written: attrs' instance_of(int) admits a bool.
    if value is None:
        return
    if type(value) is not int:
        msg = f"AgentOptions.max_tokens must be an int, got {type(value).__name__}"
        raise TypeError(msg)
    if value < 1:
        msg = f"AgentOptions.max_tokens must be at least 1, got {value}"
        raise ValueError(msg)


def _temperature(value: object) -> float | None:
    if value is None:
        return None
    if type(value) not in (int, float):
        msg = f"AgentOptions.temperature must be a number, got {type(value).__name__}"
        raise TypeError(msg)
    number = float(value)  # type: ignore[arg-type]  # checked above
    if not 0.0 <= number < float("inf"):
        msg = f"AgentOptions.temperature must be a finite number >= 0, got {value!r}"
        raise ValueError(msg)
    return number


@attrs.frozen
class AgentOptions:
    """Per-agent defaults for the model call; ``None`` means the provider's default.

    Checked on construction: a wrong type is a ``TypeError``, a malformed value a ``ValueError``.
    """

    model: str | None = attrs.field(default=None, validator=_model_string)
    max_tokens: int | None = attrs.field(default=None, validator=_positive_int)
    temperature: float | None = attrs.field(default=None, converter=_temperature)


@attrs.frozen
class TurnOutcome:
    """What ``agent.run()`` returns: how the turn ended and its last assistant message."""

    reason: Mapping[str, Any]
    message: AssistantMessage | None

    @property
    def kind(self) -> str:
        return str(self.reason["kind"])

    @property
    def text(self) -> str:
        """The text of the final assistant message ('' when there is none)."""
        if self.message is None:
            return ""
        return "".join(block.text for block in self.message.content if isinstance(block, Text))


Content: TypeAlias = "str | Sequence[Text | Image]"


class Agent(Protocol):
    """One agent: a session, an inbox and a driver. Created through ``ctx.agents``."""

    @property
    def id(self) -> str: ...
    @property
    def session(self) -> Session: ...
    @property
    def options(self) -> AgentOptions: ...
    @property
    def status(self) -> AgentStatus: ...
    @property
    def ctx(self) -> Context: ...

    def send(self, content: Content, source: Mapping[str, Any] | None = None, *, id: str | None = None) -> str: ...
    def steer(self, content: Content, source: Mapping[str, Any] | None = None, *, id: str | None = None) -> str: ...
    def inject(self, content: Content, source: Mapping[str, Any] | None = None) -> None: ...
    def cancel(self) -> None: ...
    async def when_idle(self) -> None: ...
    async def run(self, content: Content, source: Mapping[str, Any] | None = None) -> TurnOutcome: ...
    def pending_approvals(self) -> tuple[PendingApproval, ...]: ...
    async def resolve_approval(
        self,
        call_id: str,
        decision: str,
        *,
        reason: str | None = None,
        arguments: Mapping[str, Any] | str | None = None,
        by: str = "api",
    ) -> SessionEvent: ...


class AgentHandle(Protocol):
    """The owner's grip on an agent: dispose it (idempotent, memoised) or use ``async with``."""

    @property
    def agent(self) -> Agent: ...
    async def dispose(self) -> None: ...
    async def __aenter__(self) -> Self: ...
    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...
