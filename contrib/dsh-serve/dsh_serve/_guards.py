"""What a request passes before any route sees it: the token, and the body limit (SPEC §10.2).

Both are plain ASGI middleware, so a refused request costs no routing and no body read. Only the
API and the protocol endpoints are guarded; the page and its assets are public (they hold no
data: the page reads its token from the URL fragment, which the browser never sends).
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final
from urllib.parse import parse_qs

from ._errors import error_response

__all__ = ["BodyLimit", "BodyTooLargeError", "TokenGuard", "is_guarded"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The GET endpoints a browser's ``EventSource`` opens: they also take ``?token=``.
_SSE_PATHS: Final = re.compile(r"^/api/sessions/[^/]+/events$|^/api/chat/[^/]+/stream$")


def is_guarded(path: str) -> bool:
    """Whether ``path`` needs the token: the API and the protocol endpoints."""
    return path.startswith("/api/") or path == "/api" or path == "/ag-ui"


def _presented(scope: Scope) -> str | None:
    """The token the request carries: its bearer token, or ``?token=`` on an SSE ``GET``."""
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    for name, value in headers:
        if name == b"authorization":
            scheme, _, credentials = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and credentials.strip():
                return credentials.strip()
    if scope.get("method") == "GET" and _SSE_PATHS.match(scope.get("path", "")):
        raw: bytes = scope.get("query_string", b"")
        tokens = parse_qs(raw.decode("latin-1")).get("token")
        if tokens:
            return tokens[-1]
    return None


class TokenGuard:
    """Answers 401 (JSON) to a guarded request without the right token.

    The comparison takes the same time whatever the token (``hmac.compare_digest``). No cookie
    is read or set, so a cross-site page cannot act with the user's rights.
    """

    def __init__(self, app: App, *, token: str) -> None:
        self._app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_guarded(scope["path"]) or scope.get("method") == "OPTIONS":
            await self._app(scope, receive, send)
            return
        presented = _presented(scope)
        if presented is None:
            response = error_response(
                401,
                "this endpoint needs the server's token: send 'Authorization: Bearer <token>' "
                "(the SSE endpoints also take ?token=); `dsh serve` prints it at start",
                headers={"WWW-Authenticate": "Bearer"},
            )
        elif not hmac.compare_digest(presented.encode(), self._token):
            response = error_response(401, "the token is not this server's", headers={"WWW-Authenticate": "Bearer"})
        else:
            await self._app(scope, receive, send)
            return
        await response(scope, receive, send)


class BodyTooLargeError(Exception):
    """A request body grew past the limit while it was read."""


class BodyLimit:
    """Answers 413 (JSON) to a body over ``max_bytes``: at once from ``Content-Length``, or as it
    streams in (a chunked body is counted, and reading it past the limit fails)."""

    def __init__(self, app: App, *, max_bytes: int) -> None:
        self._app = app
        self._max = max_bytes

    def _too_large(self) -> Any:
        return error_response(413, f"the request body is over the limit of {self._max} bytes (max_body_bytes)")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await error_response(400, "Content-Length is not a number")(scope, receive, send)
                    return
                if declared > self._max:
                    await self._too_large()(scope, receive, send)
                    return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self._max:
                    raise BodyTooLargeError
            return message

        async def watching_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self._app(scope, counting_receive, watching_send)
        except BodyTooLargeError:
            if started:
                raise
            await self._too_large()(scope, receive, send)
