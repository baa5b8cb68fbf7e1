"""The ``jobs`` plugin: ``bash`` gains ``background``, each agent gets job tools, endings reach the model."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import anyio
import attrs

from dsh_core import Tool, ToolExecution, UserMessage, hookimpl, tool
from dsh_core.session_log import ContextMessageEvent

from ._table import JobTable, describe_end

if TYPE_CHECKING:
    from dsh_core import Context

__all__ = ["JobsConfig", "JobsPlugin"]

_BACKGROUND_NOTE = (
    " With background: true the command runs as a background job (no timeout) and the call returns "
    'at once with {"job_id", "status": "running"}: use it for servers, watchers and long builds, and '
    "follow the job with job_output, job_wait and job_kill. You are told when a job ends."
)


def _positive(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if isinstance(value, bool) or not value > 0:
        msg = f"{attribute.name} must be greater than 0, got {value!r}"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class JobsConfig:
    """The ``[plugins.jobs]`` table; every key is optional."""

    #: background jobs one agent may have running at once
    max_jobs: int = attrs.field(default=8, validator=_positive)
    #: characters of a job's latest output kept for job_output
    max_output_chars: int = attrs.field(default=1_000_000, validator=_positive)
    #: seconds job_wait waits when the call gives no timeout
    wait_timeout: float = attrs.field(default=30.0, validator=_positive)
    #: the longest timeout a job_wait call may ask for
    max_wait_timeout: float = attrs.field(default=600.0, validator=_positive)
    #: characters of a job's last output shown in the note that it ended
    note_chars: int = attrs.field(default=2000, validator=_positive)
    #: the shell that runs jobs (as ``[plugins.workspace] shell`` does for bash)
    shell: str = "bash"


class JobsPlugin:
    """Background commands for every agent that has the workspace's ``bash``.

    Each agent gets, through its own context, a ``bash`` that shadows the workspace's with one
    more parameter, ``background``, and the tools ``job_output``, ``job_wait`` and ``job_kill``.
    A call without ``background`` runs the workspace's ``bash`` unchanged. Jobs run through the
    same ``sandbox`` service as ``bash``, and the permission rules see the same ``bash`` call. The
    jobs belong to the agent's context: disposing the agent stops each of them, with every
    process it started. At each step, jobs that ended since the model last looked are told to it
    as a ``context/message`` (source ``{"kind": "plugin", "plugin": "jobs"}``).
    """

    name = "jobs"
    requires: ClassVar[tuple[str, ...]] = ("tools",)
    uses: ClassVar[tuple[str, ...]] = ("sandbox",)
    Config = JobsConfig

    def __init__(self) -> None:
        self._config = JobsConfig()
        self._ctx: Context | None = None
        self._tables: dict[str, JobTable] = {}

    def start(self, ctx: Context) -> None:
        if isinstance(ctx.config, JobsConfig):
            self._config = ctx.config
        self._ctx = ctx

    def table(self, agent_id: str) -> JobTable | None:
        """The jobs of agent ``agent_id`` (``None`` when it has none: no bash, or gone)."""
        return self._tables.get(agent_id)

    @hookimpl
    def dsh_agent_created(self, agent: Any) -> None:
        if self._ctx is None:
            return
        original = self._ctx.tools.get("bash")
        if original is None:  # no workspace: nothing can start a job
            return
        agent_ctx: Context = agent.ctx
        table = JobTable(agent_ctx, self._config)
        self._tables[agent.id] = table
        agent_id: str = agent.id

        def forget() -> None:
            self._tables.pop(agent_id, None)

        agent_ctx.effect(forget)
        agent_ctx.tools.register(_background_bash(original, table))
        for job_tool in _job_tools(table, self._config):
            agent_ctx.tools.register(job_tool)

    @hookimpl
    def dsh_agent_pre_step(self, agent: Any) -> None:
        table = self._tables.get(agent.id)
        if table is None:
            return
        for job in table.unseen_endings():
            note = describe_end(job, self._config.note_chars)
            message = UserMessage(content=note, source={"kind": "plugin", "plugin": self.name})
            agent.session.append(ContextMessageEvent(message=message))


def _background_bash(original: Tool, table: JobTable) -> Tool:
    """The workspace's ``bash`` with ``background``: a job when true, the original call otherwise."""

    async def bash(execution: ToolExecution, background: bool = False, **arguments: Any) -> Any:
        if background:
            job = await table.start(str(arguments["command"]), execution)
            return {"job_id": job.id, "status": "running"}
        value = original.function(**original.keyword_arguments(arguments, execution))
        return await value if inspect.isawaitable(value) else value

    properties = dict(original.parameters["properties"])
    properties["background"] = {
        "type": "boolean",
        "description": "run the command as a background job and return at once with its job_id",
    }
    return attrs.evolve(
        original,
        function=bash,
        description=original.description + _BACKGROUND_NOTE,
        parameters={**original.parameters, "properties": properties},
    )


def _job_tools(table: JobTable, config: JobsConfig) -> list[Tool]:
    @tool(read_only=True)
    def job_output(id: str, since: Annotated[int | None, {"minimum": 0}] = None) -> str:
        """The output of a background job that you have not read yet, with its status; returns JSON
        {"job_id", "status": "running"|"exited"|"killed", "exit_code", "output"}.

        Args:
            id: the job's id, e.g. 'job-1'
            since: read from this character of the job's output instead (0: from the start)
        """
        return table.report(table.get(id), since)

    @tool(read_only=True)
    async def job_wait(
        id: str,
        timeout: Annotated[float | None, {"exclusiveMinimum": 0}] = None,  # noqa: ASYNC109 - the model's argument
    ) -> str:
        """Wait until a background job ends, or the timeout passes; returns JSON {"job_id", "status",
        "exit_code", "output"} with the output you have not read yet.

        Args:
            id: the job's id, e.g. 'job-1'
            timeout: seconds to wait at most (default 30)
        """
        job = table.get(id)
        with anyio.move_on_after(config.wait_timeout if timeout is None else timeout):
            await job.ended.wait()
        return table.report(job)

    @tool(read_only=True)
    async def job_kill(id: str) -> str:
        """Stop a background job and every process it started; returns JSON {"job_id", "status",
        "exit_code", "output"} with the output you have not read yet.

        Args:
            id: the job's id, e.g. 'job-1'
        """
        job = table.get(id)
        await job.kill()  # a job that already ended: nothing to stop
        return table.report(job)

    # The longest wait is configuration, so its bound joins the schema here.
    properties = dict(job_wait.parameters["properties"])
    properties["timeout"] = {**properties["timeout"], "maximum": config.max_wait_timeout}
    bounded_wait = attrs.evolve(job_wait, parameters={**job_wait.parameters, "properties": properties})
    return [job_output, bounded_wait, job_kill]


