"""The model-facing vocabulary: stream chunks, failures, requests and the adapter protocol."""

from dsh_core.vocabulary._assembler import BlockAssembler as BlockAssembler
from dsh_core.vocabulary._llm_types import Chunk as Chunk
from dsh_core.vocabulary._llm_types import Failure as Failure
from dsh_core.vocabulary._llm_types import FailureCode as FailureCode
from dsh_core.vocabulary._llm_types import Finish as Finish
from dsh_core.vocabulary._llm_types import FinishReason as FinishReason
from dsh_core.vocabulary._llm_types import LlmAdapter as LlmAdapter
from dsh_core.vocabulary._llm_types import LlmCallConfig as LlmCallConfig
from dsh_core.vocabulary._llm_types import LlmRequest as LlmRequest
from dsh_core.vocabulary._llm_types import ModelInfo as ModelInfo
from dsh_core.vocabulary._llm_types import Prices as Prices
from dsh_core.vocabulary._llm_types import ReasoningDelta as ReasoningDelta
from dsh_core.vocabulary._llm_types import TextDelta as TextDelta
from dsh_core.vocabulary._llm_types import ToolCallDelta as ToolCallDelta
from dsh_core.vocabulary._llm_types import Usage as Usage
from dsh_core.vocabulary._llm_types import chunk_from_json as chunk_from_json
from dsh_core.vocabulary._llm_types import chunk_to_json as chunk_to_json

__all__ = [
    "BlockAssembler",
    "Chunk",
    "Failure",
    "FailureCode",
    "Finish",
    "FinishReason",
    "LlmAdapter",
    "LlmCallConfig",
    "LlmRequest",
    "ModelInfo",
    "Prices",
    "ReasoningDelta",
    "TextDelta",
    "ToolCallDelta",
    "Usage",
    "chunk_from_json",
    "chunk_to_json",
]
