"""The seven workspace tools as the model sees them: schemas, descriptions, and error results.

Each tool resolves its workspace from the call (``execution.cwd``) and runs its blocking file work
in a worker thread. What it refuses or cannot do it raises as a ``WorkspaceError``, a ``ToolError``
that the tool runtime makes the call's error result (``TOOL_ERROR``, text ``Error: <message>``,
saying what to do instead). The read tools are parallel-safe.
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING, Annotated

import anyio.from_thread
import anyio.to_thread
import attrs

from dsh_core import Text, Tool, ToolExecution, ToolResult, tool

from ._config import WorkspaceConfig
from ._confine import confined_command
from ._edit import edit_file as _edit_file
from ._files import list_dir as _list_dir
from ._files import read_text_file
from ._files import write_file as _write_file
from ._paths import Workspace, WorkspaceError, workspace_of
from ._search import grep as _grep
from ._shell import CommandOutcome, run_command
from ._walk import compile_glob, walk

if TYPE_CHECKING:
    from dsh_core import Context

__all__ = ["READ_TOOLS", "make_tools"]

#: tools that only read (parallel-safe); the others change files or run commands
READ_TOOLS = ("read_file", "list_dir", "glob", "grep")
#: the most lines of context grep shows around a match
_MAX_CONTEXT = 10

def make_tools(ctx: Context, config: WorkspaceConfig) -> list[Tool]:
    """The workspace tools, bound to the plugin's context (for its services) and configuration."""

    async def workspace_for(execution: ToolExecution) -> Workspace:
        return await workspace_of(execution, ctx)

    @tool(
        parallel_safe=True,
        description=(
            "Read a text file of the workspace, with line numbers (a tab follows each number). "
            f"Shows at most {config.max_read_lines} lines per call; the result says which offset "
            "continues a long file. Binary files are refused."
        ),
    )
    async def read_file(
        path: str,
        offset: Annotated[int | None, {"minimum": 1}] = None,
        limit: Annotated[int | None, {"minimum": 1}] = None,
        *,
        execution: ToolExecution,
    ) -> str:
        """Read a text file of the workspace, with line numbers.

        Args:
            path: the file, relative to the workspace root
            offset: the first line to show, counting from 1 (default 1)
            limit: how many lines to show at most
        """
        if offset is not None and offset < 1:
            msg = f"offset counts lines from 1, got {offset}"
            raise WorkspaceError(msg)
        if limit is not None and limit < 1:
            msg = f"limit must be at least 1, got {limit}"
            raise WorkspaceError(msg)
        lines = config.max_read_lines if limit is None else min(limit, config.max_read_lines)
        target = await (await workspace_for(execution)).resolve(path, "read")
        return await anyio.to_thread.run_sync(
            read_text_file, target, offset or 1, lines, config.max_read_chars
        )

    @tool
    async def write_file(path: str, content: str, *, execution: ToolExecution) -> str:
        """Create a file, or replace all of an existing file's content. Missing directories are created.
        To change part of a file, use edit_file instead.

        Args:
            path: the file, relative to the workspace root
            content: the complete new content of the file
        """
        target = await (await workspace_for(execution)).resolve(path, "write")
        return await anyio.to_thread.run_sync(_write_file, target, content)

    @tool
    async def edit_file(
        path: str,
        old_text: str,
        new_text: str,
        replace_all: bool = False,
        *,
        execution: ToolExecution,
    ) -> str:
        """Replace exact text in a file. old_text must occur exactly once, unless replace_all is true.
        Copy old_text from the file exactly, whitespace included and without read_file's line
        numbers; include enough surrounding lines to make it unique.

        Args:
            path: the file, relative to the workspace root
            old_text: the exact text to replace
            new_text: the text to put in its place
            replace_all: replace every occurrence instead of requiring exactly one
        """
        target = await (await workspace_for(execution)).resolve(path, "write")
        return await anyio.to_thread.run_sync(_edit_file, target, old_text, new_text, replace_all)

    @tool(parallel_safe=True)
    async def list_dir(path: str = ".", *, execution: ToolExecution) -> str:
        """List a directory of the workspace: subdirectories (ending in /) first, then files with sizes.

        Args:
            path: the directory, relative to the workspace root (default: the root)
        """
        target = await (await workspace_for(execution)).resolve(path, "read")
        return await anyio.to_thread.run_sync(_list_dir, target, config.max_results)

    @tool(parallel_safe=True)
    async def glob(pattern: str, path: str = ".", *, execution: ToolExecution) -> str:
        """Find files and directories by name pattern, e.g. '**/*.py', 'src/*.{ts,tsx}', 'docs/**'.
        '*' matches within one directory level and '**' across levels; a pattern without '/'
        matches only directly in path. Directories are shown with a trailing '/'.

        Args:
            pattern: the glob pattern, relative to path
            path: the directory to search, relative to the workspace root (default: the root)
        """
        workspace = await workspace_for(execution)
        base = await workspace.resolve(path, "read")
        try:
            matches, depth = compile_glob(pattern)
        except ValueError as exc:
            raise WorkspaceError(str(exc)) from None

        def search() -> tuple[list[str], int]:
            if not os.path.isdir(base.real):
                msg = f"{base.shown!r} is not a directory; glob searches below a directory"
                raise WorkspaceError(msg)
            found: list[str] = []
            total = 0
            for relative, real, is_dir in walk(
                base.real, max_depth=depth, check=anyio.from_thread.check_cancelled
            ):
                if matches(relative):
                    total += 1
                    if len(found) < config.max_results:
                        found.append(workspace.show(real) + ("/" if is_dir else ""))
            return sorted(found), total

        found, total = await anyio.to_thread.run_sync(search)
        if not found:
            place = "the workspace" if base.shown == "." else base.shown
            return f"No files match {pattern!r} in {place}."
        if total > len(found):
            found.append(f"[{total - len(found)} more matches not shown; narrow the pattern]")
        return "\n".join(found)

    @tool(parallel_safe=True)
    async def grep(
        pattern: str,
        path: str = ".",
        glob: str | None = None,
        ignore_case: bool = False,
        context: Annotated[int, {"minimum": 0, "maximum": _MAX_CONTEXT}] = 0,
        *,
        execution: ToolExecution,
    ) -> str:
        """Search file contents for a regular expression; prints path:line:text for each matching line.

        Args:
            pattern: the regular expression
            path: a file or directory to search, relative to the workspace root (default: the root)
            glob: only search files whose names match this pattern, e.g. '*.py' (with '/': paths below path)
            ignore_case: match without regard to case
            context: lines of context to show before and after each match (0 to 10)
        """
        if not 0 <= context <= _MAX_CONTEXT:
            msg = f"context must be between 0 and {_MAX_CONTEXT} lines, got {context}"
            raise WorkspaceError(msg)
        workspace = await workspace_for(execution)
        target = await workspace.resolve(path, "read")
        return await _grep(
            workspace,
            target,
            pattern,
            file_glob=glob,
            ignore_case=ignore_case,
            context=context,
            max_matches=config.max_results,
            backend=config.search,
        )

    @tool(
        description=(
            "Run a shell command with bash in the workspace root and return its output and exit code. "
            "stdout and stderr are merged; long output keeps its start and end. Commands cannot read "
            "input. Processes the command leaves in the background are stopped when it ends. "
            f"The timeout is {config.bash_timeout:g} seconds unless given (at most {config.bash_max_timeout:g})."
        )
    )
    async def bash(
        command: str,
        timeout: Annotated[float | None, {"exclusiveMinimum": 0}] = None,  # noqa: ASYNC109 - the argument the model sees
        *,
        execution: ToolExecution,
    ) -> str | ToolResult:
        """Run a shell command in the workspace root.

        Args:
            command: the command line, e.g. 'pytest -x tests/test_app.py'
            timeout: seconds before the command is stopped
        """
        limit = config.bash_timeout if timeout is None else timeout
        if not 0 < limit <= config.bash_max_timeout:
            msg = f"timeout must be more than 0 and at most {config.bash_max_timeout:g} seconds, got {limit:g}"
            raise WorkspaceError(msg)
        # Resolved in the loop's thread: the spawn below waits on the same directory anyway (the
        # child's chdir happens before the spawn returns), and a worker thread would cost two
        # trips through the scheduler per command.
        root = (await workspace_of(execution, ctx, in_thread=False)).root
        prepared = await confined_command(ctx, command, shell=config.shell, cwd=root, execution=execution)
        try:
            outcome = await run_command(
                prepared.argv,
                cwd=root,
                time_limit=limit,
                max_output=config.max_output_bytes,
                env=prepared.env,
                pass_fds=prepared.pass_fds,  # run_command closes them once the process has started
            )
        except OSError as exc:
            msg = f"the command could not be started: {exc.strerror or exc}"
            raise WorkspaceError(msg) from exc
        return _command_result(outcome, limit)

    # The longest timeout is configuration, so its bound joins the schema here.
    bash = _with_bound(bash, "timeout", maximum=config.bash_max_timeout)
    return [read_file, write_file, edit_file, list_dir, glob, grep, bash]


def _with_bound(found: Tool, parameter: str, **keywords: float) -> Tool:
    """``found`` with JSON Schema ``keywords`` added to one parameter's schema."""
    properties = dict(found.parameters["properties"])
    properties[parameter] = {**properties[parameter], **keywords}
    return attrs.evolve(found, parameters={**found.parameters, "properties": properties})


def _command_result(outcome: CommandOutcome, limit: float) -> str | ToolResult:
    output = outcome.output if outcome.output.strip() else "(no output)\n"
    if not output.endswith("\n"):
        output += "\n"
    if outcome.timed_out:
        text = (
            f"{output}[timed out after {limit:g} s: the command and every process it started were stopped. "
            "Run something quicker, or pass a longer timeout.]"
        )
        return ToolResult(
            content=(Text(text),), is_error=True, error_code="TIMEOUT", metadata={"timed_out": True}
        )
    code = outcome.exit_code
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        status = f"killed by {name}"
    else:
        status = f"exit code {code}"
    return ToolResult(
        content=(Text(f"{output}[{status}; {outcome.seconds:.1f} s]"),),
        metadata={"exit_code": code, "output_cut": outcome.cut},
    )
