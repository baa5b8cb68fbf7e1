"""What the model is told about where it works: the workspace, the date, git, and the project's ``AGENTS.md`` instructions.

``AGENTS.md`` is the cross-tool convention for instructions to coding agents. The files read are
``$XDG_CONFIG_HOME/dsh/AGENTS.md`` (the user's own, for every project), then ``AGENTS.md`` in each
directory from the git root (or ``~``) down to the workspace, nearest last: later files are more
specific. Both become sections of the system prompt through ``ctx.system_prompt`` (the service's
public seam), computed once per workspace: the prompt stays the same from step to step.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

import attrs

from ._config import user_config_path

if TYPE_CHECKING:
    from dsh_core import AssemblyContext, Context

__all__ = [
    "INSTRUCTIONS_FILE",
    "ProjectFacts",
    "RecordedProjectPrompt",
    "environment_text",
    "git_branch",
    "instruction_files",
    "instructions_text",
    "recorded_texts",
    "register_project_prompt",
]

INSTRUCTIONS_FILE: Final = "AGENTS.md"
#: the most of one instructions file put in the prompt
_MAX_CHARS: Final = 32_000


@attrs.frozen
class ProjectFacts:
    """A workspace as the system prompt describes it."""

    cwd: str
    date: str
    #: the git root, ``None`` outside a repository
    git_root: str | None
    #: the branch, ``detached at SHA``, or ``None`` (not a repository, or HEAD unreadable)
    branch: str | None
    #: the instructions files found, in prompt order (the user's own first, the nearest last)
    files: tuple[str, ...]


def _git_dir(root: Path) -> Path | None:
    """``root/.git``, or where a worktree's ``.git`` file points."""
    dot_git = root / ".git"
    if dot_git.is_dir():
        return dot_git
    try:
        first = dot_git.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if first.startswith("gitdir:"):
        target = Path(first.removeprefix("gitdir:").strip())
        return target if target.is_absolute() else (root / target)
    return None


def git_root(cwd: Path) -> Path | None:
    """The nearest directory at or above ``cwd`` holding ``.git`` (a directory, or a worktree's file)."""
    for directory in (cwd, *cwd.parents):
        if (directory / ".git").exists():
            return directory
    return None


def git_branch(root: Path) -> str | None:
    """The checked-out branch of the repository at ``root``, read from ``HEAD`` (no subprocess)."""
    git_dir = _git_dir(root)
    if git_dir is None:
        return None
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if head.startswith("ref:"):
        return head.removeprefix("ref:").strip().removeprefix("refs/heads/")
    return f"detached at {head[:12]}" if head else None


def instruction_files(cwd: Path, *, home: Path, environ: Mapping[str, str]) -> list[Path]:
    """The ``AGENTS.md`` files for ``cwd``, in prompt order: the user's own, then from the top down to ``cwd``.

    The walk up stops at the git root, else at ``home``; with neither above ``cwd`` only ``cwd``'s
    own file counts.
    """
    found: list[Path] = []
    user_file = user_config_path(environ).with_name(INSTRUCTIONS_FILE)
    if user_file.is_file():
        found.append(user_file)
    stop = git_root(cwd)
    if stop is None and (cwd == home or home in cwd.parents):
        stop = home
    chain = [cwd]
    if stop is not None:
        chain = [cwd, *(parent for parent in cwd.parents if parent == stop or stop in parent.parents)]
    for directory in reversed(chain):
        candidate = directory / INSTRUCTIONS_FILE
        if candidate.is_file() and candidate not in found:
            found.append(candidate)
    return found


