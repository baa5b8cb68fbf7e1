"""A recorded session read into what a replay re-issues: inputs, model streams, tool results, restarts.

The replay re-runs a session in lockstep with its recording: the recorded log says, by position,
what came from outside the loop, and the replay re-issues each of those inputs when its own log
has reached the same length. Everything else the loop produces by itself. From outside came:

* **inputs** — each ``inbox/queued`` (a ``send``, ``steer`` or running ``inject``), each idle
  ``context/message`` (an ``inject`` while idle), each ``inbox/cleared`` (a ``cancel`` with
  something queued), and the cancels that left no record of their own: a turn that ended
  ``aborted`` was cancelled just before the events the cancel produced (an interrupted
  ``assistant/message``, ``ABORTED`` tool results);
* **model streams** — each step attempt's ``assistant/chunk`` run (split at its ``Finish``), and
  each ``compaction/summary`` (the summariser's reply), in log order; a step that recorded no
  chunks is rebuilt from its ``assistant/message``;
* **tool results** — each ``tool/result`` by call id; for a call whose output was spilled
  (``spill/stored``), the whole text it returned, which the spill plugin stores again;
* **answers** — each call's first ``approval/resolved`` and ``question/answered`` (who answered,
  and how), and the calls that asked a question (``question/asked``: their body, the asking, runs);
* **restarts** — a crash (crash repair's events: ``TOOL_NOT_STARTED`` / ``TOOL_OUTCOME_UNKNOWN``
  results and ``turn/end {"kind": "interrupted"}``, appended when the session was resumed) or a
  clean resume (a full ``request/header`` after the first: a new agent instance began after the
  previous turn ended).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

import attrs

from dsh_core.services.sessions import SessionMeta
from dsh_core.session_log._catalogue import (
    ApprovalResolvedEvent,
    AssistantChunkEvent,
    AssistantMessageEvent,
    ContextMessageEvent,
    InboxClearedEvent,
    InboxQueuedEvent,
    QuestionAnsweredEvent,
    QuestionAskedEvent,
    RequestHeaderEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from dsh_core.session_log._event import SessionEvent
from dsh_core.vocabulary._content import (
    AssistantMessage,
    Reasoning,
    Text,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    message_from_json,
)
from dsh_core.vocabulary._llm_types import (
    Chunk,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    chunk_from_json,
)
from dsh_core.vocabulary._tool_types import ToolErrorCode

__all__ = [
    "Input",
    "InputKind",
    "ModelCall",
    "Plan",
    "RecordedResult",
    "Recording",
    "RecordingError",
    "Restart",
    "load_recording",
    "plan_replay",
]

#: error codes crash repair writes (never the result of a call that ran in the recorded process)
REPAIR_CODES: Final = frozenset({"TOOL_NOT_STARTED", "TOOL_OUTCOME_UNKNOWN"})

#: the event dsh-spill logs for an output it stored (read by name: dsh_core does not import the plugin)
SPILL_STORED: Final = "spill/stored"

#: how dsh-compaction wraps a summary in the message that replaces the span
_SUMMARY_FRAME: Final = re.compile(r"<conversation-summary>\n[^\n]*\n\n(.*)\n</conversation-summary>", re.DOTALL)

#: what re-issues an input: ``send``/``steer``/``inject`` (running), ``inject-idle`` and ``cancel``
InputKind: TypeAlias = Literal["send", "steer", "inject", "inject-idle", "cancel"]


class RecordingError(ValueError):
    """A recording that cannot be replayed: not a stored session, or a log that is not one."""


@attrs.frozen
class Recording:
    """A recorded session: its id, its meta (``None``: unknown) and its events."""

    session_id: str | None
    meta: SessionMeta | None
    events: tuple[SessionEvent, ...]


@attrs.frozen
class Input:
    """Something from outside the loop, re-issued when the replay's log has ``at`` events."""

    at: int
    kind: InputKind
    message: UserMessage | None = None


@attrs.frozen
class ModelCall:
    """One stream the model produced. ``cut``: the recorded stream ended early (cancel or crash);
    ``signalled``: the runtime saw the cancel between two chunks (it logged an ``aborted`` finish)."""

    at: int
    chunks: tuple[Chunk, ...]
    cut: bool
    signalled: bool = False


@attrs.frozen
class RecordedResult:
    """A call's recorded ``tool/result``: what the replay's tool body returns in recorded mode."""

    seq: int
    message: ToolResultMessage
    error_code: ToolErrorCode | None


