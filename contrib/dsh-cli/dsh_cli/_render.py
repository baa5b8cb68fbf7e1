"""Rendering the session-event stream: typed notes from events, one-line summaries, rich output.

``EventFeed`` turns ``SessionEvent``s into ``Note``s, live (text and reasoning from the streamed
``assistant/chunk`` deltas) or from history (from whole ``assistant/message`` events, as a log
read from disk has them). ``TranscriptPrinter`` prints notes on a rich console; ``dsh run``,
``dsh chat``, ``dsh sessions show`` and the demo all describe tools and turn ends with the same
functions, so they read alike everywhere.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TypeAlias

import attrs
from rich.console import Console
from rich.text import Text

from dsh_core import SessionEvent
from dsh_core.session_log import (
    ApprovalRequestedEvent,
    ApprovalResolvedEvent,
    AssistantChunkEvent,
    AssistantMessageEvent,
    ContextMessageEvent,
    PromptBlockedEvent,
    SteeringMessageEvent,
    StepStartEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    UserMessageEvent,
)

from ._diff import edit_diff
from ._sanitize import clean

__all__ = [
    "PROMPT_MARK",
    "BlockEnded",
    "EventFeed",
    "Note",
    "PromptBlocked",
    "ReasoningPiece",
    "RetryNote",
    "StepStarted",
    "TextPiece",
    "ToolFinished",
    "ToolStarted",
    "TranscriptPrinter",
    "TurnEnded",
    "TurnStarted",
    "UsageNote",
    "UserNote",
    "describe_call",
    "describe_reason",
    "describe_result",
    "format_tokens",
    "message_text",
    "plural",
    "reasoning_summary",
    "retry_line",
    "tool_call_line",
    "tool_result_line",
    "turn_end_line",
    "user_line",
]

# ---------------------------------------------------------------------- notes


@attrs.frozen
class TurnStarted:
    turn: int
    #: when the turn started (seconds since the epoch, from the event)
    time: float


@attrs.frozen
class StepStarted:
    turn: int
    step: int


@attrs.frozen
class UserNote:
    """A user-role message entered the history: ``kind`` is its source (``user``, ``steering``, ...)."""

    text: str
    kind: str


@attrs.frozen
class TextPiece:
    """Answer text: a streamed delta (live) or a whole text block (history)."""

    text: str


@attrs.frozen
class ReasoningPiece:
    """Reasoning text: a streamed delta (live) or a whole reasoning block (history)."""

    text: str


@attrs.frozen
class BlockEnded:
    """The assistant message of a step is complete (``interrupted`` when a cancel cut it short)."""

    interrupted: bool = False


@attrs.frozen
class UsageNote:
    input_tokens: int
    output_tokens: int


@attrs.frozen
class ToolStarted:
    call_id: str
    name: str
    arguments: str


@attrs.frozen
class ToolFinished:
    call_id: str
    name: str
    #: the result's text
    text: str
    #: ``None`` on success, else the ``tool/result`` error code (``DENIED``, ``TOOL_ERROR``, ...)
    error_code: str | None


@attrs.frozen
class PromptBlocked:
    reason: str


@attrs.frozen
class ApprovalAsked:
    """A call waits for approval (``approval/requested``)."""

    call_id: str
    tool: str
    reason: str


@attrs.frozen
class ApprovalAnswered:
    """``approval/resolved``: the decision, who answered, a denial's words, whether the arguments were edited."""

    call_id: str
    decision: str
    by: str
    reason: str | None
    edited: bool


@attrs.frozen
class RetryNote:
    """``llm/retry``: the request failed with ``code`` and is tried again (``attempt``, from 2) after ``delay`` s."""

    attempt: int
    delay: float
    code: str


@attrs.frozen
class TurnEnded:
    turn: int
    reason: Mapping[str, Any]
    #: when the turn ended (seconds since the epoch, from the event)
    time: float


Note: TypeAlias = (
    TurnStarted
    | StepStarted
    | UserNote
    | TextPiece
    | ReasoningPiece
    | BlockEnded
    | UsageNote
    | ToolStarted
    | ToolFinished
    | PromptBlocked
    | ApprovalAsked
    | ApprovalAnswered
    | RetryNote
    | TurnEnded
)


# ---------------------------------------------------------------------- the feed


def message_text(message: Mapping[str, Any], kind: str = "text") -> str:
    """The concatenated text of a message's blocks of ``kind`` (``text`` or ``reasoning``)."""
    content = message.get("content", ())
    return "".join(str(block.get("text", "")) for block in content if block.get("type") == kind)


