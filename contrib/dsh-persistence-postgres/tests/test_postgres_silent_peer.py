"""SPEC §9.6 with a silent peer: a holder whose network goes quiet (no FIN, no RST) loses its session.

The test builds a private network of its own: two network namespaces joined by a veth pair that
exists only inside them (10.213.0.1 for the server, 10.213.0.2 for the holder); nothing of it is
on the host's interfaces, and it is deleted on every ending. A throwaway server runs in the first
namespace (also serving its Unix socket, which this process uses as the second owner), the holder
process in the second, connected over the veth. Setting the holder's end of the link down makes
the holder a silent peer for the server, as a host that stopped is; the server's keepalives must
then end its connections, and with them its session lock, within about 15 s; a resume then
succeeds at once, and the old holder, on the network again, is fenced at its next flush.

Network namespaces need root. CI runs as root; a developer's run as another user fails here with
a message saying so (never skipped).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import anyio
import anyio.to_thread
import attrs
import psycopg
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.text import TextReceiveStream
from dsh_persistence_postgres import PersistencePlugin, SessionInUseError
from dsh_persistence_postgres._schema import LOCK_SEED, Statements
from dsh_persistence_postgres.testing import PostgresServer, temporary_postgres

from dsh_core import AgentOptions, Harness
from dsh_core.testing import ScriptedModel

from .postgres_kit import Database

pytestmark = pytest.mark.anyio

MODEL = AgentOptions(model="scripted/test")
SERVER_ADDRESS = "10.213.0.1"
HOLDER_ADDRESS = "10.213.0.2"
#: SPEC §9.6: a create or resume tried this long after the holder's death succeeds
TAKEOVER = 20.0
#: slack on top of it for a loaded CI machine (the server's keepalives give up after about 13 s)
MARGIN = 5.0

#: the holder: owns session "silent" over TCP, says HOLDING; on an input line (the link is back),
#: appends one event and flushes until the flush stops failing for want of a connection, then
#: says FENCED / WRITE / STORED with the error's text
HOLDER = textwrap.dedent(
    """
    import json, os, socket, sys
    import anyio, anyio.to_thread
    from dsh_core import AgentOptions, Harness
    from dsh_core.testing import ScriptedModel
    from dsh_persistence_postgres import PersistencePlugin, SessionFencedError, SessionWriteError

    def say(*words):
        os.write(1, (" ".join(str(word) for word in words).replace("\\n", " ") + "\\n").encode())

    async def main(table):
        config = {"plugins": {"persistence-postgres": json.loads(table)}}
        async with Harness(config=config, plugins=[PersistencePlugin()], autoload=False) as ctx:
            ctx.llm.register_adapter("scripted", ScriptedModel(["hello"]))
            handle = await ctx.agents.create("silent", agent_options=AgentOptions(model="scripted/test"))
            await handle.agent.run("hi")
            await ctx.sessions.flush(handle.agent.session)
            say("HOLDING", socket.gethostname(), os.getpid())
            await anyio.to_thread.run_sync(sys.stdin.readline)
            handle.agent.session.append("note/after", {"n": 1})
            for _ in range(5):  # a dead pooled connection fails one flush; the next one reconnects
                try:
                    await ctx.sessions.flush(handle.agent.session)
                except SessionFencedError as exc:
                    say("FENCED", exc)
                    break
                except SessionWriteError as exc:
                    say("WRITE", exc)
                else:
                    say("STORED")
                    break
            await handle.dispose()

    anyio.run(main, sys.argv[1], backend=sys.argv[2])
    """
)


@attrs.frozen
class PrivateLink:
    """Two network namespaces of this test, joined by a veth pair that lives only inside them."""

    server_ns: str
    holder_ns: str
    holder_link: str

    def holder_link_state(self, state: str) -> None:
        """Set the holder's end of the link ``up`` or ``down`` (down: the holder goes silent)."""
        _ip("-n", self.holder_ns, "link", "set", self.holder_link, state)


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        msg = f"ip {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}"
        raise RuntimeError(msg)


@pytest.fixture
def private_link() -> Iterator[PrivateLink]:
    """The namespaces and their link, deleted afterwards whatever happened (the veth goes with them)."""
    if os.geteuid() != 0:
        pytest.fail(
            "this test makes network namespaces and a veth pair, which needs root: run it as root (CI does), "
            "e.g. sudo .venv/bin/python -m pytest contrib/dsh-persistence-postgres/tests/test_postgres_silent_peer.py"
        )
    if shutil.which("ip") is None or shutil.which("nsenter") is None:
        pytest.fail(
            "this test needs `ip` (Debian's iproute2) and `nsenter` (util-linux): apt-get install iproute2"
        )
    tag = f"{os.getpid() % 100000}"
    link = PrivateLink(server_ns=f"dsh-srv-{tag}", holder_ns=f"dsh-hold-{tag}", holder_link=f"dshh{tag}")
    made: list[str] = []
    try:
        for ns in (link.server_ns, link.holder_ns):
            _ip("netns", "add", ns)
            made.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        # Made inside the server's namespace, its peer inside the holder's: never on the host.
        _ip("-n", link.server_ns, "link", "add", f"dshs{tag}", "type", "veth", "peer", "name", link.holder_link,
            "netns", link.holder_ns)  # fmt: skip
        _ip("-n", link.server_ns, "addr", "add", f"{SERVER_ADDRESS}/30", "dev", f"dshs{tag}")
        _ip("-n", link.holder_ns, "addr", "add", f"{HOLDER_ADDRESS}/30", "dev", link.holder_link)
        _ip("-n", link.server_ns, "link", "set", f"dshs{tag}", "up")
        _ip("-n", link.holder_ns, "link", "set", link.holder_link, "up")
        yield link
    finally:
        for ns in reversed(made):
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True, check=False)


