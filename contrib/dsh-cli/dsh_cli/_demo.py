"""``dsh demo``: an offline tour — a scripted model fixes a bug in a temporary workspace, then the session is resumed from disk.

Everything but the model is real: the agent loop, the workspace tools (``read_file``, ``edit_file``,
``bash``), the permissions plugin (a rule makes ``bash`` ask, and the demo answers for you), the
JSONL persistence, and the resume. The model is ``dsh_core.testing.ScriptedModel``, whose last
answer is written after the checks ran, so it reports what really happened.

The workspace and the session store live in a temporary directory that is removed at the end,
unless ``--keep DIR`` names a directory to keep them in (the sessions are then in ``DIR/sessions``:
``DSH_SESSIONS_DIR=DIR/sessions dsh sessions show ID``). Nothing is read from the user's
configuration, and nothing is written outside that directory.
"""

from __future__ import annotations

import shlex
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
from rich.console import Console
from rich.panel import Panel
from rich.rule import Rule
from rich.text import Text

from dsh_core import AgentOptions, Harness, Reasoning, SessionEvent, ToolResultMessage, hookimpl
from dsh_core import Text as TextBlock
from dsh_core.llm import Chunk, LlmRequest, ModelInfo, Usage
from dsh_core.testing import Reply, ScriptedModel

from ._approval import Answer, SessionApproval
from ._errors import CliError
from ._exit import ExitCode
from ._launch import new_session_id
from ._plugin import CliPlugin
from ._render import EventFeed, TranscriptPrinter, describe_call
from ._sessions import print_history

if TYPE_CHECKING:
    from dsh_core import Context, ToolExecution

__all__ = ["DEMO_FILES", "run_demo"]

_STATS = '''\
"""Small statistics helpers."""


def mean(values):
    """The arithmetic mean of values."""
    return sum(values) / len(values)


def median(values):
    """The middle value of values."""
    ordered = sorted(values)
    return ordered[len(ordered) // 2]
'''

_CHECK = """\
from stats import mean, median

assert mean([1, 2, 3, 4]) == 2.5
assert median([3, 1, 2]) == 2
got = median([4, 1, 3, 2])
assert got == 2.5, f"median([4, 1, 3, 2]) is {got}, expected 2.5"
print("all checks passed")
"""

#: The files of the demo's workspace.
DEMO_FILES: Final[Mapping[str, str]] = {"stats.py": _STATS, "check.py": _CHECK}

_OLD = """\
    ordered = sorted(values)
    return ordered[len(ordered) // 2]
"""
_NEW = """\
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2
"""

_PROMPT = "check.py fails. Find the bug in stats.py, fix it, and run the checks."
_FOLLOW_UP = "Thanks! Which function did you change?"


def _python() -> str:
    """The interpreter the demo's ``bash`` call runs: ``python3`` when on PATH, else this one."""
    for name in ("python3", "python"):
        if shutil.which(name):
            return name
    return shlex.quote(sys.executable)


