"""grep: search file contents with ripgrep when it is installed, or with Python's ``re`` otherwise.

Both backends print the same shape, paths relative to the workspace::

    src/app.py:12:def main():        a matching line
    src/app.py-13-    run()          a context line (with ``context`` > 0)
    --                               a gap between groups

and stop after ``max_matches`` matching lines. They differ where their engines do: ripgrep's
regex dialect is Rust's and it skips what ``.gitignore`` ignores; the Python backend uses ``re``
and skips only ``.git``. Both skip binary files and search dotfiles, and neither follows
symlinked directories. ``glob`` filters the files searched (``*.py``: by file name at any depth;
a pattern with ``/``: by path below ``path``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable

import anyio
import anyio.abc
import anyio.from_thread
import anyio.to_thread

from ._config import SearchBackend
from ._files import BINARY_SNIFF_BYTES, is_binary
from ._paths import ResolvedPath, Workspace, WorkspaceError
from ._walk import compile_glob, walk

__all__ = ["grep"]

#: characters of a matching line shown
_MAX_COLUMNS = 500
#: files larger than this are skipped by the Python backend
_MAX_FILE_BYTES = 20 * 1024 * 1024
#: bytes of ripgrep's error output kept for the message
_MAX_STDERR = 4000


async def grep(
    workspace: Workspace,
    target: ResolvedPath,
    pattern: str,
    *,
    file_glob: str | None,
    ignore_case: bool,
    context: int,
    max_matches: int,
    backend: SearchBackend,
) -> str:
    """Search ``target`` (a file or a directory) for the regex ``pattern``; returns the report.

    :raises WorkspaceError: for a bad pattern or glob, a missing path, or a failing ripgrep.
    """
    if not pattern:
        msg = "the pattern is empty; give a regular expression to search for"
        raise WorkspaceError(msg)
    if not await anyio.to_thread.run_sync(os.path.exists, target.real):
        msg = f"there is no file or directory {target.shown!r} to search; use list_dir or glob to find it"
        raise WorkspaceError(msg)
    rg = shutil.which("rg") if backend != "python" else None
    if backend == "ripgrep" and rg is None:
        msg = "grep is configured to use ripgrep (search = 'ripgrep'), but 'rg' is not installed on PATH"
        raise WorkspaceError(msg)
    if rg is not None:
        lines, capped = await _ripgrep(
            rg, workspace, target, pattern, file_glob, ignore_case, context, max_matches
        )
    else:
        lines, capped = await anyio.to_thread.run_sync(
            _python_grep,
            workspace,
            target,
            pattern,
            file_glob,
            ignore_case,
            context,
            max_matches,
            anyio.from_thread.check_cancelled,
        )
    if not lines:
        where = "the workspace" if target.shown == "." else target.shown
        return f"No matches for /{pattern}/ in {where}."
    if capped:
        lines.append(f"[stopped after {max_matches} matches; narrow the pattern, the path or the glob]")
    return "\n".join(lines)


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_COLUMNS else f"{text[:_MAX_COLUMNS]}... [line cut]"


# ---------------------------------------------------------------------- ripgrep


async def _ripgrep(
    rg: str,
    workspace: Workspace,
    target: ResolvedPath,
    pattern: str,
    file_glob: str | None,
    ignore_case: bool,
    context: int,
    max_matches: int,
) -> tuple[list[str], bool]:
    argv = [rg, "--null", "--line-number", "--no-heading", "--with-filename", "--color=never"]
    argv += ["--sort=path", "--hidden", "--glob=!.git", "--no-config"]
    if ignore_case:
        argv.append("--ignore-case")
    if context:
        argv.append(f"--context={context}")
    if file_glob:
        argv.append(f"--glob={file_glob}")
    argv += ["--regexp", pattern]
    if target.shown != ".":
        argv += ["--", target.shown]
    with anyio.CancelScope(shield=True):  # a cancel during the spawn would lose the process handle
        process = await anyio.open_process(
            argv,
            cwd=workspace.root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    lines: list[str] = []
    errors = bytearray()
    matches = 0
    capped = False
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_collect, process.stderr, errors)
            pending = b""
            async for chunk in _stream(process.stdout):
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for raw in complete:
                    line, is_match = _rg_line(raw)
                    lines.append(line)
                    matches += is_match
                    if matches >= max_matches:
                        capped = True
                        break
                if capped:
                    break
            if capped:
                process.kill()
            await process.wait()
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.aclose()
    if process.returncode == 2 and not capped and not lines:
        detail = errors.decode("utf-8", "replace").strip() or "no details"
        msg = f"ripgrep could not search for /{pattern}/: {detail}"
        raise WorkspaceError(msg)
    return lines, capped


def _stream(stream: anyio.abc.ByteReceiveStream | None) -> anyio.abc.ByteReceiveStream:
    if stream is None:  # the streams were opened with PIPE; this is a bug, not a user error
        msg = "the ripgrep process has no output pipe"
        raise RuntimeError(msg)
    return stream


async def _collect(stream: anyio.abc.ByteReceiveStream | None, into: bytearray) -> None:
    async for chunk in _stream(stream):
        if len(into) < _MAX_STDERR:
            into += chunk[: _MAX_STDERR - len(into)]


def _rg_line(raw: bytes) -> tuple[str, int]:
    """One line of ``rg --null`` output in the common shape, and 1 if it is a match."""
    text = raw.decode("utf-8", "replace")
    path, nul, rest = text.partition("\x00")
    if not nul:  # a `--` group separator
        return text, 0
    number = ""
    for char in rest:
        if not char.isdigit():
            break
        number += char
    separator = rest[len(number) : len(number) + 1]
    body = rest[len(number) + 1 :]
    return f"{path}{separator}{number}{separator}{_cut(body)}", 1 if separator == ":" else 0


# ---------------------------------------------------------------------- python


def _python_grep(
    workspace: Workspace,
    target: ResolvedPath,
    pattern: str,
    file_glob: str | None,
    ignore_case: bool,
    context: int,
    max_matches: int,
    check: Callable[[], None],
) -> tuple[list[str], bool]:
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        msg = f"the pattern /{pattern}/ is not a valid regular expression: {exc}"
        raise WorkspaceError(msg) from None
    wanted = _file_filter(file_glob)
    if os.path.isdir(target.real):
        files = [
            (relative, real)
            for relative, real, is_dir in walk(target.real, check=check)
            if not is_dir and not os.path.islink(real) and wanted(relative)
        ]
    else:
        files = [(os.path.basename(target.real), target.real)]
    lines: list[str] = []
    matches = 0
    for _, real in files:
        check()
        remaining = max_matches - matches
        found, count = _search_file(real, workspace.show(real), regex, context, remaining)
        if found and lines and context:
            lines.append("--")
        lines.extend(found)
        matches += count
        if matches >= max_matches:
            return lines, True
    return lines, False


def _file_filter(file_glob: str | None) -> Callable[[str], bool]:
    if not file_glob:
        return lambda relative: True
    try:
        matches, _ = compile_glob(file_glob)
    except ValueError as exc:
        raise WorkspaceError(str(exc)) from None
    if "/" in file_glob:
        return matches
    return lambda relative: matches(relative.rpartition("/")[2])


def _search_file(
    real: str, shown: str, regex: re.Pattern[str], context: int, limit: int
) -> tuple[list[str], int]:
    try:
        if os.path.getsize(real) > _MAX_FILE_BYTES:
            return [], 0
        with open(real, "rb") as raw:
            data = raw.read()
    except OSError:
        return [], 0
    if is_binary(data[:BINARY_SNIFF_BYTES]):
        return [], 0
    file_lines = data.decode("utf-8", "replace").splitlines()
    out: list[str] = []
    count = 0
    last_shown = -1
    for index, line in enumerate(file_lines):
        if not regex.search(line):
            continue
        first = max(index - context, last_shown + 1)
        if out and first > last_shown + 1:
            out.append("--")
        for before in range(first, index):
            out.append(f"{shown}-{before + 1}-{_cut(file_lines[before])}")
        out.append(f"{shown}:{index + 1}:{_cut(line)}")
        last_shown = index
        count += 1
        if count >= limit:
            return out, count
        for after in range(index + 1, min(len(file_lines), index + 1 + context)):
            if regex.search(file_lines[after]):
                break  # the next loop turn prints it as a match
            out.append(f"{shown}-{after + 1}-{_cut(file_lines[after])}")
            last_shown = after
    return out, count
