"""The kit for driving the ``dsh`` command: a fake OpenAI-compatible server, the project config, a runner.

``FakeLlm`` is a ``ThreadingHTTPServer`` on 127.0.0.1 that answers each ``POST .../chat/completions``
with the next queued reply, streamed as server-sent events the way OpenAI-compatible servers do. A
reply may hold part of its stream back until the test releases it (a model still "typing"), so a
test can act while the agent is busy without sleeping. ``project`` is a directory with a ``dsh.toml``
pointing the provider ``local`` at the server (no ``api_key_env``: no key needed), and ``dsh_env``
an environment whose HOME and XDG directories are in ``tmp_path`` and which has no API keys.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import attrs

#: the dsh console script of the environment running the tests
DSH = str(Path(sys.executable).with_name("dsh"))
#: how long a held reply waits for its release before it gives up (a broken test, not a slow one)
PATIENCE = 20.0


@attrs.define
class Reply:
    """One answer: SSE events streamed at once (``head``), and after ``release`` (``tail``)."""

    head: list[dict[str, Any]] = attrs.field(factory=list)
    tail: list[dict[str, Any]] = attrs.field(factory=list)
    release: threading.Event | None = None
    status: int = 200
    error: str = ""


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _usage(prompt: int = 12, completion: int = 5) -> dict[str, Any]:
    return {
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
    }


def _tool_call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    call = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return _chunk({"tool_calls": [call]})


class FakeLlm:
    """A loopback OpenAI-compatible chat completions server replaying queued replies."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        #: the JSON body of every request, in order
        self.requests: list[dict[str, Any]] = []
        #: set whenever a request arrives (tests wait on it instead of sleeping)
        self.received = threading.Condition()
        self._calls = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._releases: list[threading.Event] = []

    # ------------------------------------------------------------------ scripting

    def text(self, *pieces: str, finish: str = "stop") -> None:
        """Stream ``pieces`` as content deltas, then usage and ``finish``."""
        self.replies.append(Reply([*(_chunk({"content": p}) for p in pieces), _chunk({}, finish), _usage()]))

    def reasoning(self, thought: str, answer: str) -> None:
        """DeepSeek-style ``reasoning_content``, then the answer."""
        self.replies.append(
            Reply(
                [
                    _chunk({"reasoning_content": thought}),
                    _chunk({"content": answer}),
                    _chunk({}, "stop"),
                    _usage(),
                ]
            )
        )

    def tool_call(self, name: str, arguments: dict[str, Any], *, text: str | None = None) -> None:
        """Optional text, then one tool call; finishes ``tool_calls``."""
        self._calls += 1
        head = [_chunk({"content": text})] if text else []
        head += [_tool_call(name, arguments, f"call_{self._calls}"), _chunk({}, "tool_calls"), _usage()]
        self.replies.append(Reply(head))

    def held(self, *pieces: str, then: Sequence[dict[str, Any]] = ()) -> threading.Event:
        """Stream ``pieces``, then wait for the returned event before streaming ``then`` (default: finish stop)."""
        release = threading.Event()
        self._releases.append(release)
        tail = list(then) or [_chunk({}, "stop"), _usage()]
        self.replies.append(Reply([_chunk({"content": p}) for p in pieces], tail, release))
        return release

    def held_tool_call(self, text: str, name: str, arguments: dict[str, Any]) -> threading.Event:
        """Stream ``text``, wait for the release, then finish with a tool call."""
        self._calls += 1
        return self.held(
            text,
            then=[_tool_call(name, arguments, f"call_{self._calls}"), _chunk({}, "tool_calls"), _usage()],
        )

    def fail(self, status: int, message: str) -> None:
        """Answer with an HTTP error and an OpenAI-style error body."""
        self.replies.append(Reply(status=status, error=message))

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> None:
        """Block until ``count`` requests have arrived."""
        with self.received:
            if not self.received.wait_for(lambda: len(self.requests) >= count, timeout):
                msg = f"expected {count} requests, got {len(self.requests)}"
                raise AssertionError(msg)

    def messages(self, index: int) -> list[dict[str, Any]]:
        """The ``messages`` of request ``index``."""
        return list(self.requests[index]["messages"])

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        for release in self._releases:
            release.set()
        self._server.shutdown()
        self._server.server_close()


