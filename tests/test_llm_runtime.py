"""The LLM runtime: adapter registration, model strings, and streams that always end in one Finish."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, aclosing
from typing import Any

import anyio
import pytest

from dsh_core import CancelSignal, Context, DuplicateRegistrationError
from dsh_core.llm import Chunk, Failure, Finish, LlmRequest, ModelInfo, TextDelta, Usage
from dsh_core.services.llm_runtime import LlmRuntime, UnknownProviderError, failure_from_exception
from dsh_core.vocabulary import UserMessage

pytestmark = pytest.mark.anyio

StartHarness = Callable[..., AbstractAsyncContextManager[Context]]


class Adapter:
    """An adapter whose stream is a script: chunks to yield, then maybe an exception."""

    def __init__(self, *chunks: Chunk, raises: Exception | None = None, info: object = None) -> None:
        self.chunks = chunks
        self.raises = raises
        self.info = info if info is not None else ModelInfo(128_000, 8_000)
        self.closed = False
        self.requests: list[LlmRequest] = []
        self.info_asked: list[str] = []

    async def stream(self, request: LlmRequest) -> AsyncGenerator[Chunk, None]:
        self.requests.append(request)
        try:
            for chunk in self.chunks:
                yield chunk
            if self.raises is not None:
                raise self.raises
        finally:
            self.closed = True

    def model_info(self, model: str) -> ModelInfo:
        self.info_asked.append(model)
        return self.info  # type: ignore[return-value]


def request(provider: str = "fake", signal: CancelSignal | None = None) -> LlmRequest:
    return LlmRequest(provider, "m1", (UserMessage("hi"),), signal=signal)


async def collect(runtime: LlmRuntime, req: LlmRequest) -> list[Chunk]:
    async with aclosing(runtime.stream(req)) as stream:
        return [chunk async for chunk in stream]


def finish_of(chunks: list[Chunk]) -> Finish:
    assert sum(isinstance(chunk, Finish) for chunk in chunks) == 1
    last = chunks[-1]
    assert isinstance(last, Finish)
    return last


# ---------------------------------------------------------------------- registry


async def test_plugin_provides_the_runtime(dsh_ctx: Context) -> None:
    """The default `llm` plugin provides ctx.llm with no adapters."""
    assert isinstance(dsh_ctx.llm, LlmRuntime)
    assert dsh_ctx.llm.providers == ()


async def test_register_resolve_and_dispose(dsh_ctx: Context) -> None:
    """A registered adapter resolves; its disposer removes exactly it, idempotently."""
    adapter = Adapter()
    dispose = dsh_ctx.llm.register_adapter("fake", adapter)
    assert dsh_ctx.llm.resolve("fake/m1") == ("fake", "m1", adapter)
    assert dsh_ctx.llm.resolve("fake/org/model") == ("fake", "org/model", adapter)
    assert dsh_ctx.llm.providers == ("fake",)
    dispose()
    with pytest.raises(UnknownProviderError):
        dsh_ctx.llm.resolve("fake/m1")
    newer = Adapter()
    dsh_ctx.llm.register_adapter("fake", newer)
    dispose()  # stale: must not remove the newer registration
    assert dsh_ctx.llm.resolve("fake/m1")[2] is newer


async def test_duplicate_provider_is_refused(dsh_ctx: Context) -> None:
    """A second adapter for a provider raises, naming the provider and who holds it."""
    dsh_ctx.child("plugin:first").llm.register_adapter("fake", Adapter())
    with pytest.raises(DuplicateRegistrationError, match="'fake' already has an adapter") as info:
        dsh_ctx.llm.register_adapter("fake", Adapter())
    assert "plugin:first" in str(info.value)


async def test_registration_is_undone_with_its_context(dsh_ctx: Context) -> None:
    """An adapter registered through a context is unregistered when the context is disposed."""
    child = dsh_ctx.child("adapter-plugin")
    child.llm.register_adapter("fake", Adapter())
    assert dsh_ctx.llm.providers == ("fake",)
    await child.dispose()
    assert dsh_ctx.llm.providers == ()


@pytest.mark.parametrize(
    ("provider", "adapter", "error", "text"),
    [
        (3, Adapter(), TypeError, "provider must be a str"),
        ("", Adapter(), ValueError, "non-empty"),
        ("a/b", Adapter(), ValueError, "without '/'"),
        (" a", Adapter(), ValueError, "spaces"),
        ("fake", object(), TypeError, "no stream"),
    ],
)
async def test_register_refuses_bad_input(
    dsh_ctx: Context, provider: Any, adapter: Any, error: type[Exception], text: str
) -> None:
    """Bad provider names and non-adapters are refused with a clear error."""
    with pytest.raises(error, match=text):
        dsh_ctx.llm.register_adapter(provider, adapter)


async def test_resolve_errors_are_clear(dsh_ctx: Context) -> None:
    """A malformed model string says the format; an unknown provider lists the registered ones."""
    dsh_ctx.llm.register_adapter("deepseek", Adapter())
    dsh_ctx.llm.register_adapter("openai", Adapter())
    for bad in ("deepseek", "/m", "deepseek/"):
        with pytest.raises(ValueError, match="'provider/model'"):
            dsh_ctx.llm.resolve(bad)
    with pytest.raises(TypeError, match="provider/model"):
        dsh_ctx.llm.resolve(None)
    with pytest.raises(UnknownProviderError, match="registered providers: 'deepseek', 'openai'") as info:
        dsh_ctx.llm.resolve("anthropic/claude")
    assert info.value.provider == "anthropic"
    assert info.value.registered == ("deepseek", "openai")
    assert isinstance(info.value, LookupError)


async def test_model_info_asks_the_adapter(dsh_ctx: Context) -> None:
    """model_info passes the model part to the adapter and checks what comes back."""
    adapter = Adapter()
    dsh_ctx.llm.register_adapter("fake", adapter)
    assert dsh_ctx.llm.model_info("fake/big") == ModelInfo(128_000, 8_000)
    assert adapter.info_asked == ["big"]
    dsh_ctx.llm.register_adapter("odd", Adapter(info={"context_window": 1}))
    with pytest.raises(TypeError, match="not a ModelInfo"):
        dsh_ctx.llm.model_info("odd/m")
    with pytest.raises(UnknownProviderError):
        dsh_ctx.llm.model_info("nobody/m")


# ---------------------------------------------------------------------- streaming


async def test_a_good_stream_passes_through_unchanged() -> None:
    """Chunks are handed on as they are, ending with the adapter's own Finish."""
    runtime = LlmRuntime()
    chunks = (TextDelta(0, "he"), TextDelta(0, "llo"), Usage(3, 2), Finish("stop"))
    adapter = Adapter(*chunks)
    runtime.register_adapter("fake", adapter)
    req = request()
    assert await collect(runtime, req) == list(chunks)
    assert adapter.requests == [req]
    assert adapter.closed