class EventFeed:
    """Turns session events into notes. ``live=True`` takes text from the streamed chunks."""

    def __init__(self, *, live: bool) -> None:
        self.live = live
        self._calls: dict[str, str] = {}

    def feed(self, event: SessionEvent) -> list[Note]:
        data: Mapping[str, Any] = event.data
        kind = event.type
        if kind == TurnStartEvent.type:
            return [TurnStarted(int(data["turn"]), event.time)]
        if kind == StepStartEvent.type:
            return [StepStarted(int(data["turn"]), int(data["step"]))]
        if kind in (UserMessageEvent.type, SteeringMessageEvent.type, ContextMessageEvent.type):
            message = data["message"]
            source = message.get("source") or {}
            return [UserNote(clean(message_text(message)), clean(str(source.get("kind", "user"))))]
        if kind == AssistantChunkEvent.type:
            return self._chunk(data["chunk"])
        if kind == AssistantMessageEvent.type:
            return self._message(data)
        if kind == ToolCallEvent.type:
            call_id = str(data["call_id"])
            name = clean(str(data["name"]))
            self._calls[call_id] = name
            return [ToolStarted(call_id, name, clean(str(data["arguments"])))]
        if kind == ToolResultEvent.type:
            message = data["message"]
            call_id = str(message.get("call_id", ""))
            code = data.get("error_code")
            if code is None and message.get("is_error"):
                code = "TOOL_ERROR"
            name = self._calls.pop(call_id, "tool")
            text = clean(message_text(message))
            return [ToolFinished(call_id, name, text, None if code is None else clean(str(code)))]
        if kind == "llm/retry":
            failure = data.get("failure") or {}
            code = clean(str(failure.get("code", "UNKNOWN"))) if isinstance(failure, Mapping) else "UNKNOWN"
            return [RetryNote(int(data.get("attempt", 1)) + 1, float(data.get("delay", 0.0)), code)]
        if kind == PromptBlockedEvent.type:
            return [PromptBlocked(clean(str(data.get("reason", "blocked"))))]
        if kind == ApprovalRequestedEvent.type and not self.live:  # live, the prompt itself shows it
            return [ApprovalAsked(str(data["call_id"]), clean(str(data["tool"])), clean(str(data["reason"])))]
        if kind == ApprovalResolvedEvent.type and not self.live:
            said = data.get("reason")
            return [
                ApprovalAnswered(
                    str(data["call_id"]),
                    clean(str(data["decision"])),
                    clean(str(data["by"])),
                    None if said is None else clean(str(said)),
                    data.get("arguments") is not None,
                )
            ]
        if kind == TurnEndEvent.type:
            return [TurnEnded(int(data["turn"]), _clean_json(data["reason"]), event.time)]
        return []

    def feed_all(self, events: Iterable[SessionEvent]) -> list[Note]:
        return [note for event in events for note in self.feed(event)]

    def _chunk(self, chunk: Mapping[str, Any]) -> list[Note]:
        kind = chunk.get("type")
        if kind == "usage":
            return [UsageNote(int(chunk.get("input_tokens", 0)), int(chunk.get("output_tokens", 0)))]
        if not self.live:
            return []
        if kind == "text-delta":
            return [TextPiece(clean(str(chunk["text"])))]
        if kind == "reasoning-delta":
            return [ReasoningPiece(clean(str(chunk["text"])))]
        return []

    def _message(self, data: Mapping[str, Any]) -> list[Note]:
        interrupted = bool(data.get("interrupted", False))
        if self.live:
            return [BlockEnded(interrupted)]
        notes: list[Note] = []
        for block in data["message"].get("content", ()):
            if block.get("type") == "reasoning" and block.get("text"):
                notes.append(ReasoningPiece(clean(str(block["text"]))))
            elif block.get("type") == "text" and block.get("text"):
                notes.append(TextPiece(clean(str(block["text"]))))
        notes.append(BlockEnded(interrupted))
        return notes


def _clean_json(value: Any) -> Any:
    """A JSON value (a turn-end reason) with every string in it cleaned."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, Mapping):
        return {key: _clean_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_clean_json(item) for item in value]
    return value


# ---------------------------------------------------------------------- one-line summaries


_DECISION_WORDS: Final = {
    "once": "allowed once",
    "always": "allowed for this session",
    "deny": "denied",
    "cancelled": "cancelled",
}


def approval_line(note: ApprovalAnswered) -> Text:
    """``  ? allowed once by serve (arguments edited)``, ``  ? denied by cli: run the tests first``."""
    style = "red" if note.decision in ("deny", "cancelled") else "green"
    line = Text.assemble(("  ? ", "dim"), (f"{_DECISION_WORDS.get(note.decision, note.decision)} by {note.by}", style))
    if note.edited:
        line.append(" (arguments edited)", style="dim")
    if note.reason:
        line.append(f": {note.reason}", style="dim")
    return line


def plural(count: int, noun: str) -> str:
    """``1 turn``, ``2 turns``, ``0 events``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _shorten(text: str, width: int) -> str:
    text = " ".join(clean(text).split())
    return text if len(text) <= width else f"{text[: width - 1]}…"


