"""The LLM adapter conformance check: what every adapter owes the loop, asserted from the outside.

An adapter author scripts their own backend through a small ``ConformanceScript`` (four ways to
answer the next request, and a way to confirm a hang-up) and calls ``check_llm_adapter`` from a
test::

    async def test_my_adapter_conforms() -> None:
        model = ScriptedModel()
        await check_llm_adapter(lambda: model, ScriptedConformance(model), model="any")

Each case runs twice: against the raw adapter (``adapter.stream(request)`` read directly, as a
strict consumer) and through the real ``ctx.llm`` runtime of a fresh ``Harness``. A violation
raises ``AssertionError`` naming the case, the path and what was wrong. The cases:

* ``model_info(model)`` is a ``ModelInfo`` with positive limits (output <= context window), and
  ``ctx.llm.model_info`` reports the same;
* every stream is well formed: only chunk types, at most one ``Usage``, exactly one ``Finish``
  and nothing after it, block indexes a ``BlockAssembler`` accepts;
* a text answer: its ``TextDelta`` s join to the text, no tool call, finish ``stop``;
* a tool call: it assembles to one ``ToolCall`` with the name, an id from the adapter and JSON
  arguments equal to the scripted ones, finish ``tool-calls``;
* a failure: the stream ends with ``Finish("error", Failure(code=...))`` and never raises (not
  from the raw stream, not from ``ctx.llm.stream``);
* a hang: cancelling the consuming task while it waits inside the adapter returns within
  ``patience``, yields nothing more (no ``Finish``: cancellation is not data), leaves the adapter's
  stream closed, and the backend sees the client go (``ConformanceScript.hung_up``).

The check never sleeps; every wait is bounded by ``patience``. It runs on asyncio and trio.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final, Protocol, runtime_checkable

import anyio

from dsh_core.host._context import Context
from dsh_core.host._harness import Harness
from dsh_core.testing._scripted import ScriptedModel
from dsh_core.vocabulary._assembler import BlockAssembler
from dsh_core.vocabulary._content import Text, ToolCall, UserMessage
from dsh_core.vocabulary._llm_types import (
    Chunk,
    FailureCode,
    Finish,
    LlmAdapter,
    LlmRequest,
    ModelInfo,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)

__all__ = ["ConformanceScript", "ScriptedConformance", "check_llm_adapter"]

#: What the text case answers: several lines, non-ASCII, so that splitting and decoding show.
TEXT_ANSWER: Final = "Hello, wörld!\nThe answer is 42 ✓ — done."
#: The tool the tool-call case offers and expects to be called, with nested JSON arguments.
TOOL_NAME: Final = "get_weather"
TOOL_ARGUMENTS: Final[Mapping[str, Any]] = {
    "city": "Zürich",
    "days": 3,
    "units": ["celsius"],
    "hourly": False,
}
TOOL_SCHEMA: Final[Mapping[str, Any]] = {
    "name": TOOL_NAME,
    "description": "The weather forecast for a city.",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "units": {"type": "array", "items": {"type": "string"}},
            "hourly": {"type": "boolean"},
        },
        "required": ["city"],
    },
}
#: What the hang case streams before it waits to be cancelled.
HANG_TEXT: Final = "Let me think"

_CHUNK_TYPES: Final = (TextDelta, ReasoningDelta, ToolCallDelta, Usage, Finish)


@runtime_checkable
class ConformanceScript(Protocol):
    """How the check tells the backend behind an adapter what to answer to the next request.

    Each ``expect_*`` call scripts exactly one request: the check calls it right before calling
    ``adapter.stream`` (or ``ctx.llm.stream``) once. A backend should split answers into several
    deltas where it can, since that is what the check is for.
    """

    def expect_text(self, text: str) -> None:
        """Answer the next request with ``text`` (finish reason ``stop``)."""
        ...

    def expect_tool_call(self, name: str, arguments: Mapping[str, Any]) -> None:
        """Answer the next request with one call of tool ``name`` with JSON ``arguments``."""
        ...

    def expect_failure(self, code: FailureCode) -> None:
        """Fail the next request in a way the adapter should report as ``code``.

        :raises ValueError: the backend cannot produce that failure (pick another ``failure_code``).
        """
        ...

    def expect_hang(self, text: str) -> None:
        """Stream ``text`` for the next request, then hold the stream open until the client goes."""
        ...

    async def hung_up(self) -> None:
        """After a hang was cancelled: assert the backend saw the client go (a closed connection).

        Wait at most a few seconds; a backend with nothing to observe returns at once.
        """
        ...


class ScriptedConformance:
    """``ConformanceScript`` for a ``ScriptedModel``: each expectation is a ``model.add(...)``."""

    def __init__(self, model: ScriptedModel, *, chunks: int = 3) -> None:
        self.model = model
        self.chunks = chunks

    def expect_text(self, text: str) -> None:
        self.model.add(ScriptedModel.text(text, chunks=self.chunks, usage=Usage(10, 5)))

    def expect_tool_call(self, name: str, arguments: Mapping[str, Any]) -> None:
        self.model.add(ScriptedModel.tool_call(name, arguments, chunks=self.chunks))

    def expect_failure(self, code: FailureCode) -> None:
        self.model.add(ScriptedModel.failure(code, "scripted failure"))

    def expect_hang(self, text: str) -> None:
        self.model.add(ScriptedModel.hang(text, chunks=self.chunks))

    async def hung_up(self) -> None:
        """Nothing to observe: the check itself verifies that the scripted stream was closed."""


async def check_llm_adapter(
    make_adapter: Callable[[], LlmAdapter],
    script: ConformanceScript,
    *,
    model: str,
    provider: str = "conformance",
    failure_code: FailureCode = "SERVER",
    patience: float = 5.0,
) -> None:
    """Assert that an adapter honours the adapter contract, raw and through ``ctx.llm``.

    :param make_adapter: makes the adapter under test; called once per case and path, and may
        return the same object every time (a ``ScriptedModel`` must: the script lives in it).
    :param script: scripts the backend behind the adapter (see ``ConformanceScript``).
    :param model: a model name the adapter knows (``model_info(model)`` must answer).
    :param provider: the provider name requests carry and the adapter is registered under.
    :param failure_code: the failure the failure case asks the backend for (not ``ABORTED``,
        which finishes ``aborted``: a cancelled request is the hang case's business).
    :param patience: the bound on each case, in seconds (and on the hang's cancellation).
    :raises AssertionError: naming the case, the path (``raw`` or ``ctx.llm``) and the violation.
    """
    if failure_code == "ABORTED":
        msg = "check_llm_adapter: failure_code='ABORTED' is no failure to script; pick e.g. 'SERVER'"
        raise ValueError(msg)
    check = _Check(make_adapter, script, model=model, provider=provider, timeout=patience)
    await check.model_info()
    for path in ("raw", "ctx.llm"):
        await check.text(path)
        await check.tool_call(path)
        await check.failure(path, failure_code)
        await check.hang(path)


class _Spy:
    """The adapter as registered with ``ctx.llm``: records every stream the adapter returns."""

    def __init__(self, adapter: LlmAdapter) -> None:
        self.adapter = adapter
        self.streams: list[object] = []

    def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        chunks = self.adapter.stream(request)
        self.streams.append(chunks)
        return chunks

    def model_info(self, model: str) -> ModelInfo:
        return self.adapter.model_info(model)


class _Check:
    def __init__(
        self,
        make_adapter: Callable[[], LlmAdapter],
        script: ConformanceScript,
        *,
        model: str,
        provider: str,
        timeout: float,
    ) -> None:
        self.make_adapter = make_adapter
        self.script = script
        self.model = model
        self.provider = provider
        self.timeout = timeout

    def request(self, *, tools: bool = False) -> LlmRequest:
        messages = [UserMessage((Text("What is the weather in Zürich?"),))]
        schemas = [TOOL_SCHEMA] if tools else []
        return LlmRequest(self.provider, self.model, messages, tools=schemas, max_tokens=256)

    def adapter(self) -> LlmAdapter:
        adapter = self.make_adapter()
        for method in ("stream", "model_info"):
            assert callable(getattr(adapter, method, None)), (
                f"make_adapter() returned {type(adapter).__name__}, which has no {method}() method"
            )
        return adapter

    @asynccontextmanager
    async def runtime(self) -> AsyncIterator[tuple[Context, _Spy]]:
        """A fresh harness with the adapter (behind a ``_Spy``) registered: ``(ctx, spy)``."""
        spy = _Spy(self.adapter())
        async with Harness(autoload=False) as ctx:
            ctx.llm.register_adapter(self.provider, spy)
            yield ctx, spy

    # ------------------------------------------------------------------ the cases

    async def model_info(self) -> None:
        where = f"model_info({self.model!r})"
        info = self.adapter().model_info(self.model)
        assert isinstance(info, ModelInfo), f"{where} returned {type(info).__name__}, not a ModelInfo"
        assert info.context_window > 0, f"{where}: context_window must be > 0, got {info.context_window}"
        assert info.max_output_tokens > 0, (
            f"{where}: max_output_tokens must be > 0, got {info.max_output_tokens}"
        )
        assert info.max_output_tokens <= info.context_window, (
            f"{where}: max_output_tokens {info.max_output_tokens} exceeds context_window {info.context_window}"
        )
        async with self.runtime() as (ctx, _):
            seen = ctx.llm.model_info(f"{self.provider}/{self.model}")
        assert seen == info, f"ctx.llm.{where} gave {seen!r}, but the adapter gave {info!r}"

    async def text(self, path: str) -> None:
        where = f"text case ({path})"
        self.script.expect_text(TEXT_ANSWER)
        chunks = await self.collect(path, self.request(), where)
        assembler = _well_formed(chunks, where)
        finish = _finish_of(chunks)
        assert finish.reason == "stop", f"{where}: expected Finish('stop'), got {finish!r}"
        content = assembler.message().content
        calls = [block for block in content if type(block) is ToolCall]
        assert not calls, f"{where}: a text answer produced tool calls {calls!r}"
        text = "".join(block.text for block in content if type(block) is Text)
        assert text == TEXT_ANSWER, f"{where}: the text deltas join to {text!r}, expected {TEXT_ANSWER!r}"

    async def tool_call(self, path: str) -> None:
        where = f"tool-call case ({path})"
        self.script.expect_tool_call(TOOL_NAME, TOOL_ARGUMENTS)
        chunks = await self.collect(path, self.request(tools=True), where)
        assembler = _well_formed(chunks, where)
        finish = _finish_of(chunks)
        assert finish.reason == "tool-calls", f"{where}: expected Finish('tool-calls'), got {finish!r}"
        calls = [block for block in assembler.message().content if type(block) is ToolCall]
        assert len(calls) == 1, f"{where}: expected one tool call, got {len(calls)}: {calls!r}"
        (call,) = calls
        assert call.name == TOOL_NAME, f"{where}: the call names {call.name!r}, expected {TOOL_NAME!r}"
        ids = [c.id for c in chunks if type(c) is ToolCallDelta and c.id]
        assert ids, f"{where}: no ToolCallDelta carried an id (the first delta of a call should)"
        try:
            arguments = json.loads(call.arguments)
        except ValueError as exc:
            msg = f"{where}: the arguments are not JSON: {call.arguments!r} ({exc})"
            raise AssertionError(msg) from None
        assert arguments == TOOL_ARGUMENTS, (
            f"{where}: the arguments are {arguments!r}, expected {dict(TOOL_ARGUMENTS)!r}"
        )

    async def failure(self, path: str, code: FailureCode) -> None:
        where = f"failure case ({path}, {code})"
        self.script.expect_failure(code)
        chunks = await self.collect(path, self.request(), where)
        _well_formed(chunks, where)
        finish = _finish_of(chunks)
        assert finish.reason == "error", f"{where}: expected Finish('error', ...), got {finish!r}"
        assert finish.error is not None, f"{where}: Finish('error') without a Failure"
        assert finish.error.code == code, (
            f"{where}: expected a Failure with code {code!r}, got {finish.error!r}"
        )
        assert finish.error.message, f"{where}: the Failure has an empty message"

    async def hang(self, path: str) -> None:
        where = f"hang case ({path})"
        self.script.expect_hang(HANG_TEXT)
        if path == "raw":
            adapter = self.adapter()
            opened: list[object] = []

            async def open_raw() -> AsyncIterator[Chunk]:
                stream = await _open(adapter, self.request(), where)
                opened.append(stream)
                return stream

            seen = await self.cancel_mid_stream(open_raw, where)
        else:
            async with self.runtime() as (ctx, spy):

                async def open_runtime() -> AsyncIterator[Chunk]:
                    return ctx.llm.stream(self.request())

                seen = await self.cancel_mid_stream(open_runtime, where)
            opened = spy.streams
        assert seen, f"{where}: nothing was streamed before the hang"
        assert all(type(chunk) in (TextDelta, ReasoningDelta) for chunk in seen), (
            f"{where}: expected only deltas before the cancellation, got {seen!r}"
        )
        assert len(opened) == 1, f"{where}: expected one call of adapter.stream, got {len(opened)}"
        assert _closed(opened[0]), (
            f"{where}: the adapter's stream was left open after the consumer was cancelled "
            f"(an async generator must end or be closed)"
        )
        with anyio.fail_after(self.timeout):
            await self.script.hung_up()

    # ------------------------------------------------------------------ reading streams

    async def collect(self, path: str, request: LlmRequest, where: str) -> list[Chunk]:
        """Every item of one stream, read to its very end, within ``timeout``."""
        if path == "raw":
            stream = await _open(self.adapter(), request, where)
            return await self.read_all(stream, where, "the adapter's stream")
        async with self.runtime() as (ctx, _):
            return await self.read_all(ctx.llm.stream(request), where, "ctx.llm.stream")

    async def read_all(self, stream: AsyncIterator[Chunk], where: str, what: str) -> list[Chunk]:
        items: list[Chunk] = []
        with anyio.move_on_after(self.timeout) as scope:
            try:
                async with self.closing(stream):
                    async for item in stream:
                        items.append(item)
            except Exception as exc:
                msg = (
                    f"{where}: {what} raised {exc!r} after {len(items)} chunks; a failure must end the "
                    f"stream as Finish('error', Failure(...)), never as an exception"
                )
                raise AssertionError(msg) from exc
        assert not scope.cancelled_caught, (
            f"{where}: {what} did not end within {self.timeout}s (got {len(items)} chunks: {items!r})"
        )
        return items

    @asynccontextmanager
    async def closing(self, stream: object) -> AsyncIterator[None]:
        """Close ``stream`` on the way out, as the runtime does: shielded, for at most ``timeout``."""
        try:
            yield
        finally:
            aclose: Callable[[], Awaitable[object]] | None = getattr(stream, "aclose", None)
            if aclose is not None:
                with anyio.move_on_after(self.timeout, shield=True):
                    await aclose()

    async def cancel_mid_stream(
        self, open_stream: Callable[[], Awaitable[AsyncIterator[Chunk]]], where: str
    ) -> list[Chunk]:
        """Consume in a task; once a delta came and the task waits for more, cancel it.

        Returns the chunks the consumer received; asserts the cancellation returned in time and
        that the consumer received nothing after it.
        """
        seen: list[Chunk] = []
        errors: list[Exception] = []
        ended = False
        streaming = anyio.Event()
        cancelled_at: int | None = None

        async def consume() -> None:
            nonlocal ended
            try:
                stream = await open_stream()
                async with self.closing(stream):
                    async for chunk in stream:
                        seen.append(chunk)
                        if type(chunk) in (TextDelta, ReasoningDelta):
                            streaming.set()
                ended = True
            except Exception as exc:  # noqa: BLE001 - reported below as a violation
                errors.append(exc)
            finally:
                streaming.set()

        with anyio.move_on_after(self.timeout) as bound:
            async with anyio.create_task_group() as tg:
                tg.start_soon(consume)
                await streaming.wait()
                await anyio.wait_all_tasks_blocked()  # the consumer now waits inside the adapter
                cancelled_at = len(seen)
                tg.cancel_scope.cancel()
        if errors:
            msg = f"{where}: the stream raised {errors[0]!r}; only cancellation may escape a stream"
            raise AssertionError(msg) from errors[0]
        if bound.cancelled_caught:
            if cancelled_at is None:
                msg = f"{where}: no delta arrived within {self.timeout}s ({seen!r}); an adapter streams as it reads"
            else:
                msg = f"{where}: cancelling the consumer mid-stream did not return within {self.timeout}s"
            raise AssertionError(msg)
        assert cancelled_at is not None, f"{where}: the consumer was never cancelled"
        assert len(seen) == cancelled_at, (
            f"{where}: the consumer received {seen[cancelled_at:]!r} after it was cancelled; "
            f"cancellation must propagate, not become chunks"
        )
        assert not ended, f"{where}: the stream ended by itself instead of waiting to be cancelled: {seen!r}"
        return seen


async def _open(adapter: LlmAdapter, request: LlmRequest, where: str) -> AsyncIterator[Chunk]:
    """``adapter.stream(request)``, which must not raise and must give an async iterator."""
    try:
        stream: object = adapter.stream(request)
        if inspect.isawaitable(stream):  # an ``async def stream`` returning an iterator
            stream = await stream
    except Exception as exc:
        msg = f"{where}: adapter.stream() raised {exc!r}; a failure must be streamed as Finish('error', ...)"
        raise AssertionError(msg) from exc
    assert hasattr(stream, "__anext__"), (
        f"{where}: adapter.stream() returned {type(stream).__name__}, not an async iterator"
    )
    return stream  # type: ignore[return-value]


def _well_formed(chunks: list[Chunk], where: str) -> BlockAssembler:
    """Assert the stream's shape and return its assembler (fed every chunk)."""
    assert chunks, f"{where}: the stream ended without any chunk (it must end with a Finish)"
    for position, chunk in enumerate(chunks):
        assert isinstance(chunk, _CHUNK_TYPES), (
            f"{where}: item {position} is a {type(chunk).__name__}, not a stream chunk"
        )
    finishes = [position for position, chunk in enumerate(chunks) if type(chunk) is Finish]
    assert finishes, f"{where}: the stream ended without a Finish: {chunks!r}"
    assert len(finishes) == 1, f"{where}: {len(finishes)} Finish chunks (exactly one is allowed): {chunks!r}"
    assert finishes[0] == len(chunks) - 1, (
        f"{where}: {chunks[finishes[0] + 1 :]!r} came after the Finish; the Finish must be last"
    )
    usages = sum(type(chunk) is Usage for chunk in chunks)
    assert usages <= 1, f"{where}: {usages} Usage chunks (at most one is allowed)"
    assembler = BlockAssembler()
    for chunk in chunks:
        try:
            assembler.add(chunk)
        except ValueError as exc:
            msg = f"{where}: the chunks do not assemble: {exc}"
            raise AssertionError(msg) from None
    return assembler


def _finish_of(chunks: list[Chunk]) -> Finish:
    last = chunks[-1]
    assert type(last) is Finish
    return last


def _closed(stream: object) -> bool:
    """Whether an adapter's stream is finished (an async generator); other iterators are trusted."""
    if inspect.isasyncgen(stream):
        return stream.ag_frame is None
    return True
