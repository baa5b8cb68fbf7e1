"""The small values that cross the engine: workflow input, pending messages, turn input and summary.

They are dataclasses, not attrs classes, because Temporal's data converter serialises dataclasses
(and plain JSON) natively. Each one is small by design: the session log stays the single source of
truth, so no streamed chunk and no message list ever enters the workflow's history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

__all__ = [
    "ApprovalRequest",
    "ApprovalResolution",
    "EventBatch",
    "MessageKind",
    "PendingMessage",
    "ReadRequest",
    "SessionSpec",
    "SessionState",
    "SessionStatus",
    "StartInput",
    "TurnInput",
    "TurnSummary",
    "workflow_id",
]

MessageKind: TypeAlias = Literal["send", "steer", "inject"]

#: the prefix of every session's workflow id: ``dsh-session/<session id>``
WORKFLOW_ID_PREFIX = "dsh-session/"


def workflow_id(session_id: str) -> str:
    """The workflow id of a session: its single owner across every worker and host."""
    return f"{WORKFLOW_ID_PREFIX}{session_id}"


@dataclass(frozen=True)
class PendingMessage:
    """A send, steer or inject the engine accepted and the session log does not have yet.

    ``id`` is the Update's id; the turn activity logs the message under it (``inbox/queued``), so
    a retried activity never queues it twice.
    """

    id: str
    kind: MessageKind
    #: the content blocks as JSON (``Text``/``Image`` ``to_json()``)
    content: list[dict[str, Any]]
    source: dict[str, Any] | None = None


@dataclass(frozen=True)
class SessionSpec:
    """What is fixed when a session is created, so every worker treats it alike (SPEC §9.7)."""

    session_id: str
    #: ``AgentOptions`` fields: model, max_tokens, temperature
    agent_options: dict[str, Any] = field(default_factory=dict)
    #: the session's working directory; ``None``: the first worker's working directory
    cwd: str | None = None
    #: seconds without a heartbeat after which a turn is handed to another worker
    heartbeat_timeout: float = 10.0
    #: free JSON stored with the log at its first turn (the session meta's ``extra``)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ApprovalRequest:
    """A call of the session waiting for approval (its ``approval/requested``), as the engine knows it."""

    call_id: str
    tool: str
    arguments: dict[str, Any]
    reason: str
    seq: int


@dataclass(frozen=True)
class ApprovalResolution:
    """An answer to a waiting call, accepted by the engine and applied by the next turn activity."""

    call_id: str
    decision: str
    reason: str | None = None
    #: edited arguments (an object, or JSON text), checked by the worker like the model's
    arguments: dict[str, Any] | str | None = None
    by: str = "api"


@dataclass
class SessionState:
    """The workflow's whole state, carried over continue-as-new."""

    pending: list[PendingMessage] = field(default_factory=list)
    #: the seq of the last event the log committed (-1: none yet)
    last_seq: int = -1
    turns_run: int = 0
    #: outcomes (``{"reason": ..., "message": ...}``) of ``run`` updates not yet collected
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: ids withdrawn by a client whose send timed out: never queued
    withdrawn: list[str] = field(default_factory=list)
    #: set once the first turn resolved it (``SessionSpec.cwd`` or the first worker's)
    cwd: str | None = None
    #: the task queue of the worker holding the session's agent warm (None: any worker)
    warm_queue: str | None = None
    #: the calls of a parked turn waiting for approval (no activity runs meanwhile)
    approvals: list[ApprovalRequest] = field(default_factory=list)
    #: answers accepted for them, for the next turn activity to apply
    resolutions: list[ApprovalResolution] = field(default_factory=list)
    #: a cancel arrived while the turn was parked: the next activity cancels it there
    cancel_parked: bool = False


@dataclass(frozen=True)
class StartInput:
    """The workflow's input: the session's spec and, after continue-as-new, its state."""

    spec: SessionSpec
    state: SessionState | None = None


@dataclass(frozen=True)
class TurnInput:
    """One turn activity's input: the session and the messages to feed it."""

    spec: SessionSpec
    messages: list[PendingMessage]
    #: the ids whose outcome a ``run`` update waits for (only those carry the final message back)
    awaited: list[str] = field(default_factory=list)
    cwd: str | None = None
    #: the last seq the workflow knew of when it scheduled the turn: a retried attempt looks for
    #: what the lost attempt logged after it
    after_seq: int = -1
    #: answers to the parked turn's waiting calls, applied once the session is open
    resolutions: list[ApprovalResolution] = field(default_factory=list)
    #: cancel the parked turn (a cancel arrived while no activity ran)
    cancel_parked: bool = False


@dataclass(frozen=True)
class TurnSummary:
    """What a turn activity returns: small, whatever the turn did."""

    last_seq: int
    #: ids now in the log (queued, consumed or cleared there): the workflow drops them
    logged: list[str]
    #: outcomes of the awaited ids that a turn consumed
    outcomes: dict[str, dict[str, Any]]
    turns: int
    cwd: str
    cancelled: bool = False
    #: the task queue of the worker that keeps the agent warm for the next turn (None: none does)
    warm_queue: str | None = None
    #: the calls waiting for approval when the activity let go of the parked turn (none: not parked)
    approvals: list[ApprovalRequest] = field(default_factory=list)


@dataclass(frozen=True)
class SessionStatus:
    """What the ``status`` query answers."""

    session_id: str
    running: bool
    pending: int
    last_seq: int
    turns_run: int
    closed: bool
    #: the task queue of the worker holding the session's agent (running or warm); None: none does
    warm_queue: str | None = None


@dataclass(frozen=True)
class ReadRequest:
    """A ``dsh.read_events`` activity's input: events after ``after_seq``, waiting up to ``wait`` s."""

    session_id: str
    after_seq: int
    #: seconds to wait for a first new event before answering with none
    wait: float
    #: at most this many events in one answer
    limit: int = 1000


@dataclass(frozen=True)
class EventBatch:
    """What ``dsh.read_events`` answers: durable events as JSON (``SessionEvent.to_json()``), in order."""

    events: list[dict[str, Any]]
    #: whether the events came from the agent live on that worker (else: from the shared store)
    live: bool = False
