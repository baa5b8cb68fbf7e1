"""The ``skills`` plugin: each agent's skills listed in its system prompt, and the ``skill`` tool that loads one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import anyio.to_thread
import attrs

from dsh_core import ToolError, ToolExecution, tool
from dsh_core.services import AssemblyContext

from ._discover import SKILL_FILE, Skill, discover, fingerprint

if TYPE_CHECKING:
    from dsh_core import Context

__all__ = ["SkillsConfig", "SkillsPlugin"]

#: files of a skill's folder listed at most
_MAX_FILES = 100


@attrs.frozen(kw_only=True)
class SkillsConfig:
    """The ``[plugins.skills]`` table."""

    #: characters of a skill's description shown in the system prompt at most
    max_description_chars: int = 300


class SkillsPlugin:
    """Lists the skills of an agent's workspace and of the user in its prompt; ``skill`` loads one.

    Skills are looked up afresh for each prompt (in a worker thread), so a skill added while a
    session runs is offered from the next step on.
    """

    name = "skills"
    requires: ClassVar[tuple[str, ...]] = ("tools", "system_prompt")
    Config = SkillsConfig

    def __init__(self) -> None:
        self._config = SkillsConfig()
        self._skipped: set[str] = set()  # broken SKILL.md files warned about once
        #: per workspace: the fingerprint of its skill files and the skills read from them
        self._cache: dict[str | None, tuple[tuple[tuple[str, int, int], ...], dict[str, Skill]]] = {}

    def start(self, ctx: Context) -> None:
        if isinstance(ctx.config, SkillsConfig):
            self._config = ctx.config

        @tool(read_only=True, parallel_safe=True)
        async def skill(name: str, *, execution: ToolExecution) -> str:
            """Load a skill: its instructions, and the other files of its folder. Load the skill
            whose description matches your task before you start on it.

            Args:
                name: the skill's name, as the system prompt lists it
            """
            skills = await self._discover(execution.cwd)
            found = skills.get(name)
            if found is None:
                known = ", ".join(sorted(skills)) or "none"
                msg = f"there is no skill named {name!r}; the skills here are: {known}"
                raise ToolError(msg)
            files = await anyio.to_thread.run_sync(_other_files, found.folder)
            return _loaded(found, files)

        ctx.tools.register(skill)
        ctx.system_prompt.section("skills", self._section, order=40)

    async def _discover(self, cwd: str | None) -> dict[str, Skill]:
        """The skills of ``cwd``, read again only when a SKILL.md was added, removed or changed."""
        return await anyio.to_thread.run_sync(self._discover_now, cwd)

    def _discover_now(self, cwd: str | None) -> dict[str, Skill]:
        mark = fingerprint(cwd)
        cached = self._cache.get(cwd)
        if cached is not None and cached[0] == mark:
            return cached[1]
        skills = discover(cwd, skipped=self._skipped)
        self._cache[cwd] = (mark, skills)
        return skills

    async def _section(self, context: AssemblyContext) -> str:
        skills = await self._discover(context.cwd)
        if not skills:
            return ""
        most = self._config.max_description_chars
        lines = [f"- {skill.name}: {_cut(skill.description, most)}" for skill in skills.values()]
        return (
            "Skills (instructions for particular tasks): when a task matches a skill's description, "
            "load it with the skill tool first.\n" + "\n".join(lines)
        )


def _cut(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1].rstrip() + "…"


def _other_files(folder: Path) -> list[str]:
    found: list[str] = []
    for directory, subdirectories, files in os.walk(folder):
        subdirectories[:] = sorted(name for name in subdirectories if not name.startswith("."))
        for file in sorted(files):
            relative = os.path.relpath(os.path.join(directory, file), folder)
            if relative != SKILL_FILE:
                found.append(relative)
                if len(found) > _MAX_FILES:
                    return found
    return found


def _loaded(skill: Skill, files: list[str]) -> str:
    text = f"# Skill: {skill.name}\n(folder: {skill.folder})\n\n{skill.body}\n"
    if files:
        shown = files[:_MAX_FILES]
        more = f"\n- ... and more ({len(files) - len(shown)}+ not listed)" if len(files) > len(shown) else ""
        listed = "\n".join(f"- {name}" for name in shown)
        text += f"\nOther files in this skill's folder (paths relative to it):\n{listed}{more}\n"
    return text
