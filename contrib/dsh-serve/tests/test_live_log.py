"""The live log over SSE: frames, replay then tail with no gap and no duplicate, heartbeats, many
followers, slow ones dropped, and reconnecting after a server restart (SPEC §10.2)."""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from dsh_serve._api import FollowerStream
from dsh_serve._tail import _WINDOW, _WINDOW_BYTES, LogTails, SessionTail, encode_frame

from dsh_core import AgentOptions, Context, Harness
from dsh_core.testing import ScriptedModel

from .serve_kit import Served, SseEvent, follow, serving, serving_async, turn_ended

pytestmark = pytest.mark.anyio


class ModelPlugin:
    """A harness's model: the scripted one (for the tests that drive a tail without a server)."""

    name = "model"

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model

    def start(self, ctx: Context) -> None:
        ctx.llm.register_adapter(self.model.provider, self.model)


def seqs(events: list[SseEvent]) -> list[int]:
    return [int(e.id or "-1") for e in events]


async def run_turn(served: Served, client, ident: str, prompt: str) -> list[SseEvent]:
    """Send ``prompt`` and follow the log from the start to the turn's end."""
    async with follow(client, ident) as stream:
        await client.post(f"/api/sessions/{ident}/send", json={"content": prompt})
        return await stream.until(turn_ended)


async def test_each_event_is_one_frame_with_its_seq_type_and_stored_json(served: Served) -> None:
    """``id:`` is the seq, ``event:`` the type, ``data:`` the event's ``to_json()``, for the whole log."""
    served.model.add(ScriptedModel.reasoning("thinking", "An answer.", chunks=2))
    async with served.client() as client:
        ident = (await client.post("/api/sessions", json={})).json()["id"]
        seen = await run_turn(served, client, ident, "question")
    stored = await served.events(ident)
    assert [e.json() for e in seen] == stored
    assert seqs(seen) == list(range(len(stored)))
    assert [e.event for e in seen] == [e["type"] for e in stored]


async def test_replay_after_a_seq_then_tail_without_gap_or_duplicate(served: Served) -> None:
    """``?after=`` replays the stored events after it, then the live ones follow contiguously."""
    served.model.add("first answer", ScriptedModel.text("second answer, in pieces", chunks=40))
    async with served.client() as client:
        ident = (await client.post("/api/sessions", json={})).json()["id"]
        first = await run_turn(served, client, ident, "one")
        middle = len(first) // 2
        async with follow(client, ident, params={"after": middle}) as stream:
            await client.post(f"/api/sessions/{ident}/send", json={"content": "two"})
            seen = await stream.until(lambda e: turn_ended(e) and e.json()["data"]["turn"] == 2)
    assert seqs(seen) == list(range(middle + 1, seqs(seen)[-1] + 1))
    assert [e.json() for e in seen] == (await served.events(ident))[middle + 1 :]


async def test_last_event_id_wins_over_the_query(served: Served) -> None:
    """A browser's reconnect keeps its first URL and adds ``Last-Event-ID``: the header decides."""
    served.model.add("an answer")
    async with served.client() as client:
        ident = (await client.post("/api/sessions", json={})).json()["id"]
        first = await run_turn(served, client, ident, "one")
        last = seqs(first)[-1]
        async with follow(client, ident, params={"after": 0}, headers={"Last-Event-ID": str(last - 2)}) as stream:
            seen = [await stream.next(), await stream.next()]
    assert all(isinstance(e, SseEvent) for e in seen)
    assert [int(e.id) for e in seen if isinstance(e, SseEvent) and e.id] == [last - 1, last]


async def test_a_follower_joining_mid_stream_misses_nothing(served: Served) -> None:
    """Joining while the model streams hundreds of chunks: every seq once, in order, to the end."""
    served.model.add(ScriptedModel.text("x" * 600, chunks=600))
    async with served.client() as client:
        ident = (await client.post("/api/sessions", json={})).json()["id"]
        async with follow(client, ident) as early:
            await client.post(f"/api/sessions/{ident}/send", json={"content": "stream a lot"})
            await early.until(lambda e: e.event == "assistant/chunk")
            async with follow(client, ident, params={"after": 3}) as late:
                whole = await early.until(turn_ended)
                joined = await late.until(turn_ended)
    last = seqs(whole)[-1]
    assert seqs(joined) == list(range(4, last + 1))
    assert [e.json() for e in joined] == (await served.events(ident))[4:]