@attrs.frozen
class Restart:
    """A new agent instance: at ``at`` events the recorded process ended (a crash, when ``repair``
    holds crash repair's events) and the session was resumed."""

    at: int
    repair: tuple[SessionEvent, ...] = ()

    @property
    def resumes_at(self) -> int:
        """The length of the log the resumed instance starts from."""
        return self.at + len(self.repair)


@attrs.frozen
class Plan:
    recording: Recording
    seed_length: int
    inputs: tuple[Input, ...]
    model_calls: tuple[ModelCall, ...]
    results: Mapping[str, RecordedResult]
    restarts: tuple[Restart, ...]
    #: the ``provider/model`` of the first request (the agent's model in the replay)
    model: str | None
    max_tokens: int | None
    temperature: float | None
    #: each call's recorded ``approval/resolved`` data (what the replay answers with, and who)
    approvals: Mapping[str, Any] = attrs.field(factory=dict)
    #: the ``ask_user`` calls that logged ``question/asked``, and each one's first ``question/answered`` data
    asked: frozenset[str] = frozenset()
    questions: Mapping[str, Any] = attrs.field(factory=dict)
    #: each spilled call's whole output (its ``spill/stored`` text): what its body returned
    spilled: Mapping[str, str] = attrs.field(factory=dict)


# ---------------------------------------------------------------------- loading


def load_recording(source: Iterable[SessionEvent] | str | os.PathLike[str]) -> Recording:
    """Events as given, or a stored session read from its ``session.jsonl`` (or its folder).

    A last line without its newline (a write the crash cut short) is left out, as the loaders do.
    """
    if isinstance(source, str | os.PathLike):
        return _read_file(Path(source))
    if isinstance(source, bytes | Mapping):
        msg = f"a recording is a sequence of SessionEvents or a path, got {type(source).__name__}"
        raise TypeError(msg)
    events = tuple(source)
    for index, event in enumerate(events):
        if not isinstance(event, SessionEvent):
            msg = f"recording[{index}] is a {type(event).__name__}, not a SessionEvent"
            raise TypeError(msg)
        if event.seq != index:
            msg = f"recording[{index}] has seq {event.seq}: a recording is a whole log, numbered from 0"
            raise RecordingError(msg)
    return Recording(None, None, events)


def _read_file(path: Path) -> Recording:
    if path.is_dir():
        path = path / "session.jsonl"
    try:
        raw = path.read_bytes()
    except OSError as exc:
        msg = f"cannot read the recorded session {path}: {exc.strerror or exc}"
        raise RecordingError(msg) from exc
    lines = raw.split(b"\n")
    if lines and lines[-1] != b"":
        lines = lines[:-1]  # a torn tail
    lines = [line for line in lines if line]
    if not lines:
        msg = f"{path}: empty, not a stored session"
        raise RecordingError(msg)
    try:
        header = json.loads(lines[0])
        session_id = header["id"]
        meta = SessionMeta.from_json(header.get("meta", {}))
        events = tuple(
            SessionEvent.from_json(json.loads(line), field=f"line {number}")
            for number, line in enumerate(lines[1:], start=2)
        )
    except (ValueError, KeyError, TypeError) as exc:
        msg = f"{path}: not a stored session log: {exc}"
        raise RecordingError(msg) from exc
    recording = load_recording(events)
    return Recording(session_id, meta, recording.events)


# ---------------------------------------------------------------------- planning


