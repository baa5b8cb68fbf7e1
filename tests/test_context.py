"""Contexts: services by name, effects undone LIFO with children first, agent-scoped plugins."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_core import Context, MissingServiceError, ScopeDisposedError, hookimpl, hookspecs
from dsh_core.host import Dispatcher, Services, new_plugin_manager
from dsh_core.vocabulary import DuplicateRegistrationError

pytestmark = pytest.mark.anyio


def make_root() -> Context:
    events = Dispatcher(new_plugin_manager())
    events.add_specs(hookspecs)
    return Context(services=Services(), events=events)


class FakeAgent:
    def __init__(self, ident: str) -> None:
        self.id = ident


async def test_dispose_undoes_children_first_then_effects_lifo() -> None:
    """Disposal runs the newest child first, then this context's effects newest first."""
    root = make_root()
    log: list[str] = []
    root.effect(lambda: log.append("root-1"))
    first = root.child("first")
    first.effect(lambda: log.append("first-1"))
    second = root.child("second")
    second.effect(lambda: log.append("second-1"))
    second.effect(lambda: log.append("second-2"))

    async def async_undo() -> None:
        log.append("root-2")

    root.effect(async_undo)
    await root.dispose()
    assert log == ["second-2", "second-1", "first-1", "root-2", "root-1"]


async def test_disposer_is_idempotent_and_removes_the_effect() -> None:
    """A disposer called early runs once and is not run again at disposal."""
    root = make_root()
    log: list[str] = []
    undo = root.effect(lambda: log.append("x"))
    undo()
    undo()
    await root.dispose()
    assert log == ["x"]


async def test_registering_through_a_disposed_context_raises() -> None:
    """After dispose, every registration names the context and fails."""
    root = make_root()
    child = root.child("plugin:x")
    await child.dispose()
    with pytest.raises(ScopeDisposedError, match="plugin:x"):
        child.effect(lambda: None)
    with pytest.raises(ScopeDisposedError):
        child.provide("svc", object())
    with pytest.raises(ScopeDisposedError):
        child.child("grandchild")


async def test_failing_effect_does_not_stop_disposal(caplog: pytest.LogCaptureFixture) -> None:
    """An undo that raises is logged; the remaining effects still run."""
    root = make_root()
    log: list[str] = []
    root.effect(lambda: log.append("ran"))

    def broken() -> None:
        raise RuntimeError("undo failed")

    root.effect(broken)
    await root.dispose()
    assert log == ["ran"]
    assert "undo failed" in caplog.text


async def test_services_by_attribute_and_withdrawn_on_dispose() -> None:
    """ctx.<name> finds a provided service; a missing one is an AttributeError naming it."""
    root = make_root()
    plugin = root.child("plugin:greeter")
    service = object()
    plugin.provide("greeter", service)
    assert root.greeter is service
    assert getattr(root, "nothing", None) is None
    with pytest.raises(MissingServiceError, match="'nothing'"):
        _ = root.nothing
    with pytest.raises(DuplicateRegistrationError, match="plugin:greeter"):
        root.provide("greeter", object())
    await plugin.dispose()
    assert root.get_service("greeter") is None


async def test_bound_views_know_their_context() -> None:
    """A service with bind(ctx) is seen through a view bound to the context that reads it."""

    class Registry:
        def __init__(self) -> None:
            self.items: list[tuple[str, str | None]] = []

        def bind(self, ctx: Context) -> Any:
            registry = self

            class View:
                def add(self, item: str) -> None:
                    entry = (item, ctx.agent_scope)
                    registry.items.append(entry)
                    ctx.effect(lambda: registry.items.remove(entry))

            return View()

    root = make_root()
    registry = Registry()
    root.provide("registry", registry)
    agent_ctx = root.child("agent:a", agent_id="a")
    agent_ctx.registry.add("scoped")
    root.registry.add("global")
    assert registry.items == [("scoped", "a"), ("global", None)]
    await agent_ctx.dispose()
    assert registry.items == [("global", None)]


async def test_agent_scoped_plugin_hears_only_its_agent() -> None:
    """A plugin registered through agent a's context never hears agent b, and leaves with a."""
    root = make_root()
    heard: list[tuple[str, str]] = []

    class Listener:
        def __init__(self, tag: str) -> None:
            self.tag = tag

        @hookimpl
        def dsh_agent_status(self, agent: FakeAgent, status: str) -> None:
            heard.append((self.tag, agent.id))

    ctx_a = root.child("agent:a", agent_id="a")
    ctx_b = root.child("agent:b", agent_id="b")
    ctx_a.child("plugin-in-a").register_plugin(Listener("A"))
    ctx_b.register_plugin(Listener("B"))
    child_of_a = ctx_a.child("agent:a1", agent_id="a1")
    for ident in ("a", "b", "a1"):
        await root.events.notify("agent/status", agent=FakeAgent(ident), status="idle")
    assert heard == [("A", "a"), ("B", "b"), ("A", "a1")]
    await ctx_a.dispose()
    assert child_of_a.disposed
    heard.clear()
    await root.events.notify("agent/status", agent=FakeAgent("a"), status="idle")
    assert heard == []


async def test_tasks_belong_to_their_context() -> None:
    """A task started through a context is cancelled and awaited when that context is disposed."""
    import anyio

    from dsh_core import Harness

    started = anyio.Event()
    outcome: list[str] = []

    async def worker() -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            outcome.append("cleaned up")

    async with Harness(autoload=False) as root:
        child = root.child("plugin:worker")
        child.start_task(worker)
        await started.wait()
        await child.dispose()
        assert outcome == ["cleaned up"]


async def test_a_failing_task_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    """A task that raises is logged with its context; the harness keeps running."""
    import anyio

    from dsh_core import Harness

    done = anyio.Event()

    async def broken() -> None:
        try:
            raise ValueError("task bug")
        finally:
            done.set()

    async with Harness(autoload=False) as root:
        root.child("plugin:x").start_task(broken, name="broken-task")
        await done.wait()
        await anyio.lowlevel.checkpoint()
    assert "broken-task" in caplog.text
