"""Opening what ``Workspace.resolve`` resolved, and nothing else, even if the tree changes meanwhile.

A path is resolved (symlinks followed) and checked, then opened: between the two, a command or
another process may swap a directory on the way for a symlink that points out of the workspace
(a symlink race). So the file tools open a resolved path without following a symlink at its end
(``O_NOFOLLOW``), and then ask the kernel which file they got (``/proc/self/fd``): a descriptor
whose path is not the resolved one is closed and refused. Writes go through a descriptor of the
checked directory (``dir_fd``), so the temporary file and the rename land where the check said.
"""

from __future__ import annotations

import errno
import os

from ._paths import WorkspaceError

__all__ = ["PathChangedError", "open_checked"]


class PathChangedError(WorkspaceError):
    """The path led somewhere else when it was opened than when it was resolved."""


def _changed(shown: str) -> PathChangedError:
    return PathChangedError(
        f"{shown!r} changed while it was being opened (a symlink appeared on the way), so it was not "
        "touched. Resolve what the path is now (list_dir) and call again."
    )


def open_checked(real: str, shown: str, flags: int = os.O_RDONLY) -> int:
    """A descriptor of ``real`` (absolute, symlinks resolved) opened with ``flags``, proven to be ``real``.

    :raises PathChangedError: when a symlink now stands at ``real`` or on the way to it.
    :raises OSError: as ``os.open`` does (missing file, permission).
    """
    try:
        fd = os.open(real, flags | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _changed(shown) from None
        raise
    try:
        opened = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return fd  # no /proc: the O_NOFOLLOW check is all there is
    if opened != real:
        os.close(fd)
        raise _changed(shown)
    return fd
