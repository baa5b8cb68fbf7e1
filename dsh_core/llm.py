"""The model-facing vocabulary: stream chunks, failures, requests and the adapter protocol."""

from ._assembler import BlockAssembler as BlockAssembler
from ._llm_types import Chunk as Chunk
from ._llm_types import Failure as Failure
from ._llm_types import FailureCode as FailureCode
from ._llm_types import Finish as Finish
from ._llm_types import FinishReason as FinishReason
from ._llm_types import LlmAdapter as LlmAdapter
from ._llm_types import LlmCallConfig as LlmCallConfig
from ._llm_types import LlmRequest as LlmRequest
from ._llm_types import ModelInfo as ModelInfo
from ._llm_types import ReasoningDelta as ReasoningDelta
from ._llm_types import TextDelta as TextDelta
from ._llm_types import ToolCallDelta as ToolCallDelta
from ._llm_types import Usage as Usage
from ._llm_types import chunk_from_json as chunk_from_json
from ._llm_types import chunk_to_json as chunk_to_json

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
    "ReasoningDelta",
    "TextDelta",
    "ToolCallDelta",
    "Usage",
    "chunk_from_json",
    "chunk_to_json",
]