async def test_chunks_after_finish_are_dropped_and_the_adapter_closed_first() -> None:
    """Anything after the Finish is dropped; the adapter is closed before the Finish is handed out."""
    runtime = LlmRuntime()
    adapter = Adapter(
        TextDelta(0, "a"), Finish("stop"), TextDelta(0, "late"), Finish("error", Failure("x", "SERVER"))
    )
    runtime.register_adapter("fake", adapter)
    stream = runtime.stream(request())
    assert await anext(stream) == TextDelta(0, "a")
    assert not adapter.closed
    assert await anext(stream) == Finish("stop")
    assert adapter.closed
    with pytest.raises(StopAsyncIteration):
        await anext(stream)


async def test_raising_on_open_becomes_an_error_finish() -> None:
    """An adapter whose stream() raises before returning an iterator yields one error Finish."""

    class Broken(Adapter):
        def stream(self, request: LlmRequest) -> AsyncGenerator[Chunk, None]:
            msg = "bad api key format"
            raise RuntimeError(msg)

    runtime = LlmRuntime()
    runtime.register_adapter("fake", Broken())
    chunks = await collect(runtime, request())
    assert chunks == [Finish("error", Failure("bad api key format", "UNKNOWN"))]


async def test_raising_mid_stream_keeps_what_streamed() -> None:
    """A mid-stream exception follows the chunks already streamed as one error Finish."""
    runtime = LlmRuntime()
    adapter = Adapter(TextDelta(0, "par"), raises=ValueError("connection reset by peer"))
    runtime.register_adapter("fake", adapter)
    chunks = await collect(runtime, request())
    assert chunks[:-1] == [TextDelta(0, "par")]
    assert finish_of(chunks) == Finish("error", Failure("connection reset by peer", "UNKNOWN"))
    assert adapter.closed


async def test_ending_without_finish_is_a_transport_error() -> None:
    """Chunks and then silence: TRANSPORT, 'stream ended without a finish'."""
    runtime = LlmRuntime()
    runtime.register_adapter("fake", Adapter(TextDelta(0, "a"), Usage(1, 1)))
    chunks = await collect(runtime, request())
    assert len(chunks) == 3
    assert finish_of(chunks) == Finish("error", Failure("stream ended without a finish", "TRANSPORT"))


