"""Approvals on Temporal (SPEC §10.1, §9.7): a remote ask parks the turn and lets go of the worker; the answer is a
workflow update; the turn goes on on any worker, even after the one that asked was SIGKILLed."""

from __future__ import annotations

import anyio
import pytest

from dsh_core import ApprovalNotPendingError

from .temporal_kit import MODEL, Cluster, log_until, of

pytestmark = pytest.mark.anyio

RULES = {"permissions": {"mode": "full-access", "rules": [{"tool": "echo", "action": "ask"}]}}


async def test_a_remote_ask_waits_as_a_pending_approval_and_goes_on_once_resolved(cluster: Cluster) -> None:
    """The worker that asked is SIGKILLed while the call waits; another worker runs it once it is resolved."""
    async with cluster.agents() as agents:
        async with cluster.worker(RULES) as first:
            session = await agents.create("asked", agent_options=MODEL)
            await session.send('tool:echo {"text": "hi"}')
            with anyio.fail_after(30):
                (pending,) = await session.pending_approvals(wait=True)
            status = await session.status()
            first.kill()  # SIGKILL, while the call waits
        assert (pending.call_id, pending.tool, dict(pending.arguments)) == ("call_1", "echo", {"text": "hi"})
        assert status.running is False  # no activity holds a worker while it waits
        async with cluster.worker(RULES) as second:  # an update needs a worker to run the workflow's task
            with pytest.raises(ApprovalNotPendingError):
                await agents.resolve_approval("asked", "nope", "once")
            accepted = await agents.resolve_approval("asked", "call_1", "once", arguments={"text": "edited"}, by="serve")
            assert accepted["decision"] == "once"
            with pytest.raises(ApprovalNotPendingError):
                await agents.resolve_approval("asked", "call_1", "deny")  # the first answer won
            with anyio.move_on_after(30) as waited:
                await session.when_idle()
            assert not waited.cancelled_caught, f"the turn did not go on; the worker said:\n{second.stderr[-5000:]}"
            events = await log_until(agents, "asked", lambda e: e.type == "turn/end")
    (requested,) = of(events, "approval/requested")
    (resolved,) = of(events, "approval/resolved")
    assert requested.data["call_id"] == "call_1"
    assert (resolved.data["decision"], resolved.data["by"], dict(resolved.data["arguments"])) == (
        "once",
        "serve",
        {"text": "edited"},
    )
    (result,) = of(events, "tool/result")
    assert "error_code" not in result.data
    assert result.data["message"]["content"][0]["text"] == "edited"
    assert len(of(events, "turn/start")) == 1  # the same turn went on
    assert len(of(events, "assistant/message")) == 2  # no model call repeated
    assert events[-1].data["reason"] == {"kind": "completed"}


async def test_a_cancel_while_a_remote_call_waits_resolves_it_cancelled(cluster: Cluster) -> None:
    async with cluster.worker(RULES), cluster.agents() as agents:
        session = await agents.create("cancelled", agent_options=MODEL)
        await session.send('tool:echo {"text": "hi"}')
        with anyio.fail_after(30):
            await session.pending_approvals(wait=True)
        await session.cancel()
        with anyio.fail_after(30):
            await session.when_idle()
        events = await log_until(agents, "cancelled", lambda e: e.type == "turn/end")
    (resolved,) = of(events, "approval/resolved")
    assert (resolved.data["decision"], resolved.data["by"]) == ("cancelled", "cancel")
    assert events[-1].data["reason"] == {"kind": "aborted"}
