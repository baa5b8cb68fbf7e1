"""Rendering the event stream: notes from events, one-line summaries, the transcript printer."""

from __future__ import annotations

import io

from dsh_cli._exit import ExitCode, exit_code_for
from dsh_cli._render import (
    PROMPT_MARK,
    BlockEnded,
    EventFeed,
    ReasoningPiece,
    TextPiece,
    ToolFinished,
    ToolStarted,
    TranscriptPrinter,
    TurnEnded,
    TurnStarted,
    UsageNote,
    UserNote,
    describe_call,
    describe_reason,
    describe_result,
    format_tokens,
)
from rich.console import Console

from dsh_core import SessionEvent


def _event(seq: int, kind: str, data: dict[str, object]) -> SessionEvent:
    return SessionEvent.from_json({"type": kind, "seq": seq, "time": 100.0 + seq, "data": data})


def _user(text: str, kind: str = "user") -> dict[str, object]:
    return {"role": "user", "id": "u", "content": [{"type": "text", "text": text}], "source": {"kind": kind}}


LOG = [
    _event(0, "turn/start", {"turn": 1}),
    _event(1, "user/message", {"message": _user("fix it")}),
    _event(
        2,
        "assistant/chunk",
        {"turn": 1, "step": 1, "chunk": {"type": "reasoning-delta", "index": 0, "text": "hm"}},
    ),
    _event(
        3,
        "assistant/chunk",
        {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 1, "text": "Look"}},
    ),
    _event(
        4,
        "assistant/chunk",
        {
            "turn": 1,
            "step": 1,
            "chunk": {
                "type": "usage",
                "input_tokens": 1200,
                "output_tokens": 30,
                "cache_read_tokens": 0,
                "cache_write_tokens": 0,
                "reasoning_tokens": 0,
            },
        },
    ),
    _event(
        5,
        "assistant/message",
        {
            "turn": 1,
            "step": 1,
            "message": {
                "role": "assistant",
                "id": "a",
                "content": [
                    {"type": "reasoning", "text": "hm", "signature": None},
                    {"type": "text", "text": "Look"},
                    {"type": "tool-call", "id": "c1", "name": "read_file", "arguments": '{"path": "a.py"}'},
                ],
                "provider": "p",
                "model": "m",
            },
        },
    ),
    _event(
        6,
        "tool/call",
        {"turn": 1, "step": 1, "call_id": "c1", "name": "read_file", "arguments": '{"path": "a.py"}'},
    ),
    _event(
        7,
        "tool/result",
        {
            "turn": 1,
            "step": 1,
            "message": {
                "role": "tool",
                "id": "t",
                "call_id": "c1",
                "content": [{"type": "text", "text": "x\ny"}],
                "is_error": False,
            },
        },
    ),
    _event(8, "turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
]


def test_live_feed_uses_the_chunks() -> None:
    """Live, text and reasoning come from the deltas; the whole message only closes the block."""
    notes = EventFeed(live=True).feed_all(LOG)
    assert notes == [
        TurnStarted(1, 100.0),
        UserNote("fix it", "user"),
        ReasoningPiece("hm"),
        TextPiece("Look"),
        UsageNote(1200, 30),
        BlockEnded(False),
        ToolStarted("c1", "read_file", '{"path": "a.py"}'),
        ToolFinished("c1", "read_file", "x\ny", None),
        TurnEnded(1, {"kind": "completed"}, 108.0),
    ]


def test_history_feed_uses_the_messages() -> None:
    """From history, text and reasoning come from the whole assistant message (no deltas doubled)."""
    notes = EventFeed(live=False).feed_all(LOG)
    assert [n for n in notes if isinstance(n, TextPiece | ReasoningPiece)] == [
        ReasoningPiece("hm"),
        TextPiece("Look"),
    ]


def test_transcript_printer() -> None:
    """The printer writes a readable transcript: prompt, collapsed thought, answer, tool, result, turn end."""
    out = io.StringIO()
    printer = TranscriptPrinter(Console(file=out, width=100, color_system=None), reasoning="collapsed")
    printer.print_all(EventFeed(live=False).feed_all(LOG))
    assert out.getvalue().splitlines() == [
        f"{PROMPT_MARK}fix it",
        "✻ thought: hm",
        "Look",
        "⏺ read_file a.py",
        "  ⎿ x (+1 lines)",
        "✓ done  (8.0s · ↑1.2k ↓30 tokens)",
    ]