async def test_ending_with_nothing_is_an_empty_response() -> None:
    """No chunk at all: EMPTY_RESPONSE."""
    runtime = LlmRuntime()
    runtime.register_adapter("fake", Adapter())
    [finish] = await collect(runtime, request())
    assert isinstance(finish, Finish)
    assert finish.reason == "error"
    assert finish.error is not None
    assert finish.error.code == "EMPTY_RESPONSE"


async def test_unknown_provider_is_an_error_finish() -> None:
    """Streaming for an unregistered provider yields one error Finish naming the registered ones."""
    runtime = LlmRuntime()
    runtime.register_adapter("deepseek", Adapter())
    [finish] = await collect(runtime, request("nobody"))
    assert isinstance(finish, Finish)
    assert finish.error is not None
    assert finish.error.code == "BAD_REQUEST"
    assert "'nobody'" in finish.error.message
    assert "'deepseek'" in finish.error.message


async def test_non_iterable_stream_is_an_error_finish() -> None:
    """An adapter returning something that is not an async iterator fails as data too."""

    class Wrong(Adapter):
        def stream(self, request: LlmRequest) -> Any:
            return [Finish("stop")]

    runtime = LlmRuntime()
    runtime.register_adapter("fake", Wrong())
    [finish] = await collect(runtime, request())
    assert isinstance(finish, Finish)
    assert finish.reason == "error"


async def test_an_async_def_stream_returning_an_iterator_works() -> None:
    """`async def stream(...)` that returns an async iterator is awaited, then iterated."""
    inner = Adapter(TextDelta(0, "x"), Finish("stop"))

    class Awaiting(Adapter):
        async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:  # type: ignore[override]
            return inner.stream(request)

    runtime = LlmRuntime()
    runtime.register_adapter("fake", Awaiting())  # type: ignore[arg-type]  # off-protocol on purpose
    assert await collect(runtime, request()) == [TextDelta(0, "x"), Finish("stop")]
    assert inner.closed


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (RuntimeError("boom"), Failure("boom", "UNKNOWN")),
        (RuntimeError(), Failure("RuntimeError", "UNKNOWN")),
        (TimeoutError("read timed out"), Failure("read timed out", "TIMEOUT")),
        (ConnectionResetError("reset"), Failure("reset", "TRANSPORT")),
    ],
)
def test_exceptions_are_normalised(exc: Exception, expected: Failure) -> None:
    """Exceptions map to failure codes, most specific first; the message is the exception's text."""
    assert failure_from_exception(exc) == expected


async def test_an_exception_carrying_a_failure_keeps_it() -> None:
    """An adapter's exception with a `failure` attribute gives that classified failure."""

    class RateLimited(Exception):
        failure = Failure("slow down", "RATE_LIMIT", status=429, retry_after=2.0)

    runtime = LlmRuntime()
    runtime.register_adapter("fake", Adapter(raises=RateLimited()))
    [finish] = await collect(runtime, request())
    assert finish == Finish("error", RateLimited.failure)


# ---------------------------------------------------------------------- aborts and cancellation


async def test_cancelled_signal_before_the_call_aborts_without_calling_the_adapter() -> None:
    """A signal already cancelled: one aborted Finish, the adapter never asked."""
    runtime = LlmRuntime()
    adapter = Adapter(Finish("stop"))
    runtime.register_adapter("fake", adapter)
    signal = CancelSignal()
    signal.cancel("user pressed stop")
    [finish] = await collect(runtime, request(signal=signal))
    assert isinstance(finish, Finish)
    assert finish.reason == "aborted"
    assert finish.error is not None
    assert finish.error.code == "ABORTED"
    assert "user pressed stop" in finish.error.message
    assert adapter.requests == []


async def test_signal_cancelled_mid_stream_aborts() -> None:
    """Once the signal is cancelled, the next chunk ends the stream as aborted and closes the adapter."""
    runtime = LlmRuntime()
    adapter = Adapter(TextDelta(0, "a"), TextDelta(0, "b"), Finish("stop"))
    runtime.register_adapter("fake", adapter)
    signal = CancelSignal()
    seen: list[Chunk] = []
    async with aclosing(runtime.stream(request(signal=signal))) as stream:
        async for chunk in stream:
            seen.append(chunk)
            signal.cancel()
    assert seen[0] == TextDelta(0, "a")
    assert len(seen) == 2
    assert isinstance(seen[1], Finish)
    assert seen[1].reason == "aborted"
    assert adapter.closed


