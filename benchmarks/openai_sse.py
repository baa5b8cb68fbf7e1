"""Print the adapter's cost per streamed chunk against plain ``json.loads`` of the same lines.

Three figures over the same recorded-style stream of N text deltas: ``json.loads`` of each data line
(the floor any parser pays), ``StreamParser.feed`` (parsing plus building the dsh chunks), and the
whole adapter over an ``httpx.MockTransport`` (httpx, httpx-sse, parsing). Figures only; nothing
is asserted.
"""

from __future__ import annotations

import json
import time

import anyio
import httpx
from dsh_harness_openai import OpenAIAdapter
from dsh_harness_openai._stream import StreamParser

from dsh_core import Text, UserMessage
from dsh_core.llm import LlmRequest

N = 20_000


def _lines() -> list[str]:
    base = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "deepseek-v4-flash"}
    lines = [
        json.dumps(
            {**base, "choices": [{"index": 0, "delta": {"content": f"tok{i} "}, "finish_reason": None}]}
        )
        for i in range(N)
    ]
    lines.append(json.dumps({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    lines.append(json.dumps({**base, "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": N}}))
    return lines


def _per_chunk(seconds: float) -> str:
    return f"{seconds / N * 1e6:7.2f} µs/chunk"


def main() -> None:
    lines = _lines()

    start = time.perf_counter()
    for line in lines:
        json.loads(line)
    baseline = time.perf_counter() - start

    parser = StreamParser("deepseek")
    start = time.perf_counter()
    for line in lines:
        parser.feed(line)
    parser.feed("[DONE]")
    parser.close()
    parsing = time.perf_counter() - start

    body = "".join(f"data: {line}\n\n" for line in [*lines, "[DONE]"]).encode()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    async def run() -> float:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            adapter = OpenAIAdapter("deepseek", client=client, base_url="http://bench", dialect="deepseek")
            request = LlmRequest("deepseek", "deepseek-v4-flash", [UserMessage((Text("hi"),))])
            begin = time.perf_counter()
            count = 0
            async for _ in adapter.stream(request):
                count += 1
            elapsed = time.perf_counter() - begin
            assert count == N + 2, count  # N deltas, Usage, Finish
            return elapsed

    whole = anyio.run(run)
    print(f"openai_sse: {N} text deltas")
    print(f"  json.loads per line (baseline)   {_per_chunk(baseline)}")
    print(f"  StreamParser.feed                {_per_chunk(parsing)}  ({parsing / baseline:.1f}x baseline)")
    print(f"  adapter over MockTransport       {_per_chunk(whole)}  ({whole / baseline:.1f}x baseline)")


if __name__ == "__main__":
    main()
