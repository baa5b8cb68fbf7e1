"""The ``compaction`` service: measure an agent's pressure, plan a span, summarise it, record the result.

Error tree::

    DshError
      + CompactionError(DshError, RuntimeError)     no model to measure with, or the history moved
        - CompactionBusyError                        the agent is not idle, or is being compacted
        - CompactionFailedError                      .failure: the summarisation call failed

One compaction appends exactly two events, back to back: the ``user/message`` (source
``{"kind": "compaction"}``) whose surface operation replaces the span, then
``compaction/summary`` with the facts. Until then nothing is appended, so a compaction that fails
or is cancelled leaves the log as it was.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, TypeVar

import anyio
import attrs

from dsh_core import (
    AgentDisposedError,
    CancelSignal,
    DshError,
    Message,
    SurfaceOp,
)
from dsh_core.llm import Failure, FinishReason, ModelInfo, Usage
from dsh_core.session_log import UserMessageEvent
from dsh_core.vocabulary import ObjectCodec

from ._config import DEFAULT_KEEP_RATIO, DEFAULT_SUMMARY_RATIO, CompactionConfig
from ._estimate import LogFacts, Pressure, measure, message_tokens, text_tokens, tools_tokens
from ._plan import Entry, Mode, choose_span, entry_of
from ._summarise import SummaryFailedError, build_request, summarise, summary_message

if TYPE_CHECKING:
    from dsh_core.services.sessions import Session
    from dsh_core.vocabulary import Agent

__all__ = [
    "CompactionBusyError",
    "CompactionError",
    "CompactionFailedError",
    "CompactionResult",
    "Compactor",
    "Reason",
]

logger = logging.getLogger("dsh.compaction")

#: Why a compaction ran: the threshold before a step, a context overflow, or ``compact_now``.
Reason: TypeAlias = Literal["threshold", "overflow", "manual"]
_T = TypeVar("_T")

#: The share of the summarising model's window left unused by the request, for the estimate's error.
_INPUT_MARGIN: Final = 0.9

class CompactionError(DshError, RuntimeError):
    """A compaction could not run (no model to measure with, or the history changed meanwhile)."""


class CompactionBusyError(CompactionError):
    """``compact_now`` was called while the agent runs a turn, or while it is being compacted."""


class CompactionFailedError(CompactionError):
    """The summarisation call failed (``failure`` says how); nothing was appended."""

    def __init__(self, message: str, *, failure: Failure) -> None:
        super().__init__(message)
        self.failure = failure


@attrs.frozen(kw_only=True)
class CompactionResult:
    """What one compaction did (the ``compaction/summary`` event holds the same facts)."""

    reason: Reason
    #: the turn and step it ran in (``None`` for a manual compaction while idle)
    turn: int | None
    step: int | None
    #: the replaced surface entries ``[start, end)``, and the seqs of the events they were
    start: int
    end: int
    shadowed_seqs: tuple[int, ...]
    #: seq of the ``user/message`` holding the summary, and of the ``compaction/summary`` event
    message_seq: int
    summary_seq: int
    #: estimated tokens of the next request before and after (calibrated when possible)
    tokens_before: int
    tokens_after: int
    context_window: int
    #: the model that wrote the summary (``provider/model``) and what that call cost
    model: str
    usage: Usage | None
    finish: FinishReason
    summary: str

    def to_json(self) -> dict[str, Any]:
        """The ``compaction/summary`` event data: every fact but the summary and its own seq."""
        return _RESULT_JSON.encode_plain(self)


_RESULT_JSON: Final = ObjectCodec(CompactionResult, exclude=("summary_seq", "summary"))


class _AgentState:
    """What the plugin remembers about one agent instance."""

    __slots__ = ("busy", "entries", "facts", "overflow", "prefix", "prefix_tokens", "ratio", "session")

    def __init__(self, session: Session) -> None:
        self.session = session
        self.facts = LogFacts()
        #: planning views of surface entries, by seq (events never change)
        self.entries: dict[int, Entry] = {}
        #: the calibration ratio last observed: used until the model reports a usage again
        self.ratio = 1.0
        #: set while a compaction of this agent runs; set (and cleared) when it ends
        self.busy: anyio.Event | None = None
        #: the (turn, step) whose context overflow was already answered with a retry
        self.overflow: tuple[int, int] | None = None
        #: the session prefix of the current agent instance, as the last pre-step gave it
        self.prefix: tuple[Message, ...] | None = None
        self.prefix_tokens: tuple[tuple[Message, ...], int] | None = None


class Compactor:
    """The ``compaction`` service (``ctx.compaction``); the plugin's hooks call into it."""

    def __init__(self, config: CompactionConfig | None = None) -> None:
        self._config = config or CompactionConfig()
        self._states: dict[str, _AgentState] = {}

    @property
    def config(self) -> CompactionConfig:
        """The settings in force."""
        return self._config

    # ------------------------------------------------------------------ public API

    async def measure(self, agent: Agent) -> Pressure:
        """The pressure of ``agent``'s next request: estimated tokens against its model's window.

        :raises CompactionError: the agent has no model (``AgentOptions.model`` unset and nothing
            logged yet), or its model is unknown to the LLM runtime.
        """
        state = self._state(agent)
        info = self._model_info(agent, state, self._model_of(agent, state))
        header, _ = await self._header(agent, state, state.prefix)
        return self._pressure(state, info, header)

    async def compact_now(self, agent: Agent) -> CompactionResult | None:
        """Compact ``agent``'s history now, whatever the pressure; only while it is idle.

        The recent tail (``keep_recent_tokens``) is kept when there is anything older; otherwise
        everything but the last exchange or step is summarised. Returns ``None`` when there is
        nothing to summarise. The session is flushed afterwards. Cancel the calling task to stop
        it: nothing is appended then.

        :raises CompactionBusyError: the agent is running a turn, or is already being compacted.
        :raises CompactionFailedError: the summarisation call failed; the log is untouched.
        :raises CompactionError: there is no model to summarise with.
        :raises AgentDisposedError: the agent is disposed.
        """
        if agent.status == "disposed":
            msg = f"agent {agent.id!r} is disposed; resume its session to compact it"
            raise AgentDisposedError(msg)
        if agent.status != "idle":
            msg = (
                f"agent {agent.id!r} is {agent.status}: compact_now works only while it is idle; "
                f"await agent.when_idle() first (a running agent is compacted before each step anyway)"
            )
            raise CompactionBusyError(msg)
        state = self._state(agent)
        if state.busy is not None:
            msg = f"agent {agent.id!r} is already being compacted; await that compaction instead"
            raise CompactionBusyError(msg)
        try:
            result = await self._exclusive(
                state, lambda: self._compact(agent, state, "manual", None, None, None)
            )
        except SummaryFailedError as exc:
            msg = f"agent {agent.id!r}: the summarisation call failed ({exc}); the history is unchanged"
            raise CompactionFailedError(msg, failure=exc.failure) from exc
        if result is not None:
            try:
                await agent.ctx.sessions.flush(agent.session)
            except Exception:  # the compaction is committed; durability follows at the next flush
                logger.warning(
                    "agent %r: flushing the session after compaction failed", agent.id, exc_info=True
                )
        return result

    # ------------------------------------------------------------------ what the hooks call

    async def before_step(
        self, agent: Agent, turn: int, step: int, prefix: tuple[Message, ...], signal: CancelSignal
    ) -> None:
        """``agent/pre-step``: compact when the next request is over the threshold.

        Never raises but for cancellation: a failure is logged as a warning and the step goes on
        with the history as it was.
        """
        try:
            state = self._state(agent)
            state.prefix = prefix
            await self._wait_idle(state)
            if signal.cancelled:
                return
            await self._exclusive(state, lambda: self._compact(agent, state, "threshold", signal, turn, step))
        except _NotMeasurable as exc:
            logger.debug("agent %r: no compaction check before step %d.%d: %s", agent.id, turn, step, exc)
        except Exception as exc:  # noqa: BLE001 - contained by contract: the turn goes on uncompacted
            _warn_failed(agent, "before", turn, step, exc)

    async def after_request_error(
        self, agent: Agent, failure: Failure, turn: int, step: int, signal: CancelSignal
    ) -> bool:
        """``agent/request-error`` on a context overflow: compact; ``True`` to retry the request.

        At most once per step: a second overflow in the same step gives up (the turn then fails).
        """
        try:
            state = self._state(agent)
            if state.overflow == (turn, step):
                logger.warning(
                    "agent %r: the request of step %d.%d overflowed the context window again after "
                    "compaction; the turn fails",
                    agent.id,
                    turn,
                    step,
                )
                return False
            state.overflow = (turn, step)
            await self._wait_idle(state)
            result = await self._exclusive(
                state, lambda: self._compact(agent, state, "overflow", signal, turn, step)
            )
        except Exception as exc:  # noqa: BLE001 - contained: no retry, the turn fails with the overflow
            _warn_failed(agent, "after a context overflow in", turn, step, exc)
            return False
        if result is None:
            logger.warning(
                "agent %r: the request of step %d.%d overflowed the context window and there is "
                "nothing left to compact; the turn fails",
                agent.id,
                turn,
                step,
            )
        return result is not None

    def forget(self, agent: Agent) -> None:
        """Drop what is remembered about ``agent`` (it was disposed)."""
        state = self._states.get(agent.id)
        if state is not None and state.session is agent.session:
            del self._states[agent.id]

    # ------------------------------------------------------------------ the compaction

    async def _compact(
        self,
        agent: Agent,
        state: _AgentState,
        reason: Reason,
        signal: CancelSignal | None,
        turn: int | None,
        step: int | None,
    ) -> CompactionResult | None:
        config = self._config
        session = agent.session
        model = self._model_of(agent, state)
        info = self._model_info(agent, state, model)
        header, tools = await self._header(agent, state, state.prefix)
        entries = self._entries(state, session)
        pressure = self._pressure(state, info, header, entries)
        if reason == "threshold" and not pressure.over:
            return None
        window = info.context_window
        ratio = pressure.ratio
        summariser = config.model or model
        try:
            summariser_info = info if summariser == model else self._model_info(agent, state, summariser)
        except _NotMeasurable as exc:  # a configuration mistake: say so (a warning), not quietly
            raise CompactionError(f"plugins.compaction.model: {exc}") from exc
        summary_tokens = config.summary_max_tokens or max(
            1, min(summariser_info.max_output_tokens, int(window * DEFAULT_SUMMARY_RATIO))
        )
        keep = config.keep_recent_tokens
        if keep is None:
            keep = int(window * DEFAULT_KEEP_RATIO)
        mode: Mode
        if reason == "overflow":
            mode = "largest"  # the model said it does not fit: the estimate was wrong, cut all we can
        elif reason == "manual":
            mode = "keep-or-largest"
        else:
            mode = "fit" if pressure.tokens > window else "keep"
        span = choose_span(
            entries,
            keep=keep / ratio,
            room=(pressure.threshold - summary_tokens) / ratio - header,
            min_tokens=summary_tokens / ratio if reason == "threshold" else 0,
            mode=mode,
        )
        if span is None:
            logger.debug(
                "agent %r: %s compaction found nothing to summarise (%d of %d tokens, keeping %d)",
                agent.id,
                reason,
                pressure.tokens,
                window,
                keep,
            )
            return None
        shadowed = tuple(entry.seq for entry in entries[: span.end])
        messages = [self._message(session, entry.seq) for entry in entries[: span.end] if entry.tokens]
        provider, _, name = summariser.partition("/")
        budget = int((summariser_info.context_window - summary_tokens) * _INPUT_MARGIN / ratio)
        request = build_request(
            messages,
            provider=provider,
            model=name,
            tools=tools,
            max_tokens=summary_tokens,
            budget=budget,
            session_id=session.id,
            signal=signal,
        )
        summary = await summarise(agent.ctx.llm.stream, request)
        if session.surface[: span.end] != shadowed:
            msg = (
                f"agent {agent.id!r}: the history changed while it was being summarised; nothing was replaced"
            )
            raise CompactionError(msg)
        # Commit: two appends, back to back (no await in between).
        message = summary_message(summary.text)
        appended = session.append(UserMessageEvent(message=message, surface=SurfaceOp.replace(span.start, span.end)))
        after = self._entries(state, session)
        tokens_after = math.ceil((header + sum(entry.tokens for entry in after)) * ratio)
        partial = CompactionResult(
            reason=reason,
            turn=turn,
            step=step,
            start=span.start,
            end=span.end,
            shadowed_seqs=shadowed,
            message_seq=appended.seq,
            summary_seq=appended.seq + 1,
            tokens_before=pressure.tokens,
            tokens_after=tokens_after,
            context_window=window,
            model=summariser,
            usage=summary.usage,
            finish=summary.finish,
            summary=summary.text,
        )
        recorded = session.append("compaction/summary", partial.to_json())
        result = attrs.evolve(partial, summary_seq=recorded.seq)
        state.entries = {entry.seq: entry for entry in after}  # forget the shadowed entries
        if summary.finish == "max-tokens":
            logger.warning(
                "agent %r: the summary hit its length limit (%d tokens) and may be cut short; "
                "raise plugins.compaction.summary_max_tokens",
                agent.id,
                summary_tokens,
            )
        logger.info(
            "agent %r: %s compaction replaced %d entries: about %d -> %d tokens (window %d)",
            agent.id,
            reason,
            span.end - span.start,
            pressure.tokens,
            tokens_after,
            window,
        )
        return result

    # ------------------------------------------------------------------ measuring

    def _state(self, agent: Agent) -> _AgentState:
        state = self._states.get(agent.id)
        if state is None or state.session is not agent.session:
            state = self._states[agent.id] = _AgentState(agent.session)
        state.facts.update(agent.session.events)
        return state

    def _model_of(self, agent: Agent, state: _AgentState) -> str:
        model = agent.options.model
        if not model and state.facts.header is not None:
            model = state.facts.header.model
        if not model:
            msg = (
                f"agent {agent.id!r} has no model to measure its context with: set "
                "AgentOptions(model='provider/model')"
            )
            raise _NotMeasurable(msg)
        return model

    def _model_info(self, agent: Agent, state: _AgentState, model: str) -> ModelInfo:
        try:
            info: ModelInfo = agent.ctx.llm.model_info(model)
        except Exception as exc:
            msg = f"agent {agent.id!r}: cannot read the context window of {model!r}: {exc}"
            raise _NotMeasurable(msg) from exc
        return info

    async def _header(
        self, agent: Agent, state: _AgentState, prefix: tuple[Message, ...] | None
    ) -> tuple[int, tuple[Mapping[str, Any], ...]]:
        """Estimated tokens of system prompt + tools + prefix, and the tool schemas."""
        prefix_tokens: int | None = None
        if prefix is not None:
            cached = state.prefix_tokens
            if cached is None or cached[0] is not prefix:
                cached = state.prefix_tokens = (prefix, sum(message_tokens(message) for message in prefix))
            prefix_tokens = cached[1]
        logged = state.facts.header
        if logged is not None:
            return logged.tokens(prefix_tokens), logged.tools
        # Nothing logged yet (the session's first request): assemble what the loop will send.
        ctx = agent.ctx
        try:
            system = ctx.system_prompt.render(await ctx.system_prompt.assemble(agent))
            tools: tuple[Mapping[str, Any], ...] = tuple(ctx.tools.schemas(agent))
        except Exception:  # the loop will meet the same failure and end the turn with it
            logger.debug(
                "agent %r: could not assemble the system prompt to measure it", agent.id, exc_info=True
            )
            system, tools = "", ()
        return text_tokens(system) + tools_tokens(tools) + (prefix_tokens or 0), tools

    def _entries(self, state: _AgentState, session: Session) -> list[Entry]:
        cache = state.entries
        events = session.events
        entries = []
        for seq in session.surface:
            entry = cache.get(seq)
            if entry is None:
                entry = cache[seq] = entry_of(events[seq])
            entries.append(entry)
        return entries

    def _pressure(
        self, state: _AgentState, info: ModelInfo, header: int, entries: Sequence[Entry] | None = None
    ) -> Pressure:
        if entries is None:
            entries = self._entries(state, state.session)
        window = info.context_window
        pressure = measure(
            header_tokens=header,
            entries=[(entry.seq, entry.tokens) for entry in entries],
            facts=state.facts,
            fallback_ratio=state.ratio,
            context_window=window,
            threshold=math.floor(window * self._config.threshold),
        )
        if pressure.calibrated:
            state.ratio = pressure.ratio
        return pressure

    @staticmethod
    def _message(session: Session, seq: int) -> Message:
        # A model-visible event's payload carries its message (read from data once, or as appended).
        message: Message = session.events[seq].payload.message  # type: ignore[union-attr]
        return message

    # ------------------------------------------------------------------ one at a time

    @staticmethod
    async def _wait_idle(state: _AgentState) -> None:
        """Wait for a compaction of this agent that is already running (a manual one) to end."""
        while state.busy is not None:
            await state.busy.wait()

    @staticmethod
    async def _exclusive(state: _AgentState, work: Callable[[], Awaitable[_T]]) -> _T:
        done = state.busy = anyio.Event()
        try:
            return await work()
        finally:
            state.busy = None
            done.set()


class _NotMeasurable(CompactionError):
    """No model or no window to measure against: automatic compaction quietly stands aside."""


def _warn_failed(agent: Agent, where: str, turn: int, step: int, exc: Exception) -> None:
    if isinstance(exc, SummaryFailedError | CompactionError):
        logger.warning(
            "agent %r: compaction %s step %d.%d failed, the history is unchanged: %s",
            agent.id,
            where,
            turn,
            step,
            exc,
        )
    else:
        logger.warning(
            "agent %r: compaction %s step %d.%d failed, the history is unchanged",
            agent.id,
            where,
            turn,
            step,
            exc_info=exc,
        )