@pytest.mark.parametrize(
    "ending",
    [
        {"raises": RuntimeError("socket closed")},
        {"chunks": (Finish("error", Failure("stream reset", "TRANSPORT")),)},
        {"chunks": ()},
    ],
)
async def test_failure_after_the_signal_is_cancelled_is_an_abort(ending: dict[str, Any]) -> None:
    """An adapter that fails or stops after the signal was cancelled finishes aborted, not error."""
    signal = CancelSignal()

    class Polling(Adapter):
        async def stream(self, request: LlmRequest) -> AsyncGenerator[Chunk, None]:
            signal.cancel()
            async with aclosing(super().stream(request)) as inner:
                async for chunk in inner:
                    yield chunk

    runtime = LlmRuntime()
    runtime.register_adapter("fake", Polling(*ending.get("chunks", ()), raises=ending.get("raises")))
    [finish] = await collect(runtime, request(signal=signal))
    assert isinstance(finish, Finish)
    assert finish.reason == "aborted"
    assert finish.error is not None
    assert finish.error.code == "ABORTED"


async def test_adapter_finishes_are_normalised() -> None:
    """An ABORTED-coded error finish becomes aborted; an aborted finish without failure gets one."""
    runtime = LlmRuntime()
    aborted = Failure("client went away", "ABORTED")
    runtime.register_adapter("a", Adapter(Finish("error", aborted)))
    runtime.register_adapter("b", Adapter(Finish("aborted")))
    assert await collect(runtime, request("a")) == [Finish("aborted", aborted)]
    [finish] = await collect(runtime, request("b"))
    assert isinstance(finish, Finish)
    assert finish.error is not None
    assert finish.error.code == "ABORTED"


async def test_cancellation_propagates_and_closes_the_adapter() -> None:
    """Cancelling the consumer while the adapter waits propagates, and the adapter's stream is closed."""
    closed = anyio.Event()
    waiting = anyio.Event()

    class Hanging(Adapter):
        async def stream(self, request: LlmRequest) -> AsyncGenerator[Chunk, None]:
            try:
                yield TextDelta(0, "a")
                waiting.set()
                await anyio.sleep_forever()
                yield Finish("stop")
            finally:
                closed.set()

    runtime = LlmRuntime()
    runtime.register_adapter("fake", Hanging())
    seen: list[Chunk] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def consume() -> None:
                async with aclosing(runtime.stream(request())) as stream:
                    async for chunk in stream:
                        seen.append(chunk)

            tg.start_soon(consume)
            await waiting.wait()
            tg.cancel_scope.cancel()
    assert seen == [TextDelta(0, "a")]  # no Finish: cancellation is not turned into data
    assert closed.is_set()


async def test_closing_the_stream_early_closes_the_adapter() -> None:
    """A consumer that stops reading and closes the stream closes the adapter's stream too."""
    runtime = LlmRuntime()
    adapter = Adapter(TextDelta(0, "a"), TextDelta(0, "b"), Finish("stop"))
    runtime.register_adapter("fake", adapter)
    async with aclosing(runtime.stream(request())) as stream:
        async for _ in stream:
            break
    assert adapter.closed


async def test_base_exceptions_are_not_turned_into_data() -> None:
    """Only Exception is normalised: a BaseException from the adapter propagates."""

    class Stop(BaseException):
        pass

    runtime = LlmRuntime()
    adapter = Adapter(raises=Stop())  # type: ignore[arg-type]
    runtime.register_adapter("fake", adapter)
    with pytest.raises(Stop):
        await collect(runtime, request())
    assert adapter.closed


async def test_an_item_that_is_not_a_chunk_ends_the_stream_with_an_error_naming_the_adapter() -> None:
    """An adapter yielding a str gives one error Finish that names the adapter and the type."""
    from dsh_core import Harness
    from dsh_core.llm import Finish, LlmRequest, ModelInfo, TextDelta

    class Sloppy:
        async def stream(self, request: LlmRequest) -> Any:
            yield TextDelta(0, "ok")
            yield "not a chunk"

        def model_info(self, model: str) -> ModelInfo:
            return ModelInfo(1000, 100)

    async with Harness(autoload=False) as ctx:
        ctx.llm.register_adapter("sloppy", Sloppy())
        chunks = [c async for c in ctx.llm.stream(LlmRequest(provider="sloppy", model="m", messages=()))]
    assert chunks[0] == TextDelta(0, "ok")
    assert isinstance(chunks[-1], Finish)
    assert chunks[-1].reason == "error"
    assert chunks[-1].error is not None
    assert "'sloppy' adapter yielded a str" in chunks[-1].error.message
