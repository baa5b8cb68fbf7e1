"""``dsh sessions list | show | fork | delete | replay | repair``: the stored sessions, through ``session_persistence``.

``dsh sessions resume ID`` is ``dsh chat --resume ID`` (``_chat``); ``replay`` is in ``_replay``. Each verb is one function in
``VERBS``, called with the started harness; a new verb adds its parser in ``_args._sessions_parsers``
and its function here.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from rich.console import Console
from rich.table import Table
from rich.text import Text

from dsh_core import SessionEvent
from dsh_core.session_log import TurnEndEvent, TurnStartEvent, UserMessageEvent

from ._config import EffectiveConfig
from ._errors import CliError
from ._exit import ExitCode
from ._launch import (
    maybe_await,
    new_session_id,
    open_harness,
    persistence_of,
    resolve_session_id,
)
from ._render import EventFeed, TranscriptPrinter, message_text, plural
from ._sanitize import clean_line
from ._stdout import json_line, output_console

if TYPE_CHECKING:
    from dsh_core import Context

__all__ = [
    "VERBS",
    "SessionSummary",
    "print_history",
    "sessions_command",
    "stored_sessions",
    "summarize",
]


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
    #: the session it was forked from
    parent_id: str | None = None


def summarize(ident: str, events: Sequence[SessionEvent], cwd: str | None) -> SessionSummary:
    turns = 0
    title = ""
    for event in events:
        data: Mapping[str, Any] = event.data
        if event.type == TurnStartEvent.type:
            turns = max(turns, int(data["turn"]))
        elif event.type == UserMessageEvent.type and not title:
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
                parent_id=getattr(item, "parent_id", None),
            )
        )
    summaries.sort(key=lambda s: s.updated or 0.0, reverse=True)
    return summaries


def _when(stamp: float | None) -> str:
    if stamp is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))


def print_history(
    console: Console, events: Sequence[SessionEvent], *, reasoning: str = "collapsed", markdown: bool | None = None
) -> None:
    """The readable transcript of a stored log: prompts, answers, tool calls and results, turn ends.

    Answers are rendered as Markdown at a terminal (``markdown=None``: when ``console`` is one).
    """
    printer = TranscriptPrinter(
        console, reasoning=reasoning, markdown=console.is_terminal if markdown is None else markdown
    )
    printer.print_all(EventFeed(live=False).feed_all(events))


# ---------------------------------------------------------------------- the verbs

Verb = Callable[["Context", Any, argparse.Namespace, Console], Awaitable[int]]


async def _list(ctx: Context, persistence: Any, args: argparse.Namespace, console: Console) -> int:
    summaries = await stored_sessions(persistence)
    if not summaries:
        console.print(Text("no stored sessions yet; start one with `dsh chat` or `dsh run`", style="dim"))
        return int(ExitCode.OK)
    piped = not console.is_terminal  # piped: whole lines, nothing cut to the terminal's width
    table = Table(show_edge=False, pad_edge=False, box=None)
    table.add_column("id", style="bold", no_wrap=True, min_width=max(len(s.id) for s in summaries))
    table.add_column("updated", no_wrap=True, min_width=16)
    table.add_column("turns", justify="right", no_wrap=True)
    table.add_column("cwd", overflow="ellipsis", no_wrap=True, max_width=None if piped else 40)
    table.add_column("first prompt", overflow="ellipsis", no_wrap=True)
    for s in summaries:
        table.add_row(
            Text(s.id),
            _when(s.updated),
            str(s.turns),
            Text(clean_line(s.cwd or "-")),  # Text: a prompt like `s[len(s) // 2]` is not markup
            Text(clean_line(s.title or "-")),
        )
    console.print(table)
    return int(ExitCode.OK)


async def _show(ctx: Context, persistence: Any, args: argparse.Namespace, console: Console) -> int:
    session_id = await resolve_session_id(ctx, args.id)
    # A read-only view: no lock (another dsh may have it open), no repair written.
    reader = getattr(persistence, "read", persistence.load)
    loaded = await reader(session_id)
    events = tuple(loaded.events)
    if args.json:
        out = sys.stdout
        for event in events:
            out.write(json_line(event.to_json()))
        out.flush()
        return int(ExitCode.OK)
    s = summarize(session_id, events, loaded.meta.cwd)
    facts = (
        f"  ·  {plural(s.turns, 'turn')}  ·  {plural(s.events, 'event')}  ·  "
        f"{clean_line(s.cwd or 'no cwd')}  ·  updated {_when(s.updated)}"
    )
    console.print(Text.assemble(("session ", "dim"), (s.id, "bold"), (facts, "dim")))
    parent = loaded.meta.parent_id
    if parent:
        console.print(Text(f"forked from {parent}", style="dim"))
    console.print()
    print_history(console, events)
    return int(ExitCode.OK)


async def _fork(ctx: Context, persistence: Any, args: argparse.Namespace, console: Console) -> int:
    source_id = await resolve_session_id(ctx, args.id)
    reader = getattr(persistence, "read", persistence.load)
    loaded = await reader(source_id)
    seed = _balanced(tuple(loaded.events))
    upto = len(seed) - 1 if args.at is None else args.at
    if upto < 0:
        msg = f"session {source_id!r} has no finished turn to fork from"
        raise CliError(msg)
    child_id = new_session_id()
    try:
        # the source is only read: a private copy that is never entered, so its stored log stays as it is
        meta = attrs.evolve(loaded.meta, seed_length=min(loaded.meta.seed_length, len(seed)))
        source = ctx.sessions.prepare(source_id, meta=meta, seed=seed)
        child = await ctx.sessions.fork(source, upto, child_id)
    except ValueError as exc:
        raise CliError(str(exc), code=ExitCode.USAGE) from exc
    await ctx.sessions.flush(child)
    console.print(
        Text.assemble(
            ("forked ", "dim"), (source_id, "bold"), (f" (events 0..{upto}) into ", "dim"), (child_id, "bold")
        )
    )
    console.print(Text(f"continue with: dsh chat --resume {child_id}", style="dim"))
    return int(ExitCode.OK)


def _balanced(events: Sequence[SessionEvent]) -> Sequence[SessionEvent]:
    """``events`` without a last turn that has not ended (a log another process is still writing)."""
    starts = [event.seq for event in events if event.type == TurnStartEvent.type]
    ends = [event.seq for event in events if event.type == TurnEndEvent.type]
    if starts and (not ends or starts[-1] > ends[-1]):
        return events[: starts[-1]]
    return events


async def _delete(ctx: Context, persistence: Any, args: argparse.Namespace, console: Console) -> int:
    session_id = await resolve_session_id(ctx, args.id)
    from ._undo import undo_root

    # /undo's journal lives in the session's folder: it goes first, so the folder can go too
    shutil.rmtree(undo_root(ctx, session_id), ignore_errors=True)
    await maybe_await(persistence.delete(session_id))
    console.print(Text(f"deleted session {session_id}"))
    return int(ExitCode.OK)


async def _repair(ctx: Context, persistence: Any, args: argparse.Namespace, console: Console) -> int:
    """Cut a damaged log before its first damaged line; the backup is named so the user can go back."""
    repair = getattr(persistence, "repair", None)
    if repair is None:
        raise CliError(f"this session store ({type(persistence).__name__}) has no repair")
    session_id = await resolve_session_id(ctx, args.id)
    report = await repair(session_id)
    describe = getattr(report, "describe", None)
    if callable(describe):  # each backend names the cut and its backup in its own terms
        for line in describe():
            console.print(Text(str(line)))
        return int(ExitCode.OK)
    if report.backup is None:  # a store whose report does not describe itself: the JSONL fields
        console.print(
            Text(f"session {session_id}: nothing to repair ({report.events} events, every line sound)")
        )
        return int(ExitCode.OK)
    console.print(
        Text(
            f"session {session_id}: cut at line {report.line}: dropped {report.dropped_lines} lines "
            f"({report.dropped_bytes} bytes), kept {report.events} events"
        )
    )
    console.print(Text(f"the original file is kept as {report.backup}"))
    return int(ExitCode.OK)


#: ``dsh sessions VERB``: what each verb does with the started harness and its persistence service.
VERBS: dict[str, Verb] = {"list": _list, "show": _show, "fork": _fork, "delete": _delete, "repair": _repair}


async def sessions_command(config: EffectiveConfig, args: argparse.Namespace, *, cwd: Path) -> int:
    """Run ``dsh sessions VERB`` (``args.verb``)."""
    verb = VERBS.get(args.verb)
    if verb is None and args.verb != "replay":
        msg = f"unknown sessions command {args.verb!r}; use {', '.join(VERBS)} or resume"
        raise CliError(msg, code=ExitCode.USAGE)
    console = output_console()
    async with open_harness(config) as ctx:
        persistence = persistence_of(ctx, f"{args.verb} sessions")
        if verb is None:  # replay also needs the configuration, to start a second harness with it
            from ._replay import replay_command

            return await replay_command(ctx, persistence, args, console, config.data)
        return await verb(ctx, persistence, args, console)
