"""The session log: its event envelope, the catalogue of event types with their data, the checks an append applies, and crash repair."""

from ._catalogue import APPROVAL_DECISIONS as APPROVAL_DECISIONS
from ._catalogue import CONSUMING_EVENT_TYPES as CONSUMING_EVENT_TYPES
from ._catalogue import SURFACE_EVENT_TYPES as SURFACE_EVENT_TYPES
from ._catalogue import ApprovalDecision as ApprovalDecision
from ._catalogue import ApprovalRequestedEvent as ApprovalRequestedEvent
from ._catalogue import ApprovalResolvedEvent as ApprovalResolvedEvent
from ._catalogue import AssistantChunkEvent as AssistantChunkEvent
from ._catalogue import AssistantMessageEvent as AssistantMessageEvent
from ._catalogue import ContextMessageEvent as ContextMessageEvent
from ._catalogue import EndKind as EndKind
from ._catalogue import InboxClearedEvent as InboxClearedEvent
from ._catalogue import InboxKind as InboxKind
from ._catalogue import InboxQueuedEvent as InboxQueuedEvent
from ._catalogue import PromptBlockedEvent as PromptBlockedEvent
from ._catalogue import RequestHeaderDeltaEvent as RequestHeaderDeltaEvent
from ._catalogue import RequestHeaderEvent as RequestHeaderEvent
from ._catalogue import SteeringMessageEvent as SteeringMessageEvent
from ._catalogue import StepStartEvent as StepStartEvent
from ._catalogue import ToolCallEvent as ToolCallEvent
from ._catalogue import ToolResultEvent as ToolResultEvent
from ._catalogue import TurnEnd as TurnEnd
from ._catalogue import TurnEndEvent as TurnEndEvent
from ._catalogue import TurnStartEvent as TurnStartEvent
from ._catalogue import UserMessageEvent as UserMessageEvent
from ._event import SessionEvent as SessionEvent
from ._event import logged_event as logged_event
from ._repair import NOT_STARTED as NOT_STARTED
from ._repair import OUTCOME_UNKNOWN as OUTCOME_UNKNOWN
from ._repair import ParkedTurn as ParkedTurn
from ._repair import StoredLogError as StoredLogError
from ._repair import parked_turn as parked_turn
from ._repair import repair_events as repair_events
from ._session import CheckedLog as CheckedLog
from ._session import Session as Session
from ._session import SessionMeta as SessionMeta
from ._session import Validator as Validator
from ._session import check_log as check_log
from ._session import open_turn_in as open_turn_in
from ._spec import LogEvent as LogEvent
from ._spec import LogEventSpec as LogEventSpec
from ._spec import declared_types as declared_types
from ._spec import is_visible as is_visible
from ._spec import log_event as log_event
from ._spec import read_payload as read_payload
from ._spec import spec_for as spec_for
from ._surface import SurfaceOp as SurfaceOp
from ._surface import SurfaceOpKind as SurfaceOpKind

__all__ = [
    "APPROVAL_DECISIONS",
    "CONSUMING_EVENT_TYPES",
    "NOT_STARTED",
    "OUTCOME_UNKNOWN",
    "SURFACE_EVENT_TYPES",
    "ApprovalDecision",
    "ApprovalRequestedEvent",
    "ApprovalResolvedEvent",
    "AssistantChunkEvent",
    "AssistantMessageEvent",
    "CheckedLog",
    "ContextMessageEvent",
    "EndKind",
    "InboxClearedEvent",
    "InboxKind",
    "InboxQueuedEvent",
    "LogEvent",
    "LogEventSpec",
    "ParkedTurn",
    "PromptBlockedEvent",
    "RequestHeaderDeltaEvent",
    "RequestHeaderEvent",
    "Session",
    "SessionEvent",
    "SessionMeta",
    "SteeringMessageEvent",
    "StepStartEvent",
    "StoredLogError",
    "SurfaceOp",
    "SurfaceOpKind",
    "ToolCallEvent",
    "ToolResultEvent",
    "TurnEnd",
    "TurnEndEvent",
    "TurnStartEvent",
    "UserMessageEvent",
    "Validator",
    "check_log",
    "declared_types",
    "is_visible",
    "log_event",
    "logged_event",
    "open_turn_in",
    "parked_turn",
    "read_payload",
    "repair_events",
    "spec_for",
]
