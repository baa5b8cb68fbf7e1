"""The clients ``benchmarks/e2e.py`` runs against its server: dsh, three peers and two floors.

Each contender is an async context manager (``open_<kind>(base_url, **options)``) that yields an
``async def turn(model) -> int``: one whole agent turn for the prompt ``"go"`` against the server's
scenario ``model`` (tool calls of ``ping`` answered ``"pong"``, until the final text), returning the
number of ``"tok "`` text chunks the final answer had, which the benchmark checks. Everything
is imported inside the opener, so that a peer's benchmark venv needs no dsh, and dsh's none of the
peers. dsh's turn is ``agent.run`` (every chunk goes through the loop and the session log, as it
does for an app reading the log); a peer's turn iterates the stream events its own streaming API
yields, as an app showing tokens would.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

Turn = Callable[[str], Awaitable[int]]
TOKEN = "tok "
PING_SCHEMA = {
    "type": "function",
    "function": {
        "name": "ping",
        "description": "Answer pong.",
        "parameters": {"type": "object", "properties": {}},
    },
}


def chunks_in(text: str) -> int:
    return len(text) // len(TOKEN)


def ping() -> str:
    """Answer pong."""
    return "pong"


# ---------------------------------------------------------------------- dsh


@contextlib.asynccontextmanager
async def open_dsh(
    base_url: str, *, persist_root: str | None = None, http_transport: str | None = None
) -> AsyncIterator[Turn]:
    """dsh with the ``openai`` adapter plugin (and ``persistence-jsonl`` under ``persist_root``;
    ``http_transport`` is the plugin's option of that name, left out when ``None``).

    The plugins are found by entry point name, as a user's harness finds them, so a tree whose
    distributions or import packages are named otherwise runs the same code.
    """
    from importlib.metadata import entry_points

    from dsh_core import AgentOptions, Harness, tool

    found = {point.name: point for point in entry_points(group="dsh")}
    plugins: list[Any] = [found["openai"].load()]
    openai: dict[str, Any] = {"providers": {"e2e": {"base_url": base_url}}}
    if http_transport is not None:
        openai["http_transport"] = http_transport
    config: dict[str, Any] = {"plugins": {"openai": openai}}
    if persist_root is not None:
        plugins.append(found["persistence-jsonl"].load())
        config["plugins"]["persistence-jsonl"] = {"root": persist_root}
    serial = 0

    async with Harness(config=config, plugins=plugins, autoload=False) as ctx:
        ctx.tools.register(tool(ping))

        async def turn(model: str) -> int:
            nonlocal serial
            serial += 1
            options = AgentOptions(model=f"e2e/{model}")
            async with await ctx.agents.create(f"e2e-{serial}", agent_options=options) as handle:
                outcome = await handle.agent.run("go")
            return chunks_in(outcome.text)

        yield turn


# ---------------------------------------------------------------------- peers


@contextlib.asynccontextmanager
async def open_openai_agents(base_url: str) -> AsyncIterator[Turn]:
    """The OpenAI Agents SDK on its chat-completions model, tracing off (it would export to OpenAI)."""
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base_url, api_key="e2e")
    tools = [function_tool(ping)]

    async def turn(model: str) -> int:
        agent = Agent(
            name="e2e",
            instructions="bench",
            model=OpenAIChatCompletionsModel(model=model, openai_client=client),
            tools=tools,
        )
        result = Runner.run_streamed(agent, "go", max_turns=100)
        async for _ in result.stream_events():
            pass
        return chunks_in(str(result.final_output))

    try:
        yield turn
    finally:
        await client.close()


@contextlib.asynccontextmanager
async def open_pydantic_ai(base_url: str) -> AsyncIterator[Turn]:
    """pydantic-ai's ``Agent.iter``, streaming every model request's events (its documented way to
    stream through tool calls)."""
    from pydantic_ai import Agent
    from pydantic_ai.providers.openai import OpenAIProvider

    try:
        from pydantic_ai.models.openai import OpenAIChatModel as ChatModel
    except ImportError:  # before 1.0
        from pydantic_ai.models.openai import OpenAIModel as ChatModel  # type: ignore[no-redef]

    provider = OpenAIProvider(base_url=base_url, api_key="e2e")

    async def turn(model: str) -> int:
        agent = Agent(ChatModel(model, provider=provider), instructions="bench")
        agent.tool_plain(ping)
        async with agent.iter("go") as run:
            async for node in run:
                if Agent.is_model_request_node(node):
                    async with node.stream(run.ctx) as events:
                        async for _ in events:
                            pass
        assert run.result is not None
        return chunks_in(str(run.result.output))

    try:
        yield turn
    finally:
        await provider.client.close()


@contextlib.asynccontextmanager
async def open_langchain(base_url: str) -> AsyncIterator[Turn]:
    """LangChain's ``create_agent`` (a LangGraph graph) over ``langchain-openai``'s ``ChatOpenAI``,
    streamed with ``stream_mode="messages"`` (token by token)."""
    from langchain.agents import create_agent
    from langchain_core.tools import tool as lc_tool
    from langchain_openai import ChatOpenAI

    tools = [lc_tool(ping)]

    async def turn(model: str) -> int:
        llm = ChatOpenAI(model=model, base_url=base_url, api_key="e2e", streaming=True)  # type: ignore[arg-type]
        agent = create_agent(llm, tools=tools, system_prompt="bench")
        last = None
        async for mode, payload in agent.astream(
            {"messages": [{"role": "user", "content": "go"}]}, stream_mode=["messages", "values"]
        ):
            if mode == "values":
                last = payload
        assert last is not None
        return chunks_in(str(last["messages"][-1].content))

    yield turn


# ---------------------------------------------------------------------- floors


class _Answer:
    """What a floor keeps of one streamed answer: the text chunks and the tool calls."""

    __slots__ = ("calls", "text")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: list[dict[str, Any]] = []

    def feed(self, data: str) -> None:
        event = json.loads(data)
        for choice in event.get("choices") or ():
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if content:
                self.text.append(content)
            for call in delta.get("tool_calls") or ():
                self.calls.append(call)


async def _tool_loop(post: Callable[[list[dict[str, Any]], str], Awaitable[_Answer]], model: str) -> int:
    """The least an agent does: post, run the tool calls, post their results, until text comes."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    while True:
        answer = await post(messages, model)
        if not answer.calls:
            return chunks_in("".join(answer.text))
        messages.append({"role": "assistant", "content": None, "tool_calls": answer.calls})
        messages.extend(
            {"role": "tool", "tool_call_id": call["id"], "content": ping()} for call in answer.calls
        )


def _request_body(messages: list[dict[str, Any]], model: str) -> bytes:
    return json.dumps({"model": model, "messages": messages, "stream": True, "tools": [PING_SCHEMA]}).encode()


@contextlib.asynccontextmanager
async def open_floor_socket(base_url: str) -> AsyncIterator[Turn]:
    """The floor: asyncio streams on a raw socket, HTTP/1.1 chunked framing and SSE split by hand,
    ``json.loads`` per event; one kept-alive connection per turn running at once."""
    import asyncio
    from urllib.parse import urlsplit

    url = urlsplit(base_url)
    host, port, path = url.hostname or "127.0.0.1", url.port or 80, f"{url.path}/chat/completions"
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def post_on(
        connection: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        messages: list[dict[str, Any]],
        model: str,
    ) -> _Answer:
        reader, writer = connection
        body = _request_body(messages, model)
        writer.write(
            f"POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await reader.readuntil(b"\r\n\r\n")  # the status line and headers: always 200 here
        answer = _Answer()
        pending = b""
        while True:
            size = int(await reader.readuntil(b"\r\n"), 16)
            data = await reader.readexactly(size + 2)
            if size == 0:
                return answer
            pending += data[:-2]
            *events, pending = pending.split(b"\n\n")
            for raw in events:
                if raw.startswith(b"data: ") and raw != b"data: [DONE]":
                    answer.feed(raw[6:].decode())

    async def turn(model: str) -> int:
        connection = idle.pop() if idle else await asyncio.open_connection(host, port)
        try:
            return await _tool_loop(lambda messages, model: post_on(connection, messages, model), model)
        finally:
            idle.append(connection)

    try:
        yield turn
    finally:
        for _, writer in idle:
            writer.close()


@contextlib.asynccontextmanager
async def open_floor_httpx(base_url: str) -> AsyncIterator[Turn]:
    """The floor of an httpx client: ``aiter_lines`` over the same stream, ``json.loads`` per event."""
    import httpx

    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=60) as client:

        async def post(messages: list[dict[str, Any]], model: str) -> _Answer:
            answer = _Answer()
            body = _request_body(messages, model)
            headers = {"content-type": "application/json"}
            async with client.stream("POST", "/chat/completions", content=body, headers=headers) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        answer.feed(line[6:])
            return answer

        async def turn(model: str) -> int:
            return await _tool_loop(post, model)

        yield turn


OPENERS: dict[str, Callable[..., contextlib.AbstractAsyncContextManager[Turn]]] = {
    "dsh": open_dsh,
    "openai-agents": open_openai_agents,
    "pydantic-ai": open_pydantic_ai,
    "langchain": open_langchain,
    "floor-socket": open_floor_socket,
    "floor-httpx": open_floor_httpx,
}
