"""The Vercel AI SDK UI message stream over ``POST /api/chat`` with the ``ai`` package's own chat
(``AbstractChat`` and its default transport, pinned in tests/node/package-lock.json), run by node
against a real server (SPEC §10.2)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from dsh_core import Reasoning
from dsh_core.testing import Reply, ScriptedModel

from .serve_kit import Served, follow

pytestmark = pytest.mark.anyio

NODE_DIR = Path(__file__).parent / "node"
NODE = shutil.which("node") or "node"

if not (NODE_DIR / "node_modules" / "ai").is_dir():
    pytest.fail(f"the AI SDK is not installed: run `npm ci` in {NODE_DIR} (.ci/run does)", pytrace=False)


async def chat(served: Served, chat_id: str, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    plan = json.dumps({"url": served.url, "token": served.token, "chatId": chat_id, "steps": steps})
    with anyio.fail_after(60):
        done = await anyio.run_process([NODE, str(NODE_DIR / "chat_client.mjs"), plan], cwd=NODE_DIR, check=False)
    assert done.returncode == 0, done.stderr.decode()
    lines = [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]
    return [line for line in lines if "step" in line]  # not the transport's "connected" lines


def assistant(step: dict[str, Any]) -> dict[str, Any]:
    message = step["messages"][-1]
    assert message["role"] == "assistant", step
    return message


async def test_a_chat_streams_text_reasoning_and_tool_parts(served: Served) -> None:
    """The chat ends ready with one assistant message: reasoning, the tool part with its output, the text."""
    served.model.add(
        Reply(Reasoning("hmm"), ScriptedModel.call("wait_gate", {}), chunks=2),
        ScriptedModel.text("Opened **now**.", chunks=3),
    )
    async with anyio.create_task_group() as tg:

        async def open_when_entered() -> None:
            await served.wait_gate_entered()
            await served.open_gate()

        tg.start_soon(open_when_entered)
        (step,) = await chat(served, "chat-1", [{"send": "open the gate"}])
    assert step["status"] == "ready"
    assert step["error"] is None
    message = assistant(step)
    assert message["id"] == "chat-1:turn-1"
    kinds = [p["type"] for p in message["parts"]]
    assert "reasoning" in kinds
    assert "tool-wait_gate" in kinds
    tool = next(p for p in message["parts"] if p["type"] == "tool-wait_gate")
    assert tool["state"] == "output-available"
    assert tool["output"] == "the gate opened"
    texts = [p["text"] for p in message["parts"] if p["type"] == "text"]
    assert texts[-1] == "Opened **now**."


async def test_an_approval_request_answered_by_the_next_post(served: Served) -> None:
    """A pending approval ends the response with the tool part awaiting an answer; the chat's answer
    resolves it server-side and the same assistant message goes on."""
    served.model.add(ScriptedModel.tool_call("write_note", {"text": "hi"}), "written")
    first, second = await chat(served, "chat-2", [{"send": "write"}, {"approve": {"approved": True}}])
    asked = assistant(first)
    tool = next(p for p in asked["parts"] if p["type"] == "tool-write_note")
    assert tool["state"] == "approval-requested"
    assert tool["approval"]["id"] == "call_1"
    done = assistant(second)
    assert done["id"] == asked["id"]  # one message for the turn, across the approval
    tool = next(p for p in done["parts"] if p["type"] == "tool-write_note")
    assert tool["state"] == "output-available"
    assert served.notes == ["hi"]
    assert [p["text"] for p in done["parts"] if p["type"] == "text"][-1] == "written"
    resolved = [e for e in await served.events("chat-2") if e["type"] == "approval/resolved"]
    assert [(r["data"]["decision"], r["data"]["by"]) for r in resolved] == [("once", "serve")]


async def test_a_denial_streams_tool_output_denied(served: Served) -> None:
    """Denying with a reason: the tool part ends denied and the model hears the reason."""
    served.model.add(ScriptedModel.tool_call("write_note", {"text": "x"}), "ok, no note")
    _, second = await chat(
        served, "chat-3", [{"send": "write"}, {"approve": {"approved": False, "reason": "not now"}}]
    )
    tool = next(p for p in assistant(second)["parts"] if p["type"] == "tool-write_note")
    assert tool["state"] == "output-denied"
    assert served.notes == []
    assert "not now" in str(served.model.requests[-1].messages[-1].content)


async def test_resume_replays_the_running_turn_from_the_log(served: Served) -> None:
    """A chat that reconnects (resumeStream) gets the running turn's message from its start, then the
    rest as it streams; with no turn running the stream endpoint answers 204."""
    served.model.add(ScriptedModel.hang("half of it"))
    async with served.client() as client:
        unknown = await client.get("/api/chat/chat-4/stream")
        (await client.post("/api/sessions", json={"id": "chat-4"})).raise_for_status()
        none_running = await client.get("/api/chat/chat-4/stream")
        async with follow(client, "chat-4") as log:
            await client.post("/api/sessions/chat-4/send", json={"content": "tell me"})
            await log.until(lambda e: e.event == "assistant/chunk")
        plan = json.dumps({"url": served.url, "token": served.token, "chatId": "chat-4", "steps": [{"resume": True}]})
        with anyio.fail_after(60):
            async with await anyio.open_process([NODE, str(NODE_DIR / "chat_client.mjs"), plan], cwd=NODE_DIR) as node:
                assert node.stdout is not None
                lines = BufferedByteReceiveStream(node.stdout)
                connected = json.loads(await lines.receive_until(b"\n", 1 << 20))  # the GET's headers came
                await client.post("/api/sessions/chat-4/cancel")  # the reconnected stream is open: end the turn
                step = json.loads(await lines.receive_until(b"\n", 1 << 24))
                assert await node.wait() == 0
    assert unknown.status_code == 404
    assert none_running.status_code == 204
    assert connected == {"connected": f"{served.url}/api/chat/chat-4/stream", "status": 200}
    message = assistant(step)
    assert message["id"] == "chat-4:turn-1"
    assert "half of it" in "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")


async def test_bad_chat_bodies_are_422(served: Served) -> None:
    """No id, no messages, or a last message that is neither a user prompt nor an approval: 422."""
    async with served.client() as client:
        answers = [
            await client.post("/api/chat", json={"messages": [{"id": "m", "role": "user", "parts": []}]}),
            await client.post("/api/chat", json={"id": "c", "messages": []}),
            await client.post("/api/chat", json={"id": "c", "messages": [{"id": "m", "role": "system", "parts": []}]}),
        ]
    async with httpx.AsyncClient(base_url=served.url) as anonymous:
        refused = await anonymous.post("/api/chat", json={"id": "c", "messages": []})
    assert [a.status_code for a in answers] == [422, 422, 422]
    assert refused.status_code == 401


async def test_steering_the_inbox_and_compaction_are_data_dsh_parts(served: Served) -> None:
    """What the UI message stream has no part for comes as ``data-dsh-*`` parts of the turn's
    message: the queued steer (one part, kept by its id), the steering, a compaction."""
    served.model.add(ScriptedModel.tool_call("wait_gate", {}), "steered reply")
    async with anyio.create_task_group() as tg:
        steps: list[dict[str, Any]] = []

        async def run() -> None:
            steps.extend(await chat(served, "chat-6", [{"send": "start"}]))

        tg.start_soon(run)
        await served.wait_gate_entered()
        async with served.client() as client:
            await client.post("/api/sessions/chat-6/steer", json={"content": "go right", "id": "steer-1"})
        compaction = await served.append_compaction("chat-6")
        await served.open_gate()
    (step,) = steps
    assert step["status"] == "ready", step
    parts = [p for p in assistant(step)["parts"] if p["type"].startswith("data-dsh-")]
    by_type = {(p["type"], p["id"]): p["data"] for p in parts}
    assert by_type[("data-dsh-inbox", "steer-1")] == {"state": "queued", "kind": "steer", "text": "go right"}
    (steering,) = [p["data"] for p in parts if p["type"] == "data-dsh-steering"]
    assert (steering["text"], steering["queuedId"]) == ("go right", "steer-1")
    assert by_type[("data-dsh-compaction", f"compaction-{compaction}")]["tokens_after"] == 1200
    assert assistant(step)["parts"][-1] == {"type": "text", "text": "steered reply", "state": "done"}
