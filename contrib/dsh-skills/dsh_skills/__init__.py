"""dsh plugin for skills: ``SKILL.md`` folders listed in the system prompt and loaded by the ``skill`` tool.

Load the ``skills`` plugin (entry point). Skills are found in the workspace's ``.agents/skills/``
and ``.claude/skills/`` and in ``~/.config/dsh/skills/``, in that order of precedence.
"""

from ._discover import Skill as Skill
from ._discover import SkillFileError as SkillFileError
from ._discover import discover as discover
from ._discover import read_skill as read_skill
from ._discover import skill_roots as skill_roots
from ._plugin import SkillsConfig as SkillsConfig
from ._plugin import SkillsPlugin as SkillsPlugin

__all__ = ["Skill", "SkillFileError", "SkillsConfig", "SkillsPlugin", "discover", "read_skill", "skill_roots"]