#: the argument that best names what a workspace tool call is about
_KEY_ARGUMENT = ("command", "pattern", "path", "file_path", "query", "url")


def describe_call(name: str, arguments: str | Mapping[str, Any], width: int = 80) -> str:
    """``read_file greet.py``, ``bash $ python -m pytest -q``, ``tool(a=1, b="x")``: one short line."""
    parsed: Any = arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return _shorten(f"{name} {arguments}", width)
    if not isinstance(parsed, Mapping):
        return _shorten(f"{name} {parsed!r}", width)
    if name == "bash" and isinstance(parsed.get("command"), str):
        return _shorten(f"bash $ {parsed['command']}", width)
    for key in _KEY_ARGUMENT:
        value = parsed.get(key)
        if isinstance(value, str):
            rest = [
                f"{k}={json.dumps(v)}" for k, v in parsed.items() if k != key and k in ("pattern", "path")
            ]
            return _shorten(" ".join([name, value, *rest]), width)
    shown = ", ".join(f"{k}={json.dumps(v)}" for k, v in parsed.items())
    return _shorten(f"{name}({shown})", width)


#: lines of an error result shown (the whole message of an INVALID_ARGS, up to this many lines)
ERROR_LINES = 12


def describe_result(text: str, error_code: str | None, width: int = 100) -> str:
    """A tool result in short: its first line and how many more, or the error with its whole message.

    An error keeps its lines (up to ``ERROR_LINES``): a schema error names every bad argument.
    """
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if error_code is not None:
        first = lines[0].removeprefix("Error: ") if lines else ""
        shown = [_shorten(f"{error_code}: {first}", width)]
        shown += [_shorten(line, width) for line in lines[1:ERROR_LINES]]
        if len(lines) > ERROR_LINES:
            shown.append(f"(+{len(lines) - ERROR_LINES} lines)")
        return "\n".join(shown)
    if not lines:
        return "(no output)"
    if len(lines) == 1:
        return _shorten(lines[0], width)
    return _shorten(f"{lines[0]}  (+{len(lines) - 1} lines)", width)


def format_tokens(count: int) -> str:
    """``950``, ``1.2k``, ``34k``, ``1.5M``."""
    if count < 1000:
        return str(count)
    if count < 10_000:
        return f"{count / 1000:.1f}k"
    if count < 1_000_000:
        return f"{count // 1000}k"
    return f"{count / 1_000_000:.1f}M"


def reasoning_summary(text: str, width: int = 90) -> str:
    """Collapsed reasoning: its first line, shortened (``thought: Read the tests first…``)."""
    lines = text.strip().splitlines() or [""]
    summary = _shorten(lines[0], width)
    if len(lines) > 1 and not summary.endswith("…"):
        summary += " …"
    return f"thought: {summary}"


def describe_reason(reason: Mapping[str, Any]) -> str:
    """A ``turn/end`` reason for people: ``completed``, ``error: TRANSPORT: connection refused``."""
    kind = str(reason.get("kind", "?"))
    if kind == "error":
        failure = reason.get("failure") or {}
        code = failure.get("code", "UNKNOWN")
        return f"error: {code}: {failure.get('message', 'the turn failed')}"
    if kind == "stopped":
        return f"stopped: {reason.get('reason', 'a plugin stopped the turn')}"
    if kind == "aborted":
        return "cancelled"
    if kind == "max-tokens":
        return "stopped at the output token limit (max-tokens)"
    if kind == "rejected":
        return "rejected: the prompt was blocked"
    return kind


# ---------------------------------------------------------------------- rich lines

#: the mark before a user's prompt (U+203A, a single right-pointing angle quotation mark)
PROMPT_MARK = "\u203a "


def user_line(text: str, kind: str) -> Text:
    if kind == "steering":
        return Text.assemble(("↳ ", "cyan"), (text, "cyan"))
    if kind == "user":
        return Text.assemble((PROMPT_MARK, "bold green"), (text, "bold"))
    return Text.assemble((f"[{kind}] ", "dim"), (_shorten(text, 200), "dim"))


def tool_call_line(name: str, arguments: str) -> Text:
    return Text.assemble(("⏺ ", "yellow"), (describe_call(name, arguments), "bold"))


def tool_result_line(finished: ToolFinished) -> Text:
    summary = describe_result(finished.text, finished.error_code)
    if finished.error_code is None:
        return Text.assemble(("  ⎿ ", "dim"), (summary, "dim"))
    return Text.assemble(("  ⎿ ", "dim"), (summary.replace("\n", "\n    "), "red"))


