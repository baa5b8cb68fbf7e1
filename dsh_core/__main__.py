"""``python -m dsh_core plugins`` lists installed plugins; ``events`` and ``session-log`` print the catalogues."""

from __future__ import annotations

import sys

from dsh_core._catalog_doc import render_event_catalog, render_session_log
from dsh_core.host._harness import installed_plugins


def _plugins() -> str:
    rows = []
    for info in installed_plugins():
        origin = f"{info.distribution} {info.version}" if info.distribution else "?"
        rows.append(
            f"{info.name}  ({origin})\n"
            f"    provides: {', '.join(info.provides) or '-'}\n"
            f"    requires: {', '.join(info.requires) or '-'}\n"
            f"    hooks:    {', '.join(info.hooks) or '-'}"
        )
    return "\n".join(rows) if rows else "no dsh plugins installed"


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "plugins"
    if command == "plugins":
        print(_plugins())
        return 0
    if command == "events":
        sys.stdout.write(render_event_catalog())
        return 0
    if command == "session-log":
        sys.stdout.write(render_session_log())
        return 0
    print(f"usage: python -m dsh_core [plugins|events|session-log] (unknown command {command!r})", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
