"""The replaceable services: each one's Protocol next to its default implementation."""

from ._persistence import LoadedSessionLike as LoadedSessionLike
from ._persistence import SessionPersistence as SessionPersistence
from ._persistence import SessionStoreReader as SessionStoreReader
from ._persistence import SessionStoreWriter as SessionStoreWriter
from ._prompt_errors import MalformedPromptReferenceError as MalformedPromptReferenceError
from ._prompt_errors import MissingPromptValueError as MissingPromptValueError
from ._prompt_errors import PromptRenderError as PromptRenderError
from ._prompt_errors import UnknownPromptVariableError as UnknownPromptVariableError
from .agents import AgentEvents as AgentEvents
from .agents import AgentFactory as AgentFactory
from .agents import AgentRegistry as AgentRegistry
from .agents import AgentsPlugin as AgentsPlugin
from .agents import AgentsService as AgentsService
from .agents import AgentsView as AgentsView
from .agents import MissingAgentFactoryError as MissingAgentFactoryError
from .agents import agent_events as agent_events
from .agents import assemble_context_for as assemble_context_for
from .llm_runtime import LlmPlugin as LlmPlugin
from .llm_runtime import LlmRuntime as LlmRuntime
from .llm_runtime import LlmService as LlmService
from .llm_runtime import UnknownProviderError as UnknownProviderError
from .llm_runtime import failure_from_exception as failure_from_exception
from .sessions import Detach as Detach
from .sessions import Session as Session
from .sessions import SessionMeta as SessionMeta
from .sessions import SessionsPlugin as SessionsPlugin
from .sessions import SessionsService as SessionsService
from .sessions import SessionStore as SessionStore
from .sessions import Validator as Validator
from .subagents import SubagentError as SubagentError
from .subagents import SubagentProvider as SubagentProvider
from .subagents import SubagentRefusedError as SubagentRefusedError
from .subagents import SubagentRegistry as SubagentRegistry
from .subagents import SubagentRegistryPlugin as SubagentRegistryPlugin
from .subagents import SubagentRequest as SubagentRequest
from .subagents import SubagentResult as SubagentResult
from .subagents import SubagentRun as SubagentRun
from .subagents import SubagentsService as SubagentsService
from .subagents import SubagentsView as SubagentsView
from .subagents import UnknownSubagentProviderError as UnknownSubagentProviderError
from .system_prompt import DEFAULT_PERSONA as DEFAULT_PERSONA
from .system_prompt import HARNESS_IDENTITY as HARNESS_IDENTITY
from .system_prompt import Assembly as Assembly
from .system_prompt import AssemblyContext as AssemblyContext
from .system_prompt import PromptSection as PromptSection
from .system_prompt import SectionText as SectionText
from .system_prompt import SystemPrompt as SystemPrompt
from .system_prompt import SystemPromptConfig as SystemPromptConfig
from .system_prompt import SystemPromptPlugin as SystemPromptPlugin
from .system_prompt import SystemPromptService as SystemPromptService
from .system_prompt import SystemPromptView as SystemPromptView
from .system_prompt import VariableProvider as VariableProvider
from .system_prompt import render_prompt as render_prompt
from .tools import ApprovalService as ApprovalService
from .tools import Guard as Guard
from .tools import ToolRuntime as ToolRuntime
from .tools import ToolsPlugin as ToolsPlugin
from .tools import ToolsService as ToolsService
from .tools import ToolsView as ToolsView

__all__ = [
    "DEFAULT_PERSONA",
    "HARNESS_IDENTITY",
    "AgentEvents",
    "AgentFactory",
    "AgentRegistry",
    "AgentsPlugin",
    "AgentsService",
    "AgentsView",
    "ApprovalService",
    "Assembly",
    "AssemblyContext",
    "Detach",
    "Guard",
    "LlmPlugin",
    "LlmRuntime",
    "LlmService",
    "LoadedSessionLike",
    "MalformedPromptReferenceError",
    "MissingAgentFactoryError",
    "MissingPromptValueError",
    "PromptRenderError",
    "PromptSection",
    "SectionText",
    "Session",
    "SessionMeta",
    "SessionPersistence",
    "SessionStore",
    "SessionStoreReader",
    "SessionStoreWriter",
    "SessionsPlugin",
    "SessionsService",
    "SubagentError",
    "SubagentProvider",
    "SubagentRefusedError",
    "SubagentRegistry",
    "SubagentRegistryPlugin",
    "SubagentRequest",
    "SubagentResult",
    "SubagentRun",
    "SubagentsService",
    "SubagentsView",
    "SystemPrompt",
    "SystemPromptConfig",
    "SystemPromptPlugin",
    "SystemPromptService",
    "SystemPromptView",
    "ToolRuntime",
    "ToolsPlugin",
    "ToolsService",
    "ToolsView",
    "UnknownPromptVariableError",
    "UnknownProviderError",
    "UnknownSubagentProviderError",
    "Validator",
    "VariableProvider",
    "agent_events",
    "assemble_context_for",
    "failure_from_exception",
    "render_prompt",
]
