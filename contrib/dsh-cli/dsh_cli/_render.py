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
from rich.cells import cell_len
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
    QuestionAnsweredEvent,
    QuestionAskedEvent,
    SteeringMessageEvent,
    StepStartEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    UserMessageEvent,
)

from ._diff import file_diff, history_diff
from ._sanitize import clean

__all__ = [
    "PROMPT_MARK",
    "TODO_UPDATED",
    "BlockEnded",
    "EventFeed",
    "Note",
    "PromptBlocked",
    "QuestionLines",
    "QuestionsAnswered",
    "QuestionsAsked",
    "ReasoningPiece",
    "RetryNote",
    "StepStarted",
    "TextPiece",
    "TodoNote",
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
    "format_window",
    "history_lines",
    "message_text",
    "plural",
    "question_lines",
    "question_text",
    "reasoning_summary",
    "retry_line",
    "tool_call_line",
    "tool_result_line",
    "turn_end_line",
    "user_line",
    "whole_call",
    "wrap_exact",
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
class TodoNote:
    """``todo/updated``: the agent's whole todo list as it became (each ``(status, content)``)."""

    todos: tuple[tuple[str, str], ...]


@attrs.frozen
class QuestionsAsked:
    """``question/asked``: an ``ask_user`` call's questions, each ``(question, options, multi_select)``."""

    call_id: str
    questions: tuple[tuple[str, tuple[str, ...], bool], ...]


@attrs.frozen
class QuestionsAnswered:
    """``question/answered``: who answered and the answers, each ``(question id, answer text)``."""

    call_id: str
    by: str
    answers: tuple[tuple[str, str], ...]


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
    | TodoNote
    | QuestionsAsked
    | QuestionsAnswered
    | RetryNote
    | TurnEnded
)


# ---------------------------------------------------------------------- the feed


#: the event type the todo plugin logs (read by name: the CLI does not import the plugin)
TODO_UPDATED: Final = "todo/updated"


def _todo_note(data: Mapping[str, Any]) -> Note:
    todos = data.get("todos")
    items = [item for item in todos if isinstance(item, Mapping)] if isinstance(todos, Sequence) else []
    return TodoNote(tuple((clean(str(item.get("status", ""))), clean(str(item.get("content", "")))) for item in items))


def _asked_note(data: Mapping[str, Any]) -> Note:
    questions = [item for item in data.get("questions") or () if isinstance(item, Mapping)]
    return QuestionsAsked(
        str(data.get("call_id", "")),
        tuple(
            (
                clean(str(item.get("question", ""))),
                tuple(clean(str(option)) for option in item.get("options") or ()),
                bool(item.get("multi_select", False)),
            )
            for item in questions
        ),
    )


def _answered_note(data: Mapping[str, Any]) -> Note:
    answers = data.get("answers")
    pairs = answers.items() if isinstance(answers, Mapping) else ()
    return QuestionsAnswered(
        str(data.get("call_id", "")),
        clean(str(data.get("by", ""))),
        tuple((clean(str(key)), _answer_text(value)) for key, value in pairs),
    )


def _answer_text(value: object) -> str:
    """An answer as one line: a multi-select's options joined by commas."""
    if isinstance(value, list | tuple):
        return ", ".join(clean(str(item)) for item in value)
    return clean(str(value))


#: events only a transcript from history prints (live, the todo checklist and the question show them)
_HISTORY_ONLY: Final = {
    TODO_UPDATED: _todo_note,
    QuestionAskedEvent.type: _asked_note,
    QuestionAnsweredEvent.type: _answered_note,
}


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
            kind = source.get("kind", "user")
            if kind == "plugin" and source.get("plugin"):  # named by the plugin that added it
                kind = source["plugin"]
            return [UserNote(clean(message_text(message)), clean(str(kind)))]
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
        if not self.live and kind in _HISTORY_ONLY:  # live, the checklist and the question show them
            return [_HISTORY_ONLY[kind](data)]
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


_TODO_MARKS: Final = {"completed": ("✔", "green"), "in_progress": ("▶", "bold cyan"), "pending": ("○", "")}
#: what a question's closing ``by`` means when it carries no answers
_CLOSED_BY: Final = {"cancel": "cancelled", "repair": "closed by repair", "unavailable": "nobody could be asked"}


def history_lines(note: TodoNote | QuestionsAsked | QuestionsAnswered) -> list[Text]:
    """A todo list, an ``ask_user`` call's questions or their answers, as a transcript shows them."""
    if isinstance(note, TodoNote):
        done = sum(1 for status, _ in note.todos if status == "completed")
        lines = [Text.assemble(("  ☰ todo ", "bold"), (f"{done}/{len(note.todos)} done", "dim"))]
        for status, content in note.todos:
            mark, style = _TODO_MARKS.get(status, ("?", ""))
            lines.append(Text.assemble(("    ", ""), (f"{mark} ", style), (content, "dim" if status == "completed" else "")))
        return lines
    if isinstance(note, QuestionsAsked):
        lines = []
        for question, options, many in note.questions:
            line = Text.assemble(("  ? ", "yellow"), (question, "bold"))
            if options:
                line.append(f"  ({' / '.join(options)}{'; more than one' if many else ''})", style="dim")
            lines.append(line)
        return lines
    if not note.answers:
        words = _CLOSED_BY.get(note.by, f"closed by {note.by}")
        return [Text.assemble(("  ↳ ", "dim"), (f"{words}: no answers", "red"))]
    answers = " · ".join(f"{key}: {value}" for key, value in note.answers)
    return [Text.assemble(("  ↳ ", "dim"), (f"answered by {note.by}: ", "green"), (answers, ""))]


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


