"""``inject(..., id=...)`` is idempotent per id, like ``send``/``steer`` (a retried activity injects once)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dsh_core import hookimpl, tool
from dsh_core.testing import ScriptedModel

from .loop_kit import MODEL, running

pytestmark = pytest.mark.anyio


async def test_an_idle_inject_with_an_id_is_logged_once_under_that_id() -> None:
    async with running(ScriptedModel()) as ctx:
        async with await ctx.agents.create("a", agent_options=MODEL) as handle:
            agent = handle.agent
            agent.inject("the build is green", id="note-1")
            agent.inject("the build is green", id="note-1")  # retried
            with anyio.fail_after(5):
                await agent.when_idle()
            events = list(agent.session.events)
    assert [e.type for e in events] == ["context/message"]
    assert events[0].data["message"]["id"] == "note-1"


async def test_a_running_inject_with_an_id_is_queued_once_and_consumed_under_it() -> None:
    @tool
    def probe() -> str:
        """Inject twice with one id while the tool runs."""
        agent.inject("from the tool", id="ctx-1")
        agent.inject("from the tool", id="ctx-1")
        return "probed"

    model = ScriptedModel([ScriptedModel.tool_call("probe"), "done"])
    async with running(model) as ctx:
        ctx.tools.register(probe)
        async with await ctx.agents.create("a", agent_options=MODEL) as handle:
            agent = handle.agent
            with anyio.fail_after(5):
                await agent.run("go")
            events = list(agent.session.events)
    queued = [e for e in events if e.type == "inbox/queued" and e.data["kind"] == "inject"]
    assert [e.data["id"] for e in queued] == ["ctx-1"]
    contexts = [e for e in events if e.type == "context/message"]
    assert [e.data.get("queued_id") for e in contexts] == ["ctx-1"]


async def test_an_id_injected_in_the_log_is_known_to_the_next_agent_of_the_session() -> None:
    async with running(ScriptedModel()) as ctx:
        async with await ctx.agents.create("a", agent_options=MODEL) as handle:
            handle.agent.inject("once", id="n1")
            with anyio.fail_after(5):
                await handle.agent.when_idle()
            log = list(handle.agent.session.events)
        async with await ctx.agents.create("b", seed=log, agent_options=MODEL) as handle:
            handle.agent.inject("once", id="n1")
            handle.agent.send("go", id="n1")  # one id space, as for send and steer
            events = list(handle.agent.session.events)
    assert [e.type for e in events] == ["context/message"]


async def test_inject_refuses_a_malformed_id_before_anything_is_logged() -> None:
    seen: list[Any] = []

    class Follow:
        @hookimpl
        def dsh_session_event(self, event: Any) -> None:
            seen.append(event)

    async with running(ScriptedModel(), plugins=[Follow()]) as ctx:
        async with await ctx.agents.create("a", agent_options=MODEL) as handle:
            with pytest.raises(TypeError, match="id must be a str"):
                handle.agent.inject("x", id=3)  # type: ignore[arg-type]
            with pytest.raises(ValueError, match="must not be empty"):
                handle.agent.inject("x", id="")
    assert seen == []
