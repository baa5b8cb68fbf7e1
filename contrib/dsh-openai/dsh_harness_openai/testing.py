"""A fake OpenAI-compatible server on the loopback interface, for tests: it replays scripted replies.

``LlmServer`` is a real HTTP/1.1 server (``http.server`` in a thread, 127.0.0.1, a free port), so
the adapter's whole stack — httpx, the connection pool, SSE parsing — runs as it does against a
provider. Queue replies, then point a provider's ``base_url`` at ``server.base_url``::

    with LlmServer() as server:
        server.stream(chunk(content="Hello"), chunk(finish="stop"))
        config = {"plugins": {"openai": {"providers": {"local": {"base_url": server.base_url}}}}}
        ...
        assert server.requests[0].body["messages"][-1]["content"] == "hi"

Each POST takes the next reply (a 500 when none is left) and is recorded in ``requests``. A reply can
stream its parts chunked and keep the response open until the client hangs up (``disconnected`` is
set then), stop before the body it announced is complete (a cut stream), or hold its headers back
until the server stops (a slow server).
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Final, Self

import attrs

__all__ = ["LlmServer", "Recorded", "Reply", "chunk", "sse"]

#: How long a handler thread waits for the test (a release, a hang-up) before it gives up, so that
#: no thread outlives a broken test by much. A passing test never waits that long.
PATIENCE: Final = 10.0


def sse(*events: object, done: bool = True) -> bytes:
    """An event-stream body: each event as one ``data:`` line (JSON, or a str as is), then ``[DONE]``."""
    lines = [f"data: {event if isinstance(event, str) else json.dumps(event)}\n\n" for event in events]
    if done:
        lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()


def chunk(index: int = 0, finish: str | None = None, **delta: Any) -> dict[str, Any]:
    """One ``chat.completion.chunk`` whose single choice carries ``delta`` (and ``finish`` as its finish_reason)."""
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
    }


@attrs.define
class Reply:
    """What the server answers to one request."""

    status: int = 200
    #: the body, or its parts (sent one by one when ``hold_open``)
    body: bytes | list[bytes] = b""
    headers: dict[str, str] = attrs.field(factory=dict)
    content_type: str = "text/event-stream"
    #: announce a longer body than is sent, then close the connection: a stream cut mid-way
    cut: bool = False
    #: send nothing, not even the status line, until the server stops: slow headers
    hold_headers: bool = False
    #: send the parts chunked, then keep the response open until the client hangs up
    hold_open: bool = False


@attrs.frozen
class Recorded:
    """One request the server received; ``body`` is the parsed JSON (the raw text if it was not JSON)."""

    path: str
    #: header names in lower case
    headers: dict[str, str]
    body: Any


class LlmServer:
    """A loopback HTTP server that answers each POST with the next queued ``Reply``.

    Use it as a context manager (or call ``start`` and ``stop``); ``stop`` releases held replies,
    shuts the server down and closes its socket.
    """

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        #: set by ``stop``: held replies give up
        self.release = threading.Event()
        #: set when a client hung up on a ``hold_open`` reply
        self.disconnected = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._server.handle_error = _quiet  # type: ignore[method-assign]  # clients that hang up are expected
        self.port: int = self._server.server_address[1]
        #: the ``base_url`` of a provider served here
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, name="llm-server", daemon=True
        )

    def reply(self, *replies: Reply) -> None:
        """Queue replies, answered in order."""
        self.replies.extend(replies)

    def stream(self, *events: object, done: bool = True) -> None:
        """Queue a 200 event stream of ``events`` (see ``sse``)."""
        self.reply(Reply(body=sse(*events, done=done)))

    def error(self, status: int, message: str = "", *, headers: dict[str, str] | None = None) -> None:
        """Queue an error status with an OpenAI-style body ``{"error": {"message": ...}}``."""
        body = json.dumps({"error": {"message": message, "type": "error"}}).encode()
        self.reply(Reply(status, body, headers or {}, content_type="application/json"))

    @property
    def body(self) -> Any:
        """The JSON body of the last request."""
        return self.requests[-1].body

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Release held replies, stop serving and close the socket. Idempotent."""
        self.release.set()
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=PATIENCE)
        self._server.server_close()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _quiet(request: object, client_address: object) -> None:
    """A handler that failed because its client went away is no news."""


def _handler_for(state: LlmServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length", "0")))
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
            headers = {name.lower(): value for name, value in self.headers.items()}
            state.requests.append(Recorded(self.path, headers, body))
            reply = (
                state.replies.popleft()
                if state.replies
                else Reply(500, b'{"error": {"message": "no reply queued"}}')
            )
            if reply.hold_headers:
                state.release.wait(PATIENCE)
                self.close_connection = True
                return
            parts = reply.body if isinstance(reply.body, list) else [reply.body]
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if reply.hold_open:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for part in parts:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.flush()
                self._wait_for_hang_up()
                return
            payload = b"".join(parts)
            self.send_header("Content-Length", str(len(payload) + (100 if reply.cut else 0)))
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
            if reply.cut:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)

        def _wait_for_hang_up(self) -> None:
            self.close_connection = True
            self.connection.settimeout(PATIENCE)
            try:
                if self.connection.recv(1) == b"":
                    state.disconnected.set()
            except OSError:  # a reset is a hang-up too
                state.disconnected.set()

    return Handler