def whole_call(name: str, arguments: str | Mapping[str, Any]) -> str:
    """Every character of a call, for a question about it: a ``bash`` command as written (its lines
    kept), a file edit by its path (its diff is shown beside it), any other call with all its arguments."""
    parsed: Any = arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return clean(f"{name} {arguments}")
    if not isinstance(parsed, Mapping):
        return clean(f"{name} {parsed!r}")
    if name == "bash" and isinstance(parsed.get("command"), str):
        rest = {k: v for k, v in parsed.items() if k != "command"}
        extra = "".join(f"\n({k}={json.dumps(v)})" for k, v in rest.items())
        return clean(f"bash $ {parsed['command']}{extra}")
    if name in ("edit_file", "write_file") and isinstance(parsed.get("path"), str):
        rest = {k: v for k, v in parsed.items() if k not in ("path", "content", "old_text", "new_text")}
        shown = "".join(f" {k}={json.dumps(v)}" for k, v in rest.items())
        return clean(f"{name} {parsed['path']}{shown}")
    shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in parsed.items())
    return clean(f"{name}({shown})")


def _fitting(text: str, width: int) -> int:
    """How many characters of ``text`` fit in ``width`` cells (at least one)."""
    used = 0
    for index, char in enumerate(text):
        used += cell_len(char)
        if used > width:
            return max(1, index)
    return len(text)


def wrap_exact(text: str, width: int) -> list[str]:
    """``text`` cut into lines of at most ``width`` cells, at a space where one is near; joined they are
    ``text`` again, character for character (its own newlines end lines too)."""
    width = max(8, width)
    lines: list[str] = []
    for line in text.expandtabs(4).split("\n"):
        while cell_len(line) > width:
            cut = _fitting(line, width)
            space = line.rfind(" ", 0, cut)
            if space >= cut // 2:
                cut = space + 1
            lines.append(line[:cut])
            line = line[cut:]
        lines.append(line)
    return lines


@attrs.frozen
class QuestionLines:
    """An approval question laid out for a terminal ``width``: the whole call, then the reason, wrapped."""

    call: tuple[str, ...]
    reason: tuple[str, ...]


def question_lines(name: str, arguments: str | Mapping[str, Any], reason: str, width: int) -> QuestionLines:
    """The call (after ``? allow ``, continued under it) and the reason (after ``  why: ``), nothing cut."""
    call = wrap_exact(whole_call(name, arguments), width - 8)
    why = wrap_exact(clean(reason), width - 8)
    return QuestionLines(tuple(call), tuple(why))


def question_text(lines: QuestionLines) -> str:
    """The question as plain lines: ``? allow CALL`` (continued under it), ``  why:  REASON``, each ending in a newline."""
    call = [f"{'? allow ' if i == 0 else ' ' * 8}{line}" for i, line in enumerate(lines.call)]
    why = [f"{'  why:  ' if i == 0 else ' ' * 8}{line}" for i, line in enumerate(lines.reason)]
    return "".join(f"{line}\n" for line in (*call, *why))


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


def format_window(count: int) -> str:
    """A context window or output limit: ``8k`` for 8192 and ``32k`` for 32768 alike (powers of two in
    KiB, as model cards write them), else ``format_tokens`` (``128k`` for 128000)."""
    if count >= 1024 and count % 1024 == 0 and count < 1_048_576:
        return f"{count // 1024}k"
    return format_tokens(count)


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
        self,
        console: Console,
        *,
        reasoning: str = "shown",
        max_attempts: int | None = None,
        cwd: str | None = None,
        markdown: bool = False,
    ) -> None:
        self.console = console
        #: render each answer as Markdown once it is whole (a transcript from history at a terminal)
        self.markdown = markdown
        self._answer = ""
        #: live, the workspace: a file edit's diff is drawn from the file before it runs; ``None``
        #: (history): from the call and its result, once the result is known
        self.cwd = cwd
        self._calls: dict[str, ToolStarted] = {}
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
            if self.cwd is not None:
                diff = file_diff(note.name, note.arguments, self.cwd)
                if diff is not None:
                    console.print(diff)
            else:
                self._calls[note.call_id] = note
        elif isinstance(note, ToolFinished):
            call = self._calls.pop(note.call_id, None)
            if call is not None:
                diff = history_diff(call.name, call.arguments, note.text, note.error_code is not None)
                if diff is not None:
                    console.print(diff)
            console.print(tool_result_line(note))
        elif isinstance(note, RetryNote):
            console.print(retry_line(note, self.max_attempts))
        elif isinstance(note, PromptBlocked):
            console.print(Text(f"✗ prompt blocked: {note.reason}", style="red"))
        elif isinstance(note, ApprovalAsked):
            console.print(Text(f"  ? approval asked: {note.reason}", style="yellow"))
        elif isinstance(note, ApprovalAnswered):
            console.print(approval_line(note))
        elif isinstance(note, TodoNote | QuestionsAsked | QuestionsAnswered):
            for line in history_lines(note):
                console.print(line)
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
        if kind == "text" and self.markdown:
            self._answer += piece.text
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
        if self._answer.strip():
            from ._markdown import render_block

            self.console.print(render_block(self._answer.strip("\n")))
        self._answer = ""
        if self._open == "reasoning" and self.reasoning == "collapsed" and self._reasoning_text.strip():
            self.console.print(Text(f"✻ {reasoning_summary(self._reasoning_text)}", style="dim italic"))
        elif self._line_open:
            self.console.print()
        self._open = None
        self._line_open = False
