"""The ASGI app: the guards, the native API, the built-in page, and the JSON errors (SPEC §10.2)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Final

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from ._agui import agui_routes
from ._api import api_routes
from ._config import ServeConfig
from ._desk import SessionDesk
from ._errors import ApiError, error_response
from ._guards import BodyLimit, TokenGuard, is_guarded
from ._tail import LogTails
from ._vercel import vercel_routes

if TYPE_CHECKING:
    from dsh_core import Context

__all__ = ["PAGE_POLICY", "ServeApp", "open_app"]

logger = logging.getLogger("dsh_serve")

#: The page's Content-Security-Policy: only its own script and styles, and requests to this
#: server; nothing a model or a tool writes into the page can run a script or load a resource.
PAGE_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


class ServeApp:
    """A running app: the ASGI callable, and what it serves."""

    def __init__(self, asgi: Starlette, desk: SessionDesk, tails: LogTails, config: ServeConfig) -> None:
        self.asgi = asgi
        self.desk = desk
        self.tails = tails
        self.config = config

    def stopping(self) -> None:
        """The server stops taking requests: every SSE follower ends now (its client may reconnect)."""
        self.tails.close_all()


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.message)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if is_guarded(request.url.path):
        message = {404: f"no endpoint {request.url.path}", 405: f"{request.method} is not allowed on {request.url.path}"}
        return error_response(exc.status_code, message.get(exc.status_code, str(exc.detail)), headers=exc.headers)
    return PlainTextResponse(str(exc.detail), status_code=exc.status_code, headers=exc.headers)


async def _bug(request: Request, exc: Exception) -> Response:
    logger.error("a request to %s failed", request.url.path, exc_info=exc)
    return error_response(500, f"the server failed: {type(exc).__name__} (its log has the details)")


def _page_routes() -> list[BaseRoute]:
    static = files("dsh_serve") / "static"
    index = static / "index.html"

    async def page(request: Request) -> Response:
        return Response(
            index.read_bytes(),
            media_type="text/html; charset=utf-8",
            headers={"Content-Security-Policy": PAGE_POLICY, "Cache-Control": "no-store", "Referrer-Policy": "no-referrer"},
        )

    return [
        Route("/", page, methods=["GET"]),
        Mount("/static", StaticFiles(directory=str(static)), name="static"),
    ]


@asynccontextmanager
async def open_app(
    ctx: Context, *, config: ServeConfig, token: str, model: str, cwd: Path
) -> AsyncIterator[ServeApp]:
    """The app over ``ctx``'s sessions; on exit its followers end and its agents are disposed.

    ``token`` guards the API; ``model`` is the model of sessions created without one; ``cwd``
    is the workspace of new sessions.
    """
    tails = LogTails()
    unregister = ctx.register_plugin(tails, name="serve/log-tails")
    desk = SessionDesk(ctx, model=model, cwd=cwd)
    middleware = []
    if config.allowed_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(config.allowed_origins),
                allow_methods=["GET", "POST", "DELETE"],
                allow_headers=["Authorization", "Content-Type", "Last-Event-ID"],
                allow_credentials=False,
            )
        )
    middleware += [
        Middleware(TokenGuard, token=token),
        Middleware(BodyLimit, max_bytes=config.max_body_bytes),
    ]
    asgi = Starlette(
        routes=[
            *vercel_routes(desk, tails, config),
            *api_routes(desk, tails, config),
            *agui_routes(desk, tails, config),
            *_page_routes(),
        ],
        middleware=middleware,
        exception_handlers={ApiError: _api_error, HTTPException: _http_error, Exception: _bug},
    )
    app = ServeApp(asgi, desk, tails, config)
    try:
        yield app
    finally:
        tails.close_all()
        await desk.aclose()
        result = unregister()
        if result is not None:
            await result
