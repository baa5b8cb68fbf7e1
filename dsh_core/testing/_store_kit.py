"""``check_session_store(make)``: the conformance suite of a persistence backend.

``make(directory)`` gets a fresh, empty directory and returns ``(plugin, table)``: the backend's
plugin instance and its own config table, for ``Harness(config={"plugins": {plugin.name: table}},
plugins=[plugin])``. Each case gets a store of its own (``make`` is called once per case); the
case starts as many harnesses on it as it needs, each with a new instance of the plugin's class on
the same table (two harnesses of one process are two owners), and child processes that import the
class by its module path. So the class must be importable and constructible without arguments (as
every entry-point plugin is), and the table must be JSON.

The cases (``dsh_core.testing._store_cases``) are the persistence contract through the public seam
only (``dsh_core.SessionPersistence``, the core's errors and types): round trips and resume, the
write path, crash repair, one owner per session within and across processes (a SIGKILLed holder
included), SIGKILL inside a tool, and §9.1's durability of an accepted send while the event loop is
blocked. A violation raises ``AssertionError`` naming every case that failed and why.
"""

from __future__ import annotations

import tempfile
import traceback
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from dsh_core.testing._store_cases import CASES
from dsh_core.testing._store_harness import KitStore

__all__ = ["STORE_CASES", "check_session_store"]

#: the names of the cases, in the order they run
STORE_CASES: tuple[str, ...] = tuple(CASES)

Make = Callable[[Path], tuple[object, Mapping[str, Any]]]


async def check_session_store(make: Make, *, cases: Iterable[str] | None = None) -> None:
    """Run the conformance cases (all, or those named in ``cases``) against the backend ``make`` builds.

    :raises AssertionError: naming each case that failed, with its error.
    :raises ValueError: ``cases`` names a case that does not exist.
    """
    chosen = STORE_CASES if cases is None else tuple(cases)
    unknown = [name for name in chosen if name not in CASES]
    if unknown:
        msg = f"check_session_store: no case named {', '.join(map(repr, unknown))}; the cases are {STORE_CASES}"
        raise ValueError(msg)
    failures: list[str] = []
    for name in chosen:
        with tempfile.TemporaryDirectory(prefix=f"dsh-store-{name[:20]}-") as temp:
            plugin, table = make(Path(temp))
            store = KitStore(type(plugin), _name_of(plugin), dict(table), Path(temp))
            try:
                await CASES[name](store)
            except Exception as exc:  # noqa: BLE001 - every failure, a typed error of the backend included
                where = "".join(traceback.format_exception(exc)[-3:]).strip()
                failures.append(f"case {name!r} failed: {type(exc).__name__}: {exc}\n{where}")
    if failures:
        msg = f"check_session_store: {len(failures)} of {len(chosen)} cases failed\n" + "\n\n".join(failures)
        raise AssertionError(msg)


def _name_of(plugin: object) -> str:
    name = getattr(plugin, "name", None)
    if not isinstance(name, str) or not name:
        msg = f"check_session_store: make() returned {plugin!r}, which has no plugin name (a str attribute `name`)"
        raise TypeError(msg)
    return name
