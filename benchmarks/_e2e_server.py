"""The OpenAI-compatible streaming server of ``benchmarks/e2e.py``, run in a process of its own.

``python benchmarks/_e2e_server.py`` listens on a free loopback port, prints it on one line and
serves until its standard input closes. It answers every POST (any path: the clients post to
``/v1/chat/completions``) with an HTTP/1.1 chunked ``text/event-stream``, one HTTP chunk per
server-sent event, keeping the connection alive. The scenario is spelled in the request's model
name, ``e2e-<chunks>-<pace in µs>-<tool steps>``:

* while the request carries fewer ``role: tool`` messages than ``<tool steps>``, the answer is one
  call of the tool ``ping`` (``finish_reason: tool_calls``);
* then it is ``<chunks>`` content deltas of ``"tok "`` each, ``<pace>`` µs apart (0: all written at
  once, as a fast model behind a buffering proxy arrives), a ``finish_reason: stop`` chunk, a usage
  chunk and ``[DONE]``.

Standard library only (asyncio streams), so the server costs the clients' processes nothing, and
any Python that runs the benchmark runs it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from functools import cache
from typing import Any

TOKEN = "tok "
HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)
BASE = {"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "created": 1, "model": "e2e"}


def event(payload: dict[str, Any] | str) -> bytes:
    """One server-sent event framed as one HTTP chunk."""
    data = payload if isinstance(payload, str) else json.dumps({**BASE, **payload}, separators=(",", ":"))
    line = f"data: {data}\n\n".encode()
    return b"%x\r\n%s\r\n" % (len(line), line)


def _choice(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


@cache
def text_events(chunks: int) -> tuple[bytes, ...]:
    """The content deltas of a text answer (the role comes with the first)."""
    first = event(_choice({"role": "assistant", "content": TOKEN}))
    rest = event(_choice({"content": TOKEN}))
    return (first, *(rest for _ in range(chunks - 1)))


@cache
def text_tail(chunks: int) -> bytes:
    usage = {"prompt_tokens": 10, "completion_tokens": chunks, "total_tokens": 10 + chunks}
    return (
        event(_choice({}, "stop")) + event({"choices": [], "usage": usage}) + event("[DONE]") + b"0\r\n\r\n"
    )


def tool_call_answer(step: int) -> bytes:
    call = {
        "index": 0,
        "id": f"call_{step}",
        "type": "function",
        "function": {"name": "ping", "arguments": "{}"},
    }
    usage = {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
    return (
        event(_choice({"role": "assistant", "content": None, "tool_calls": [call]}))
        + event(_choice({}, "tool_calls"))
        + event({"choices": [], "usage": usage})
        + event("[DONE]")
        + b"0\r\n\r\n"
    )


def scenario(model: str) -> tuple[int, float, int]:
    """``e2e-<chunks>-<pace µs>-<tool steps>`` -> (chunks, pace in seconds, tool steps)."""
    _, chunks, pace, tools = model.split("-")
    return int(chunks), int(pace) / 1e6, int(tools)


async def answer(writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
    chunks, pace, tools = scenario(str(body.get("model", "e2e-1-0-0")))
    done = sum(1 for message in body.get("messages", ()) if message.get("role") == "tool")
    writer.write(HEAD)
    if done < tools:
        writer.write(tool_call_answer(done))
    elif pace == 0:
        writer.write(b"".join(text_events(chunks)) + text_tail(chunks))
    else:
        for index, part in enumerate(text_events(chunks)):
            if index:
                await asyncio.sleep(pace)
            writer.write(part)
            await writer.drain()
        writer.write(text_tail(chunks))
    await writer.drain()


OPEN: dict[asyncio.StreamWriter, asyncio.Task[None]] = {}


async def serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    task = asyncio.current_task()
    assert task is not None
    OPEN[writer] = task
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = json.loads(await reader.readexactly(length)) if length else {}
            await answer(writer, body)
    except (asyncio.IncompleteReadError, ConnectionError):
        pass  # the client hung up: between requests, or mid-stream
    finally:
        OPEN.pop(writer, None)
        writer.close()


async def main() -> None:
    server = await asyncio.start_server(serve_connection, "127.0.0.1", 0, backlog=2048)
    print(server.sockets[0].getsockname()[1], flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # the parent closes our stdin to stop us
    server.close()
    handlers = list(OPEN.values())
    for writer in list(OPEN):
        writer.transport.abort()  # each handler's next read fails, and it ends
    await asyncio.gather(*handlers, return_exceptions=True)


if __name__ == "__main__":
    asyncio.run(main())
