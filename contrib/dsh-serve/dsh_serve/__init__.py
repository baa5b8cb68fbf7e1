"""dsh plugin that serves the sessions over HTTP: the native API, the live log over SSE, a web page,
and the AG-UI and Vercel AI SDK projections.

``dsh web`` (opens the page) and ``dsh serve`` (headless) run it with the CLI's configuration;
``open_app(ctx, ...)`` gives the ASGI app over any started harness. See docs/plugins/serve.md.
The plugin and its config import only attrs: every harness loads the plugin (``dsh run`` too),
and the web stack (Starlette, uvicorn, pydantic) is imported only when an app is opened.
"""

from ._config import ServeConfig as ServeConfig
from ._plugin import ServePlugin as ServePlugin

# Not `from typing import TYPE_CHECKING`: the front keeps only its own names (as dsh_cli does);
# mypy reads a module's own TYPE_CHECKING as typing's.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._app import ServeApp as ServeApp
    from ._app import open_app as open_app
del TYPE_CHECKING

__all__ = ["ServeApp", "ServeConfig", "ServePlugin", "open_app"]

_LAZY = {"ServeApp", "open_app"}


def __getattr__(name: str) -> "Any":  # a string: Any is imported for type checkers only
    if name not in _LAZY:
        msg = f"module 'dsh_serve' has no attribute {name!r}"
        raise AttributeError(msg)
    from . import _app

    value = getattr(_app, name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
