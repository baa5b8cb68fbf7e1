"""dsh: an extensible LLM agent harness — the vocabulary, the plugin host and the core services."""

from dsh_core.host._context import Context as Context
from dsh_core.host._context import Disposer as Disposer
from dsh_core.host._harness import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from dsh_core.host._harness import Harness as Harness
from dsh_core.host._harness import PluginInfo as PluginInfo
from dsh_core.host._harness import installed_plugins as installed_plugins
from dsh_core.host._markers import hookimpl as hookimpl
from dsh_core.host._markers import hookspec as hookspec
from dsh_core.persistence import PersistenceError as PersistenceError
from dsh_core.persistence import RepairReport as RepairReport
from dsh_core.persistence import SessionAccessError as SessionAccessError
from dsh_core.persistence import SessionConflictError as SessionConflictError
from dsh_core.persistence import SessionCorruptError as SessionCorruptError
from dsh_core.persistence import SessionFencedError as SessionFencedError
from dsh_core.persistence import SessionFormatError as SessionFormatError
from dsh_core.persistence import SessionInfo as SessionInfo
from dsh_core.persistence import SessionInUseError as SessionInUseError
from dsh_core.persistence import SessionNotFoundError as SessionNotFoundError
from dsh_core.persistence import SessionWriteError as SessionWriteError
from dsh_core.persistence import StoredSession as StoredSession
from dsh_core.persistence import StoreUnavailableError as StoreUnavailableError
from dsh_core.services._persistence import LoadedSessionLike as LoadedSessionLike
from dsh_core.services._persistence import SessionPersistence as SessionPersistence
from dsh_core.services.agents import agent_events as agent_events
from dsh_core.services.agents import assemble_context_for as assemble_context_for
from dsh_core.services.approvals import ApprovalAnswer as ApprovalAnswer
from dsh_core.services.approvals import ApprovalNotPendingError as ApprovalNotPendingError
from dsh_core.services.approvals import PendingApproval as PendingApproval
from dsh_core.services.sessions import Session as Session
from dsh_core.services.sessions import SessionMeta as SessionMeta
from dsh_core.services.subagents import SubagentError as SubagentError
from dsh_core.services.subagents import SubagentProvider as SubagentProvider
from dsh_core.services.subagents import SubagentRefusedError as SubagentRefusedError
from dsh_core.services.subagents import SubagentRegistry as SubagentRegistry
from dsh_core.services.subagents import SubagentRegistryPlugin as SubagentRegistryPlugin
from dsh_core.services.subagents import SubagentRequest as SubagentRequest
from dsh_core.services.subagents import SubagentResult as SubagentResult
from dsh_core.services.subagents import SubagentRun as SubagentRun
from dsh_core.services.subagents import UnknownSubagentProviderError as UnknownSubagentProviderError
from dsh_core.services.system_prompt import AssemblyContext as AssemblyContext
from dsh_core.services.tools import ApprovalService as ApprovalService
from dsh_core.session_log._event import SessionEvent as SessionEvent
from dsh_core.session_log._event import SurfaceOp as SurfaceOp
from dsh_core.session_log._repair import StoredLogError as StoredLogError
from dsh_core.session_log._repair import repair_events as repair_events
from dsh_core.tools._definition import Tool as Tool
from dsh_core.tools._definition import tool as tool
from dsh_core.tools._errors import ToolError as ToolError
from dsh_core.vocabulary._agent_types import AgentHandle as AgentHandle
from dsh_core.vocabulary._agent_types import AgentOptions as AgentOptions
from dsh_core.vocabulary._agent_types import TurnOutcome as TurnOutcome
from dsh_core.vocabulary._content import AssistantMessage as AssistantMessage
from dsh_core.vocabulary._content import ContentBlock as ContentBlock
from dsh_core.vocabulary._content import Image as Image
from dsh_core.vocabulary._content import Message as Message
from dsh_core.vocabulary._content import Reasoning as Reasoning
from dsh_core.vocabulary._content import Text as Text
from dsh_core.vocabulary._content import ToolCall as ToolCall
from dsh_core.vocabulary._content import ToolResultMessage as ToolResultMessage
from dsh_core.vocabulary._content import UserMessage as UserMessage
from dsh_core.vocabulary._decisions import Accept as Accept
from dsh_core.vocabulary._decisions import Allow as Allow
from dsh_core.vocabulary._decisions import Ask as Ask
from dsh_core.vocabulary._decisions import Block as Block
from dsh_core.vocabulary._decisions import ContinuationDecision as ContinuationDecision
from dsh_core.vocabulary._decisions import ContinuationStop as ContinuationStop
from dsh_core.vocabulary._decisions import Deny as Deny
from dsh_core.vocabulary._decisions import Reject as Reject
from dsh_core.vocabulary._decisions import Retry as Retry
from dsh_core.vocabulary._errors import AgentDisposedError as AgentDisposedError
from dsh_core.vocabulary._errors import ConfigError as ConfigError
from dsh_core.vocabulary._errors import DependencyCycleError as DependencyCycleError
from dsh_core.vocabulary._errors import DshError as DshError
from dsh_core.vocabulary._errors import DuplicateRegistrationError as DuplicateRegistrationError
from dsh_core.vocabulary._errors import EventDataError as EventDataError
from dsh_core.vocabulary._errors import MissingServiceError as MissingServiceError
from dsh_core.vocabulary._errors import PluginError as PluginError
from dsh_core.vocabulary._errors import ScopeDisposedError as ScopeDisposedError
from dsh_core.vocabulary._errors import VocabularyError as VocabularyError
from dsh_core.vocabulary._json import FrozenDict as FrozenDict
from dsh_core.vocabulary._json import JsonValueError as JsonValueError
from dsh_core.vocabulary._signal import CancelSignal as CancelSignal
from dsh_core.vocabulary._tool_types import ToolExecution as ToolExecution
from dsh_core.vocabulary._tool_types import ToolResult as ToolResult

