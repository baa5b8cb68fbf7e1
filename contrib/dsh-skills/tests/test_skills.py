"""Skills: found in three places, listed in the prompt, loaded by the skill tool."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from dsh_skills import SkillFileError, SkillsPlugin, discover, read_skill

from dsh_core import AgentOptions, Harness, ToolExecution
from dsh_core.testing import ScriptedModel, result_text

pytestmark = pytest.mark.anyio


def _skill(root: Path, folder: str, name: str, description: str, body: str = "Do it well.") -> Path:
    path = root / folder
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n{body}\n")
    return path


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A workspace and a user config folder, with skills in all three places."""
    ws = tmp_path / "ws"
    config = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    release = _skill(ws / ".agents" / "skills", "release", "release", "Cut a release: bump, tag, changelog.",
                     body="1. Bump the version.\n2. Run scripts/tag.sh.")
    (release / "scripts").mkdir()
    (release / "scripts" / "tag.sh").write_text("git tag\n")
    (release / "CHECKLIST.md").write_text("- [ ] tests\n")
    _skill(ws / ".claude" / "skills", "review", "review", "Review a pull request for bugs.")
    _skill(ws / ".claude" / "skills", "release-old", "release", "An older release skill, shadowed.")
    _skill(config / "dsh" / "skills", "pdf", "pdf-forms", "Fill PDF forms.")
    _skill(config / "dsh" / "skills", "review-user", "review", "The user's review skill, shadowed.")
    broken = ws / ".agents" / "skills" / "broken"
    broken.mkdir()
    (broken / "SKILL.md").write_text("no front matter here\n")
    return ws, config


def test_discovery_order_and_precedence(places: tuple[Path, Path]) -> None:
    """.agents before .claude before the user's folder; the first skill of a name wins; broken ones are skipped."""
    ws, config = places
    skills = discover(str(ws))
    assert sorted(skills) == ["pdf-forms", "release", "review"]
    assert skills["release"].description == "Cut a release: bump, tag, changelog."
    assert skills["review"].folder == ws / ".claude" / "skills" / "review"
    assert skills["pdf-forms"].folder == config / "dsh" / "skills" / "pdf"
    assert sorted(discover(None)) == ["pdf-forms", "review"]  # no workspace: the user's only


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("no front matter\n", "no front matter"),
        ("---\nname: x\n", "not closed"),
        ("---\nname: [x\n---\n", "not valid YAML"),
        ("---\n- a\n---\n", "must be a mapping"),
        ("---\nname: x\n---\nbody\n", "'description' is missing"),
        ("---\nname: ''\ndescription: d\n---\n", "'name' is missing"),
    ],
)
def test_a_broken_skill_file_says_what_is_wrong(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "SKILL.md"
    path.write_text(text)
    with pytest.raises(SkillFileError, match=words) as raised:
        read_skill(path)
    assert str(path) in str(raised.value)


def test_multiline_yaml_descriptions_are_read(tmp_path: Path) -> None:
    path = tmp_path / "SKILL.md"
    path.write_text(textwrap.dedent("""\
        ---
        name: "deploy"
        description: >
          Deploy the service
          to staging.
        allowed-tools: [bash]
        ---
        Steps.
        """))
    skill = read_skill(path)
    assert (skill.name, skill.description, skill.body) == ("deploy", "Deploy the service to staging.", "Steps.")


async def test_skills_are_listed_in_the_prompt_and_loaded_by_the_tool(places: tuple[Path, Path]) -> None:
    ws, _ = places
    model = ScriptedModel([ScriptedModel.tool_call("skill", {"name": "release"}), ScriptedModel.text("done")])
    async with Harness(plugins=[SkillsPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("a", agent_options=AgentOptions(model="scripted/x"), meta={"cwd": str(ws)}) as handle:
            await handle.agent.run("cut a release")
        unknown = await ctx.tools.execute(
            ToolExecution(call_id="c", name="skill", arguments='{"name": "deploy"}', cwd=str(ws))
        )
    system = model.requests[0].system or ""
    assert "load it with the skill tool first.\n- release: Cut a release: bump, tag, changelog.\n" in system
    assert "- review: Review a pull request for bugs.\n- pdf-forms: Fill PDF forms." in system
    assert "shadowed" not in system
    loaded = model.requests[1].messages[-1].content[0].text
    assert loaded.startswith(f"# Skill: release\n(folder: {ws / '.agents' / 'skills' / 'release'})\n\n1. Bump the version.")
    assert loaded.endswith("(paths relative to it):\n- CHECKLIST.md\n- scripts/tag.sh\n")
    assert unknown.error_code == "TOOL_ERROR"
    assert "there is no skill named 'deploy'; the skills here are: pdf-forms, release, review" in result_text(unknown)


async def test_no_skills_no_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "empty"))
    model = ScriptedModel([ScriptedModel.text("hi")])
    async with Harness(plugins=[SkillsPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("a", agent_options=AgentOptions(model="scripted/x"), meta={"cwd": str(tmp_path)}) as handle:
            await handle.agent.run("hi")
    assert "Skills" not in (model.requests[0].system or "")


async def test_a_skill_added_or_changed_during_a_session_is_offered_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Skills are cached per workspace until a SKILL.md is added, removed or changed."""
    from dsh_core.services import AssemblyContext

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    root = tmp_path / ".agents" / "skills"
    _skill(root, "one", "one", "The first.")
    async with Harness(plugins=[SkillsPlugin()], autoload=False) as ctx:
        context = AssemblyContext(cwd=str(tmp_path))

        async def listed() -> str:
            return ctx.system_prompt.render(await ctx.system_prompt.assemble(context))

        assert "- one: The first." in await listed()
        _skill(root, "two", "two", "The second.")
        assert "- two: The second." in await listed()
        (root / "one" / "SKILL.md").write_text("---\nname: one\ndescription: The first, rewritten at length.\n---\n")
        assert "- one: The first, rewritten at length." in await listed()
        (root / "two" / "SKILL.md").unlink()
        assert "two" not in await listed()
