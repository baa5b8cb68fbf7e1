"""Async event dispatch over pluggy's registry: pluggy orders and validates, we call and await.

pluggy has no async call loop, so the dispatcher walks ``get_hookimpls()`` in pluggy's call order
(tryfirst, then last-registered first, then trylast) and awaits what is async. The ordered list of
callables for each event (its *plan*) is cached until the next register or unregister.

Agent scoping: a plugin registered through an agent's context carries that agent's id as its scope
and hears an event only when the event's subject is that agent or an agent it owns.
"""

from __future__ import annotations

import inspect
import logging
import operator
from collections.abc import Awaitable, Callable, Mapping
from types import CoroutineType, GeneratorType, ModuleType
from typing import Any, TypeVar

import anyio
import pluggy

from dsh_core.host._markers import PROJECT, EventMode, EventSpec, spec_of

__all__ = ["Dispatcher", "Registration", "check_guards", "new_plugin_manager"]

logger = logging.getLogger("dsh.events")

_T = TypeVar("_T")


class Registration:
    """One plugin object in the registry; ``alive`` turns false the moment it is unregistered."""

    __slots__ = ("alive", "name", "plugin", "scope")

    def __init__(self, plugin: object, name: str, scope: str | None) -> None:
        self.plugin = plugin
        self.name = name
        self.scope = scope
        self.alive = True


