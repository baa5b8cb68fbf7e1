"""The async dispatcher: each mode's ordering, value threading, containment and scoping."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from dsh_core import hookimpl, hookspec
from dsh_core.host import Dispatcher, check_guards, new_plugin_manager

pytestmark = pytest.mark.anyio


class Spec:
    @hookspec(mode="notify", subject="agent")
    def dsh_test_note(self, agent: Any, log: list[str]) -> None: ...

    @hookspec(mode="waterfall", value="value", subject="agent")
    def dsh_test_fold(self, agent: Any, value: int, log: list[str]) -> int | None: ...

    @hookspec(mode="serial", subject="agent")
    def dsh_test_first(self, agent: Any, log: list[str]) -> str | None: ...

    @hookspec(mode="around", subject="agent")
    def dsh_test_wrap(self, agent: Any, log: list[str], call_next: Any) -> Any: ...

    @hookspec(mode="parallel", subject="agent")
    def dsh_test_all(self, agent: Any, log: list[str]) -> None: ...

    @hookspec(mode="notify", subject="agent", vetoes=True)
    def dsh_test_veto(self, agent: Any) -> None: ...


class Agent:
    def __init__(self, ident: str) -> None:
        self.id = ident


A = Agent("a")


@pytest.fixture
def events() -> Dispatcher:
    dispatcher = Dispatcher(new_plugin_manager())
    dispatcher.add_specs(Spec)
    return dispatcher


def listener(tag: str, *, is_async: bool = False, result: Any = None, **opts: Any) -> object:
    """A plugin object with one impl of every test hook that logs ``tag``."""

    class Plugin:
        if is_async:

            @hookimpl(**opts)
            async def dsh_test_note(self, log: list[str]) -> None:
                await anyio.lowlevel.checkpoint()
                log.append(tag)

            @hookimpl(**opts)
            async def dsh_test_fold(self, value: int, log: list[str]) -> int:
                await anyio.lowlevel.checkpoint()
                log.append(tag)
                return value * 10 + int(tag[-1])

            @hookimpl(**opts)
            async def dsh_test_first(self, log: list[str]) -> Any:
                log.append(tag)
                return result

        else:

            @hookimpl(**opts)
            def dsh_test_note(self, log: list[str]) -> None:
                log.append(tag)

            @hookimpl(**opts)
            def dsh_test_fold(self, value: int, log: list[str]) -> int:
                log.append(tag)
                return value * 10 + int(tag[-1])

            @hookimpl(**opts)
            def dsh_test_first(self, log: list[str]) -> Any:
                log.append(tag)
                return result

    return Plugin()


async def test_notify_runs_tryfirst_then_newest_then_trylast(events: Dispatcher) -> None:
    """Call order is pluggy's: tryfirst, then last registered first, then trylast; sync and async alike."""
    events.register(listener("p1"), name="p1")
    events.register(listener("p2", is_async=True, trylast=True), name="p2")
    events.register(listener("p3"), name="p3")
    events.register(listener("p4", is_async=True, tryfirst=True), name="p4")
    log: list[str] = []
    await events.notify("test/note", agent=A, log=log)
    assert log == ["p4", "p3", "p1", "p2"]


async def test_notify_contains_and_logs_a_failing_listener(
    events: Dispatcher, caplog: pytest.LogCaptureFixture
) -> None:
    """A raising notify listener is logged with plugin and event, and the others still run."""

    class Broken:
        @hookimpl
        def dsh_test_note(self, log: list[str]) -> None:
            raise ValueError("boom")

    events.register(listener("p1"), name="p1")
    events.register(Broken(), name="broken")
    log: list[str] = []
    with caplog.at_level(logging.ERROR, logger="dsh.events"):
        await events.notify("test/note", agent=A, log=log)
    assert log == ["p1"]
    assert "'broken'" in caplog.text
    assert "test/note" in caplog.text


async def test_vetoing_notify_raises(events: Dispatcher) -> None:
    """An event declared with vetoes=True lets a listener's exception through."""

    class Veto:
        @hookimpl
        def dsh_test_veto(self) -> None:
            raise PermissionError("no")

    events.register(Veto(), name="veto")
    with pytest.raises(PermissionError):
        await events.notify("test/veto", agent=A)


async def test_waterfall_threads_the_value_and_none_keeps_it(events: Dispatcher) -> None:
    """Each waterfall listener sees the previous one's value; returning None keeps the value."""

    class Keeper:
        @hookimpl
        def dsh_test_fold(self, value: int, log: list[str]) -> None:
            log.append(f"keep:{value}")

    events.register(listener("p1"), name="p1")
    events.register(Keeper(), name="keeper")
    events.register(listener("p2", is_async=True), name="p2")
    log: list[str] = []
    value = await events.waterfall("test/fold", 0, agent=A, log=log)
    assert log == ["p2", "keep:2", "p1"]
    assert value == 21


async def test_waterfall_with_no_listener_returns_value(events: Dispatcher) -> None:
    """No listener: the initial value comes back unchanged."""
    assert await events.waterfall("test/fold", 7, agent=A, log=[]) == 7


