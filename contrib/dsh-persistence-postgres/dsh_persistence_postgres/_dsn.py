"""The connection string: where it comes from, how a server is named in messages, and what we add to it.

The DSN is the ``dsn`` key, else ``$DSH_POSTGRES_DSN``. It is parsed by libpq's own rules
(``conninfo_to_dict``), so a URL and a ``key=value`` string both work, as do libpq's environment
variables and ``~/.pgpass`` for what the string leaves out. Nothing ever prints the DSN itself: a
server is named ``user@host:port/dbname`` and every driver message that reaches us passes through
``redact`` first.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Final

import attrs
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from dsh_core import ConfigError

__all__ = ["ENV_VAR", "KEEPALIVES", "SERVER_KEEPALIVES", "Target", "resolve_target"]

ENV_VAR: Final = "DSH_POSTGRES_DSN"

#: client side: notice a dead server (or network) within about 15 s, like the server does for us
KEEPALIVES: Final[Mapping[str, str]] = {
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "4",
    "tcp_user_timeout": "15000",
}

#: server side, set on the lock connection: the server drops a dead host's connection, and with it
#: the host's session locks, after at most 5 + 2 x 4 = 13 s of silence (or 15 s of unacknowledged data)
SERVER_KEEPALIVES: Final[Mapping[str, str]] = {
    "tcp_keepalives_idle": "5",
    "tcp_keepalives_interval": "2",
    "tcp_keepalives_count": "4",
    "tcp_user_timeout": "15000",
}


@attrs.frozen
class Target:
    """A server to connect to: the full connection string (secret) and its printable name."""

    conninfo: str = attrs.field(repr=False)
    name: str
    #: the password, when the DSN holds one, so that driver messages can be scrubbed of it
    secret: str | None = attrs.field(repr=False, default=None)

    def redact(self, text: str) -> str:
        """``text`` with the password (if any) blanked out."""
        if self.secret:
            text = text.replace(self.secret, "********")
        return text

    def with_options(self, options: Mapping[str, str]) -> str:
        """The connection string with ``options`` added where the DSN does not set them."""
        given = conninfo_to_dict(self.conninfo)
        extra = {key: value for key, value in options.items() if key not in given}
        return make_conninfo(self.conninfo, **extra)


def resolve_target(dsn: str | None, environ: Mapping[str, str] | None = None) -> Target:
    """The server named by ``dsn``, or by ``$DSH_POSTGRES_DSN`` when ``dsn`` is ``None``.

    :raises ConfigError: neither is set, or the string is not a connection string (the message
        never repeats it: it may hold a password).
    """
    env = os.environ if environ is None else environ
    source = "plugins.persistence-postgres.dsn"
    if dsn is None:
        dsn = env.get(ENV_VAR) or None
        source = f"${ENV_VAR}"
    if dsn is None:
        msg = (
            f"persistence-postgres needs a database: set plugins.persistence-postgres.dsn (a libpq "
            f"connection string or postgresql:// URL) or the {ENV_VAR} environment variable"
        )
        raise ConfigError(msg, path="plugins.persistence-postgres.dsn")
    try:
        parts: dict[str, Any] = conninfo_to_dict(dsn)
    except Exception as exc:  # noqa: BLE001 - psycopg.ProgrammingError; its text may quote the DSN
        msg = f"{source} is not a valid libpq connection string or postgresql:// URL ({type(exc).__name__})"
        raise ConfigError(msg, path="plugins.persistence-postgres.dsn") from None
    password = parts.get("password") or None
    return Target(conninfo=dsn, name=describe(parts, env), secret=str(password) if password else None)


def describe(parts: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    """``user@host:port/dbname`` for messages, filled from libpq's defaults where the DSN is silent."""
    host = str(parts.get("host") or environ.get("PGHOST") or "localhost")
    port = str(parts.get("port") or environ.get("PGPORT") or "5432")
    user = parts.get("user") or environ.get("PGUSER")
    dbname = parts.get("dbname") or environ.get("PGDATABASE") or user or "postgres"
    where = f"{host}:{port}/{dbname}"
    return f"{user}@{where}" if user else where
