"""dsh plugin that serves the sessions over HTTP: the native API, the live log over SSE, a web page.

``dsh web`` (opens the page) and ``dsh serve`` (headless) run it with the CLI's configuration;
``open_app(ctx, ...)`` gives the ASGI app over any started harness. See docs/plugins/serve.md.
"""

from ._app import ServeApp as ServeApp
from ._app import open_app as open_app
from ._config import ServeConfig as ServeConfig
from ._plugin import ServePlugin as ServePlugin

__all__ = ["ServeApp", "ServeConfig", "ServePlugin", "open_app"]