async def test_waterfall_failure_propagates(events: Dispatcher) -> None:
    """A raising waterfall listener raises to the caller (the loop then ends the turn)."""

    class Broken:
        @hookimpl
        def dsh_test_fold(self, value: int) -> int:
            raise RuntimeError("bad plugin")

    events.register(Broken(), name="broken")
    with pytest.raises(RuntimeError, match="bad plugin"):
        await events.waterfall("test/fold", 1, agent=A, log=[])


async def test_serial_first_result_short_circuits(events: Dispatcher) -> None:
    """The first non-None result wins and later listeners are not called."""
    events.register(listener("p1", result="late"), name="p1")
    events.register(listener("p2", is_async=True, result="won"), name="p2")
    events.register(listener("p3", result=None), name="p3")
    log: list[str] = []
    assert await events.serial("test/first", agent=A, log=log) == "won"
    assert log == ["p3", "p2"]


async def test_around_nests_in_call_order(events: Dispatcher) -> None:
    """The first listener in call order is the outermost wrapper; the innermost call is the body."""

    def wrapper(tag: str, **opts: Any) -> object:
        class Wrap:
            @hookimpl(**opts)
            async def dsh_test_wrap(self, log: list[str], call_next: Any) -> Any:
                log.append(f"{tag}>")
                result = await call_next()
                log.append(f"<{tag}")
                return f"{tag}({result})"

        return Wrap()

    events.register(wrapper("outer", tryfirst=True), name="outer")
    events.register(wrapper("inner", trylast=True), name="inner")
    events.register(wrapper("mid"), name="mid")
    log: list[str] = []

    async def body() -> str:
        log.append("body")
        return "x"

    result = await events.around("test/wrap", body, agent=A, log=log)
    assert result == "outer(mid(inner(x)))"
    assert log == ["outer>", "mid>", "inner>", "body", "<inner", "<mid", "<outer"]


async def test_around_may_short_circuit_and_retry(events: Dispatcher) -> None:
    """A wrapper may skip the body (cache) or call it twice (retry)."""
    calls = 0

    async def body() -> int:
        nonlocal calls
        calls += 1
        return calls

    class Twice:
        @hookimpl
        async def dsh_test_wrap(self, call_next: Any) -> Any:
            await call_next()
            return await call_next()

    reg = events.register(Twice(), name="twice")
    assert await events.around("test/wrap", body, agent=A, log=[]) == 2
    events.unregister(reg)

    class Cache:
        @hookimpl
        def dsh_test_wrap(self, call_next: Any) -> Any:
            return "cached"

    events.register(Cache(), name="cache")
    assert await events.around("test/wrap", body, agent=A, log=[]) == "cached"
    assert calls == 2


async def test_parallel_runs_together_and_raises_first_failure(events: Dispatcher) -> None:
    """Parallel listeners run concurrently; one failing cancels the others and is raised."""
    started = anyio.Event()
    cancelled: list[str] = []

    class Waiter:
        @hookimpl
        async def dsh_test_all(self, log: list[str]) -> None:
            started.set()
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                cancelled.append("waiter")
                raise

    class Failer:
        @hookimpl
        async def dsh_test_all(self, log: list[str]) -> None:
            await started.wait()
            raise OSError("disk full")

    events.register(Waiter(), name="waiter")
    events.register(Failer(), name="failer")
    with pytest.raises(OSError, match="disk full"):
        await events.parallel("test/all", agent=A, log=[])
    assert cancelled == ["waiter"]


async def test_parallel_listeners_overlap(events: Dispatcher) -> None:
    """Two parallel listeners that each wait for the other both finish (they truly overlap)."""
    first, second = anyio.Event(), anyio.Event()

    class One:
        @hookimpl
        async def dsh_test_all(self, log: list[str]) -> None:
            first.set()
            await second.wait()
            log.append("one")

    class Two:
        @hookimpl
        async def dsh_test_all(self, log: list[str]) -> None:
            second.set()
            await first.wait()
            log.append("two")

    events.register(One(), name="one")
    events.register(Two(), name="two")
    log: list[str] = []
    with anyio.fail_after(5):
        await events.parallel("test/all", agent=A, log=log)
    assert sorted(log) == ["one", "two"]


async def test_unregistered_mid_dispatch_is_skipped(events: Dispatcher) -> None:
    """A listener unregistered by an earlier one during the same dispatch is not called."""
    log: list[str] = []
    later = listener("later", trylast=True)
    registration = events.register(later, name="later")

    class Remover:
        @hookimpl(tryfirst=True)
        def dsh_test_note(self, log: list[str]) -> None:
            log.append("remover")
            events.unregister(registration)

    events.register(Remover(), name="remover")
    await events.notify("test/note", agent=A, log=log)
    assert log == ["remover"]


