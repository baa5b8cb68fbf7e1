"""``dsh sessions list | show | delete``: the stored sessions, read through the ``session_persistence`` service.

``dsh sessions resume ID`` is ``dsh chat --resume ID`` (``_chat``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from rich.console import Console
from rich.table import Table
from rich.text import Text

from dsh_core import SessionEvent

from ._config import EffectiveConfig
from ._exit import CliError, ExitCode
from ._launch import maybe_await, open_harness, persistence_of, resolve_session_id
from ._render import EventFeed, TranscriptPrinter, message_text

__all__ = ["SessionSummary", "print_history", "sessions_command", "stored_sessions", "summarize"]


@attrs.frozen
class SessionSummary:
    """What ``dsh sessions list`` shows about one stored session."""

    id: str
    cwd: str | None
    turns: int
    events: int
    updated: float | None
    #: the first user prompt, as a title
    title: str


def summarize(ident: str, events: Sequence[SessionEvent], cwd: str | None) -> SessionSummary:
    turns = 0
    title = ""
    for event in events:
        data: Mapping[str, Any] = event.data
        if event.type == "turn/start":
            turns = max(turns, int(data["turn"]))
        elif event.type == "user/message" and not title:
            title = " ".join(message_text(data["message"]).split())
    updated = events[-1].time if events else None
    return SessionSummary(ident, cwd, turns, len(events), updated, title)


async def stored_sessions(persistence: Any) -> list[SessionSummary]:
    """Every stored session, newest first: from the listing's records, or by loading each when it gives only ids."""
    summaries = []
    for item in await maybe_await(persistence.list()):
        if isinstance(item, str):
            loaded = await persistence.load(item)
            summaries.append(summarize(item, tuple(loaded.events), loaded.meta.cwd))
            continue
        summaries.append(
            SessionSummary(
                id=str(item.id),
                cwd=getattr(item, "cwd", None),
                turns=int(getattr(item, "turns", 0)),
                events=int(getattr(item, "events", 0)),
                updated=getattr(item, "modified", None) or getattr(item, "created", None),
                title=" ".join(str(getattr(item, "title", None) or "").split()),
            )
        )
    summaries.sort(key=lambda s: s.updated or 0.0, reverse=True)
    return summaries


def _when(stamp: float | None) -> str:
    if stamp is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))


def print_history(console: Console, events: Sequence[SessionEvent], *, reasoning: str = "collapsed") -> None:
    """The readable transcript of a stored log: prompts, answers, tool calls and results, turn ends."""
    printer = TranscriptPrinter(console, reasoning=reasoning)
    printer.print_all(EventFeed(live=False).feed_all(events))


async def sessions_command(
    config: EffectiveConfig, *, verb: str, ident: str | None, json_lines: bool = False
) -> int:
    """Run ``dsh sessions VERB``."""
    console = Console(highlight=False)
    async with open_harness(config) as ctx:
        persistence = persistence_of(ctx, f"{verb} sessions")
        if verb == "list":
            summaries = await stored_sessions(persistence)
            if not summaries:
                console.print(
                    Text("no stored sessions yet; start one with `dsh chat` or `dsh run`", style="dim")
                )
                return int(ExitCode.OK)
            table = Table(show_edge=False, pad_edge=False, box=None)
            table.add_column("id", style="bold", no_wrap=True, min_width=max(len(s.id) for s in summaries))
            table.add_column("updated", no_wrap=True, min_width=16)
            table.add_column("turns", justify="right", no_wrap=True)
            table.add_column("cwd", overflow="ellipsis", no_wrap=True, max_width=40)
            table.add_column("first prompt", overflow="ellipsis", no_wrap=True)
            for s in summaries:
                table.add_row(s.id, _when(s.updated), str(s.turns), s.cwd or "-", s.title or "-")
            console.print(table)
            return int(ExitCode.OK)
        if ident is None:
            raise CliError(f"dsh sessions {verb} needs a session id", code=ExitCode.USAGE)
        if verb == "show":
            session_id = await resolve_session_id(ctx, ident)
            # A read-only view: no lock (another dsh may have it open), no repair written.
            reader = getattr(persistence, "read", persistence.load)
            loaded = await reader(session_id)
            events = tuple(loaded.events)
            if json_lines:
                for event in events:
                    print(json.dumps(event.to_json(), ensure_ascii=False))
                return int(ExitCode.OK)
            s = summarize(session_id, events, loaded.meta.cwd)
            facts = f"  ·  {s.turns} turns  ·  {s.events} events  ·  {s.cwd or 'no cwd'}  ·  updated {_when(s.updated)}"
            console.print(Text.assemble(("session ", "dim"), (s.id, "bold"), (facts, "dim")))
            console.print()
            print_history(console, events)
            return int(ExitCode.OK)
        if verb == "delete":
            if not await maybe_await(persistence.exists(ident)):
                raise CliError(f"no stored session {ident!r}; `dsh sessions list` shows the stored sessions")
            await maybe_await(persistence.delete(ident))
            console.print(f"deleted session {ident}")
            return int(ExitCode.OK)
    msg = f"unknown sessions command {verb!r}; use list, show, resume or delete"
    raise CliError(msg, code=ExitCode.USAGE)