def plan_replay(recording: Recording) -> Plan:
    """Read ``recording`` into its inputs, model streams, tool results and restarts."""
    events = recording.events
    seed_length = recording.meta.seed_length if recording.meta is not None else 0
    repair_seqs, restarts = _restarts(events, seed_length)
    inputs: list[Input] = []
    calls: list[ModelCall] = []
    results: dict[str, RecordedResult] = {}
    approvals: dict[str, Any] = {}
    asked: set[str] = set()
    questions: dict[str, Any] = {}
    spilled: dict[str, str] = {}
    open_attempt: list[Chunk] | None = None
    attempt_at = 0
    chunked_steps: set[tuple[int, int]] = set()
    in_turn = False
    turn_start = 0
    first_header: Mapping[str, Any] | None = None

    def close_attempt(*, cut: bool, signalled: bool = False) -> None:
        nonlocal open_attempt
        if open_attempt is not None:
            calls.append(ModelCall(attempt_at, tuple(open_attempt), cut=cut, signalled=signalled))
            open_attempt = None

    for event in events[seed_length:]:
        kind, seq = event.type, event.seq
        data = _json(event)
        if seq in repair_seqs:
            close_attempt(cut=True)
            in_turn = False
            continue
        if kind == TurnStartEvent.type:
            in_turn, turn_start = True, seq
        elif kind == TurnEndEvent.type:
            close_attempt(cut=True)
            if data["reason"]["kind"] == "aborted":
                _add_implied_cancel(events, inputs, turn_start, seq)
            in_turn = False
        elif kind == InboxQueuedEvent.type:
            inputs.append(Input(seq, data["kind"], _user_message(data["message"])))
        elif kind == InboxClearedEvent.type:
            inputs.append(Input(seq, "cancel"))
        elif kind == ContextMessageEvent.type and not in_turn:
            inputs.append(Input(seq, "inject-idle", _user_message(data["message"])))
        elif kind == AssistantChunkEvent.type:
            if open_attempt is None:
                open_attempt, attempt_at = [], seq
            chunk = chunk_from_json(data["chunk"])
            chunked_steps.add((data["turn"], data["step"]))
            if type(chunk) is Finish and chunk.reason == "aborted":
                if open_attempt is None:
                    open_attempt, attempt_at = [], seq
                close_attempt(cut=True, signalled=True)  # the runtime's record of a cancel, not the model's
                continue
            open_attempt.append(chunk)
            if type(chunk) is Finish:
                close_attempt(cut=False)
        elif kind == AssistantMessageEvent.type:
            close_attempt(cut=True)
            if (data["turn"], data["step"]) not in chunked_steps and not data.get("interrupted"):
                calls.append(ModelCall(seq, _chunks_of(data), cut=False))
        elif kind == "compaction/summary":
            calls.append(ModelCall(seq, _summary_chunks(data, events), cut=False))
        elif kind == ToolResultEvent.type:
            message = message_from_json(data["message"])
            assert isinstance(message, ToolResultMessage)
            results[message.call_id] = RecordedResult(seq, message, data.get("error_code"))
        elif kind == RequestHeaderEvent.type and first_header is None:
            first_header = data
        elif kind == ApprovalResolvedEvent.type:
            approvals.setdefault(data["call_id"], data)
        elif kind == QuestionAskedEvent.type:
            asked.add(data["call_id"])
        elif kind == QuestionAnsweredEvent.type:
            questions.setdefault(data["call_id"], data)
        elif kind == SPILL_STORED and isinstance(data.get("call_id"), str) and isinstance(data.get("text"), str):
            spilled.setdefault(data["call_id"], data["text"])
    model, max_tokens, temperature = _first_call_config(first_header)
    return Plan(
        recording=recording,
        seed_length=seed_length,
        inputs=tuple(sorted(inputs, key=lambda item: item.at)),
        model_calls=tuple(calls),
        results=results,
        restarts=restarts,
        model=model,
        max_tokens=max_tokens,
        temperature=temperature,
        approvals=approvals,
        asked=frozenset(asked),
        questions=questions,
        spilled=spilled,
    )


def _restarts(events: Sequence[SessionEvent], seed_length: int) -> tuple[set[int], tuple[Restart, ...]]:
    """Where the recorded process ended and a new instance resumed the session."""
    repair: set[int] = set()
    restarts: list[Restart] = []
    last_turn_end = seed_length
    seen_header = False
    for event in events[seed_length:]:
        if event.type == TurnEndEvent.type and _json(event)["reason"]["kind"] == "interrupted":
            start = event.seq
            while start - 1 >= seed_length and _is_repair(events[start - 1], events):
                start -= 1
            repair.update(range(start, event.seq + 1))
            restarts.append(Restart(start, tuple(events[start : event.seq + 1])))
            last_turn_end = event.seq + 1
            seen_header = False
        elif event.type == TurnEndEvent.type:
            last_turn_end = event.seq + 1
        elif event.type == RequestHeaderEvent.type:
            if seen_header:
                restarts.append(Restart(last_turn_end))
            seen_header = True
    return repair, tuple(restarts)


def _json(event: SessionEvent) -> Any:
    """An event's data, as the JSON it is (the shapes of SPEC §7)."""
    return event.data