def retry_line(note: RetryNote, max_attempts: int | None) -> Text:
    """``retrying 2/5 in 4 s (RATE_LIMIT)``."""
    of = f"/{max_attempts}" if max_attempts else ""
    delay = f"{note.delay:.0f}" if note.delay >= 1 or note.delay == 0 else f"{note.delay:.1f}"
    return Text(f"↻ retrying {note.attempt}{of} in {delay} s ({note.code})", style="yellow")


def turn_end_line(reason: Mapping[str, Any], *, seconds: float | None, tokens: tuple[int, int]) -> Text:
    kind = str(reason.get("kind", "?"))
    facts = []
    if seconds is not None:
        facts.append(f"{seconds:.1f}s")
    if any(tokens):
        facts.append(f"↑{format_tokens(tokens[0])} ↓{format_tokens(tokens[1])} tokens")
    tail = f"  ({' · '.join(facts)})" if facts else ""
    if kind == "completed":
        return Text(f"✓ done{tail}", style="dim")
    if kind == "aborted":
        return Text(f"⏹ cancelled{tail}", style="yellow")
    return Text(f"✗ {describe_reason(reason)}{tail}", style="red")


# ---------------------------------------------------------------------- the printer


class TranscriptPrinter:
    """Prints notes on a rich console as a readable transcript (live or from history).

    ``reasoning``: ``shown`` prints it dimmed, ``collapsed`` prints one dim line per block,
    ``hidden`` prints nothing.
    """

    def __init__(
        self, console: Console, *, reasoning: str = "shown", max_attempts: int | None = None
    ) -> None:
        self.console = console
        self.reasoning = reasoning
        #: attempts per request, for ``retrying 2/5``
        self.max_attempts = max_attempts
        self._open: str | None = None  # the kind of streamed block the cursor is in
        self._line_open = False  # text was printed and its line not ended yet
        self._fresh = True  # nothing of the open block printed yet
        self._tokens = [0, 0]
        self._turn_started: float | None = None
        self._reasoning_text = ""

    def print_all(self, notes: Sequence[Note]) -> None:
        for note in notes:
            self.note(note)
        self._close()

    def note(self, note: Note) -> None:
        console = self.console
        if isinstance(note, TextPiece | ReasoningPiece):
            self._piece(note)
            return
        self._close()
        if isinstance(note, TurnStarted):
            self._turn_started = note.time
            self._tokens = [0, 0]
        elif isinstance(note, UserNote):
            console.print(user_line(note.text, note.kind))
        elif isinstance(note, UsageNote):
            self._tokens[0] += note.input_tokens
            self._tokens[1] += note.output_tokens
        elif isinstance(note, ToolStarted):
            console.print(tool_call_line(note.name, note.arguments))
            diff = edit_diff(note.name, note.arguments)
            if diff is not None:
                console.print(diff)
        elif isinstance(note, ToolFinished):
            console.print(tool_result_line(note))
        elif isinstance(note, RetryNote):
            console.print(retry_line(note, self.max_attempts))
        elif isinstance(note, PromptBlocked):
            console.print(Text(f"✗ prompt blocked: {note.reason}", style="red"))
        elif isinstance(note, ApprovalAsked):
            console.print(Text(f"  ? approval asked: {note.reason}", style="yellow"))
        elif isinstance(note, ApprovalAnswered):
            console.print(approval_line(note))
        elif isinstance(note, TurnEnded):
            started = self._turn_started
            seconds = None if started is None else max(0.0, note.time - started)
            console.print(
                turn_end_line(note.reason, seconds=seconds, tokens=(self._tokens[0], self._tokens[1]))
            )
            self._turn_started = None

    def _piece(self, piece: TextPiece | ReasoningPiece) -> None:
        kind = "text" if isinstance(piece, TextPiece) else "reasoning"
        if self._open != kind:
            self._close()
            self._open = kind
            self._reasoning_text = ""
            self._line_open = False
            self._fresh = True
        if kind == "reasoning" and self.reasoning != "shown":
            self._reasoning_text += piece.text
            return
        text = piece.text.lstrip("\n") if self._fresh else piece.text
        if not text:
            return
        style = None
        if kind == "reasoning":
            style = "dim italic"
            text = f"✻ {text}" if self._fresh else text
        self._fresh = False
        self.console.print(text, end="", style=style, markup=False, highlight=False, soft_wrap=True)
        self._line_open = not text.endswith("\n")

    def _close(self) -> None:
        if self._open == "reasoning" and self.reasoning == "collapsed" and self._reasoning_text.strip():
            self.console.print(Text(f"✻ {reasoning_summary(self._reasoning_text)}", style="dim italic"))
        elif self._line_open:
            self.console.print()
        self._open = None
        self._line_open = False
