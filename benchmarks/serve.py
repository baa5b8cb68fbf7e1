"""dsh-serve under load: the agent's chunk rate with 0, 10 and 100 SSE followers, the memory of 1,000
idle followers, and the first byte of a reconnect that replays a 10,000-event session.

Run: ``.venv/bin/python benchmarks/serve.py``. Prints figures, asserts nothing. The server (harness,
app on asyncio, uvicorn on its own thread) runs in this process over loopback; the followers are a
child process of plain asyncio sockets that read and discard. The child runs in a session of its
own: with Linux's autogroups the kernel then shares the CPU between it and the server as between
two programs (a browser is another program), rather than counting the clients' reading against the
server's own share. The
chunk rate is the agent's: ``ScriptedModel`` chunks (yielding to the loop before each one, as a
network stream does) per second of the turn, measured in the server; the 0-follower run is the
baseline of the same run. Budget (issue 30): with 100 followers >= 0.5x the rate with none.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
from dsh_persistence_jsonl import PersistencePlugin
from dsh_serve import ServePlugin, open_app
from dsh_serve._server import listening

from dsh_core import Context, Harness
from dsh_core.testing import ScriptedModel

CHUNKS = 20_000
ROUNDS = 3
TOKEN = "bench-token"
REPLAY_EVENTS = 10_000

#: The followers: N connections to the live log, reading and discarding until the marker.
FOLLOWERS = textwrap.dedent(
    """
    import asyncio, sys
    port, path, count, marker = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4].encode()
    async def one(ready):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET {path} HTTP/1.1\\r\\nHost: x\\r\\nAccept: text/event-stream\\r\\n\\r\\n".encode())
        await reader.readuntil(b"\\r\\n\\r\\n")
        ready.release()
        tail = b""
        while True:
            data = await reader.read(1 << 20)
            if not data or marker in tail + data[:len(marker)] or marker in data:
                break
            tail = data[-len(marker):]
        writer.close()
    async def main():
        ready = asyncio.Semaphore(0)
        tasks = [asyncio.create_task(one(ready)) for _ in range(count)]
        for _ in range(count):
            await ready.acquire()
        print("ready", flush=True)
        await asyncio.gather(*tasks)
        print("done", flush=True)
    asyncio.run(main())
    """
)


class _Model:
    name = "bench-model"

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model

    def start(self, ctx: Context) -> None:
        ctx.llm.register_adapter(self.model.provider, self.model)


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def _followers(port: int, path: str, count: int, marker: str) -> asyncio.subprocess.Process:
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        FOLLOWERS,
        str(port),
        path,
        str(count),
        marker,
        stdout=asyncio.subprocess.PIPE,
        start_new_session=True,  # scheduled as another program is (Linux autogroups), as a browser is
    )
    assert child.stdout is not None
    assert (await child.stdout.readline()).strip() == b"ready"
    return child


async def bench() -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="dsh-serve-bench-"))
    model = ScriptedModel(checkpoints=True)
    config = {"plugins": {"persistence-jsonl": {"root": str(root)}}}
    plugin = ServePlugin()
    figures: dict[str, Any] = {}
    async with Harness(config=config, plugins=[PersistencePlugin(), _Model(model), plugin], autoload=False) as ctx:
        async with open_app(ctx, config=plugin.config, token=TOKEN, model="scripted/any", cwd=root) as app:
            async with listening(app) as url:
                port = int(url.rsplit(":", 1)[1])
                headers = {"Authorization": f"Bearer {TOKEN}"}
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=120) as client:
                    # the chunk rate with 0, 10 and 100 followers
                    rates: dict[int, float] = {}
                    cpu_rates: dict[int, float] = {}
                    for count in (0, 10, 100) * ROUNDS:
                        ident = (await client.post("/api/sessions", json={})).json()["id"]
                        path = f"/api/sessions/{ident}/events?token={TOKEN}"
                        child = await _followers(port, path, count, "event: turn/end") if count else None
                        model.add(ScriptedModel.text("x" * CHUNKS, chunks=CHUNKS))
                        agent = ctx.agents.get(ident)
                        assert agent is not None
                        started, cpu = time.perf_counter(), time.thread_time()
                        await agent.run("go")
                        elapsed, cpu_used = time.perf_counter() - started, time.thread_time() - cpu
                        if child is not None:
                            await child.wait()
                        rates[count] = max(rates.get(count, 0.0), CHUNKS / elapsed)
                        cpu_rates[count] = max(cpu_rates.get(count, 0.0), CHUNKS / cpu_used)
                    figures["rates"] = rates
                    figures["cpu_rates"] = cpu_rates
                    # memory of 1,000 idle followers
                    ident = (await client.post("/api/sessions", json={})).json()["id"]
                    path = f"/api/sessions/{ident}/events?token={TOKEN}"
                    before = _rss_kib()
                    child = await _followers(port, path, 1000, "never")
                    after = _rss_kib()
                    figures["idle_kib_per_follower"] = (after - before) / 1000
                    child.kill()
                    await child.wait()
                    # the first byte of a reconnect replaying a 10,000-event session
                    ident = (await client.post("/api/sessions", json={})).json()["id"]
                    model.add(ScriptedModel.text("y" * REPLAY_EVENTS, chunks=REPLAY_EVENTS))
                    agent = ctx.agents.get(ident)
                    assert agent is not None
                    await agent.run("fill the log")
                    events = len(agent.session.events)
                    await ctx.sessions.flush(agent.session)  # the store has written it: a quiet server
                    best_first = best_all = float("inf")
                    request = f"GET /api/sessions/{ident}/events?token={TOKEN} HTTP/1.1\r\nHost: x\r\n\r\n"
                    for _ in range(5):
                        started = time.perf_counter()
                        reader, writer = await asyncio.open_connection("127.0.0.1", port)
                        writer.write(request.encode())
                        seen = await reader.read(1 << 16)
                        first = time.perf_counter() - started
                        while b"event: turn/end" not in seen[-(1 << 17) :]:
                            data = await reader.read(1 << 20)
                            if not data:
                                break
                            seen = seen[-(1 << 16) :] + data
                        whole = time.perf_counter() - started
                        writer.close()
                        await writer.wait_closed()
                        best_first, best_all = min(best_first, first), min(best_all, whole)
                    figures["replay"] = {"events": events, "first_byte_ms": best_first * 1e3, "all_ms": best_all * 1e3}
    return figures


def main() -> None:
    figures = asyncio.run(bench())
    rates, cpu_rates = figures["rates"], figures["cpu_rates"]
    print(
        f"the agent's chunk rate, {CHUNKS} chunks per turn, best of {ROUNDS} interleaved runs "
        "(chunks per second of wall time, and per CPU second of the server's thread; x: against 0 followers)"
    )
    for count in (0, 10, 100):
        print(
            f"  {count:>3} followers: {rates[count]:>8.0f}/s  x{rates[count] / rates[0]:.2f}   "
            f"{cpu_rates[count]:>8.0f}/cpu-s  x{cpu_rates[count] / cpu_rates[0]:.2f}"
        )
    print(f"1,000 idle followers: {figures['idle_kib_per_follower']:.1f} KiB of server RSS per connection")
    replay = figures["replay"]
    print(
        f"reconnect replaying {replay['events']} events: first byte {replay['first_byte_ms']:.1f} ms, "
        f"whole log {replay['all_ms']:.0f} ms (best of 5)"
    )
    if "--json" in sys.argv:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
