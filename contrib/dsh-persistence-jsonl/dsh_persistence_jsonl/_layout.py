"""Where a session lives on disk: the store root, and a folder name for every session id.

``<root>/<escaped id>/session.jsonl`` holds the log, ``<root>/<escaped id>/lock`` the advisory
lock. The escaping keeps every id inside the root: anything outside ``[A-Za-z0-9._-]`` is
percent-encoded (UTF-8), and so is a leading ``.`` (which rules out ``.``, ``..`` and hidden
folders), so no id can contain a separator or name a parent. The mapping is reversible, except
for ids whose escaped form would pass the file-name limit: those keep a readable prefix and end
in ``~`` plus a SHA-256 of the id (``~`` never appears otherwise). Ids are always read back from
the log's header, never from folder names.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Final

import attrs
import platformdirs

__all__ = ["BACKUP_PREFIX", "LOCK_NAME", "LOG_NAME", "TEMP_PREFIX", "Layout", "default_root", "escape_id"]

LOG_NAME: Final = "session.jsonl"
LOCK_NAME: Final = "lock"
#: a log being created is written to ``session.jsonl.tmp-<pid>-<random>``, then renamed
TEMP_PREFIX: Final = f"{LOG_NAME}.tmp-"
#: ``repair`` keeps the file it cut as ``session.jsonl.damaged-<UTC time>``
BACKUP_PREFIX: Final = f"{LOG_NAME}.damaged-"

_SAFE: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
#: file names are limited to 255 bytes on common file systems; stay well below it
_MAX_NAME: Final = 160
_KEEP: Final = 80


def default_root() -> Path:
    """The platform's user data directory for dsh, plus ``sessions``."""
    return Path(platformdirs.user_data_dir("dsh", appauthor=False)) / "sessions"


def _percent(char: str) -> str:
    return "".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))


def escape_id(session_id: str) -> str:
    """The folder name of ``session_id``: a single path component, never ``.`` or ``..``.

    :raises TypeError: ``session_id`` is not a str.
    :raises ValueError: ``session_id`` is empty.
    """
    if not isinstance(session_id, str):
        msg = f"session id must be a str, got {type(session_id).__name__}"
        raise TypeError(msg)
    if not session_id:
        msg = "session id must be a non-empty str"
        raise ValueError(msg)
    name = "".join(char if char in _SAFE else _percent(char) for char in session_id)
    if name.startswith("."):
        name = "%2E" + name[1:]
    if len(name) > _MAX_NAME:
        digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
        prefix = name[:_KEEP]
        cut = prefix.rfind("%", len(prefix) - 2)  # never split a %XX triple
        name = f"{prefix[:cut] if cut >= 0 else prefix}~{digest}"
    return name


@attrs.frozen
class Layout:
    """Paths of the store rooted at ``root`` (absolute)."""

    root: Path

    def folder(self, session_id: str) -> Path:
        """``<root>/<escaped id>``: always a direct child of the root."""
        folder = self.root / escape_id(session_id)
        assert folder.parent == self.root  # the escaping guarantees one plain component
        return folder

    def log(self, session_id: str) -> Path:
        return self.folder(session_id) / LOG_NAME

    def lock(self, session_id: str) -> Path:
        return self.folder(session_id) / LOCK_NAME
