"""The workspace plugin: its front, entry point, tools, configuration, and a real agent using it."""

from __future__ import annotations

import json
from pathlib import Path

import dsh_workspace
import importlib_metadata
import pytest
from dsh_workspace import WorkspacePlugin

from dsh_core import AgentOptions, ConfigError, Context, Harness
from dsh_core.testing import ScriptedModel

pytestmark = pytest.mark.anyio


def test_front_is_exact() -> None:
    """The package exports the plugin, its config, the seam protocols, COMMAND_ENV and the process
    helpers other command runners share (dsh-jobs), and nothing else."""
    assert dsh_workspace.__all__ == [
        "COMMAND_ENV",
        "Access",
        "ChildProcess",
        "Confined",
        "ConfinedCommand",
        "Sandbox",
        "WorkspaceConfig",
        "WorkspacePlugin",
        "WorkspacePolicy",
        "command_environment",
        "confined_command",
        "start_process",
        "stop_group",
    ]
    assert set(dsh_workspace.__all__) == {name for name in vars(dsh_workspace) if not name.startswith("_")}


def test_entry_point_is_registered() -> None:
    """The distribution registers `workspace` in the `dsh` entry-point group."""
    [entry] = [ep for ep in importlib_metadata.entry_points(group="dsh") if ep.name == "workspace"]
    assert entry.load() is WorkspacePlugin
    assert entry.dist is not None
    assert entry.dist.name == "dsh-harness-workspace"


async def test_tools_are_registered_with_read_tools_parallel_safe(ctx: Context) -> None:
    """All seven tools are registered; exactly the four read tools are parallel-safe."""
    assert ctx.tools.names() == ("bash", "edit_file", "glob", "grep", "list_dir", "read_file", "write_file")
    safe = {
        name for name in ctx.tools.names() if ctx.tools.is_parallel_safe(name, {"path": ".", "pattern": "x"})
    }
    assert safe == {"glob", "grep", "list_dir", "read_file"}
    schemas = {schema["name"]: schema for schema in ctx.tools.schemas()}
    bash = schemas["bash"]["parameters"]
    assert tuple(bash["required"]) == ("command",)
    assert set(bash["properties"]) == {"command", "timeout"}
    assert "offset" in schemas["read_file"]["parameters"]["properties"]
    assert "The timeout is 120 seconds unless given (at most 600)." in schemas["bash"]["description"]
    assert "Copy old_text from the file exactly" in schemas["edit_file"]["description"]


@pytest.mark.parametrize("workspace_config", [{"bash_timeout": 30, "max_read_lines": 400}])
async def test_descriptions_state_the_configured_limits(ctx: Context) -> None:
    """The model reads the configured default timeout and line limit in the tool descriptions."""
    schemas = {schema["name"]: schema for schema in ctx.tools.schemas()}
    assert "The timeout is 30 seconds unless given (at most 600)." in schemas["bash"]["description"]
    assert "Shows at most 400 lines per call" in schemas["read_file"]["description"]


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ({"bash_timeout": "soon"}, "plugins.workspace.bash_timeout"),
        ({"search": "grep"}, "plugins.workspace.search"),
        ({"colour": True}, "colour"),
    ],
)
async def test_bad_config_is_refused(table: dict[str, object], problem: str) -> None:
    """Wrong types, unknown values and unknown keys fail at start-up, naming the key."""
    with pytest.raises(ConfigError, match=problem.replace(".", r"\.")):
        async with Harness(
            config={"plugins": {"workspace": table}}, plugins=[WorkspacePlugin], autoload=False
        ):
            pass


async def test_an_agent_reads_edits_and_runs_code_in_its_workspace(tmp_path: Path) -> None:
    """Through the agent loop: read a file, edit it, run it with bash, and answer."""
    (tmp_path / "app.py").write_text('print("hello")\n')
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("read_file", {"path": "app.py"}),
            ScriptedModel.tool_call(
                "edit_file", {"path": "app.py", "old_text": '"hello"', "new_text": '"bye"'}
            ),
            ScriptedModel.tool_call("bash", {"command": "python3 app.py"}),
            ScriptedModel.text("It prints bye now."),
        ]
    )
    async with Harness(plugins=[WorkspacePlugin], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        options = AgentOptions(model="scripted/x")
        async with await ctx.agents.create(
            "a1", meta={"cwd": str(tmp_path)}, agent_options=options
        ) as handle:
            outcome = await handle.agent.run("make it say bye")
            events = list(handle.agent.session.events)
    assert outcome.kind == "completed"
    assert outcome.text == "It prints bye now."
    assert (tmp_path / "app.py").read_text() == 'print("bye")\n'
    results = [event.data for event in events if event.type == "tool/result"]
    assert [data.get("error_code") for data in results] == [None, None, None]
    texts = [data["message"]["content"][0]["text"] for data in results]
    assert texts[0] == '     1\tprint("hello")'
    assert texts[1].startswith("Edited app.py: replaced 1 occurrence at line 1.")
    assert texts[2].startswith("bye\n[exit code 0; ")
    calls = [json.loads(event.data["arguments"]) for event in events if event.type == "tool/call"]
    assert calls[2] == {"command": "python3 app.py"}
    model.assert_consumed()
