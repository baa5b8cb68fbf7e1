"""``dsh web`` and ``dsh serve``: the sessions over HTTP with the CLI's configuration (SPEC §10.2).

Both run every installed plugin with the configuration ``dsh chat`` would use, in the invoking
directory's workspace, until SIGINT or SIGTERM. ``dsh web`` opens the page in a browser on a local
launch (over SSH, or with no display, it only prints the URL); ``dsh serve`` never opens one.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
import webbrowser
from collections.abc import Awaitable, Mapping
from pathlib import Path
from typing import Final

import anyio

from ._config import DEFAULT_PORT
from ._server import RunningServer, bind, is_loopback, running_server

__all__ = ["ServeCommand", "resolve_token", "serve", "should_open_browser", "web"]

#: The variable that gives the token when neither ``--token`` nor ``[plugins.serve] token`` does.
TOKEN_ENV: Final = "DSH_SERVE_TOKEN"


def resolve_token(flag: str | None, configured: object, environ: Mapping[str, str]) -> tuple[str, bool]:
    """The token and whether it was given (``--token``, ``[plugins.serve] token``, ``DSH_SERVE_TOKEN``)
    rather than generated."""
    for given in (flag, configured, environ.get(TOKEN_ENV)):
        if isinstance(given, str) and given.strip():
            return given.strip(), True
    return secrets.token_urlsafe(24), False


def should_open_browser(environ: Mapping[str, str], platform: str) -> bool:
    """A local launch with a display: not over SSH, and on Linux with X11 or Wayland."""
    if any(environ.get(name) for name in ("SSH_CONNECTION", "SSH_CLIENT", "SSH_TTY")):
        return False
    if platform.startswith("linux") or "bsd" in platform:
        return bool(environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"))
    return True


async def _until_signalled(running: RunningServer) -> None:
    """Serve until SIGINT or SIGTERM (or until the server stops by itself)."""
    async with anyio.create_task_group() as tg:

        async def on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    break
            tg.cancel_scope.cancel()

        async def on_end() -> None:
            await running.ended.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(on_signal)
        tg.start_soon(on_end)


class ServeCommand:
    """A ``dsh.commands`` entry point: ``web`` opens a browser, ``serve`` never does."""

    def __init__(self, name: str, *, opens_browser: bool, help: str) -> None:
        self.name = name
        self.opens_browser = opens_browser
        self.help = help

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
        parser.add_argument(
            "--port", type=int, default=DEFAULT_PORT, help=f"the port to listen on (default: {DEFAULT_PORT}; 0: any)"
        )
        parser.add_argument(
            "--token", help=f"the access token (default: plugins.serve.token, ${TOKEN_ENV}, else a generated one)"
        )
        parser.add_argument("--no-open", action="store_true", help="do not open the page in a browser")

    def run(self, args: argparse.Namespace) -> Awaitable[int]:
        return self._serve(args)

    async def _serve(self, args: argparse.Namespace) -> int:
        import dsh_cli  # the CLI's configuration layers; this command is reached through `dsh`

        from ._app import open_app
        from ._plugin import ServePlugin

        config = dsh_cli.config_from_args(args)
        token, given = resolve_token(args.token, config.get("plugins.serve.token"), os.environ)
        host: str = args.host
        if not is_loopback(host) and not given:
            msg = (
                f"refusing to listen on {host} without a token of your own: anyone who can reach it could "
                f"act as you. Pass --token, set ${TOKEN_ENV} or plugins.serve.token, or listen on 127.0.0.1"
            )
            raise dsh_cli.CliError(msg)
        if not 0 <= args.port <= 65535:
            msg = f"--port {args.port}: expected a port number from 0 to 65535"
            raise dsh_cli.CliError(msg)
        try:
            sock = bind(host, args.port)
        except OSError as exc:
            msg = f"cannot listen on {host}:{args.port}: {exc.strerror or exc}"
            raise dsh_cli.CliError(msg) from exc
        port = sock.getsockname()[1]
        shown_host = f"[{host.strip('[]')}]" if ":" in host else host
        base = f"http://{shown_host}:{port}/"
        with sock:
            plugin = ServePlugin()
            async with dsh_cli.open_harness(config, plugins=[plugin]) as ctx:
                model = config.model
                async with open_app(ctx, config=plugin.config, token=token, model=model, cwd=Path.cwd()) as app:

                    def ready() -> None:
                        print(f"dsh {self.name}: serving the sessions of {Path.cwd()} (model {model})", file=sys.stderr)
                        print(base if given else f"{base}#token={token}", file=sys.stderr, flush=True)
                        if self.opens_browser and not args.no_open and should_open_browser(os.environ, sys.platform):
                            webbrowser.open(f"{base}#token={token}")

                    async with running_server(app, sock, on_ready=ready) as running:
                        await _until_signalled(running)
        print(f"dsh {self.name}: stopped", file=sys.stderr, flush=True)
        return 0


web = ServeCommand("web", opens_browser=True, help="serve the sessions and open the web page (127.0.0.1:3080)")
serve = ServeCommand("serve", opens_browser=False, help="serve the sessions over HTTP (the API and the web page), headless")
