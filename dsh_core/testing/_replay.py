"""``replay_session``: re-run a recorded session through a fresh harness and compare the logs.

The replay runs the real loop with the plugins given; only what came from outside the recorded
process is played back from the recording (see ``_recording``): the user's inputs, re-issued when
the replayed log reaches the length at which they were recorded; the model, an adapter that
streams the recorded replies in order; and, in ``tools="recorded"`` mode, each tool's body, whose
result is the recorded one while pre-execute, approval, guards and post-execute still run (a
spilled result is the whole recorded text, so the spill plugin stores it again; an ``ask_user`` call
that asked runs its body, and the replay answers its question as recorded, by whom). A
recorded crash or resume is replayed as one: the instance is stopped, and a new one resumes from
the replayed log (with crash repair's recorded events), through a persistence service of the
replay's own. Then the replayed log is compared with the recorded one (``_replay_compare``).

Inputs are re-issued at the places where the loop awaits — in the model's stream, around a tool,
in the hooks of a step — and, between turns, by the replay itself once the agent is idle.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import anyio
import anyio.lowlevel
import attrs

from dsh_core.host._harness import Harness
from dsh_core.host._markers import hookimpl
from dsh_core.services.approvals import ApprovalAnswer
from dsh_core.services.sessions import SessionMeta
from dsh_core.session_log._catalogue import RequestHeaderEvent
from dsh_core.session_log._event import SessionEvent
from dsh_core.session_log._session import CheckedLog
from dsh_core.testing._recording import (
    REPAIR_CODES,
    Input,
    ModelCall,
    Plan,
    Recording,
    load_recording,
    plan_replay,
)
from dsh_core.testing._replay_compare import Divergence, first_divergence
from dsh_core.vocabulary._agent_types import AgentOptions
from dsh_core.vocabulary._content import Text as TextBlock
from dsh_core.vocabulary._llm_types import Failure, Finish, LlmRequest, ModelInfo, TextDelta
from dsh_core.vocabulary._tool_types import ToolExecution, ToolResult

if TYPE_CHECKING:
    from dsh_core.host._context import Context
    from dsh_core.vocabulary._agent_types import AgentHandle

__all__ = ["DEFAULT_MODEL_INFO", "ReplayReport", "assert_replay_matches", "replay_session"]

#: what ``ReplayModel.model_info`` answers when the caller gives nothing better
DEFAULT_MODEL_INFO = ModelInfo(context_window=131_072, max_output_tokens=8_192)
#: error codes of results whose call never ran a tool body
_NO_BODY = frozenset({"DENIED", "UNKNOWN_TOOL", "INVALID_ARGS"})


@attrs.frozen
class ReplayReport:
    """What a replay found. ``log`` is the replayed log; ``problems`` what the replay could not do
    (a model asked for more than was recorded, an input it could not place)."""

    recorded: tuple[SessionEvent, ...]
    log: tuple[SessionEvent, ...]
    first_divergence: Divergence | None
    problems: tuple[str, ...] = ()

    @property
    def diverged(self) -> bool:
        return self.first_divergence is not None

    def diff(self, context: int = 3) -> str:
        """A readable account: the divergence and the events around it, recorded and replayed."""
        found = self.first_divergence
        if found is None:
            return f"the replay matches the recording ({len(self.log)} events)"
        lines = [found.describe()]
        start = max(0, found.seq - context)
        for title, events in (("recorded", self.recorded), ("replayed", self.log)):
            lines.append(f"  {title}:")
            for event in events[start : found.seq + context + 1]:
                marker = ">" if event.seq == found.seq else " "
                lines.append(f"  {marker} {event.seq:>5} {event.type} {_brief(event)}")
        lines.extend(f"  problem: {problem}" for problem in self.problems)
        return "\n".join(lines)


def _brief(event: SessionEvent, width: int = 90) -> str:
    import json

    from dsh_core.vocabulary._json import thaw_json

    text = json.dumps(thaw_json(event.data), ensure_ascii=False, sort_keys=True)
    return text if len(text) <= width else text[: width - 3] + "..."


def assert_replay_matches(report: ReplayReport) -> None:
    """Fail a test with a readable diff when the replay diverged."""
    __tracebackhide__ = True
    if report.diverged:
        raise AssertionError("the replay diverged from the recording\n" + report.diff())


async def replay_session(
    events: Iterable[SessionEvent] | str | os.PathLike[str],
    *,
    plugins: Sequence[Any] = (),
    config: Mapping[str, Any] | None = None,
    tools: Literal["recorded", "live"] = "recorded",
    session_id: str | None = None,
    meta: Mapping[str, Any] | SessionMeta | None = None,
    model_info: ModelInfo = DEFAULT_MODEL_INFO,
    autoload: bool = False,
) -> ReplayReport:
    """Re-run every turn of a recorded session through a fresh harness with ``plugins``.

    ``events`` is a log (``SessionEvent``s from seq 0) or the path of a stored session's
    ``session.jsonl`` or folder, whose header gives the id and meta. ``tools="live"`` runs the
    tools for real. ``model_info`` is what the replayed model reports (compaction's thresholds
    depend on it). ``autoload`` also loads the installed plugins (``dsh sessions replay`` does).
    """
    if tools not in ("recorded", "live"):
        msg = f"tools must be 'recorded' or 'live', got {tools!r}"
        raise ValueError(msg)
    recording = load_recording(events)
    plan = plan_replay(recording)
    ident = session_id or recording.session_id or "replay"
    chosen_meta = _meta(meta, recording, plan)
    replayer = _Replayer(plan, tools=tools, model_info=model_info)
    harness = Harness(config=dict(config or {}), plugins=[*plugins, replayer], autoload=autoload)
    async with harness as ctx:
        log = await replayer.run(ctx, ident, chosen_meta)
    return ReplayReport(
        recorded=recording.events,
        log=log,
        first_divergence=first_divergence(recording.events, log),
        problems=tuple(replayer.problems),
    )


def _meta(given: Mapping[str, Any] | SessionMeta | None, recording: Recording, plan: Plan) -> SessionMeta:
    if isinstance(given, SessionMeta):
        return given
    if given is not None:
        return SessionMeta.from_json({"seed_length": plan.seed_length, **given})
    return recording.meta or SessionMeta()


# ---------------------------------------------------------------------- the plugin the replay adds


@attrs.frozen
class _Stored:
    meta: SessionMeta
    events: tuple[SessionEvent, ...]
    #: the replayed log is not checked by a loader: the resume checks it
    checked: CheckedLog | None = None


class _ReplayStore:
    """``session_persistence`` for the replay: a resume loads the replayed log so far."""

    def __init__(self) -> None:
        self.stored: dict[str, _Stored] = {}

    async def load(self, session_id: str) -> _Stored:
        return self.stored[session_id]

    async def exists(self, session_id: str) -> bool:
        return session_id in self.stored

    async def list(self) -> Sequence[Any]:
        return ()

    async def delete(self, session_id: str) -> None:
        self.stored.pop(session_id, None)

    def release(self, session_id: str) -> None:
        return None


class _Replayer:
    """The plugin a replay adds: the recorded model, tool bodies, approvals and inputs."""

    name = "replay"
    uses = ("approval", "question", "session_persistence")

    def __init__(self, plan: Plan, *, tools: str, model_info: ModelInfo) -> None:
        self.plan = plan
        self.tools_mode = tools
        self.model_info_value = model_info
        self.problems: list[str] = []
        self.store = _ReplayStore()
        self._inputs = list(plan.inputs)
        self._calls = list(plan.model_calls)
        self._restarts = list(plan.restarts)
        self._handle: AgentHandle | None = None
        self._crash = anyio.Event()
        #: where the recording ended inside a turn (the replayed log is cut there)
        self._ended_at: int | None = None
        #: the log of the instances stopped so far (each cut where its recorded process ended)
        self._done: tuple[SessionEvent, ...] = ()

    # ------------------------------------------------------------------ plugin

    def start(self, ctx: Context) -> None:
        if ctx.get_service("session_persistence") is None:
            ctx.provide("session_persistence", self.store)
        else:
            self.problems.append("a session_persistence service is loaded: restarts resume from it")
        if self.plan.asked:
            if ctx.get_service("question") is None:
                ctx.provide("question", _RecordedAnswers(self, ctx))
            else:
                self.problems.append("a question service is loaded: the recorded questions are asked to it")
        for provider in self._providers():
            ctx.llm.register_adapter(provider, self)

    def _providers(self) -> set[str]:
        found: set[str] = set()
        for event in self.plan.recording.events:
            data: Any = event.data
            if event.type == RequestHeaderEvent.type:
                found.add(str(data["config"]["provider"]))
            elif event.type == "compaction/summary" and isinstance(data.get("model"), str):
                found.add(data["model"].partition("/")[0])
        return {provider for provider in found if provider}

    # ------------------------------------------------------------------ the adapter

    def model_info(self, model: str) -> ModelInfo:
        return self.model_info_value

    async def stream(self, request: LlmRequest) -> Any:
        await self._opportunity()
        if not self._calls:
            message = (
                "replay: the model was asked for a reply the recording does not have "
                f"(all {len(self.plan.model_calls)} recorded replies were used)"
            )
            self.problems.append(message)
            yield Finish("error", Failure(message, "UNKNOWN"))
            return
        call: ModelCall = self._calls.pop(0)
        for chunk in call.chunks:
            yield chunk
            await self._opportunity(deliver=not call.signalled)
        if call.signalled:
            yield TextDelta(0, "")  # the runtime sees the cancel before this chunk, as it did when recorded
        if call.cut:  # the recorded stream was cut here: by a cancel (re-issued above) or a crash
            if self._restarts and self._restarts[0].repair:
                await self._stop_instance()
            await self._stop_instance("replay: the recording ends inside a model reply")

    # ------------------------------------------------------------------ tool bodies, hooks

    @hookimpl(trylast=True)
    async def dsh_tools_execute(self, execution: ToolExecution, call_next: Callable[[], Awaitable[ToolResult]]) -> ToolResult:
        await self._opportunity()
        if self.tools_mode == "live" or execution.call_id in self.plan.asked:
            return await call_next()  # an ask_user call's body asks: its answer is re-issued (``_RecordedAnswers``)
        recorded = self.plan.results.get(execution.call_id)
        if recorded is None or recorded.error_code in REPAIR_CODES:
            if self._restarts and self._restarts[0].repair:
                await self._stop_instance()  # the recorded process died while this tool ran
            await self._stop_instance(f"replay: the recording ends inside tool call {execution.call_id!r}")
        if recorded.error_code in _NO_BODY:
            return ToolResult(
                f"replay: the recorded call never ran its tool ({recorded.error_code}), but the replay ran it",
                is_error=True,
                error_code="TOOL_ERROR",
            )
        if recorded.error_code == "ABORTED":  # cancelled while it ran: the pipeline aborts the body
            self._cancel()
            await anyio.sleep_forever()
        message = recorded.message
        content: Any = message.content
        whole = self.plan.spilled.get(execution.call_id)
        if whole is not None:  # the body returned this; the preview in the log is the spill plugin's
            content = (TextBlock(whole), *(block for block in message.content if not isinstance(block, TextBlock)))
        return ToolResult(content, is_error=message.is_error, error_code=recorded.error_code)

    @hookimpl
    async def dsh_tools_pre_execute(self) -> None:
        await self._opportunity()

    @hookimpl(tryfirst=True)
    async def dsh_approval_answer(self, execution: ToolExecution) -> ApprovalAnswer | None:
        """The recorded answer, by whom it was given; a cancel or a crash is re-issued instead."""
        await self._opportunity()  # a recorded cancel or crash at this point happens here
        recorded = self.plan.approvals.get(execution.call_id)
        if recorded is None:  # the recording ends while the call waits: so does this instance
            await self._stop_instance()
        if recorded["by"] in ("cancel", "repair"):
            return None  # the re-issued cancel (or crash) resolves it, as it did
        arguments = recorded.get("arguments")
        return ApprovalAnswer(
            recorded["decision"],
            reason=recorded.get("reason"),
            arguments=None if arguments is None else dict(arguments),
            by=recorded["by"],
        )

    @hookimpl
    async def dsh_agent_pre_step(self) -> None:
        await self._opportunity()

    @hookimpl
    async def dsh_agent_request(self) -> None:
        await self._opportunity()

    @hookimpl
    async def dsh_agent_turn_continuation(self) -> None:
        await self._opportunity()

    # ------------------------------------------------------------------ inputs

    def _length(self) -> int:
        handle = self._handle
        return len(handle.agent.session.events) if handle is not None else 0

    async def _opportunity(self, *, deliver: bool = True) -> None:
        """Re-issue what is due at this length of the log, from inside the running turn.

        After a cancel, ``deliver`` waits at a checkpoint, where the cancelled step's scope ends.
        """
        length = self._length()
        restart = self._restarts[0] if self._restarts else None
        if restart is not None and restart.repair and length >= restart.at:
            await self._stop_instance()
        cancelled = False
        while self._inputs and self._inputs[0].at <= length and self._inputs[0].kind != "inject-idle":
            item = self._inputs.pop(0)
            self._issue(item)
            cancelled = cancelled or item.kind == "cancel"
            length = self._length()
        if cancelled and deliver:
            await anyio.lowlevel.checkpoint()

    async def _stop_instance(self, problem: str | None = None) -> NoReturn:
        """The recorded process ended here (a crash, or the end of the recording): stop this instance."""
        if problem is not None:
            self.problems.append(problem)
            self._ended_at = self._length()
        self._crash.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    def _issue(self, item: Input) -> None:
        assert self._handle is not None
        agent = self._handle.agent
        message = item.message
        if item.kind == "cancel":
            self._cancel()
        elif item.kind == "steer" and message is not None:
            agent.steer(list(message.content), source=message.source)
        elif item.kind in ("inject", "inject-idle") and message is not None:
            agent.inject(list(message.content), source=message.source)
        elif message is not None:
            agent.send(list(message.content), source=message.source)

    def _cancel(self) -> None:
        if self._handle is not None:
            self._handle.agent.cancel()

    # ------------------------------------------------------------------ the run

    async def run(self, ctx: Context, session_id: str, meta: SessionMeta) -> tuple[SessionEvent, ...]:
        plan = self.plan
        options = AgentOptions(model=plan.model, max_tokens=plan.max_tokens, temperature=plan.temperature)
        seed = plan.recording.events[: plan.seed_length]
        self._handle = await ctx.agents.create(session_id, meta=meta.to_json(), seed=seed, agent_options=options)
        self._options = options
        try:
            while await self._advance(ctx, session_id, meta):
                pass
        finally:
            handle, self._handle = self._handle, None
            if handle is not None:
                live = tuple(handle.agent.session.events)
                await handle.dispose()
                self._done = live if self._ended_at is None else live[: self._ended_at]
        return self._done

    async def _advance(self, ctx: Context, session_id: str, meta: SessionMeta) -> bool:
        """Wait for the agent to settle (or the recorded process to end); then issue what comes next."""
        assert self._handle is not None
        agent = self._handle.agent
        async with anyio.create_task_group() as group:

            async def crash_watch() -> None:
                await self._crash.wait()
                group.cancel_scope.cancel()

            group.start_soon(crash_watch)
            await agent.when_idle()
            group.cancel_scope.cancel()
        length = len(agent.session.events)
        if self._ended_at is not None:
            return False
        restart = self._restarts[0] if self._restarts else None
        if restart is not None and (self._crash.is_set() or length >= restart.at):
            self._restarts.pop(0)
            self._crash = anyio.Event()
            await self._resume(ctx, session_id, meta, restart)
            return True
        if not self._inputs:
            return False
        item = self._inputs[0]
        if item.at > length:
            self.problems.append(
                f"replay: the recording has an input ({item.kind}) at seq {item.at}, but the replayed log "
                f"settled at {length} events"
            )
            return False
        self._issue(self._inputs.pop(0))
        return True

    async def _resume(self, ctx: Context, session_id: str, meta: SessionMeta, restart: Any) -> None:
        """Stop the instance where its recorded process ended, and resume the session from there."""
        assert self._handle is not None
        events = tuple(self._handle.agent.session.events)[: restart.at]
        await self._handle.dispose()
        self._handle = None
        resumed = (*events, *_renumbered(restart.repair, len(events)))
        self.store.stored[session_id] = _Stored(meta, resumed)
        self._handle = await ctx.agents.resume(session_id, agent_options=self._options)


class _RecordedAnswers:
    """The ``question`` service of a replay: answers each question as recorded, by whom it was answered.

    A question the recording closed by a cancel or a crash waits: the re-issued cancel or crash
    closes it, as it did. One the recording leaves unanswered ends the instance there.
    """

    question_by = "replay"

    def __init__(self, replayer: _Replayer, ctx: Context) -> None:
        self._replayer = replayer
        self._ctx = ctx

    async def ask(self, execution: ToolExecution, question: Any) -> Mapping[str, Any] | None:
        from dsh_core.services.questions import answer_question

        replayer = self._replayer
        await replayer._opportunity()  # a recorded cancel or crash at this point happens here
        recorded = replayer.plan.questions.get(execution.call_id)
        if recorded is None:  # the recording ends while the question waits: so does this instance
            await replayer._stop_instance()
        if recorded["by"] == "unavailable":
            return None  # nobody could be asked
        session = self._ctx.sessions.get(execution.session_id) if execution.session_id else None
        if recorded["by"] not in ("cancel", "repair") and session is not None:
            # answered through the API, so the record names who answered; this ask is then closed
            await answer_question(self._ctx, session, execution.call_id, recorded["answers"], by=recorded["by"])
        await anyio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover


def _renumbered(events: Sequence[SessionEvent], start: int) -> tuple[SessionEvent, ...]:
    return tuple(attrs.evolve(event, seq=start + index) for index, event in enumerate(events))
