"""A real HTTP server on 127.0.0.1 for the web tests, recording every request it gets."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import attrs

PAGE = """<!doctype html><html><head><title>Widgets</title><style>body{color:red}</style>
<script>alert("no")</script></head><body><h2>How to use widgets</h2>
<p>Call <code>widget()</code> with <a href="/docs">the docs</a> at hand.</p>
<ul><li>first</li><li>second</li></ul></body></html>"""


@attrs.define
class Seen:
    path: str
    host: str


@attrs.define
class LocalServer:
    port: int
    seen: list[Seen]
    release: threading.Event

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


def _handler(seen: list[Seen], release: threading.Event) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def _send(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name.replace("_", "-"), value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            seen.append(Seen(path=self.path, host=self.headers.get("host", "")))
            query = parse_qs(parts.query)
            if parts.path == "/page":
                self._send(200, PAGE.encode(), "text/html; charset=utf-8")
            elif parts.path == "/text":
                self._send(200, "plain text, größe\n".encode(), "text/plain; charset=utf-8")
            elif parts.path == "/big":
                self._send(200, b"0123456789" * 100_000, "text/plain")
            elif parts.path == "/png":
                self._send(200, b"\x89PNG\r\n\x1a\n" + bytes(100), "image/png")
            elif parts.path == "/missing":
                self._send(404, b"<html><body><p>No such widget</p></body></html>", "text/html")
            elif parts.path == "/redirect":
                self._send(302, b"", "text/plain", location=query["to"][0])
            elif parts.path == "/hang":
                self.send_response(200)
                self.send_header("content-type", "text/plain")
                self.end_headers()
                self.wfile.write(b"starting")
                self.wfile.flush()
                release.wait(30)
            else:
                self._send(200, b"secret", "text/plain")

    return Handler


def serve() -> Iterator[LocalServer]:
    seen: list[Seen] = []
    release = threading.Event()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(seen, release))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield LocalServer(port=server.server_address[1], seen=seen, release=release)
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