def _handler(state: FakeLlm) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
            with state.received:
                state.requests.append(body)
                reply = (
                    state.replies.popleft() if state.replies else Reply(status=500, error="no reply queued")
                )
                state.received.notify_all()
            if reply.status != 200:
                payload = json.dumps({"error": {"message": reply.error, "type": "error"}}).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                self._events(reply.head)
                if reply.release is not None and not reply.release.wait(PATIENCE):
                    return
                self._events(reply.tail)
                self._send(b"data: [DONE]\n\n")
                self._send(b"")
            except OSError:  # the client hung up (a cancelled turn)
                self.close_connection = True

        def _events(self, events: list[dict[str, Any]]) -> None:
            for event in events:
                self._send(f"data: {json.dumps(event)}\n\n".encode())

        def _send(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    return Handler


def project_toml(base_url: str, sessions: Path, extra: str = "") -> str:
    return f"""
[plugins.cli]
model = "local/fake"

[plugins.openai.providers.local]
base_url = "{base_url}"
models = {{ fake = {{ context_window = 32768, max_output_tokens = 4096 }} }}

[plugins.retry]
max_attempts = 1

[plugins.persistence-jsonl]
root = "{sessions}"
batch_delay = 0.0

[plugins.permissions]
mode = "workspace-write"
sandbox = "off"
rules = [{{ tool = "bash", action = "ask" }}]
{extra}
"""


def run_dsh(
    *args: str, cwd: Path, env: dict[str, str], input: str | None = None, timeout: float = 30.0
) -> subprocess.CompletedProcess[str]:
    """Run ``dsh ARGS`` to completion, capturing stdout and stderr as text."""
    return subprocess.run(
        [DSH, *args],
        cwd=cwd,
        env=env,
        input=input,
        stdin=subprocess.DEVNULL if input is None else None,  # never the test runner's own stdin
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def spawn_dsh(*args: str, cwd: Path, env: dict[str, str], columns: int = 120) -> Any:
    """``dsh ARGS`` in a pseudo-terminal (pexpect), 40 rows by ``columns`` (120)."""
    import pexpect  # the test extra; only the terminal tests need it

    env = {**env, "COLUMNS": str(columns)}
    child = pexpect.spawn(
        DSH, list(args), cwd=str(cwd), env=env, dimensions=(40, columns), encoding="utf-8", timeout=15
    )
    child.linesep = "\r"  # Enter is a carriage return, as a terminal sends it (Ctrl-J, "\n", is a newline)
    return child


class Terminal:
    """The screen of a ``spawn_dsh`` child as a terminal shows it (pyte), for what is redrawn in place.

    prompt_toolkit repaints only the cells that change, so a status line is never one contiguous
    string in the raw output; the emulated screen has it whole. Reads only when waiting, and waits
    on the child's output (never a sleep).
    """

    def __init__(self, child: Any, rows: int = 40, columns: int = 120) -> None:
        import pyte  # the test extra

        self.child = child
        self.screen = pyte.Screen(columns, rows)
        # answer the cursor-position reports prompt_toolkit asks for, as a real terminal does
        self.screen.write_process_input = child.send  # type: ignore[method-assign]
        self._stream = pyte.Stream(self.screen)

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def wait_for(self, wanted: str, timeout: float = 15.0) -> None:
        """Read the child's output until ``wanted`` is on the screen."""
        import pexpect

        deadline = time.monotonic() + timeout
        while wanted not in self.text():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                msg = f"{wanted!r} never appeared; the screen:\n{self.text()}"
                raise AssertionError(msg)
            try:
                self._stream.feed(self.child.read_nonblocking(65536, timeout=remaining))
            except pexpect.TIMEOUT:
                continue
