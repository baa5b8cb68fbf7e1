"""Background jobs: started by bash {background: true}, followed, killed with every process, told to the model."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from dsh_jobs import JobsPlugin
from dsh_permissions import PermissionsPlugin
from dsh_workspace import WorkspacePlugin

from dsh_core import AgentOptions, Context, Harness, ToolExecution, tool
from dsh_core.testing import (
    ScriptedModel,
    call_tool,
    is_alive,
    pids_running,
    read_fifo,
    result_text,
    wait_gone,
)

pytestmark = pytest.mark.anyio

MODEL = AgentOptions(model="scripted/x")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    return workspace


@pytest.fixture
async def ctx() -> AsyncIterator[Context]:
    config = {"plugins": {"jobs": {"max_jobs": 2}}}
    async with Harness(config=config, plugins=[WorkspacePlugin(), JobsPlugin()], autoload=False) as root:
        yield root


async def _agent(ctx: Context, ws: Path, name: str = "worker") -> Any:
    return await ctx.agents.create(name, agent_options=MODEL, meta={"cwd": str(ws)})


async def _call(ctx: Context, ws: Path, agent: Any, name: str, **arguments: Any) -> Any:
    result = await call_tool(ctx, name, ws, agent_id=agent.id, **arguments)
    return result


def _json(result: Any) -> Any:
    return json.loads(result_text(result))


async def test_a_background_command_returns_at_once_and_is_followed(ctx: Context, ws: Path) -> None:
    """The call answers {job_id, status: running}; job_wait gives the exit code and the output."""
    async with await _agent(ctx, ws) as handle:
        (ws / "go.fifo").parent.mkdir(exist_ok=True)
        os.mkfifo(ws / "go.fifo")
        started = await _call(ctx, ws, handle.agent, "bash", command="cat go.fifo; echo done; exit 7", background=True)
        assert _json(started) == {"job_id": "job-1", "status": "running"}
        running = _json(await _call(ctx, ws, handle.agent, "job_output", id="job-1"))
        assert running == {"job_id": "job-1", "status": "running", "exit_code": None, "output": ""}
        (ws / "go.fifo").write_text("hello\n")
        ended = _json(await _call(ctx, ws, handle.agent, "job_wait", id="job-1", timeout=10))
        assert ended == {"job_id": "job-1", "status": "exited", "exit_code": 7, "output": "hello\ndone\n"}


async def test_job_output_reads_what_is_new_or_from_an_offset(ctx: Context, ws: Path) -> None:
    async with await _agent(ctx, ws) as handle:
        await _call(ctx, ws, handle.agent, "bash", command="printf 'one\\ntwo\\n'", background=True)
        assert _json(await _call(ctx, ws, handle.agent, "job_wait", id="job-1"))["output"] == "one\ntwo\n"
        assert _json(await _call(ctx, ws, handle.agent, "job_output", id="job-1"))["output"] == ""
        again = _json(await _call(ctx, ws, handle.agent, "job_output", id="job-1", since=4))
        assert again == {"job_id": "job-1", "status": "exited", "exit_code": 0, "output": "two\n"}
        unknown = await _call(ctx, ws, handle.agent, "job_output", id="job-9")
        assert unknown.error_code == "TOOL_ERROR"
        assert "there is no job 'job-9' (this agent's jobs: job-1)" in result_text(unknown)


async def test_bash_without_background_is_the_workspace_bash(ctx: Context, ws: Path) -> None:
    async with await _agent(ctx, ws) as handle:
        result = await _call(ctx, ws, handle.agent, "bash", command="echo plain; exit 3")
        assert result_text(result).startswith("plain\n[exit code 3; ")
        assert result.metadata["exit_code"] == 3
        schema = ctx.tools.get("bash", handle.agent.id)
        assert schema is not None
        assert schema.parameters["properties"]["background"]["type"] == "boolean"
    assert "background" not in ctx.tools.get("bash").parameters["properties"]  # the global tool is unchanged


async def _start_tree(ctx: Context, ws: Path, agent: Any, fifo: str) -> list[int]:
    """A job whose shell starts a child and a grandchild; the pids come back through a FIFO."""
    os.mkfifo(ws / fifo)
    command = f"(sleep 1000 & echo $! > {fifo}.inner; wait) & sleep 1000 & echo $$ $! > {fifo}; wait"
    os.mkfifo(ws / f"{fifo}.inner")
    await _call(ctx, ws, agent, "bash", command=command, background=True)
    inner = read_fifo(ws / f"{fifo}.inner")
    pids = [int(pid) for pid in (await read_fifo(ws / fifo)).split()] + [int(await inner)]
    assert len(pids) == 3
    assert all(is_alive(pid) for pid in pids)
    return pids


async def test_job_kill_stops_every_process_within_two_seconds(ctx: Context, ws: Path) -> None:
    async with await _agent(ctx, ws) as handle:
        pids = await _start_tree(ctx, ws, handle.agent, "pids.fifo")
        pidfds = [os.pidfd_open(pid) for pid in pids]  # held: the pids cannot be reused meanwhile
        try:
            with anyio.fail_after(2):
                killed = _json(await _call(ctx, ws, handle.agent, "job_kill", id="job-1"))
                await wait_gone(pids, within=2)
        finally:
            for fd in pidfds:
                os.close(fd)
        assert killed["status"] == "killed"
        assert killed["exit_code"] is not None
        assert killed["exit_code"] < 0


async def test_disposing_the_agent_stops_its_jobs(ctx: Context, ws: Path) -> None:
    handle = await _agent(ctx, ws)
    pids = await _start_tree(ctx, ws, handle.agent, "a.fifo")
    pidfds = [os.pidfd_open(pid) for pid in pids]
    try:
        with anyio.fail_after(2):
            await handle.dispose()
            await wait_gone(pids, within=2)
    finally:
        for fd in pidfds:
            os.close(fd)


async def test_the_cap_counts_running_jobs(ctx: Context, ws: Path) -> None:
    """With max_jobs = 2 a third running job is refused; once one is killed, another may start."""
    async with await _agent(ctx, ws) as handle:
        for _ in range(2):
            await _call(ctx, ws, handle.agent, "bash", command="exec sleep 1000", background=True)
        refused = await _call(ctx, ws, handle.agent, "bash", command="true", background=True)
        assert refused.error_code == "TOOL_ERROR"
        assert "2 background jobs are running already" in result_text(refused)
        await _call(ctx, ws, handle.agent, "job_kill", id="job-1")
        again = await _call(ctx, ws, handle.agent, "bash", command="true", background=True)
        assert _json(again) == {"job_id": "job-3", "status": "running"}


async def test_jobs_are_per_agent(ctx: Context, ws: Path) -> None:
    async with await _agent(ctx, ws, "one") as one, await _agent(ctx, ws, "two") as two:
        await _call(ctx, ws, one.agent, "bash", command="true", background=True)
        other = await _call(ctx, ws, two.agent, "job_output", id="job-1")
        assert other.error_code == "TOOL_ERROR"


async def test_a_job_that_ends_is_told_to_the_model_at_its_next_step(ws: Path) -> None:
    """The job ends while the model is busy elsewhere; the next request carries a note saying so."""
    os.mkfifo(ws / "go.fifo")
    plugin = JobsPlugin()

    @tool
    async def release(execution: ToolExecution) -> str:
        """Let the job finish, and wait until it has."""
        await anyio.to_thread.run_sync((ws / "go.fifo").write_text, "x\n")
        table = plugin.table(str(execution.agent_id))
        assert table is not None
        await table.get("job-1").ended.wait()
        return "released"

    model = ScriptedModel(
        [
            ScriptedModel.tool_call("bash", {"command": "cat go.fifo >/dev/null; echo built ok", "background": True}),
            ScriptedModel.tool_call("release"),
            ScriptedModel.text("noted"),
        ]
    )
    async with Harness(plugins=[WorkspacePlugin(), plugin], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        ctx.tools.register(release)
        async with await _agent(ctx, ws) as handle:
            await handle.agent.run("build in the background")
            notes = [e for e in handle.agent.session.events if e.type == "context/message"]
    (note,) = notes
    assert note.data["message"]["source"] == {"kind": "plugin", "plugin": "jobs"}
    text = note.data["message"]["content"][0]["text"]
    assert text.startswith("[Background job job-1 ('cat go.fifo >/dev/null; echo built ok') exited with code 0 after ")
    assert "Its last output:\nbuilt ok\n" in text
    assert model.requests[2].messages[-1].content[0].text == text
    assert all("Background job" not in str(message) for message in model.requests[1].messages)


class RecordingSandbox:
    """A ``sandbox`` service that marks the commands it wraps, or refuses them."""

    name = "recording-sandbox"
    provides = ("sandbox",)

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.wrapped: list[Sequence[str]] = []

    def start(self, ctx: Any) -> None:
        ctx.provide("sandbox", self)

    async def wrap(self, argv: Sequence[str], *, cwd: str, execution: ToolExecution) -> list[str]:
        if self.refuse:
            raise RuntimeError("no sandbox here")
        self.wrapped.append(argv)
        return ["env", "JOB_SANDBOXED=yes", *argv]


@pytest.mark.parametrize("refuse", [False, True])
async def test_jobs_run_through_the_sandbox_service(ws: Path, refuse: bool) -> None:
    sandbox = RecordingSandbox(refuse)
    async with Harness(plugins=[sandbox, WorkspacePlugin(), JobsPlugin()], autoload=False) as ctx:
        async with await _agent(ctx, ws) as handle:
            started = await _call(ctx, ws, handle.agent, "bash", command="echo $JOB_SANDBOXED", background=True)
            if refuse:
                assert started.error_code == "TOOL_ERROR"
                assert "the command was not run: no sandbox here" in result_text(started)
                return
            assert _json(await _call(ctx, ws, handle.agent, "job_wait", id="job-1"))["output"] == "yes\n"
    assert sandbox.wrapped[0][1:] == ["-c", "echo $JOB_SANDBOXED"]


async def test_read_only_mode_denies_background_commands_too(ws: Path) -> None:
    config = {"plugins": {"permissions": {"mode": "read-only"}}}
    plugins = [PermissionsPlugin(), WorkspacePlugin(), JobsPlugin()]
    async with Harness(config=config, plugins=plugins, autoload=False) as ctx:
        async with await _agent(ctx, ws) as handle:
            denied = await _call(ctx, ws, handle.agent, "bash", command="touch made", background=True)
            assert denied.error_code == "DENIED"
    assert not (ws / "made").exists()


async def test_a_job_in_the_real_sandbox_is_confined_and_killed_whole(ws: Path) -> None:
    """Under dsh-permissions' bubblewrap sandbox: no capability inside, and job_kill empties its pid namespace."""
    config = {"plugins": {"permissions": {"mode": "workspace-write", "sandbox": "required"}}}
    plugins = [PermissionsPlugin(), WorkspacePlugin(), JobsPlugin()]
    os.mkfifo(ws / "up.fifo")
    # "up" only once the child has exec'd sleep, so that the test finds it by its command line
    command = (
        "grep CapEff /proc/self/status; sleep 987654.3 & "
        "until grep -q 987654 /proc/$!/cmdline; do :; done; echo up > up.fifo; wait"
    )
    async with Harness(config=config, plugins=plugins, autoload=False) as ctx:
        status = await ctx.sandbox.status()
        async with await _agent(ctx, ws) as handle:
            started = await _call(ctx, ws, handle.agent, "bash", command=command, background=True)
            if not status.available:  # the sandbox is required: the job fails closed instead
                assert started.error_code == "TOOL_ERROR"
                assert "the command was not run" in result_text(started)
                return
            assert await read_fifo(ws / "up.fifo") == "up\n"
            pids = pids_running(["sleep", "987654.3"])
            assert len(pids) == 1
            pidfds = [os.pidfd_open(pid) for pid in pids]
            try:
                with anyio.fail_after(2):
                    killed = _json(await _call(ctx, ws, handle.agent, "job_kill", id="job-1"))
                    await wait_gone(pids, within=2)
            finally:
                for fd in pidfds:
                    os.close(fd)
    assert killed["status"] == "killed"
    assert "CapEff:\t0000000000000000" in killed["output"]