__all__ = [
    "ENTRY_POINT_GROUP",
    "Accept",
    "AgentDisposedError",
    "AgentHandle",
    "AgentOptions",
    "Allow",
    "ApprovalAnswer",
    "ApprovalNotPendingError",
    "ApprovalService",
    "Ask",
    "AssemblyContext",
    "AssistantMessage",
    "Block",
    "CancelSignal",
    "ConfigError",
    "ContentBlock",
    "Context",
    "ContinuationDecision",
    "ContinuationStop",
    "Deny",
    "DependencyCycleError",
    "Disposer",
    "DshError",
    "DuplicateRegistrationError",
    "EventDataError",
    "FrozenDict",
    "Harness",
    "Image",
    "JsonValueError",
    "LoadedSessionLike",
    "Message",
    "MissingServiceError",
    "PendingApproval",
    "PersistenceError",
    "PluginError",
    "PluginInfo",
    "Reasoning",
    "Reject",
    "RepairReport",
    "Retry",
    "ScopeDisposedError",
    "Session",
    "SessionAccessError",
    "SessionConflictError",
    "SessionCorruptError",
    "SessionEvent",
    "SessionFencedError",
    "SessionFormatError",
    "SessionInUseError",
    "SessionInfo",
    "SessionMeta",
    "SessionNotFoundError",
    "SessionPersistence",
    "SessionWriteError",
    "StoreUnavailableError",
    "StoredLogError",
    "StoredSession",
    "SubagentError",
    "SubagentProvider",
    "SubagentRefusedError",
    "SubagentRegistry",
    "SubagentRegistryPlugin",
    "SubagentRequest",
    "SubagentResult",
    "SubagentRun",
    "SurfaceOp",
    "Text",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolExecution",
    "ToolResult",
    "ToolResultMessage",
    "TurnOutcome",
    "UnknownSubagentProviderError",
    "UserMessage",
    "VocabularyError",
    "agent_events",
    "assemble_context_for",
    "hookimpl",
    "hookspec",
    "installed_plugins",
    "repair_events",
    "tool",
]