async def test_an_idle_stream_gets_a_comment_line_heartbeat(tmp_path: Path) -> None:
    """An idle follower receives a comment line every ``heartbeat`` seconds."""
    (tmp_path / "w").mkdir()
    with serving(tmp_path / "s", tmp_path / "w", heartbeat=0.2) as served:
        async with served.client() as client:
            ident = (await client.post("/api/sessions", json={})).json()["id"]
            async with follow(client, ident) as stream:
                first = await stream.next()
                second = await stream.next()
    assert isinstance(first, str)
    assert first.startswith(":")
    assert isinstance(second, str)
    assert second.startswith(":")


async def test_many_followers_see_one_send_alike(served: Served) -> None:
    """Eight followers of one session all see the same events, whoever sent the prompt."""
    served.model.add(ScriptedModel.text("shared answer", chunks=5))
    async with served.client() as client:
        ident = (await client.post("/api/sessions", json={})).json()["id"]
        results: dict[int, list[SseEvent]] = {}
        subscribed = [anyio.Event() for _ in range(8)]

        async def one(index: int) -> None:
            async with served.client() as own, follow(own, ident) as stream:
                subscribed[index].set()
                results[index] = await stream.until(turn_ended)

        async with anyio.create_task_group() as tg:
            for index in range(8):
                tg.start_soon(one, index)
            for ready in subscribed:
                await ready.wait()
            async with served.client() as sender:
                await sender.post(f"/api/sessions/{ident}/send", json={"content": "to everyone"})
    expected = await served.events(ident)
    for index in range(8):
        assert [e.json() for e in results[index]] == expected


async def test_a_follower_whose_writes_stall_is_dropped_without_slowing_the_turn() -> None:
    """A follower whose transport stops taking writes is dropped after ``send_timeout``; the turn
    runs to its end meanwhile, and the follower's place on the tail is given up.

    The stall is made at the ASGI ``send`` (the transport's edge): how much a stalled TCP peer
    lets the kernel buffer varies with the machine, so a socket test cannot say when it stalls.
    """
    model = ScriptedModel([ScriptedModel.text("w" * 2000, chunks=200)], checkpoints=True)

    async with Harness(config={}, plugins=[ModelPlugin(model)], autoload=False) as ctx:
        tails = LogTails()
        ctx.register_plugin(tails, name="tails")
        handle = await ctx.agents.create("s", agent_options=AgentOptions(model="scripted/any"))
        agent = handle.agent
        tail = tails.of(agent.session)
        response = FollowerStream(tail.follow(-1, flush_interval=0), ping=60, send_timeout=0.2, sep="\n")
        writes = 0
        stalled = anyio.Event()

        async def send(message: dict) -> None:
            nonlocal writes
            if message["type"] == "http.response.body" and message.get("body"):
                writes += 1
                if writes >= 2:  # the second write never completes: the peer stopped reading
                    stalled.set()
                    await anyio.sleep_forever()

        async def receive() -> dict:
            await anyio.sleep_forever()
            raise AssertionError

        scope = {"type": "http", "method": "GET", "path": "/api/sessions/s/events", "headers": []}
        dropped = anyio.Event()
        async with anyio.create_task_group() as tg:

            async def serve_follower() -> None:
                await response(scope, receive, send)
                dropped.set()

            tg.start_soon(serve_follower)
            outcome = await agent.run("stream")  # the stalled follower never holds the turn up
            with anyio.fail_after(10):
                await dropped.wait()
    assert stalled.is_set()
    assert outcome.reason["kind"] == "completed"
    assert tail.followers == 0


async def test_the_stream_ends_when_the_session_is_deleted(served: Served) -> None:
    """Deleting a session ends its followers' streams."""
    async with served.client() as client:
        ident = (await client.post("/api/sessions", json={})).json()["id"]
        async with follow(client, ident) as stream:
            async with served.client() as other:
                assert (await other.delete(f"/api/sessions/{ident}")).status_code == 204
            assert await stream.rest() == []


