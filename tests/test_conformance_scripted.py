"""The adapter conformance check: ScriptedModel passes it, and adapters that break the contract fail it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import pytest

from dsh_core.llm import Chunk, FailureCode, Finish, LlmRequest, ModelInfo, TextDelta, Usage
from dsh_core.testing import (
    ConformanceScript,
    Reply,
    ScriptedConformance,
    ScriptedModel,
    check_llm_adapter,
)

pytestmark = pytest.mark.anyio


async def test_scripted_model_conforms() -> None:
    """Every case passes, raw and through ctx.llm, and every scripted reply is played."""
    model = ScriptedModel()
    await check_llm_adapter(lambda: model, ScriptedConformance(model), model="any")
    model.assert_consumed()
    assert model.played == 8  # text, tool call, failure and hang; raw and through ctx.llm


async def test_scripted_model_with_checkpoints_conforms() -> None:
    """A model that yields to the event loop before each chunk (as a network stream does) passes too."""
    model = ScriptedModel(checkpoints=True)
    await check_llm_adapter(lambda: model, ScriptedConformance(model, chunks=1), model="any")


def test_scripted_conformance_is_a_conformance_script() -> None:
    assert isinstance(ScriptedConformance(ScriptedModel()), ConformanceScript)


# ---------------------------------------------------------------------- broken adapters


class TwoFinishes(ScriptedConformance):
    def expect_text(self, text: str) -> None:
        self.model.add(Reply.of_chunks(TextDelta(0, text), Finish("stop"), Finish("stop")))


class NoFinish(ScriptedConformance):
    def expect_text(self, text: str) -> None:
        self.model.add(ScriptedModel.no_finish(text))


class WrongText(ScriptedConformance):
    def expect_text(self, text: str) -> None:
        self.model.add(ScriptedModel.text(text.upper(), chunks=2))


class TwoUsages(ScriptedConformance):
    def expect_text(self, text: str) -> None:
        self.model.add(Reply.of_chunks(TextDelta(0, text), Usage(1, 1), Usage(1, 1), Finish("stop")))


class BadJson(ScriptedConformance):
    def expect_tool_call(self, name: str, arguments: Mapping[str, Any]) -> None:
        self.model.add(ScriptedModel.tool_call(name, "{not json"))


class RaisesOnFailure(ScriptedConformance):
    def expect_failure(self, code: FailureCode) -> None:
        self.model.add(ScriptedModel.raises(RuntimeError("provider said no")))


class WrongCode(ScriptedConformance):
    def expect_failure(self, code: FailureCode) -> None:
        self.model.add(ScriptedModel.failure("UNKNOWN"))


class NoHang(ScriptedConformance):
    def expect_hang(self, text: str) -> None:
        self.model.add(ScriptedModel.text(text))


@pytest.mark.parametrize(
    ("script_class", "complaint"),
    [
        (TwoFinishes, r"text case \(raw\): 2 Finish chunks"),
        (NoFinish, r"text case \(raw\): the stream ended without a Finish"),
        (WrongText, r"text case \(raw\): the text deltas join to"),
        (TwoUsages, r"text case \(raw\): 2 Usage chunks"),
        (BadJson, r"tool-call case \(raw\): the arguments are not JSON"),
        (RaisesOnFailure, r"failure case \(raw, SERVER\): the adapter's stream raised RuntimeError"),
        (WrongCode, r"failure case \(raw, SERVER\): expected a Failure with code 'SERVER'"),
        (NoHang, r"hang case \(raw\): the stream ended by itself"),
    ],
)
async def test_a_broken_adapter_fails_the_check(
    script_class: type[ScriptedConformance], complaint: str
) -> None:
    """Each broken behaviour is caught, and the message names the case, the path and the fault."""
    model = ScriptedModel()
    with pytest.raises(AssertionError, match=complaint):
        await check_llm_adapter(lambda: model, script_class(model), model="any")


class Wrapper:
    """A ScriptedModel behind a hook that can spoil its stream or its model_info."""

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model

    def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        return self.model.stream(request)

    def model_info(self, model: str) -> ModelInfo:
        return self.model.model_info(model)


class RaisesWhenCalled(Wrapper):
    def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        self.model.stream(request)  # take the scripted reply all the same
        msg = "no connection"
        raise ConnectionError(msg)


class SwallowsCancellation(Wrapper):
    """Turns the hang's cancellation into a Finish("aborted") chunk: cancellation must propagate."""

    async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:  # type: ignore[override]
        try:
            async for chunk in self.model.stream(request):
                yield chunk
        except anyio.get_cancelled_exc_class():
            yield Finish("aborted")


class Unchunky(Wrapper):
    async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:  # type: ignore[override]
        async for chunk in self.model.stream(request):
            yield chunk
            yield "junk"  # type: ignore[misc]


class NoModelInfo(Wrapper):
    def model_info(self, model: str) -> ModelInfo:
        return {"context_window": 1000, "max_output_tokens": 100}  # type: ignore[return-value]


class OutputBeyondWindow(Wrapper):
    def model_info(self, model: str) -> ModelInfo:
        return ModelInfo(1000, 2000)


@pytest.mark.parametrize(
    ("wrapper", "complaint"),
    [
        (RaisesWhenCalled, r"text case \(raw\): adapter.stream\(\) raised ConnectionError"),
        (SwallowsCancellation, r"hang case \(raw\): the consumer received \[Finish"),
        (Unchunky, r"text case \(raw\): item 1 is a str, not a stream chunk"),
        (NoModelInfo, r"model_info\('any'\) returned dict, not a ModelInfo"),
        (OutputBeyondWindow, r"max_output_tokens 2000 exceeds context_window 1000"),
    ],
)
async def test_a_broken_adapter_class_fails_the_check(wrapper: type[Wrapper], complaint: str) -> None:
    model = ScriptedModel()
    adapter = wrapper(model)
    with pytest.raises(AssertionError, match=complaint):
        await check_llm_adapter(lambda: adapter, ScriptedConformance(model), model="any")