def _read(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(could not be read: {exc.strerror or exc})"
    if len(text) > _MAX_CHARS:
        text = (
            text[:_MAX_CHARS]
            + f"\n… (cut: the file has {len(text)} characters, the first {_MAX_CHARS} are here)"
        )
    return text.strip()


def facts_for(cwd: Path, *, home: Path, environ: Mapping[str, str]) -> ProjectFacts:
    root = git_root(cwd)
    return ProjectFacts(
        cwd=str(cwd),
        date=time.strftime("%Y-%m-%d (%A)"),
        git_root=None if root is None else str(root),
        branch=None if root is None else git_branch(root),
        files=tuple(str(path) for path in instruction_files(cwd, home=home, environ=environ)),
    )


def environment_text(facts: ProjectFacts) -> str:
    """The ``cli:environment`` section: where the agent works and when."""
    if facts.git_root is None:
        git = "no (the workspace is not in a git repository)"
    elif facts.branch is None:
        git = f"yes (root {facts.git_root})"
    elif facts.branch.startswith("detached"):
        git = f"yes (root {facts.git_root}, {facts.branch})"
    else:
        git = f"yes (root {facts.git_root}, branch {facts.branch})"
    return (
        f"{_ENVIRONMENT_HEADING}"
        f"- Working directory (the workspace; relative paths are from here): {facts.cwd}\n"
        f"- Today's date: {facts.date}\n"
        f"- Git repository: {git}"
    )


def instructions_text(facts: ProjectFacts) -> str:
    """The ``cli:instructions`` section: every instructions file, each under its path; ``""`` when there are none."""
    if not facts.files:
        return ""
    parts = [
        f"{_INSTRUCTIONS_HEADING}"
        f"Instructions from {INSTRUCTIONS_FILE} files, the most general first and the one nearest the "
        "workspace last; where they disagree, the later one wins. Follow them."
    ]
    for name in facts.files:
        parts.append(f"## {name}\n{_read(Path(name))}")
    parts.append(_INSTRUCTIONS_END)
    return "\n\n".join(parts)


_ENVIRONMENT_HEADING: Final = "# Environment\n"
_INSTRUCTIONS_HEADING: Final = "# Project instructions\n"
_INSTRUCTIONS_END: Final = "(end of the project instructions)"


def recorded_texts(system: str) -> tuple[str, str]:
    """The environment and instructions sections as a recorded system prompt has them (``""`` where absent)."""
    environment = instructions = ""
    start = _section_start(system, _ENVIRONMENT_HEADING)
    if start >= 0:
        end = system.find("\n\n", start)
        environment = system[start : end if end >= 0 else len(system)]
    start = _section_start(system, _INSTRUCTIONS_HEADING)
    if start >= 0:
        end = system.find(_INSTRUCTIONS_END, start)
        if end >= 0:
            instructions = system[start : end + len(_INSTRUCTIONS_END)]
    return environment, instructions


def _section_start(system: str, heading: str) -> int:
    if system.startswith(heading):
        return 0
    found = system.find(f"\n\n{heading}")
    return found + 2 if found >= 0 else -1


class _PerWorkspace:
    """The two texts for each workspace, made on first use and kept (the same prompt at every step)."""

    def __init__(self, fallback: Path, environ: Mapping[str, str]) -> None:
        self._fallback = fallback
        self._environ = environ
        self._texts: dict[str, tuple[str, str]] = {}

    def texts(self, context: AssemblyContext) -> tuple[str, str]:
        cwd = Path(context.cwd) if context.cwd else self._fallback
        key = str(cwd)
        texts = self._texts.get(key)
        if texts is None:
            home = Path(self._environ.get("HOME") or Path.home())
            facts = facts_for(cwd, home=home, environ=self._environ)
            texts = self._texts[key] = (environment_text(facts), instructions_text(facts))
        return texts


def register_project_prompt(ctx: Context, cwd: Path, environ: Mapping[str, str] | None = None) -> None:
    """Add the environment and the project instructions to the system prompt (sections ``cli:environment``
    and ``cli:instructions``, at the end), undone with ``ctx``.

    The texts are variables' values, not section texts: an ``AGENTS.md`` with ``{{`` in it is
    not read as a prompt template.
    """
    workspace = _PerWorkspace(cwd, os.environ if environ is None else environ)
    _register(ctx, workspace.texts)


def _register(ctx: Context, texts: Callable[[AssemblyContext], tuple[str, str]]) -> None:
    prompt = ctx.system_prompt
    prompt.variable("cli_environment", lambda context: texts(context)[0])
    prompt.variable("cli_instructions", lambda context: texts(context)[1])
    prompt.section("cli:environment", "{{cli_environment}}", order=80)
    prompt.section("cli:instructions", "{{cli_instructions}}", order=90)


class RecordedProjectPrompt:
    """For ``dsh sessions replay``: the environment and instructions of the recording's first request.

    A replay must not see today's date or an ``AGENTS.md`` edited since; a session continued on
    another day (or after its instructions changed) diverges where the prompt did, which the
    replay then shows.
    """

    name = "cli-project-prompt"
    uses = ("system_prompt",)

    def __init__(self, system: str) -> None:
        self._texts = recorded_texts(system)

    def start(self, ctx: Context) -> None:
        if any(self._texts) and ctx.get_service("system_prompt") is not None:
            _register(ctx, lambda context: self._texts)
