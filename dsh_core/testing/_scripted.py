"""ScriptedModel: an LLM adapter that plays a script of replies, for tests and benchmarks.

Each ``stream()`` call takes the next ``Reply`` of the script and streams it with no latency (no
sleeps, no I/O), so a test runs the whole loop deterministically and a benchmark measures only the
harness::

    model = ScriptedModel([
        ScriptedModel.tool_call("read", {"path": "a.py"}),   # step 1: call a tool
        ScriptedModel.text("It defines main().", chunks=3),   # step 2: answer in 3 deltas
    ])
    ctx.llm.register_adapter(model.provider, model)           # then AgentOptions(model="scripted/any")
    ...
    model.assert_consumed()
    assert model.requests[1].messages[-1].call_id == "call_1"

A reply streams its blocks as deltas (block ``i`` at index ``i``), then its ``Usage`` if given,
then ``Finish``. The finish reason defaults to ``tool-calls`` when the reply has a tool call and
``stop`` otherwise. Other endings: ``failure`` (an error ``Finish``), ``raises`` (the stream raises),
``hang`` (the stream waits until cancelled) and ``no_finish`` (the stream just ends).

A tool call scripted without an id gets ``call_<n>`` when played, ``n`` counting this model's tool
calls from 1, so ids are unique and predictable.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, Literal, TypeAlias

import anyio
import anyio.lowlevel
import attrs

from dsh_core.vocabulary._content import ContentBlock, Reasoning, Text, ToolCall
from dsh_core.vocabulary._json import dumps_json, freeze_json
from dsh_core.vocabulary._llm_types import (
    Chunk,
    Failure,
    FailureCode,
    Finish,
    FinishReason,
    LlmRequest,
    ModelInfo,
    Prices,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)

__all__ = ["Reply", "ScriptedModel"]

#: What a reply does after its chunks: end the stream, raise ``exception``, or wait to be cancelled.
ReplyEnding: TypeAlias = Literal["end", "raise", "hang"]


def _split(text: str, pieces: int) -> list[str]:
    """``text`` in ``pieces`` nearly equal, non-empty parts (fewer if it is shorter; one if empty)."""
    count = max(1, min(pieces, len(text)))
    size = len(text)
    return [text[size * i // count : size * (i + 1) // count] for i in range(count)]


def _deltas(blocks: Iterable[ContentBlock | str], pieces: int) -> list[Chunk]:
    if type(pieces) is not int or pieces < 1:
        msg = f"chunks must be an int >= 1 (deltas per block), got {pieces!r}"
        raise ValueError(msg)
    out: list[Chunk] = []
    for index, block in enumerate(blocks):
        if isinstance(block, str) or type(block) is Text:
            text = block if isinstance(block, str) else block.text
            out.extend(TextDelta(index, part) for part in _split(text, pieces))
        elif type(block) is Reasoning:
            out.extend(ReasoningDelta(index, part) for part in _split(block.text, pieces))
        elif type(block) is ToolCall:
            first, *rest = _split(block.arguments, pieces)
            out.append(ToolCallDelta(index, block.id, block.name, first))
            out.extend(ToolCallDelta(index, None, None, part) for part in rest)
        else:
            kind = type(block).__name__
            msg = f"a scripted reply streams Text, Reasoning and ToolCall blocks (or str), got {kind}"
            raise TypeError(msg)
    return out


@attrs.frozen(init=False)
class Reply:
    """One scripted model call: the chunks it streams, then how it ends.

    ``Reply(*blocks, finish=None, usage=None, error=None, chunks=1)`` streams ``blocks`` (a str is
    a ``Text``), each split into ``chunks`` deltas, then ``usage`` (if given) and
    ``Finish(finish, error)``. ``finish`` defaults to ``"error"`` when ``error`` is given, else
    ``"tool-calls"`` if a block is a ``ToolCall``, else ``"stop"``. ``Reply.of_chunks`` plays exact
    chunks instead (for malformed or unusual streams).
    """

    chunks: tuple[Chunk, ...]
    then: ReplyEnding = "end"
    exception: BaseException | None = None

    def __init__(
        self,
        *blocks: ContentBlock | str,
        finish: FinishReason | None = None,
        usage: Usage | None = None,
        error: Failure | None = None,
        chunks: int = 1,
    ) -> None:
        streamed = _deltas(blocks, chunks)
        if usage is not None:
            streamed.append(usage)
        if finish is None:
            has_calls = any(type(block) is ToolCall for block in blocks)
            finish = "error" if error is not None else "tool-calls" if has_calls else "stop"
        streamed.append(Finish(finish, error))
        self.__attrs_init__(tuple(streamed))

    @classmethod
    def of_chunks(
        cls, *chunks: Chunk, then: ReplyEnding = "end", exception: BaseException | None = None
    ) -> Reply:
        """A reply that streams exactly ``chunks`` (no ``Finish`` is added), then ends as ``then`` says."""
        if (then == "raise") != (exception is not None):
            msg = "Reply.of_chunks: pass exception= exactly when then='raise'"
            raise ValueError(msg)
        reply = object.__new__(cls)
        reply.__attrs_init__(tuple(chunks), then, exception)
        return reply


def _as_reply(entry: Reply | str) -> Reply:
    if isinstance(entry, Reply):
        return entry
    if isinstance(entry, str):
        return Reply(entry)
    msg = f"a script entry is a Reply (see the ScriptedModel helpers) or a str, got {type(entry).__name__}"
    raise TypeError(msg)


class ScriptedModel:
    """An ``LlmAdapter`` that streams scripted replies, one per ``stream()`` call, in order.

    :param script: the replies (a str is a text reply); add more later with ``add``.
    :param provider: the name to register it under (``ctx.llm.register_adapter(model.provider, model)``).
    :param checkpoints: yield to the event loop before each chunk, as a network stream does, so that a
        test can cancel mid-stream. Off by default: the script then streams without any await.
    :param prices: the ``Prices`` that ``model_info`` reports (``None``: no cost is known).

    Every request is recorded in ``requests``. A ``stream()`` call with the script exhausted
    streams ``Finish("error", Failure(code="UNKNOWN"))`` and is counted in ``overruns``, so that
    ``assert_consumed`` fails too.
    """

    def __init__(
        self,
        script: Iterable[Reply | str] = (),
        *,
        provider: str = "scripted",
        context_window: int = 128_000,
        max_output_tokens: int = 8192,
        checkpoints: bool = False,
        prices: Prices | None = None,
    ) -> None:
        self.provider = provider
        self.info = ModelInfo(context_window, max_output_tokens, prices)
        self.checkpoints = checkpoints
        #: every request received, in order (the exhausted ones too)
        self.requests: list[LlmRequest] = []
        #: how many replies have been played
        self.played = 0
        #: how many requests came after the script ran out
        self.overruns = 0
        self._script: deque[Reply] = deque(_as_reply(entry) for entry in script)
        self._calls = 0

    # ------------------------------------------------------------------ the script

    @property
    def remaining(self) -> int:
        """How many replies are left to play."""
        return len(self._script)

    def add(self, *replies: Reply | str) -> None:
        """Append replies to the script (a str is a text reply)."""
        self._script.extend(_as_reply(entry) for entry in replies)

    def assert_consumed(self) -> None:
        """Fail unless every reply was played and no request came after the script ran out."""
        if self._script:
            msg = (
                f"ScriptedModel: {len(self._script)} scripted replies were never requested "
                f"({self.played} played); the loop made fewer model calls than the test expects"
            )
            raise AssertionError(msg)
        if self.overruns:
            msg = (
                f"ScriptedModel: {self.overruns} requests came after the script ran out "
                f"(it had {self.played} replies); add more with ScriptedModel.add()"
            )
            raise AssertionError(msg)

    # ------------------------------------------------------------------ the adapter

    def model_info(self, model: str) -> ModelInfo:
        """The same ``ModelInfo`` for every model name, from the constructor."""
        return self.info

    def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        """Record ``request`` and stream the next reply (taken now, not at the first iteration)."""
        self.requests.append(request)
        if self._script:
            self.played += 1
            reply = self._script.popleft()
        else:
            self.overruns += 1
            message = (
                f"ScriptedModel: script exhausted after {self.played} replies; "
                "add more with ScriptedModel.add()"
            )
            reply = Reply.of_chunks(Finish("error", Failure(message, "UNKNOWN")))
        return self._play(reply)

    async def _play(self, reply: Reply) -> AsyncIterator[Chunk]:
        ids: dict[int, str] = {}
        for chunk in reply.chunks:
            if self.checkpoints:
                await anyio.lowlevel.checkpoint()
            if type(chunk) is ToolCallDelta and chunk.id == "":
                if chunk.index not in ids:
                    self._calls += 1
                    ids[chunk.index] = f"call_{self._calls}"
                chunk = attrs.evolve(chunk, id=ids[chunk.index])
            yield chunk
        if reply.then == "raise" and reply.exception is not None:
            raise reply.exception
        if reply.then == "hang":
            await anyio.sleep_forever()

    def __repr__(self) -> str:
        return (
            f"<ScriptedModel {self.provider!r}: {self.played} played, {self.remaining} remaining"
            f"{f', {self.overruns} overruns' if self.overruns else ''}>"
        )

    # ------------------------------------------------------------------ building replies

    @staticmethod
    def call(name: str, arguments: Mapping[str, Any] | str | None = None, *, id: str = "") -> ToolCall:
        """A tool-call block; ``arguments`` as a mapping is dumped to JSON, a str is kept raw.

        ``id=""`` (the default) means: assigned when played (``call_<n>``).
        """
        if arguments is None:
            raw = "{}"
        elif isinstance(arguments, str):
            raw = arguments
        else:
            raw = dumps_json(freeze_json(arguments, where="ScriptedModel.call", root="arguments"))
        return ToolCall(id, name, raw)

    @staticmethod
    def text(
        text: str, *, chunks: int = 1, usage: Usage | None = None, finish: FinishReason | None = None
    ) -> Reply:
        """A plain answer, split into ``chunks`` text deltas."""
        return Reply(Text(text), chunks=chunks, usage=usage, finish=finish)

    @staticmethod
    def reasoning(
        thought: str, answer: str | None = None, *, chunks: int = 1, usage: Usage | None = None
    ) -> Reply:
        """Reasoning, then (optionally) an answer."""
        blocks: list[ContentBlock] = [Reasoning(thought)]
        if answer is not None:
            blocks.append(Text(answer))
        return Reply(*blocks, chunks=chunks, usage=usage)

    @staticmethod
    def tool_call(
        name: str,
        arguments: Mapping[str, Any] | str | None = None,
        *,
        id: str = "",
        text: str | None = None,
        chunks: int = 1,
        usage: Usage | None = None,
    ) -> Reply:
        """One tool call (after ``text``, if given); finishes ``tool-calls``.

        For several calls in one reply: ``Reply(ScriptedModel.call(...), ScriptedModel.call(...))``.
        """
        call = ScriptedModel.call(name, arguments, id=id)
        blocks: tuple[ContentBlock, ...] = (call,) if text is None else (Text(text), call)
        return Reply(*blocks, chunks=chunks, usage=usage)

    @staticmethod
    def failure(
        failure: Failure | FailureCode = "SERVER",
        message: str = "scripted failure",
        *blocks: ContentBlock | str,
        status: int | None = None,
        retry_after: float | None = None,
        chunks: int = 1,
    ) -> Reply:
        """A failed call: ``blocks`` (if any), then ``Finish("error", failure)``.

        ``failure`` is a ``Failure`` or a code (``"RATE_LIMIT"``, ...) completed by ``message``,
        ``status`` and ``retry_after``. The ``ABORTED`` code finishes ``aborted``.
        """
        if not isinstance(failure, Failure):
            failure = Failure(message, failure, status, retry_after)
        reason: FinishReason = "aborted" if failure.code == "ABORTED" else "error"
        return Reply(*blocks, finish=reason, error=failure, chunks=chunks)

    @staticmethod
    def raises(exception: BaseException, *blocks: ContentBlock | str, chunks: int = 1) -> Reply:
        """The stream raises ``exception``: at once, or after streaming ``blocks``."""
        return Reply.of_chunks(*_deltas(blocks, chunks), then="raise", exception=exception)

    @staticmethod
    def hang(*blocks: ContentBlock | str, chunks: int = 1) -> Reply:
        """The stream yields ``blocks`` (if any), then waits until it is cancelled."""
        return Reply.of_chunks(*_deltas(blocks, chunks), then="hang")

    @staticmethod
    def no_finish(*blocks: ContentBlock | str, chunks: int = 1) -> Reply:
        """The stream yields ``blocks`` and ends without a ``Finish`` (a misbehaving provider)."""
        return Reply.of_chunks(*_deltas(blocks, chunks))

    @staticmethod
    def chunks(*chunks: Chunk) -> Reply:
        """Exactly these chunks, nothing added (same as ``Reply.of_chunks``)."""
        return Reply.of_chunks(*chunks)
