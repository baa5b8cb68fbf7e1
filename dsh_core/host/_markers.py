"""The hook markers: ``hookimpl`` is pluggy's; ``hookspec`` also records the event's dispatch mode."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeAlias, TypeVar

import attrs
import pluggy

__all__ = ["PROJECT", "EventMode", "EventSpec", "event_name_for", "hookimpl", "hookspec", "spec_of"]

PROJECT = "dsh"

EventMode: TypeAlias = Literal["notify", "waterfall", "serial", "around", "parallel"]
_MODES: frozenset[str] = frozenset({"notify", "waterfall", "serial", "around", "parallel"})

hookimpl = pluggy.HookimplMarker(PROJECT)
_pluggy_hookspec = pluggy.HookspecMarker(PROJECT)

_F = TypeVar("_F", bound=Callable[..., Any])

#: How the dispatcher finds the agent an event is about, from the call's keyword arguments.
SubjectGetter: TypeAlias = Callable[[Mapping[str, Any]], "str | None"]


@attrs.frozen
class EventSpec:
    """What the dispatcher needs to know about one event; lives on its hookspec function."""

    event: str
    hook: str
    mode: EventMode
    #: the argument that carries the threaded value of a waterfall
    value_arg: str | None
    #: the argument naming the agent, session or execution the event is about (for scoped plugins)
    subject_arg: str | None
    #: notify events whose raising listener vetoes the action instead of being contained
    vetoes: bool
    #: events dispatched synchronously (inside a sync call such as ``Session.append``): ``def`` only
    sync: bool
    doc: str
    argnames: tuple[str, ...]


def event_name_for(hook: str) -> str:
    """``dsh_agent_turn_continuation`` -> ``agent/turn-continuation``."""
    if not hook.startswith(f"{PROJECT}_"):
        msg = f"hook {hook!r} must start with '{PROJECT}_' (pluggy project {PROJECT!r})"
        raise ValueError(msg)
    group, _, rest = hook[len(PROJECT) + 1 :].partition("_")
    return f"{group}/{rest.replace('_', '-')}"


def hookspec(
    fn: object = None,
    /,
    *,
    mode: EventMode | None = None,
    event: str | None = None,
    value: str | None = None,
    subject: str | None = None,
    vetoes: bool = False,
    sync: bool = False,
) -> Callable[[_F], _F]:
    """Declare an event: its hook, its dispatch mode and, for a waterfall, the threaded argument.

    ``subject`` names the argument whose agent decides which agent-scoped plugins hear the event.
    ``sync=True`` (notify only) means the event fires inside synchronous code, so its listeners
    must be plain ``def`` functions.
    """
    if sync and mode != "notify":
        msg = "only notify events can be dispatched synchronously (sync=True)"
        raise ValueError(msg)
    if fn is not None or mode is None:
        msg = (
            "@hookspec needs the event's dispatch mode: @hookspec(mode='notify'|'waterfall'|'serial'|"
            "'around'|'parallel'); a waterfall also names its threaded argument with value=..."
        )
        raise TypeError(msg)
    if mode not in _MODES:
        msg = f"unknown event mode {mode!r}; expected one of {sorted(_MODES)}"
        raise ValueError(msg)
    if (mode == "waterfall") != (value is not None):
        msg = "a waterfall names its threaded argument with value=...; other modes take none"
        raise ValueError(msg)

    def mark(fn: _F) -> _F:
        import inspect

        argnames = tuple(inspect.signature(fn).parameters)
        for needed in (value, subject):
            if needed is not None and needed not in argnames:
                msg = f"hookspec {fn.__name__}: argument {needed!r} is not in its signature {argnames}"
                raise ValueError(msg)
        if mode == "around" and "call_next" not in argnames:
            msg = f"hookspec {fn.__name__}: an around event takes a 'call_next' argument"
            raise ValueError(msg)
        fn.dsh_event = EventSpec(  # type: ignore[attr-defined]  # a marker attribute, read by spec_of()
            event=event or event_name_for(fn.__name__),
            hook=fn.__name__,
            mode=mode,
            value_arg=value,
            subject_arg=subject,
            vetoes=vetoes,
            sync=sync,
            doc=inspect.cleandoc(fn.__doc__ or ""),
            argnames=argnames,
        )
        return _pluggy_hookspec(fn)

    return mark


def spec_of(fn: object) -> EventSpec | None:
    """The ``EventSpec`` recorded by ``@hookspec``, or ``None`` for an unmarked function."""
    spec = getattr(fn, "dsh_event", None)
    return spec if isinstance(spec, EventSpec) else None