def test_describe_call() -> None:
    """A call is named by its main argument; others show their arguments; bad JSON is shown raw."""
    assert describe_call("bash", '{"command": "pytest -q"}') == "bash $ pytest -q"
    assert describe_call("read_file", {"path": "a.py", "offset": 3}) == "read_file a.py"
    assert describe_call("grep", {"pattern": "TODO", "path": "src"}) == 'grep TODO path="src"'
    assert describe_call("custom", {"n": 1}) == "custom(n=1)"
    assert describe_call("custom", "{not json") == "custom {not json"
    assert len(describe_call("bash", {"command": "x" * 500})) == 80


def test_describe_result_and_reason() -> None:
    """Results are one line; errors lead with their code; reasons read as words."""
    assert describe_result("", None) == "(no output)"
    assert describe_result("one\ntwo\nthree", None) == "one (+2 lines)"
    assert describe_result("Error: nope", "DENIED") == "DENIED: nope"
    failure = {"kind": "error", "failure": {"code": "AUTH", "message": "bad key"}}
    assert describe_reason(failure) == "error: AUTH: bad key"
    assert describe_reason({"kind": "aborted"}) == "cancelled"
    assert format_tokens(999) == "999"
    assert format_tokens(1234) == "1.2k"
    assert format_tokens(56_000) == "56k"


def test_exit_codes_follow_the_turn_end() -> None:
    """Each turn/end reason has its exit status; unknown ones are errors."""
    assert exit_code_for({"kind": "completed"}) == ExitCode.OK
    assert exit_code_for({"kind": "error"}) == ExitCode.ERROR
    assert exit_code_for({"kind": "max-tokens"}) == ExitCode.MAX_TOKENS
    assert exit_code_for({"kind": "stopped", "reason": "x"}) == ExitCode.STOPPED
    assert exit_code_for({"kind": "rejected"}) == ExitCode.REJECTED
    assert exit_code_for({"kind": "aborted"}) == ExitCode.INTERRUPTED
    assert exit_code_for({"kind": "disposed"}) == ExitCode.ERROR


def test_front_is_exact() -> None:
    """dsh_cli exports exactly its __all__ (each name loaded on first use), sorted."""
    import dsh_cli

    for name in dsh_cli.__all__:
        getattr(dsh_cli, name)
    assert set(dsh_cli.__all__) == {name for name in vars(dsh_cli) if not name.startswith("_")}
    assert dsh_cli.__all__ == sorted(dsh_cli.__all__)


def test_a_list_is_cut_item_by_item_as_it_streams() -> None:
    """Each list item is finished when the next one starts, so it is rendered before the list ends."""
    from dsh_cli._markdown import ListItem, MarkdownBlocks

    blocks = MarkdownBlocks()
    assert blocks.feed("Intro.\n\n- point **10**\n  nested detail\n") == ["Intro."]
    second = blocks.feed("- second\n")
    assert second == ["- point **10**\n  nested detail"]
    assert isinstance(second[0], ListItem)
    assert not second[0].continues
    (last,) = blocks.flush()
    assert last == "- second"
    assert isinstance(last, ListItem)
    assert last.continues, "printed under the item before it"


def test_history_renders_markdown_when_asked() -> None:
    """A transcript from history at a terminal renders the answer's Markdown (no raw ** left)."""
    out = io.StringIO()
    printer = TranscriptPrinter(Console(file=out, width=100, color_system=None), markdown=True)
    printer.print_all([TextPiece("Some **bold** words\n\n- one\n- two"), BlockEnded(False)])
    text = out.getvalue()
    assert "**" not in text
    assert "Some bold words" in text
    assert "• one" in text


def test_wrap_exact_keeps_every_character() -> None:
    """A wrapped command joins back to itself; no line is wider than asked (wide characters count twice)."""
    from dsh_cli._render import wrap_exact
    from rich.cells import cell_len

    text = "echo " + "x" * 30 + " && touch HIDDEN.txt; echo 漢字漢字漢字漢字漢字漢字"
    lines = wrap_exact(text, 20)
    assert "".join(lines) == text
    assert all(cell_len(line) <= 20 for line in lines)
    assert wrap_exact("a\nb", 20) == ["a", "b"], "the command's own lines are kept"
