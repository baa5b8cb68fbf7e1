"""File operations behind read_file, write_file and list_dir: blocking code, run in a worker thread.

Every function takes a path already resolved and checked by ``Workspace.resolve`` and returns
the text the model sees, or raises ``WorkspaceError`` with a message that says what to do next.
Writes are atomic: a temporary file in the same directory, fsynced, then renamed over the target.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import secrets
import stat

from ._open import open_checked
from ._paths import ResolvedPath, WorkspaceError

__all__ = ["BINARY_SNIFF_BYTES", "atomic_write", "is_binary", "list_dir", "read_text_file", "write_file"]

#: how much of a file is inspected to tell text from binary
BINARY_SNIFF_BYTES = 8192
#: characters of one line shown before it is cut
MAX_LINE_CHARS = 2000


def is_binary(head: bytes) -> bool:
    """A NUL byte in the first block means binary (what git and grep use too)."""
    return b"\x00" in head


def _missing(path: ResolvedPath) -> WorkspaceError:
    parent = os.path.dirname(path.real)
    hint = ""
    try:
        names = os.listdir(parent)
    except OSError:
        names = []
    close = difflib.get_close_matches(os.path.basename(path.real), names, n=3, cutoff=0.6)
    if close:
        shown_parent = os.path.dirname(path.shown)
        hint = " Did you mean: " + ", ".join(repr(os.path.join(shown_parent, name)) for name in close) + "?"
    elif not os.path.isdir(parent):
        hint = f" Its directory {os.path.dirname(path.shown) or '.'!r} does not exist either."
    return WorkspaceError(f"there is no file {path.shown!r}.{hint} Use list_dir or glob to find files.")


def _os_error(path: ResolvedPath, exc: OSError, verb: str) -> WorkspaceError:
    reason = exc.strerror or str(exc)
    return WorkspaceError(f"cannot {verb} {path.shown!r}: {reason}")


# ---------------------------------------------------------------------- read


def read_text_file(path: ResolvedPath, offset: int, limit: int, max_chars: int) -> str:
    """Lines ``offset`` .. ``offset + limit - 1`` (from 1) of a text file, numbered, within ``max_chars``.

    The text ends with a note when more lines follow, saying which ``offset`` continues.

    :raises WorkspaceError: missing file, directory, binary file, offset past the end, OS error.
    """
    if os.path.isdir(path.real):
        msg = f"{path.shown!r} is a directory, not a file; use list_dir to see what it holds"
        raise WorkspaceError(msg)
    try:
        with os.fdopen(open_checked(path.real, path.shown), "rb") as raw:
            head = raw.read(BINARY_SNIFF_BYTES)
            size = os.fstat(raw.fileno()).st_size
    except FileNotFoundError:
        raise _missing(path) from None
    except OSError as exc:
        raise _os_error(path, exc, "read") from None
    if is_binary(head):
        msg = (
            f"{path.shown!r} is a binary file ({size} bytes); read_file shows text only. "
            "Inspect it with bash (for example 'file' or 'xxd | head') if you must."
        )
        raise WorkspaceError(msg)
    if size == 0:
        return f"({path.shown} is empty)"
    shown: list[str] = []
    used = 0
    number = 0
    more = False
    try:
        with open(open_checked(path.real, path.shown), encoding="utf-8", errors="replace") as text:
            for number, line in enumerate(text, start=1):
                if number < offset:
                    continue
                if len(shown) >= limit:
                    more = True
                    break
                body = line.rstrip("\r\n")
                if len(body) > MAX_LINE_CHARS:
                    body = f"{body[:MAX_LINE_CHARS]}... [line cut: {len(body)} characters]"
                entry = f"{number:>6}\t{body}"
                if shown and used + len(entry) + 1 > max_chars:
                    more = True
                    break
                shown.append(entry)
                used += len(entry) + 1
    except OSError as exc:
        raise _os_error(path, exc, "read") from None
    if not shown:
        msg = f"offset {offset} is past the end of {path.shown!r}, which has {number} line(s)"
        raise WorkspaceError(msg)
    last = offset + len(shown) - 1
    if more:
        shown.append(
            f"[showing lines {offset}-{last}; more follow: call read_file with offset={last + 1} to continue]"
        )
    return "\n".join(shown)


# ---------------------------------------------------------------------- write


def atomic_write(real: str, data: bytes, shown: str | None = None) -> None:
    """Replace ``real`` with ``data`` atomically: temp file in the same directory, fsync, rename.

    Everything happens through a descriptor of the directory, checked to be the resolved one, so
    a symlink swapped in on the way cannot lead the write elsewhere. An existing file keeps its
    permission bits. The directory is fsynced so the rename survives a crash. The temp file is
    removed if anything fails.

    :raises PathChangedError: when the directory is no longer the one resolved.
    """
    directory, name = os.path.split(real)
    dir_fd = open_checked(directory, shown or directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            mode = stat.S_IMODE(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask  # what open() would have made
        temp = f".{name}.{secrets.token_hex(6)}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fchmod(out.fileno(), mode)
                os.fsync(out.fileno())
            os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)
            raise
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_file(path: ResolvedPath, content: str) -> str:
    """Write ``content`` (UTF-8) to ``path``, creating missing parent directories.

    :raises WorkspaceError: when the path is a directory, or the OS refuses.
    """
    if os.path.isdir(path.real):
        msg = f"{path.shown!r} is a directory; give the path of a file inside it"
        raise WorkspaceError(msg)
    existed = os.path.exists(path.real)
    data = content.encode("utf-8")
    try:
        os.makedirs(os.path.dirname(path.real), exist_ok=True)
        atomic_write(path.real, data, path.shown)
    except OSError as exc:
        raise _os_error(path, exc, "write") from None
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    state = "overwrote" if existed else "created"
    return f"Wrote {_count(len(data), 'byte')} ({_count(lines, 'line')}) to {path.shown} ({state})."


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


# ---------------------------------------------------------------------- list


def _describe_entry(entry: os.DirEntry[str]) -> str:
    try:
        if entry.is_symlink():
            return f"{entry.name} -> {os.readlink(entry.path)}"
        if entry.is_dir():
            return f"{entry.name}/"
        return f"{entry.name}  ({entry.stat().st_size} bytes)"
    except OSError:
        return f"{entry.name}  (unreadable)"


def list_dir(path: ResolvedPath, max_entries: int) -> str:
    """The entries of a directory: directories first (``name/``), then files with sizes and symlinks.

    :raises WorkspaceError: when the path is missing, not a directory, or unreadable.
    """
    try:
        with os.scandir(path.real) as scan:
            entries = list(scan)
    except FileNotFoundError:
        raise _missing(path) from None
    except NotADirectoryError:
        msg = f"{path.shown!r} is a file, not a directory; use read_file to read it"
        raise WorkspaceError(msg) from None
    except OSError as exc:
        raise _os_error(path, exc, "list") from None
    if not entries:
        return f"{path.shown}/ is empty."

    def order(entry: os.DirEntry[str]) -> tuple[bool, str]:
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        return (not is_dir, entry.name)

    entries.sort(key=order)
    lines = [f"{path.shown}/ ({len(entries)} entries):"]
    lines.extend(_describe_entry(entry) for entry in entries[:max_entries])
    if len(entries) > max_entries:
        lines.append(f"[{len(entries) - max_entries} more entries not shown; use glob to narrow the listing]")
    return "\n".join(lines)