def _arguments_getter(argnames: tuple[str, ...]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """A C-level picker of the arguments an impl takes (an ``itemgetter``), always giving a tuple."""
    if not argnames:
        return lambda _kwargs: ()
    if len(argnames) == 1:
        (name,) = argnames
        return lambda kwargs: (kwargs[name],)
    return operator.itemgetter(*argnames)


class _Impl:
    __slots__ = ("argnames", "arguments", "function", "is_async", "registration")

    def __init__(self, function: Callable[..., Any], argnames: tuple[str, ...], registration: Registration) -> None:
        self.function = function
        self.argnames = argnames
        self.arguments = _arguments_getter(argnames)
        self.is_async = inspect.iscoroutinefunction(function)
        self.registration = registration


class _Plan:
    """The impls of one event in call order, whether any of them is agent-scoped, and the audience
    of each subject heard so far (the impls a call about that agent reaches)."""

    __slots__ = ("audiences", "impls", "mode", "scoped", "spec")

    def __init__(self, spec: EventSpec, impls: tuple[_Impl, ...]) -> None:
        self.spec = spec
        self.mode = spec.mode
        self.impls = impls
        self.scoped = any(impl.registration.scope is not None for impl in impls)
        #: subject id -> its audience; dropped with the plan (register, unregister, set_owner)
        self.audiences: dict[str | None, tuple[_Impl, ...]] = {}


def _subject_id(value: object) -> str | None:
    agent_id = getattr(value, "agent_id", None)
    if agent_id is not None:
        return str(agent_id)
    ident = getattr(value, "id", None)
    return None if ident is None else str(ident)


class Dispatcher:
    """Calls the listeners of an event in the mode its hookspec declares."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self._pm = pm
        self._specs: dict[str, EventSpec] = {}
        self._plans: dict[str, _Plan] = {}
        self._registrations: dict[int, Registration] = {}
        #: agent id -> the agent that owns it (None for a top-level agent)
        self._owners: dict[str, str | None] = {}
        self._owner_tokens: dict[str, object] = {}

    # ------------------------------------------------------------------ catalog and registry

    def add_specs(self, module_or_class: ModuleType | type) -> None:
        """Declare the events found on ``module_or_class`` (functions marked with ``@hookspec``)."""
        self._pm.add_hookspecs(module_or_class)
        for name in dir(module_or_class):
            spec = spec_of(getattr(module_or_class, name))
            if spec is not None:
                self._specs[spec.event] = spec
        self._plans.clear()

    @property
    def specs(self) -> Mapping[str, EventSpec]:
        return self._specs

    def register(self, plugin: object, *, name: str, scope: str | None = None) -> Registration:
        """Add ``plugin``'s hookimpls; ``scope`` is the agent id it is limited to, if any."""
        if self._has_wrappers(plugin):
            msg = f"plugin {name!r}: pluggy wrappers are not supported; use an 'around' event instead"
            raise TypeError(msg)
        self._check_sync_listeners(plugin, name)
        self._pm.register(plugin, name=name)
        registration = Registration(plugin, name, scope)
        self._registrations[id(plugin)] = registration
        self._plans.clear()
        return registration

    def unregister(self, registration: Registration) -> None:
        """Remove a plugin; idempotent. A dispatch already under way skips it from now on."""
        if not registration.alive:
            return
        registration.alive = False
        self._registrations.pop(id(registration.plugin), None)
        if self._pm.is_registered(registration.plugin):
            self._pm.unregister(registration.plugin)
        self._plans.clear()

    def set_owner(self, agent_id: str, owner: str | None) -> Callable[[], None]:
        """Record that ``owner``'s scoped plugins also hear events about ``agent_id``."""
        token = object()
        self._owners[agent_id] = owner
        self._owner_tokens[agent_id] = token
        self._forget_audiences()

        def forget() -> None:
            if self._owner_tokens.get(agent_id) is token:  # exact: never a later same-id entry
                del self._owner_tokens[agent_id]
                self._owners.pop(agent_id, None)
                self._forget_audiences()

        return forget

    def _forget_audiences(self) -> None:
        """Ownership changed: who hears what about an agent must be worked out again."""
        for plan in self._plans.values():
            if plan.scoped:
                plan.audiences.clear()

    def _check_sync_listeners(self, plugin: object, name: str) -> None:
        sync_hooks = {spec.hook: spec.event for spec in self._specs.values() if spec.sync}
        for hook, event in sync_hooks.items():
            function = getattr(plugin, hook, None)
            if function is not None and inspect.iscoroutinefunction(function):
                msg = (
                    f"plugin {name!r}: {hook} must be a plain 'def': {event!r} fires inside a "
                    "synchronous call; hand slow work to a task of your own"
                )
                raise TypeError(msg)

    def _has_wrappers(self, plugin: object) -> bool:
        for name in dir(plugin):
            opts = self._pm.parse_hookimpl_opts(plugin, name)
            if opts is not None and (opts.get("wrapper") or opts.get("hookwrapper")):
                return True
        return False

    def _plan(self, event: str, mode: EventMode) -> _Plan:
        plan = self._plans.get(event)
        if plan is not None and plan.mode == mode:
            return plan
        return self._new_plan(event, mode)

    def _new_plan(self, event: str, mode: EventMode) -> _Plan:
        """Work out (and cache until the registry changes) the plan of ``event``."""
        spec = self._specs.get(event)
        if spec is None:
            msg = f"unknown event {event!r}; declare it with @hookspec and Harness/ctx.add_events()"
            raise KeyError(msg)
        if spec.mode != mode:
            msg = f"event {event!r} is declared {spec.mode!r}; it cannot be dispatched as {mode!r}"
            raise TypeError(msg)
        caller = getattr(self._pm.hook, spec.hook, None)
        impls: list[_Impl] = []
        if caller is not None:
            for hookimpl in reversed(caller.get_hookimpls()):  # pluggy stores them in reverse call order
                registration = self._registrations.get(id(hookimpl.plugin))
                if registration is None:
                    continue
                argnames = (*hookimpl.argnames, *hookimpl.kwargnames)
                impls.append(_Impl(hookimpl.function, argnames, registration))
        plan = _Plan(spec, tuple(impls))
        self._plans[event] = plan
        return plan

    def _audience(self, plan: _Plan, kwargs: Mapping[str, Any]) -> tuple[_Impl, ...]:
        """The impls that hear this call: global ones, and scoped ones whose agent is concerned."""
        if not plan.scoped:
            return plan.impls
        subject_arg = plan.spec.subject_arg
        subject = _subject_id(kwargs.get(subject_arg)) if subject_arg else None
        audience = plan.audiences.get(subject)
        if audience is not None:
            return audience
        concerned: set[str] = set()
        owner = subject
        while owner is not None and owner not in concerned:
            concerned.add(owner)
            owner = self._owners.get(owner)
        audience = tuple(
            impl for impl in plan.impls if impl.registration.scope is None or impl.registration.scope in concerned
        )
        if len(plan.audiences) < 1024:  # bounded: agents come and go
            plan.audiences[subject] = audience
        return audience

    def is_quiet(self, event: str) -> bool:
        """Whether ``event`` (a declared ``notify`` event) has no listener at all: the caller may skip
        building its arguments. Cheap: the cached plan's answer."""
        plan = self._plans.get(event)
        if plan is None or plan.mode != "notify":
            plan = self._new_plan(event, "notify")
        return not plan.impls

    def has_listeners(self, event: str) -> bool:
        """Whether any plugin listens to ``event`` (lets callers skip preparing costly arguments)."""
        plan = self._plans.get(event)  # a cached plan is the one of its declared mode
        if plan is not None:
            return bool(plan.impls)
        spec = self._specs.get(event)
        return spec is not None and bool(self._new_plan(event, spec.mode).impls)

    # ------------------------------------------------------------------ the modes

    async def notify(self, event: str, /, **kwargs: Any) -> None:
        """Call every listener; a failure is logged and contained (or, for a vetoing event, raised)."""
        plan = self._plans.get(event)
        if plan is None or plan.mode != "notify":
            plan = self._new_plan(event, "notify")
        if not plan.impls:
            return
        vetoes = plan.spec.vetoes
        for impl in self._audience(plan, kwargs):
            if not impl.registration.alive:
                continue
            try:
                result = impl.function(*impl.arguments(kwargs))
                if impl.is_async or (result is not None and _is_awaitable(result)):
                    await result
            except Exception:
                if vetoes:
                    raise
                logger.exception("plugin %r failed in %s (contained)", impl.registration.name, event)

    def notify_sync(self, event: str, /, **kwargs: Any) -> None:
        """Call every listener of a ``sync=True`` event from synchronous code; failures are contained."""
        plan = self._plans.get(event)
        if plan is None or plan.mode != "notify":
            plan = self._new_plan(event, "notify")
        if not plan.impls:
            return
        for impl in self._audience(plan, kwargs):
            if not impl.registration.alive:
                continue
            try:
                impl.function(*impl.arguments(kwargs))
            except Exception:
                if plan.spec.vetoes:
                    raise
                logger.exception("plugin %r failed in %s (contained)", impl.registration.name, event)

    async def waterfall(self, event: str, value: _T, /, **kwargs: Any) -> _T:
        """Thread ``value`` through the listeners; each may return a replacement or ``None``."""
        plan = self._plans.get(event)
        if plan is None or plan.mode != "waterfall":
            plan = self._new_plan(event, "waterfall")
        if not plan.impls:
            return value
        value_arg = plan.spec.value_arg
        assert value_arg is not None
        for impl in self._audience(plan, kwargs):
            if not impl.registration.alive:
                continue
            kwargs[value_arg] = value
            result = impl.function(*impl.arguments(kwargs))
            if impl.is_async or (result is not None and _is_awaitable(result)):
                result = await result
            if result is not None:
                value = result
        return value

    async def serial(self, event: str, /, **kwargs: Any) -> Any:
        """Await listeners one by one; the first non-``None`` result wins and the rest are skipped."""
        plan = self._plans.get(event)
        if plan is None or plan.mode != "serial":
            plan = self._new_plan(event, "serial")
        if not plan.impls:
            return None
        for impl in self._audience(plan, kwargs):
            if not impl.registration.alive:
                continue
            result = impl.function(*impl.arguments(kwargs))
            if impl.is_async or (result is not None and _is_awaitable(result)):
                result = await result
            if result is not None:
                return result
        return None

    async def around(self, event: str, inner: Callable[[], Awaitable[_T]], /, **kwargs: Any) -> _T:
        """Run ``inner`` wrapped by every listener; each gets ``call_next`` for the rest of the chain."""
        plan = self._plans.get(event)
        if plan is None or plan.mode != "around":
            plan = self._new_plan(event, "around")
        if not plan.impls:
            return await inner()
        impls = [impl for impl in self._audience(plan, kwargs) if impl.registration.alive]
        if not impls:
            return await inner()

        count = len(impls)

        def link(index: int) -> Callable[[], Awaitable[_T]]:
            """``call_next`` for the listener before ``index``: runs listener ``index`` (or the body).

            It hands back the listener's own awaitable instead of wrapping it in another
            coroutine, so each level of the chain costs one call, not a coroutine of ours.
            """
            if index == count:
                return inner
            impl = impls[index]

            def call_next() -> Awaitable[_T]:
                kwargs["call_next"] = link(index + 1)  # read into args before the next level
                result = impl.function(*impl.arguments(kwargs))
                if impl.is_async or _is_awaitable(result):
                    return result  # type: ignore[no-any-return]
                return _ready(result)  # a sync listener that answered without calling on

            return call_next

        return await link(0)()

    async def parallel(self, event: str, /, **kwargs: Any) -> None:
        """Await every listener concurrently; the first failure cancels the rest and is raised."""
        plan = self._plan(event, "parallel")
        impls = []
        for impl in self._audience(plan, kwargs):
            if not impl.registration.alive:
                continue
            if impl.is_async:
                impls.append(impl)
            else:  # a sync listener cannot overlap with anything: run it now, raise at once
                result = impl.function(*impl.arguments(kwargs))
                if result is not None and _is_awaitable(result):
                    await result
        if not impls:
            return
        if len(impls) == 1:
            await self._call(impls[0], kwargs)
            return
        failures: list[Exception] = []
        async with anyio.create_task_group() as tg:

            async def run(impl: _Impl) -> None:
                try:
                    await self._call(impl, kwargs)
                except Exception as exc:  # noqa: BLE001 - collected; the first is raised after the group
                    failures.append(exc)
                    tg.cancel_scope.cancel()

            for impl in impls:
                tg.start_soon(run, impl)
        if failures:
            raise failures[0]

    @staticmethod
    async def _call(impl: _Impl, kwargs: Mapping[str, Any]) -> Any:
        result = impl.function(*impl.arguments(kwargs))
        if impl.is_async or (result is not None and _is_awaitable(result)):
            result = await result
        return result


#: classes whose instances are never awaitable (what sync listeners return: configs, decisions, ...)
_NOT_AWAITABLE: set[type] = set()


def _is_awaitable(value: object) -> bool:
    """``inspect.isawaitable``, remembering the classes that are not (its ABC check costs on every call)."""
    cls = value.__class__
    if cls is CoroutineType:
        return True
    if cls in _NOT_AWAITABLE:
        return False
    if inspect.isawaitable(value):
        return True
    if cls is not GeneratorType and len(_NOT_AWAITABLE) < 512:  # a generator may be a coroutine
        _NOT_AWAITABLE.add(cls)
    return False


async def _ready(value: _T) -> _T:
    return value


def new_plugin_manager() -> pluggy.PluginManager:
    """A pluggy manager for the dsh project (one per Harness: no global registry)."""
    return pluggy.PluginManager(PROJECT)


async def check_guards(
    guards: list[Callable[..., Any]] | tuple[Callable[..., Any], ...], /, *args: Any
) -> str | None:
    """Run every guard; return the deny reason, or ``None`` when all allow.

    Guards only narrow: any deny wins, a raising guard denies (fail closed), and the reasons are
    sorted so that the order of the guards never changes the outcome.
    """
    reasons: list[str] = []
    for guard in guards:
        try:
            reason = guard(*args)
            if _is_awaitable(reason):
                reason = await reason
        except Exception as exc:  # noqa: BLE001 - a raising guard denies (fail closed)
            reasons.append(f"guard {getattr(guard, '__qualname__', guard)!r} failed: {exc!r}")
            continue
        if reason is not None:
            reasons.append(str(reason))
    if not reasons:
        return None
    return "; ".join(sorted(set(reasons)))
