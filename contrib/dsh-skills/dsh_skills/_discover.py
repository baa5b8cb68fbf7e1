"""Finding skills: the three places they live, reading a SKILL.md's front matter, and which one wins a name.

A skill is a folder holding ``SKILL.md``: YAML front matter between ``---`` lines with ``name``
and ``description``, then the instructions in Markdown. The places, searched in this order (the
first skill of a name wins): the workspace's ``.agents/skills/``, its ``.claude/skills/``, and the
user's ``$XDG_CONFIG_HOME/dsh/skills/`` (``~/.config/dsh/skills/``).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path

import attrs

__all__ = ["Skill", "SkillFileError", "discover", "fingerprint", "read_skill", "skill_roots"]

logger = logging.getLogger("dsh.skills")

#: the file that makes a folder a skill
SKILL_FILE = "SKILL.md"
#: a SKILL.md larger than this is not read (bytes)
_MAX_SKILL_BYTES = 1024 * 1024


class SkillFileError(ValueError):
    """A SKILL.md that cannot be used: no front matter, bad YAML, or no name or description."""


@attrs.frozen(kw_only=True)
class Skill:
    """One skill: its name and description (from the front matter), its folder and its instructions."""

    name: str
    description: str
    folder: Path
    body: str


def skill_roots(cwd: str | None, environ: Mapping[str, str] | None = None) -> list[Path]:
    """The folders searched for skills, in order of precedence."""
    env = os.environ if environ is None else environ
    roots: list[Path] = []
    if cwd:
        workspace = Path(cwd)
        roots += [workspace / ".agents" / "skills", workspace / ".claude" / "skills"]
    base = env.get("XDG_CONFIG_HOME", "")
    config = Path(base) if base and os.path.isabs(base) else Path(env.get("HOME") or Path.home()) / ".config"
    roots.append(config / "dsh" / "skills")
    return roots


def read_skill(path: Path) -> Skill:
    """The skill whose ``SKILL.md`` is ``path``.

    :raises SkillFileError: naming the file and what is wrong with it.
    :raises OSError: when it cannot be read.
    """
    if path.stat().st_size > _MAX_SKILL_BYTES:
        msg = f"{path}: larger than {_MAX_SKILL_BYTES} bytes; a SKILL.md holds instructions, keep data in other files"
        raise SkillFileError(msg)
    text = path.read_text(encoding="utf-8", errors="replace").lstrip("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        msg = f"{path}: no front matter; start the file with a '---' line, then name: and description:, then '---'"
        raise SkillFileError(msg)
    end = next((index for index in range(1, len(lines)) if lines[index].strip() in ("---", "...")), None)
    if end is None:
        msg = f"{path}: the front matter is not closed by a '---' line"
        raise SkillFileError(msg)
    import yaml  # only when a skill is read: starting the harness imports no YAML parser

    try:
        front = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        # Hand-written front matter often has an unquoted colon in its description, which YAML
        # refuses and the tools that read these files accept: read it as plain key: value lines.
        front = _plain_front_matter(lines[1:end])
        if not {"name", "description"} <= front.keys():
            msg = f"{path}: the front matter is not valid YAML ({exc})"
            raise SkillFileError(msg) from None
    if not isinstance(front, dict):
        msg = f"{path}: the front matter must be a mapping with name and description"
        raise SkillFileError(msg)
    fields = {}
    for key in ("name", "description"):
        value = front.get(key)
        if not isinstance(value, str) or not value.strip():
            msg = f"{path}: front matter {key!r} is missing or not a non-empty string"
            raise SkillFileError(msg)
        fields[key] = " ".join(value.split())
    body = "".join(lines[end + 1 :]).strip("\n")
    return Skill(name=fields["name"], description=fields["description"], folder=path.parent, body=body)


_PLAIN_KEY = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*):[ \t]*(.*?)\s*$")


def _plain_front_matter(lines: list[str]) -> dict[str, str]:
    """Top-level ``key: value`` lines, the value taken as written (surrounding quotes removed)."""
    found: dict[str, str] = {}
    for line in lines:
        match = _PLAIN_KEY.match(line)
        if match:
            value = match.group(2)
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            found[match.group(1)] = value
    return found


def fingerprint(cwd: str | None, environ: Mapping[str, str] | None = None) -> tuple[tuple[str, int, int], ...]:
    """What ``discover`` would read, as (path, mtime, size) of every SKILL.md and root: equal
    fingerprints mean equal skills, so a cache can skip reading and parsing them again."""
    found: list[tuple[str, int, int]] = []
    for root in skill_roots(cwd, environ):
        try:
            entries = sorted(os.scandir(root), key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            try:
                stat = os.stat(os.path.join(entry.path, SKILL_FILE))
            except OSError:
                continue
            found.append((entry.path, stat.st_mtime_ns, stat.st_size))
    return tuple(found)


def discover(
    cwd: str | None, environ: Mapping[str, str] | None = None, *, skipped: set[str] | None = None
) -> dict[str, Skill]:
    """Every usable skill by name, the first of a name in precedence order.

    A broken one is skipped, with a warning logged once per file when ``skipped`` (the files
    warned about so far) is given, else every time.
    """
    found: dict[str, Skill] = {}
    for root in skill_roots(cwd, environ):
        try:
            entries = sorted(root.iterdir())
        except OSError:
            continue
        for folder in entries:
            path = folder / SKILL_FILE
            if not path.is_file():
                continue
            try:
                skill = read_skill(path)
            except (OSError, SkillFileError) as exc:
                if skipped is None or str(path) not in skipped:
                    logger.warning("skill skipped: %s", exc)
                    if skipped is not None:
                        skipped.add(str(path))
                continue
            found.setdefault(skill.name, skill)
    return found
