"""``dsh sessions replay ID``: re-run a stored session with the installed plugins and compare the logs.

The session is read (lock-free) through the configured persistence, then replayed by
``dsh_core.testing.replay_session`` in a second harness: every installed plugin and the current
configuration, less what must not take part in a replay — the persistence plugins (the replay keeps
its log in memory), the approval channel (approvals come from the recording) and the model adapters
(the recording is the model; a replay never calls a real one). Exit 0 when the replay matches, 1 at
the first divergence.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from rich.console import Console
from rich.text import Text

from dsh_core import installed_plugins
from dsh_core.llm import ModelInfo
from dsh_core.session_log import RequestHeaderEvent
from dsh_core.testing import DEFAULT_MODEL_INFO, ReplayReport, replay_session

from ._exit import ExitCode
from ._launch import resolve_session_id
from ._project import RecordedProjectPrompt
from ._sanitize import clean_line
from ._stdout import json_line

if TYPE_CHECKING:
    from dsh_core import Context

__all__ = ["replay_command"]

#: plugins that never take part in a replay: the model adapters dsh ships, and the CLI's approvals
_LEFT_OUT: Final = ("openai", "cli")
#: services whose providers are left out too
_LEFT_OUT_SERVICES: Final = ("session_persistence", "approval")


def replay_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with the plugins that must not take part in a replay disabled."""
    left_out = set(_LEFT_OUT)
    for info in installed_plugins():
        if any(service in _LEFT_OUT_SERVICES for service in info.provides):
            left_out.add(info.name)
    plugins = dict(config.get("plugins", {}))
    plugins["disable"] = sorted(left_out | set(plugins.get("disable", [])))
    return {**config, "plugins": plugins}


def _model_info(ctx: Context, events: Any) -> ModelInfo:
    """The recorded model's window as the configured adapter reports it (compaction depends on it)."""
    for event in events:
        if event.type == RequestHeaderEvent.type:
            config = event.data["config"]
            try:
                info = ctx.llm.model_info(f"{config['provider']}/{config['model']}")
            except Exception:  # noqa: BLE001 - an unknown provider or model: the replay's default
                return DEFAULT_MODEL_INFO
            return info if isinstance(info, ModelInfo) else DEFAULT_MODEL_INFO
    return DEFAULT_MODEL_INFO


def _recorded_system(events: Any) -> str:
    """The system prompt of the recording's first request ("" without one)."""
    for event in events:
        if event.type == RequestHeaderEvent.type:
            return str(event.data.get("system") or "")
    return ""


async def replay_command(
    ctx: Context, persistence: Any, args: argparse.Namespace, console: Console, config: Mapping[str, Any]
) -> int:
    session_id = await resolve_session_id(ctx, args.id)
    reader = getattr(persistence, "read", persistence.load)
    loaded = await reader(session_id)
    events = tuple(loaded.events)
    report = await replay_session(
        events,
        plugins=[RecordedProjectPrompt(_recorded_system(events))],
        config=replay_config(config),
        tools="live" if args.live_tools else "recorded",
        session_id=session_id,
        meta=loaded.meta,
        model_info=_model_info(ctx, events),
        autoload=True,
    )
    if args.json:
        sys.stdout.write(json_line(_as_json(session_id, report)))
        sys.stdout.flush()
    else:
        _print(console, session_id, report)
    return int(ExitCode.OK if not report.diverged else ExitCode.ERROR)


def _as_json(session_id: str, report: ReplayReport) -> dict[str, Any]:
    found = report.first_divergence
    return {
        "session": session_id,
        "diverged": report.diverged,
        "recorded_events": len(report.recorded),
        "replayed_events": len(report.log),
        "first_divergence": None
        if found is None
        else {
            "seq": found.seq,
            "path": found.path,
            "describe": found.describe(),
            "expected": None if found.expected is None else found.expected.to_json(),
            "actual": None if found.actual is None else found.actual.to_json(),
        },
        "problems": list(report.problems),
    }


def _print(console: Console, session_id: str, report: ReplayReport) -> None:
    if not report.diverged:
        console.print(
            Text.assemble(
                ("replayed ", "dim"),
                (session_id, "bold"),
                (f": matches the recording ({len(report.log)} events)", "green"),
            )
        )
        return
    console.print(Text.assemble(("replayed ", "dim"), (session_id, "bold"), (": diverged", "bold red")))
    for line in report.diff().splitlines():
        console.print(Text(clean_line(line)))