def _pieces(text: str) -> int:
    """How many deltas to stream ``text`` in: about four characters each, like a real model."""
    return max(1, len(text) // 4)


def _script(python: str) -> ScriptedModel:
    first = "The checks fail, so I'll read the code they test first."
    second = (
        "`median` returns the upper of the two middle values when the list has an even length; "
        "it should return their mean."
    )
    model = ScriptedModel()
    model.add(
        Reply(
            Reasoning("The user says check.py fails. I should read stats.py before changing anything."),
            TextBlock(first),
            ScriptedModel.call("read_file", {"path": "stats.py"}),
            chunks=_pieces(first),
            usage=Usage(1210, 58),
        ),
        ScriptedModel.tool_call(
            "edit_file",
            {"path": "stats.py", "old_text": _OLD, "new_text": _NEW},
            text=second,
            chunks=_pieces(second),
            usage=Usage(1480, 131),
        ),
        ScriptedModel.tool_call(
            "bash", {"command": f"{python} check.py"}, text="Now the checks:", chunks=4, usage=Usage(1702, 24)
        ),
    )
    return model


def _final_answer(result: str) -> str:
    if "all checks passed" in result:
        return (
            "Fixed: `median` now averages the two middle values when the list has an even length, "
            'and `check.py` prints "all checks passed".'
        )
    first = result.strip().splitlines()[-1] if result.strip() else "no output"
    return f"I changed `median`, but the checks still fail: {first}"


class _DemoModel:
    """The demo's adapter: a ``ScriptedModel`` streamed at a reading pace, whose last answers depend on the checks."""

    name = "demo-model"

    def __init__(self, script: ScriptedModel, pace: float) -> None:
        self.script = script
        self.pace = pace

    def start(self, ctx: Context) -> None:
        ctx.llm.register_adapter("scripted", self)

    def model_info(self, model: str) -> ModelInfo:
        return self.script.model_info(model)

    async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        if self.script.remaining == 0:
            last = request.messages[-1] if request.messages else None
            if isinstance(last, ToolResultMessage):
                text = _final_answer("".join(getattr(block, "text", "") for block in last.content))
            else:
                text = "Only `median` in stats.py: for an even number of values it now returns the mean of the two middle ones."
            self.script.add(ScriptedModel.text(text, chunks=_pieces(text), usage=Usage(1790, 41)))
        async for chunk in self.script.stream(request):
            if self.pace:
                await anyio.sleep(self.pace)
            yield chunk


class _DemoPrompter:
    """Answers the approval question for the user, and shows that it was asked."""

    def __init__(self, console: Console) -> None:
        self._console = console

    async def ask(self, execution: ToolExecution, reason: str) -> Answer:
        self._console.print(
            Text.assemble(
                ("? ", "bold yellow"),
                (f"allow {describe_call(execution.name, execution.arguments)}", "bold"),
                (f" — {reason}", "dim"),
            )
        )
        self._console.print(
            Text("  → once (the demo answers for you; dsh chat asks: once / always / deny)", style="green")
        )
        return Answer("once")


class _Live:
    """Agent-scoped listener: the transcript as it happens."""

    def __init__(self, printer: TranscriptPrinter) -> None:
        self._printer = printer
        self._feed = EventFeed(live=True)

    @hookimpl
    def dsh_session_event(self, event: SessionEvent) -> None:
        for note in self._feed.feed(event):
            self._printer.note(note)


def _config(root: Path) -> dict[str, Any]:
    return {
        "plugins": {
            "persistence-jsonl": {"root": str(root / "sessions"), "batch_delay": 0.0},
            "permissions": {"mode": "workspace-write", "rules": [{"tool": "bash", "action": "ask"}]},
        }
    }


async def _turn(
    ctx: Context, console: Console, session_id: str, prompt: str, *, resume: bool, cwd: Path
) -> str:
    printer = TranscriptPrinter(console, reasoning="shown", cwd=str(cwd))

    def setup(agent_ctx: Context) -> None:
        agent_ctx.register_plugin(_Live(printer), name="cli-demo-live")

    options = AgentOptions(model="scripted/demo")
    if resume:
        handle = await ctx.agents.resume(session_id, agent_options=options, setup=setup)
    else:
        handle = await ctx.agents.create(
            session_id, meta={"cwd": str(cwd)}, agent_options=options, setup=setup
        )
    async with handle:
        if resume:
            console.print(Rule(Text(f"resumed session {session_id} from disk: its history", style="bold")))
            print_history(console, tuple(handle.agent.session.events), reasoning="collapsed", markdown=False)
            console.print(Rule(Text("the conversation goes on", style="bold")))
        outcome = await handle.agent.run(prompt)
        printer.print_all(())
        return str(outcome.kind)


def _prepare(root: Path) -> Path:
    workspace = root / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    for name, text in DEMO_FILES.items():
        (workspace / name).write_text(text, encoding="utf-8")
    return workspace


def run_demo(*, keep: Path | None = None, pace: float = 0.006) -> int:
    """Play the demo; returns the exit status (0 when both turns completed and the bug is fixed on disk)."""
    console = Console(highlight=False)
    if keep is not None:
        root = keep.expanduser().resolve()
        return anyio.run(_play, console, root, _prepare(root), pace, True, backend="asyncio")
    with tempfile.TemporaryDirectory(prefix="dsh-demo-") as tmp:
        root = Path(tmp)
        return anyio.run(_play, console, root, _prepare(root), pace, False, backend="asyncio")


async def _play(console: Console, root: Path, workspace: Path, pace: float, kept: bool) -> int:
    model = _DemoModel(_script(_python()), pace)
    session_id = f"demo-{new_session_id()}"
    console.print(
        Panel(
            Text.assemble(
                ("dsh demo", "bold"),
                " — a scripted model (no API key, no network) fixes a bug through the real agent loop, "
                "workspace tools, permissions and session persistence.\n",
                (f"workspace  {workspace}\nsessions   {root / 'sessions'}", "dim"),
            ),
            border_style="cyan",
        )
    )
    config = _config(root)
    approval = CliPlugin(SessionApproval(_DemoPrompter(console)))
    try:
        async with Harness(config=config, plugins=[model, approval], source="dsh demo") as ctx:
            first = await _turn(ctx, console, session_id, _PROMPT, resume=False, cwd=workspace)
        console.print(Text(f"✓ session {session_id} saved; the harness stopped", style="dim"))
        console.print()
        async with Harness(
            config=config,
            plugins=[model, CliPlugin(SessionApproval(_DemoPrompter(console)))],
            source="dsh demo",
        ) as ctx:
            second = await _turn(ctx, console, session_id, _FOLLOW_UP, resume=True, cwd=workspace)
    except Exception as exc:  # the demo reports any failure as one line
        raise CliError(f"the demo failed: {type(exc).__name__}: {exc}", code=ExitCode.ERROR) from exc
    fixed = (
        "return (ordered[middle - 1] + ordered[middle]) / 2"
        in await anyio.Path(workspace / "stats.py").read_text()
    )
    console.print()
    lines = [
        Text.assemble(
            ("✓ " if fixed else "✗ ", "green" if fixed else "red"),
            "stats.py was fixed on disk" if fixed else "stats.py was not changed",
        ),
        Text('Next: export DEEPSEEK_API_KEY=...  then  dsh chat  (or dsh run "..."); dsh --help for more.'),
    ]
    if kept:
        lines.append(
            Text(f"Kept: DSH_SESSIONS_DIR={root / 'sessions'} dsh sessions show {session_id}", style="dim")
        )
    console.print(Panel(Text("\n").join(lines), border_style="green" if fixed else "red"))
    ok = first == "completed" and second == "completed" and fixed
    return int(ExitCode.OK if ok else ExitCode.ERROR)