async def test_cancellation_propagates_through_notify(events: Dispatcher) -> None:
    """Containment catches Exception only: a cancelled listener cancels the dispatch."""
    entered = anyio.Event()

    class Slow:
        @hookimpl
        async def dsh_test_note(self, log: list[str]) -> None:
            entered.set()
            await anyio.sleep_forever()

    events.register(Slow(), name="slow")
    events.register(listener("after", trylast=True), name="after")
    log: list[str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: events.notify("test/note", agent=A, log=log))
        await entered.wait()
        tg.cancel_scope.cancel()
    assert log == []


async def test_scoped_plugin_hears_only_its_agent_and_owned_agents(events: Dispatcher) -> None:
    """A plugin scoped to agent a hears a and a's child, never b; global plugins hear all."""
    events.set_owner("a", None)
    events.set_owner("a-child", "a")
    events.set_owner("b", None)
    events.register(listener("scoped"), name="scoped", scope="a")
    events.register(listener("global"), name="global")
    heard = {}
    for ident in ("a", "a-child", "b"):
        log: list[str] = []
        await events.notify("test/note", agent=Agent(ident), log=log)
        heard[ident] = log
    assert heard == {"a": ["global", "scoped"], "a-child": ["global", "scoped"], "b": ["global"]}


async def test_dispatching_in_the_wrong_mode_is_refused(events: Dispatcher) -> None:
    """An event is dispatched only in the mode its hookspec declares; unknown events are named."""
    with pytest.raises(TypeError, match="declared 'notify'"):
        await events.serial("test/note", agent=A, log=[])
    with pytest.raises(KeyError, match="test/nope"):
        await events.notify("test/nope")


async def test_pluggy_wrappers_are_refused(events: Dispatcher) -> None:
    """pluggy's sync wrappers cannot wrap async dispatch, so registering one is an error."""

    class Wrapper:
        @hookimpl(wrapper=True)
        def dsh_test_note(self) -> Any:
            return (yield)

    with pytest.raises(TypeError, match="around"):
        events.register(Wrapper(), name="wrapper")


def _deny_if(word: str) -> Any:
    def guard(text: str) -> str | None:
        return f"no {word}" if word in text else None

    return guard


async def test_guards_only_narrow_and_order_never_matters() -> None:
    """Any deny wins, a raising guard denies, and every permutation gives the same outcome."""
    import itertools

    def broken(text: str) -> str | None:
        raise RuntimeError("guard bug")

    async def allow(text: str) -> None:
        return None

    guards = [_deny_if("rm"), _deny_if("curl"), allow]
    outcomes = {await check_guards(list(perm), "rm -rf / && curl x") for perm in itertools.permutations(guards)}
    assert outcomes == {"no curl; no rm"}
    assert await check_guards(guards, "ls") is None
    denied = await check_guards([allow, broken], "ls")
    assert denied is not None
    assert "guard bug" in denied


class SyncSpec:
    @hookspec(mode="notify", subject="agent", sync=True)
    def dsh_test_synced(self, agent: Any, log: list[str]) -> None: ...


def test_sync_event_calls_listeners_inline_and_refuses_async_ones() -> None:
    """A sync=True event runs from sync code; an async def listener is refused at registration."""
    events = Dispatcher(new_plugin_manager())
    events.add_specs(SyncSpec)

    class Good:
        @hookimpl
        def dsh_test_synced(self, log: list[str]) -> None:
            log.append("good")

    class Broken:
        @hookimpl
        def dsh_test_synced(self, log: list[str]) -> None:
            raise RuntimeError("contained")

    class Bad:
        @hookimpl
        async def dsh_test_synced(self, log: list[str]) -> None: ...

    events.register(Good(), name="good")
    events.register(Broken(), name="broken")
    with pytest.raises(TypeError, match="must be a plain 'def'"):
        events.register(Bad(), name="bad")
    log: list[str] = []
    events.notify_sync("test/synced", agent=A, log=log)
    assert log == ["good"]


async def test_a_sync_listener_returning_an_awaitable_is_awaited(events: Dispatcher) -> None:
    """A listener wrapped by a sync decorator returns a coroutine: the dispatcher awaits it."""
    import functools

    def passthrough(fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any) -> Any:
            return fn(*args)

        return wrapper

    class Wrapped:
        @hookimpl
        @passthrough
        async def dsh_test_fold(self, value: int) -> int:
            await anyio.lowlevel.checkpoint()
            return value + 1

        @hookimpl
        @passthrough
        async def dsh_test_note(self, log: list[str]) -> None:
            log.append("awaited")

    events.register(Wrapped(), name="wrapped")
    log: list[str] = []
    assert await events.waterfall("test/fold", 1, agent=A, log=log) == 2
    await events.notify("test/note", agent=A, log=log)
    assert log == ["awaited"]


def test_hookspec_without_a_mode_says_what_is_missing() -> None:
    """Bare @hookspec (or no mode) is a TypeError that tells the author to name the mode."""
    with pytest.raises(TypeError, match="mode="):

        @hookspec  # type: ignore[arg-type]
        def dsh_test_bare() -> None: ...