@pytest.fixture
def namespaced_server(private_link: PrivateLink) -> Iterator[PostgresServer]:
    """A throwaway server in the server's namespace, on the veth address and its Unix socket."""
    with temporary_postgres(
        netns=private_link.server_ns, settings={"listen_addresses": SERVER_ADDRESS}
    ) as server:
        yield server


async def test_a_silent_holder_loses_its_session_and_is_fenced(
    private_link: PrivateLink, namespaced_server: PostgresServer, anyio_backend: str
) -> None:
    """The holder goes silent (its link down): within 20 s the server has dropped its lock, a resume here
    succeeds at once, and the old holder, back on the network, has its next flush refused as fenced."""
    db = Database(namespaced_server.dsn, "public")
    table = {
        "dsn": f"host={SERVER_ADDRESS} port=5432 user=dsh dbname=postgres connect_timeout=5",
        "connections": 1,
    }
    command = [
        "ip",
        "netns",
        "exec",
        private_link.holder_ns,
        sys.executable,
        "-c",
        HOLDER,
        json.dumps(table),
        anyio_backend,
    ]
    async with await anyio.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None
    ) as holder:
        assert holder.stdin is not None
        assert holder.stdout is not None
        lines = BufferedByteReceiveStream(holder.stdout)
        try:
            with anyio.fail_after(60):
                said = (await lines.receive_until(b"\n", 65536)).decode().split()
            assert said[0] == "HOLDING", said
            host, pid = said[1], int(said[2])

            config = {"plugins": {"persistence-postgres": {"dsn": namespaced_server.dsn}}}
            async with Harness(config=config, plugins=[PersistencePlugin()], autoload=False) as ctx:
                ctx.llm.register_adapter("scripted", ScriptedModel())
                with pytest.raises(SessionInUseError, match=re.escape(f"process {pid} on host {host}")):
                    await ctx.session_persistence.load("silent")  # it lives: refused, naming it

            private_link.holder_link_state("down")  # silent from here: no FIN, no RST reaches the server
            with anyio.fail_after(TAKEOVER + MARGIN):
                await _wait_released(db, "silent")  # waits on the lock itself: the server frees it

            async with Harness(config=config, plugins=[PersistencePlugin()], autoload=False) as ctx:
                ctx.llm.register_adapter("scripted", ScriptedModel(["taken over"]))
                async with await ctx.agents.resume("silent", agent_options=MODEL) as handle:
                    outcome = await handle.agent.run("who has it?")
                    assert outcome.text == "taken over"
                    (epoch,) = db.query("SELECT epoch FROM dsh_sessions WHERE id = 'silent'")[0]

                    private_link.holder_link_state("up")
                    await holder.stdin.send(b"go\n")
                    with anyio.fail_after(120):
                        verdict = (await lines.receive_until(b"\n", 65536)).decode()
                        while verdict.startswith("WRITE"):  # a dead connection's failure first
                            verdict = (await lines.receive_until(b"\n", 65536)).decode()
                    stored = [
                        row[0]
                        for row in db.query(
                            "SELECT type FROM dsh_events WHERE session_id = 'silent' ORDER BY seq"
                        )
                    ]
            assert verdict.startswith("FENCED"), verdict
            assert f"process {os.getpid()} on host {socket.gethostname()}" in verdict  # names the new holder
            assert "note/after" not in stored  # the stale owner wrote nothing
            assert stored.count("turn/start") == 2
            assert epoch >= 2
            with anyio.fail_after(60):
                await holder.wait()
        finally:
            if holder.returncode is None:
                holder.kill()
            rest = await _drain(holder)
            if rest:
                print(rest)


async def _wait_released(db: Database, session_id: str) -> None:
    """Return once no connection holds the session's lock (a blocking lock that waits for the holder's end)."""
    key = Statements(db.schema).lock_key + session_id

    def wait() -> None:
        with psycopg.connect(db.dsn, autocommit=True) as conn:
            conn.execute("SET statement_timeout = '60s'")
            conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, %s))", (key, LOCK_SEED))
            conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, %s))", (key, LOCK_SEED))

    await anyio.to_thread.run_sync(wait, abandon_on_cancel=True)


async def _drain(process: Process) -> str:
    if process.stdout is None:
        return ""
    text = ""
    with anyio.move_on_after(5):
        async for chunk in TextReceiveStream(process.stdout):
            text += chunk
    return text
