"""dsh: an extensible LLM agent harness — the vocabulary, the plugin host and the core services."""

from ._agent_types import AgentHandle as AgentHandle
from ._agent_types import AgentOptions as AgentOptions
from ._agent_types import TurnOutcome as TurnOutcome
from ._content import AssistantMessage as AssistantMessage
from ._content import ContentBlock as ContentBlock
from ._content import Image as Image
from ._content import Message as Message
from ._content import Reasoning as Reasoning
from ._content import Text as Text
from ._content import ToolCall as ToolCall
from ._content import ToolResultMessage as ToolResultMessage
from ._content import UserMessage as UserMessage
from ._context import Context as Context
from ._context import Disposer as Disposer
from ._decisions import Accept as Accept
from ._decisions import Allow as Allow
from ._decisions import Ask as Ask
from ._decisions import Block as Block
from ._decisions import ContinuationDecision as ContinuationDecision
from ._decisions import ContinuationStop as ContinuationStop
from ._decisions import Deny as Deny
from ._decisions import Reject as Reject
from ._decisions import Retry as Retry
from ._defaults.agents import agent_events as agent_events
from ._defaults.agents import assemble_context_for as assemble_context_for
from ._defaults.sessions import Session as Session
from ._defaults.sessions import SessionMeta as SessionMeta
from ._defaults.subagents import SubagentError as SubagentError
from ._defaults.subagents import SubagentProvider as SubagentProvider
from ._defaults.subagents import SubagentRefusedError as SubagentRefusedError
from ._defaults.subagents import SubagentRegistry as SubagentRegistry
from ._defaults.subagents import SubagentRegistryPlugin as SubagentRegistryPlugin
from ._defaults.subagents import SubagentRequest as SubagentRequest
from ._defaults.subagents import SubagentResult as SubagentResult
from ._defaults.subagents import SubagentRun as SubagentRun
from ._defaults.subagents import UnknownSubagentProviderError as UnknownSubagentProviderError
from ._defaults.system_prompt import AssemblyContext as AssemblyContext
from ._defaults.tools import ApprovalService as ApprovalService
from ._errors import AgentDisposedError as AgentDisposedError
from ._errors import ConfigError as ConfigError
from ._errors import DependencyCycleError as DependencyCycleError
from ._errors import DshError as DshError
from ._errors import DuplicateRegistrationError as DuplicateRegistrationError
from ._errors import EventDataError as EventDataError
from ._errors import MissingServiceError as MissingServiceError
from ._errors import PluginError as PluginError
from ._errors import ScopeDisposedError as ScopeDisposedError
from ._errors import VocabularyError as VocabularyError
from ._host import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from ._host import Harness as Harness
from ._host import PluginInfo as PluginInfo
from ._host import installed_plugins as installed_plugins
from ._json import FrozenDict as FrozenDict
from ._json import JsonValueError as JsonValueError
from ._markers import hookimpl as hookimpl
from ._markers import hookspec as hookspec
from ._persistence import LoadedSessionLike as LoadedSessionLike
from ._persistence import SessionPersistence as SessionPersistence
from ._repair import StoredLogError as StoredLogError
from ._repair import repair_events as repair_events
from ._session_event import SessionEvent as SessionEvent
from ._session_event import SurfaceOp as SurfaceOp
from ._signal import CancelSignal as CancelSignal
from ._tool_def import Tool as Tool
from ._tool_def import tool as tool
from ._tool_types import ToolExecution as ToolExecution
from ._tool_types import ToolResult as ToolResult

__all__ = [
    "ENTRY_POINT_GROUP",
    "Accept",
    "AgentDisposedError",
    "AgentHandle",
    "AgentOptions",
    "Allow",
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
    "PluginError",
    "PluginInfo",
    "Reasoning",
    "Reject",
    "Retry",
    "ScopeDisposedError",
    "Session",
    "SessionEvent",
    "SessionMeta",
    "SessionPersistence",
    "StoredLogError",
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
