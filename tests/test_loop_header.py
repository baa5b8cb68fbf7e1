"""The request header (SPEC §3): ``request/header`` once, on the first request of an agent instance;
``request/header-delta`` with only the changed fields when something changed; nothing when equal.
The session prefix rides on the header and the request, never in the history.
"""

from __future__ import annotations

from typing import Any

import anyio
import attrs
import pytest

from dsh_core import hookimpl, tool
from dsh_core.testing import ScriptedModel
from dsh_core.vocabulary import UserMessage

from .loop_kit import MODEL, running

pytestmark = pytest.mark.anyio

_HEADERS = ("request/header", "request/header-delta")


def _headers(events: Any) -> list[tuple[int, int, str, dict[str, Any]]]:
    """(turn, step, type, data) of every header event, with the step it belongs to."""
    out = []
    turn = step = 0
    for event in events:
        if event.type == "step/start":
            turn, step = event.data["turn"], event.data["step"]
        elif event.type in _HEADERS:
            out.append((turn, step, event.type, dict(event.data)))
    return out


@tool
def noop() -> str:
    """Do nothing."""
    return "ok"


async def test_header_once_then_deltas_only_for_changes() -> None:
    class BiggerAfterFirstStep:
        @hookimpl
        def dsh_agent_request(self, config: Any, turn: int, step: int) -> Any:
            return None if (turn, step) == (1, 1) else attrs.evolve(config, max_tokens=100)

    model = ScriptedModel([ScriptedModel.tool_call("noop"), ScriptedModel.tool_call("noop"), "done", "again"])
    async with running(model, plugins=[BiggerAfterFirstStep()]) as ctx:
        ctx.tools.register(noop)
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            with anyio.fail_after(5):
                await handle.agent.run("go")
                await handle.agent.run("more")
            events = list(handle.agent.session.events)
    headers = _headers(events)
    assert [(t, s, kind) for t, s, kind, _ in headers] == [(1, 1, "request/header"), (1, 2, "request/header-delta")]
    first, delta = headers[0][3], headers[1][3]
    assert set(first) == {"config", "system", "tools", "prefix"}
    assert (first["config"]["provider"], first["config"]["model"]) == ("scripted", "test")
    assert first["config"]["max_tokens"] is None
    assert [schema["name"] for schema in first["tools"]] == ["noop"]
    assert list(first["prefix"]) == []
    assert delta == {"config": {**first["config"], "max_tokens": 100}}
    assert [r.max_tokens for r in model.requests] == [None, 100, 100, 100]
    # the header is logged inside the step, before anything streams
    for event in events:
        if event.type in _HEADERS:
            assert events[event.seq - 1].type == "step/start"


async def test_a_tool_registered_between_turns_is_a_tools_only_delta() -> None:
    model = ScriptedModel(["one", "two", "three"])
    async with running(model) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            with anyio.fail_after(5):
                await handle.agent.run("first")
                ctx.tools.register(noop)
                await handle.agent.run("second")
                await handle.agent.run("third")
            events = list(handle.agent.session.events)
    headers = _headers(events)
    assert [(t, kind) for t, _, kind, _ in headers] == [(1, "request/header"), (2, "request/header-delta")]
    assert list(headers[0][3]["tools"]) == []
    assert list(headers[1][3]) == ["tools"]
    assert [schema["name"] for schema in headers[1][3]["tools"]] == ["noop"]


async def test_a_new_instance_over_a_log_logs_a_full_header_first() -> None:
    async with running(ScriptedModel(["before"])) as ctx:
        async with await ctx.agents.create("old", agent_options=MODEL) as handle:
            await handle.agent.run("hi")
            log = list(handle.agent.session.events)
    model = ScriptedModel(["after"])
    async with running(model) as ctx:
        async with await ctx.agents.create("new", seed=log, agent_options=MODEL) as handle:
            with anyio.fail_after(5):
                await handle.agent.run("again")
            events = list(handle.agent.session.events)[len(log) :]
    assert [kind for _, _, kind, _ in _headers(events)] == ["request/header"]


async def test_the_session_prefix_is_asked_once_rides_the_header_and_never_the_history() -> None:
    asked: list[str] = []

    class Prefix:
        @hookimpl
        def dsh_agent_session_prefix(self, agent: Any, prefix: Any) -> Any:
            asked.append(agent.id)
            return (*prefix, UserMessage(content="frozen prefix", source={"kind": "plugin", "plugin": "test"}))

    model = ScriptedModel([ScriptedModel.tool_call("noop"), "one", "two"])
    async with running(model, plugins=[Prefix()]) as ctx:
        ctx.tools.register(noop)
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            with anyio.fail_after(5):
                await handle.agent.run("first")
                await handle.agent.run("second")
            events = list(handle.agent.session.events)
            history = [m.text for m in handle.agent.session.derive_messages()]
    assert asked == ["a1"]
    assert all(request.messages[0].text == "frozen prefix" for request in model.requests)
    assert "frozen prefix" not in history
    headers = _headers(events)
    assert len(headers) == 1
    assert [m["content"][0]["text"] for m in headers[0][3]["prefix"]] == ["frozen prefix"]