def _is_repair(event: SessionEvent, events: Sequence[SessionEvent]) -> bool:
    """A ``tool/result`` crash repair wrote, the ``tool/call`` of a ``TOOL_NOT_STARTED`` pair, or an
    approval or a question it closed."""
    if event.type in (ApprovalResolvedEvent.type, QuestionAnsweredEvent.type):
        return bool(_json(event).get("by") == "repair")
    if event.type == ToolResultEvent.type:
        return _json(event).get("error_code") in REPAIR_CODES
    if event.type == ToolCallEvent.type and event.seq + 1 < len(events):
        following = events[event.seq + 1]
        return following.type == ToolResultEvent.type and _json(following).get("error_code") == "TOOL_NOT_STARTED"
    return False


def _add_implied_cancel(events: Sequence[SessionEvent], inputs: list[Input], turn_start: int, end: int) -> None:
    """A turn that ended ``aborted`` with no ``inbox/cleared`` of its own was cancelled just before
    the events the cancel made (an interrupted message, ``ABORTED`` results)."""
    if any(item.kind == "cancel" and turn_start <= item.at < end for item in inputs):
        return
    at = end
    while at - 1 > turn_start and _made_by_cancel(events[at - 1], events, end):
        at -= 1
    inputs.append(Input(at, "cancel"))


def _made_by_cancel(event: SessionEvent, events: Sequence[SessionEvent], end: int) -> bool:
    if event.type in (ApprovalResolvedEvent.type, QuestionAnsweredEvent.type):
        return bool(_json(event).get("by") == "cancel")
    if event.type == AssistantChunkEvent.type:
        chunk = _json(event)["chunk"]
        return bool(chunk.get("type") == "finish" and chunk.get("reason") == "aborted")
    if event.type == AssistantMessageEvent.type:
        return bool(_json(event).get("interrupted"))
    if event.type == ToolResultEvent.type:
        return bool(_json(event).get("error_code") == "ABORTED")
    if event.type == ToolCallEvent.type:
        call_id = _json(event)["call_id"]
        return any(
            later.type == ToolResultEvent.type
            and _json(later).get("error_code") == "ABORTED"
            and _json(later)["message"].get("call_id") == call_id
            for later in events[event.seq + 1 : end]
        )
    return False


def _user_message(data: Any) -> UserMessage:
    message = message_from_json(data)
    if not isinstance(message, UserMessage):
        msg = f"a queued or injected message must be a user message, got role {data.get('role')!r}"
        raise RecordingError(msg)
    return message


def _chunks_of(data: Mapping[str, Any]) -> tuple[Chunk, ...]:
    """An ``assistant/message`` as the stream that would have produced it (for logs without chunks)."""
    message = message_from_json(data["message"])
    assert isinstance(message, AssistantMessage)
    chunks: list[Chunk] = []
    for index, block in enumerate(message.content):
        if type(block) is Text:
            chunks.append(TextDelta(index, block.text))
        elif type(block) is Reasoning:
            chunks.append(ReasoningDelta(index, block.text))
        elif type(block) is ToolCall:
            chunks.append(ToolCallDelta(index, block.id, block.name, block.arguments))
    usage = data.get("usage")
    if usage is not None:
        chunks.append(chunk_from_json({"type": "usage", **usage}))
    chunks.append(Finish("tool-calls" if message.tool_calls else "stop"))
    return tuple(chunks)


def _summary_chunks(data: Mapping[str, Any], events: Sequence[SessionEvent]) -> tuple[Chunk, ...]:
    """The summariser's reply of a ``compaction/summary``: its text (read out of the summary message
    at ``message_seq``, unwrapped from dsh-compaction's frame), usage and finish."""
    message = message_from_json(_json(events[data["message_seq"]])["message"])
    text = "".join(block.text for block in message.content if type(block) is Text)
    framed = _SUMMARY_FRAME.fullmatch(text)
    chunks: list[Chunk] = [TextDelta(0, framed.group(1) if framed else text)]
    usage = data.get("usage")
    if usage is not None:
        chunks.append(chunk_from_json({"type": "usage", **usage}))
    chunks.append(Finish(data.get("finish") or "stop"))
    return tuple(chunks)


def _first_call_config(header: Mapping[str, Any] | None) -> tuple[str | None, int | None, float | None]:
    if header is None:
        return None, None, None
    config = header.get("config") or {}
    provider, model = config.get("provider"), config.get("model")
    name = f"{provider}/{model}" if provider and model else None
    return name, config.get("max_tokens"), config.get("temperature")

