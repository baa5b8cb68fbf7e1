"""dsh plugin that keeps every session in one SQLite database file: WAL, one owner per session, crash-repaired.

Load the ``persistence-sqlite`` plugin (entry point) and set ``[plugins.persistence-sqlite]``
``path`` and ``batch_delay``; ``ctx.agents.resume(id)`` then continues a stored session. Written
against the public store seam alone (``dsh_core.SessionPersistence``, ``dsh_core.persistence``):
its errors are the core's.
"""

from ._plugin import PersistenceConfig as PersistenceConfig
from ._plugin import PersistencePlugin as PersistencePlugin
from ._plugin import default_path as default_path
from ._schema import SCHEMA_VERSION as SCHEMA_VERSION
from ._store import SqliteSessionStore as SqliteSessionStore

__all__ = ["SCHEMA_VERSION", "PersistenceConfig", "PersistencePlugin", "SqliteSessionStore", "default_path"]