async def test_reconnecting_after_a_server_restart_resumes_the_session(tmp_path: Path, anyio_backend: str) -> None:
    """After a restart the session is listed as stored; its log replays from the last seen seq and
    a new prompt continues it."""
    (tmp_path / "w").mkdir()
    async with serving_async(tmp_path / "s", tmp_path / "w", backend=anyio_backend, model=ScriptedModel(["before the restart"])) as served:
        async with served.client() as client:
            ident = (await client.post("/api/sessions", json={})).json()["id"]
            before = await run_turn(served, client, ident, "one")
    async with serving_async(tmp_path / "s", tmp_path / "w", backend=anyio_backend, model=ScriptedModel(["after the restart"])) as served:
        async with served.client() as client:
            listed = (await client.get("/api/sessions")).json()["sessions"]
            assert [(s["id"], s["status"], s["last_seq"]) for s in listed] == [(ident, "stored", seqs(before)[-1])]
            last = seqs(before)[-1]
            async with follow(client, ident, headers={"Last-Event-ID": str(last - 1)}) as stream:
                replayed = await stream.until(lambda e: e.id == str(last))
                await client.post(f"/api/sessions/{ident}/send", json={"content": "two"})
                after = await stream.until(turn_ended)
            shown = (await client.get(f"/api/sessions/{ident}")).json()
    assert [e.json() for e in replayed] == [before[-1].json()]
    assert seqs(after)[0] == last + 1
    assert after[-1].json()["data"]["turn"] == 2
    assert shown["status"] != "stored"
    assert shown["title"] == "one"


async def test_a_resumed_session_keeps_the_model_it_was_created_with(tmp_path: Path, anyio_backend: str) -> None:
    """A session created with a model of its own still uses it after a restart (the server's
    default model is another)."""
    (tmp_path / "w").mkdir()
    async with serving_async(tmp_path / "s", tmp_path / "w", backend=anyio_backend, model=ScriptedModel(["first"])) as served:
        async with served.client() as client:
            ident = (await client.post("/api/sessions", json={"model": "scripted/alpha"})).json()["id"]
            await run_turn(served, client, ident, "one")
        first_model = served.model.requests[-1].model
    second = ScriptedModel(["second"])
    async with serving_async(tmp_path / "s", tmp_path / "w", backend=anyio_backend, model=second) as served:
        async with served.client() as client:
            await run_turn(served, client, ident, "two")
            shown = (await client.get(f"/api/sessions/{ident}")).json()
    assert first_model == "alpha"
    assert second.requests[-1].model == "alpha"
    assert shown["model"] == "scripted/alpha"


async def test_the_frame_window_stays_bounded_while_frames_stay_exact() -> None:
    """Big events pass through a session's frame window without it holding more than its bounds,
    and every frame, cached or encoded again, is the event's."""
    model = ScriptedModel([ScriptedModel.text("z" * (300 * 40_000), chunks=300)])  # 300 chunks of 40 KB

    async with Harness(config={}, plugins=[ModelPlugin(model)], autoload=False) as ctx:
        handle = await ctx.agents.create("s", agent_options=AgentOptions(model="scripted/any"))
        await handle.agent.run("big")
        session = handle.agent.session
        tail = SessionTail(session)
        frames = []
        async with aclosing(tail.follow(-1, flush_interval=0)) as stream:
            async for frame in stream:
                frames.append(frame)
                assert len(tail._frames) <= _WINDOW
                assert tail._bytes <= _WINDOW_BYTES or len(tail._frames) == 1  # one frame bigger than the window
                if b"event: turn/end" in frame:
                    break
        again = [encode_frame(event) for event in session.events]
    assert b"".join(frames) == b"".join(again)
    assert tail._frame(0) == again[0]  # dropped from the window: encoded again, the same


async def test_followers_at_the_live_end_write_one_shared_block_per_round() -> None:
    """Followers woken together wait for the same round and send the same bytes object, joined once:
    what a follower costs is one write per round, however many events the round holds."""
    model = ScriptedModel([ScriptedModel.text("r" * 3000, chunks=3000)], checkpoints=True)

    async with Harness(config={}, plugins=[ModelPlugin(model)], autoload=False) as ctx:
        tails = LogTails()
        ctx.register_plugin(tails, name="tails")
        handle = await ctx.agents.create("s", agent_options=AgentOptions(model="scripted/any"))
        tail = tails.of(handle.agent.session)
        writes: list[list[bytes]] = [[], [], []]

        async def follower(index: int) -> None:
            async with aclosing(tail.follow(-1, flush_interval=0.05)) as stream:
                async for block in stream:
                    writes[index].append(block)
                    if b"event: turn/end" in block:
                        return

        async with anyio.create_task_group() as tg:
            for index in range(3):
                tg.start_soon(follower, index)
            await anyio.wait_all_tasks_blocked()  # all three wait at the live end of the empty log
            await handle.agent.run("stream")
        expected = b"".join(encode_frame(event) for event in handle.agent.session.events)
    for blocks in writes:
        assert b"".join(blocks) == expected
        assert len(blocks) < len(handle.agent.session.events) // 10  # rounds, not an event per write
    first, *others = writes
    for blocks in others:
        assert [id(block) for block in blocks] == [id(block) for block in first]  # the same objects
