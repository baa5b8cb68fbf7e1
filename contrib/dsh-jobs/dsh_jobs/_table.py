"""One agent's jobs: starting them sandboxed like ``bash``, the cap, finding them by id, and the report a tool returns."""

from __future__ import annotations

import contextlib
import json
import os
from typing import TYPE_CHECKING

import anyio
from dsh_workspace import confined_command, start_process

from dsh_core import ToolError, ToolExecution

from ._job import Job

if TYPE_CHECKING:
    from dsh_core import Context

    from ._plugin import JobsConfig

__all__ = ["JobTable", "describe_end"]

#: characters of output one job_output or job_wait call returns at most
_MOST_SHOWN = 30_000


class JobTable:
    """The jobs of one agent, owned by its context: disposing it stops every one of them."""

    def __init__(self, ctx: Context, config: JobsConfig) -> None:
        self._ctx = ctx
        self._config = config
        self._jobs: dict[str, Job] = {}
        self._next = 1

    @property
    def jobs(self) -> list[Job]:
        return list(self._jobs.values())

    def running(self) -> list[Job]:
        return [job for job in self._jobs.values() if job.status == "running"]

    async def start(self, command: str, execution: ToolExecution) -> Job:
        """Start ``command`` in the background, in the call's workspace, through the sandbox service.

        :raises ToolError: the cap is reached, the shell is missing, the sandbox refuses, or the
            process cannot start.
        """
        if len(self.running()) >= self._config.max_jobs:
            msg = (
                f"{self._config.max_jobs} background jobs are running already (the most this agent may run); "
                "wait for one (job_wait) or stop one (job_kill) first"
            )
            raise ToolError(msg)
        root = _workspace_root(execution)
        # As bash's: no shell, or a refusing sandbox (it fails closed), raises a ToolError.
        prepared = await confined_command(self._ctx, command, shell=self._config.shell, cwd=root, execution=execution)
        # Shielded, as bash's own spawn: a cancel landing mid-spawn would lose the process handle.
        with anyio.CancelScope(shield=True):
            try:
                process = await start_process(
                    prepared.argv, cwd=root, env=prepared.env, pass_fds=prepared.pass_fds
                )
            except OSError as exc:
                msg = f"the command could not be started: {exc.strerror or exc}"
                raise ToolError(msg) from exc
            finally:
                for fd in prepared.pass_fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)
        job = Job(f"job-{self._next}", command, process, self._config.max_output_chars)
        self._next += 1
        self._jobs[job.id] = job
        self._ctx.start_task(job.watch, name=f"jobs: {job.id}")
        self._forget_old()
        return job

    def get(self, job_id: str) -> Job:
        job = self._jobs.get(job_id)
        if job is None:
            known = ", ".join(self._jobs) or "none"
            msg = (
                f"there is no job {job_id!r} (this agent's jobs: {known}); jobs end with the process "
                "that ran them, so none survives a restart"
            )
            raise ToolError(msg)
        return job

    def report(self, job: Job, since: int | None = None) -> str:
        """The JSON a job tool returns: ``{job_id, status, exit_code, output}``, output from the cursor."""
        output = job.output.take(since, _MOST_SHOWN)
        if job.status != "running" and job.output.read_to >= job.output.total:
            job.end_seen = True
        return json.dumps(
            {"job_id": job.id, "status": job.status, "exit_code": job.exit_code, "output": output},
            ensure_ascii=False,
        )

    def unseen_endings(self) -> list[Job]:
        """Jobs that ended without the model having been shown it; marks them seen."""
        ended = [job for job in self._jobs.values() if job.status != "running" and not job.end_seen]
        for job in ended:
            job.end_seen = True
        return ended

    def _forget_old(self) -> None:
        """Keep the records of at most 4 times max_jobs jobs: the oldest ended ones go first."""
        ended = [job_id for job_id, job in self._jobs.items() if job.status != "running"]
        for job_id in ended[: max(0, len(self._jobs) - 4 * self._config.max_jobs)]:
            del self._jobs[job_id]


def _workspace_root(execution: ToolExecution) -> str:
    if not execution.cwd:
        msg = "background jobs run in the agent's workspace, but this agent has no working directory"
        raise ToolError(msg)
    root = os.path.realpath(execution.cwd)
    if not os.path.isdir(root):
        msg = f"the workspace {execution.cwd} (this agent's cwd) is not an existing directory"
        raise ToolError(msg)
    return root


def describe_end(job: Job, tail: int) -> str:
    """The note a step gets about a job that ended: how, after how long, and its last output."""
    how = f"exited with code {job.exit_code}" if job.status == "exited" else f"was killed ({job.exit_code})"
    last = job.output.tail(tail)
    shown = f" Its last output:\n{last}" if last.strip() else " It printed nothing."
    return (
        f"[Background job {job.id} ({job.command!r}) {how} after {job.seconds or 0:.1f} s.{shown}\n"
        f"job_output {{\"id\": \"{job.id}\"}} shows the output you have not read.]"
    )


