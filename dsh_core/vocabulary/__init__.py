"""The vocabulary every part speaks: content blocks and messages, model chunks and requests, decisions, tool results, agent options, JSON values and the errors they raise."""

from ._agent_types import Agent as Agent
from ._agent_types import AgentHandle as AgentHandle
from ._agent_types import AgentOptions as AgentOptions
from ._agent_types import AgentStatus as AgentStatus
from ._agent_types import Setup as Setup
from ._agent_types import TurnOutcome as TurnOutcome
from ._assembler import BlockAssembler as BlockAssembler
from ._codec import FieldCodec as FieldCodec
from ._codec import ObjectCodec as ObjectCodec
from ._codec import TaggedUnion as TaggedUnion
from ._codec import json_field as json_field
from ._content import SOURCE_KINDS as SOURCE_KINDS
from ._content import USER_SOURCE as USER_SOURCE
from ._content import AssistantMessage as AssistantMessage
from ._content import Content as Content
from ._content import ContentBlock as ContentBlock
from ._content import Image as Image
from ._content import Message as Message
from ._content import Reasoning as Reasoning
from ._content import SourceKind as SourceKind
from ._content import Text as Text
from ._content import ToolCall as ToolCall
from ._content import ToolResultMessage as ToolResultMessage
from ._content import UserMessage as UserMessage
from ._content import as_content as as_content
from ._content import as_result_content as as_result_content
from ._content import block_from_json as block_from_json
from ._content import message_from_json as message_from_json
from ._content import new_id as new_id
from ._content import validate_bool as validate_bool
from ._content import validate_optional_str as validate_optional_str
from ._content import validate_str as validate_str
from ._decisions import Accept as Accept
from ._decisions import Allow as Allow
from ._decisions import Ask as Ask
from ._decisions import Block as Block
from ._decisions import ContinuationAction as ContinuationAction
from ._decisions import ContinuationDecision as ContinuationDecision
from ._decisions import ContinuationStop as ContinuationStop
from ._decisions import Decision as Decision
from ._decisions import Deny as Deny
from ._decisions import PostToolDecision as PostToolDecision
from ._decisions import PreToolDecision as PreToolDecision
from ._decisions import PromptDecision as PromptDecision
from ._decisions import Reject as Reject
from ._decisions import Retry as Retry
from ._decisions import context_texts as context_texts
from ._decisions import decision_from_json as decision_from_json
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
from ._json import MAX_DEPTH as MAX_DEPTH
from ._json import FrozenDict as FrozenDict
from ._json import JsonValue as JsonValue
from ._json import JsonValueError as JsonValueError
from ._json import check_keys as check_keys
from ._json import dumps_json as dumps_json
from ._json import expect_object as expect_object
from ._json import freeze_json as freeze_json
from ._json import freeze_json_object as freeze_json_object
from ._json import frozen_trusted as frozen_trusted
from ._json import json_type_name as json_type_name
from ._json import loads_json as loads_json
from ._json import refuse as refuse
from ._json import str_field as str_field
from ._json import thaw_json as thaw_json
from ._llm_types import FAILURE_CODES as FAILURE_CODES
from ._llm_types import FINISH_REASONS as FINISH_REASONS
from ._llm_types import Chunk as Chunk
from ._llm_types import Failure as Failure
from ._llm_types import FailureCode as FailureCode
from ._llm_types import Finish as Finish
from ._llm_types import FinishReason as FinishReason
from ._llm_types import LlmAdapter as LlmAdapter
from ._llm_types import LlmCallConfig as LlmCallConfig
from ._llm_types import LlmRequest as LlmRequest
from ._llm_types import ModelInfo as ModelInfo
from ._llm_types import PollableSignal as PollableSignal
from ._llm_types import Prices as Prices
from ._llm_types import ReasoningDelta as ReasoningDelta
from ._llm_types import TextDelta as TextDelta
from ._llm_types import ToolCallDelta as ToolCallDelta
from ._llm_types import TrustedMessages as TrustedMessages
from ._llm_types import Usage as Usage
from ._llm_types import chunk_from_json as chunk_from_json
from ._llm_types import chunk_to_json as chunk_to_json
from ._signal import CancelSignal as CancelSignal
from ._tool_types import ToolErrorCode as ToolErrorCode
from ._tool_types import ToolExecution as ToolExecution
from ._tool_types import ToolResult as ToolResult

__all__ = [
    "FAILURE_CODES",
    "FINISH_REASONS",
    "MAX_DEPTH",
    "SOURCE_KINDS",
    "USER_SOURCE",
    "Accept",
    "Agent",
    "AgentDisposedError",
    "AgentHandle",
    "AgentOptions",
    "AgentStatus",
    "Allow",
    "Ask",
    "AssistantMessage",
    "Block",
    "BlockAssembler",
    "CancelSignal",
    "Chunk",
    "ConfigError",
    "Content",
    "ContentBlock",
    "ContinuationAction",
    "ContinuationDecision",
    "ContinuationStop",
    "Decision",
    "Deny",
    "DependencyCycleError",
    "DshError",
    "DuplicateRegistrationError",
    "EventDataError",
    "Failure",
    "FailureCode",
    "FieldCodec",
    "Finish",
    "FinishReason",
    "FrozenDict",
    "Image",
    "JsonValue",
    "JsonValueError",
    "LlmAdapter",
    "LlmCallConfig",
    "LlmRequest",
    "Message",
    "MissingServiceError",
    "ModelInfo",
    "ObjectCodec",
    "PluginError",
    "PollableSignal",
    "PostToolDecision",
    "PreToolDecision",
    "Prices",
    "PromptDecision",
    "Reasoning",
    "ReasoningDelta",
    "Reject",
    "Retry",
    "ScopeDisposedError",
    "Setup",
    "SourceKind",
    "TaggedUnion",
    "Text",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolErrorCode",
    "ToolExecution",
    "ToolResult",
    "ToolResultMessage",
    "TrustedMessages",
    "TurnOutcome",
    "Usage",
    "UserMessage",
    "VocabularyError",
    "as_content",
    "as_result_content",
    "block_from_json",
    "check_keys",
    "chunk_from_json",
    "chunk_to_json",
    "context_texts",
    "decision_from_json",
    "dumps_json",
    "expect_object",
    "freeze_json",
    "freeze_json_object",
    "frozen_trusted",
    "json_field",
    "json_type_name",
    "loads_json",
    "message_from_json",
    "new_id",
    "refuse",
    "str_field",
    "thaw_json",
    "validate_bool",
    "validate_optional_str",
    "validate_str",
]
