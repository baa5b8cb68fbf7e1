"""AG-UI over ``POST /ag-ui`` with AG-UI's own client: ``HttpAgent`` from ``@ag-ui/client`` (pinned in
tests/node/package-lock.json), run by node against a real server (SPEC §10.2)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from dsh_core import Reasoning, UserMessage
from dsh_core.testing import Reply, ScriptedModel

from .serve_kit import Served, follow

pytestmark = pytest.mark.anyio

NODE_DIR = Path(__file__).parent / "node"
NODE = shutil.which("node") or "node"

if not (NODE_DIR / "node_modules" / "@ag-ui" / "client").is_dir():
    pytest.fail(
        f"the AG-UI client is not installed: run `npm ci` in {NODE_DIR} (.ci/run does)", pytrace=False
    )


async def agui(served: Served, thread: str, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run ``runs`` through ``HttpAgent`` on one thread; one result per run."""
    plan = json.dumps({"url": served.url, "token": served.token, "threadId": thread, "runs": runs})
    with anyio.fail_after(60):
        done = await anyio.run_process([NODE, str(NODE_DIR / "agui_client.mjs"), plan], cwd=NODE_DIR, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]


def types(result: dict[str, Any]) -> list[str]:
    return [event["type"] for event in result["events"]]


async def test_a_run_streams_text_reasoning_and_a_tool_call(served: Served) -> None:
    """One run: RUN_STARTED, steps, reasoning, text and a tool call with its result, RUN_FINISHED."""
    served.model.add(
        Reply(Reasoning("thinking it over"), ScriptedModel.call("wait_gate", {}), chunks=2),
        ScriptedModel.text("The gate opened.", chunks=3),
    )
    async with anyio.create_task_group() as tg:

        async def open_when_entered() -> None:
            await served.wait_gate_entered()
            await served.open_gate()

        tg.start_soon(open_when_entered)
        (result,) = await agui(served, "thread-1", [{"message": "open it"}])
    assert "error" not in result, result
    seen = types(result)
    assert seen[0] == "RUN_STARTED"
    assert seen[-1] == "RUN_FINISHED"
    assert result["events"][-1]["outcome"]["type"] == "success"
    for expected in (
        "STEP_STARTED", "STEP_FINISHED", "REASONING_START", "REASONING_MESSAGE_CONTENT", "REASONING_END",
        "TOOL_CALL_START", "TOOL_CALL_END", "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
    ):
        assert expected in seen, (expected, seen)
    text = "".join(e["delta"] for e in result["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "The gate opened."
    tool_result = next(e for e in result["events"] if e["type"] == "TOOL_CALL_RESULT")
    assert tool_result["content"] == "the gate opened"
    roles = [m["role"] for m in result["messages"]]
    assert roles[0] == "user"
    assert "assistant" in roles
    assert "tool" in roles
    async with served.client() as client:  # the thread is a dsh session
        shown = (await client.get("/api/sessions/thread-1")).json()
    assert shown["title"] == "open it"


async def test_the_conversation_resent_sends_only_the_new_message(served: Served) -> None:
    """HttpAgent re-sends every message on each run; only the unseen one becomes a prompt."""
    served.model.add("first answer", "second answer")
    results = await agui(served, "thread-2", [{"message": "one"}, {"message": "two"}])
    assert [r["events"][-1]["type"] for r in results] == ["RUN_FINISHED", "RUN_FINISHED"]
    assert len(served.model.requests) == 2
    last = served.model.requests[-1].messages
    prompts = [m for m in last if isinstance(m, UserMessage)]
    assert [str(m.content[0].text) for m in prompts] == ["one", "two"]  # each once
    events = await served.events("thread-2")
    assert [e["type"] for e in events].count("inbox/queued") == 2


async def test_an_approval_is_an_interrupt_answered_by_resume(served: Served) -> None:
    """A pending approval ends the run with an interrupt; the next run's resume answers it (AG-UI's
    payload with edited arguments) and streams the rest of the same turn."""
    served.model.add(ScriptedModel.tool_call("write_note", {"text": "draft"}), "noted")
    first, second = await agui(
        served,
        "thread-3",
        [{"message": "write a note"}, {"resumeWith": {"approved": True, "editedArgs": {"text": "edited"}}}],
    )
    finished = first["events"][-1]
    assert finished["type"] == "RUN_FINISHED"
    assert finished["outcome"]["type"] == "interrupt"
    (interrupt,) = finished["outcome"]["interrupts"]
    assert interrupt["id"] == "call_1"
    assert interrupt["toolCallId"] == "call_1"
    assert interrupt["reason"] == "tool_call"
    assert "responseSchema" in interrupt
    assert "error" not in second, second
    assert second["events"][-1]["outcome"]["type"] == "success"
    assert "TOOL_CALL_RESULT" in types(second)
    assert served.notes == ["edited"]
    resolved = [e for e in await served.events("thread-3") if e["type"] == "approval/resolved"]
    assert [(r["data"]["decision"], r["data"]["by"]) for r in resolved] == [("once", "serve")]
    turns = {e["data"]["turn"] for e in await served.events("thread-3") if e["type"] == "turn/start"}
    assert turns == {1}  # one dsh turn, two AG-UI runs


async def test_a_denial_through_dsh_payload(served: Served) -> None:
    """dsh's own payload (``decision``, ``reason``) is accepted too; the model is told the reason."""
    served.model.add(ScriptedModel.tool_call("write_note", {"text": "x"}), "fine")
    _, second = await agui(
        served,
        "thread-4",
        [{"message": "note"}, {"resumeWith": {"decision": "deny", "reason": "no notes today"}}],
    )
    assert second["events"][-1]["outcome"]["type"] == "success"
    assert served.notes == []
    assert "no notes today" in str(served.model.requests[-1].messages[-1].content)


async def test_a_run_while_a_turn_runs_steers_with_the_dsh_extension(served: Served) -> None:
    """``forwardedProps.dsh.deliver = "steer"`` lands in the running turn; both runs end with it."""
    served.model.add(ScriptedModel.tool_call("wait_gate", {}), "steered reply")
    async with anyio.create_task_group() as tg:
        results: dict[str, list[dict[str, Any]]] = {}

        async def first() -> None:
            results["first"] = await agui(served, "thread-5", [{"message": "start"}])

        tg.start_soon(first)
        await served.wait_gate_entered()

        async def second() -> None:
            results["second"] = await agui(
                served, "thread-5", [{"message": "go left", "forwardedProps": {"dsh": {"deliver": "steer"}}}]
            )

        async with served.client() as client, follow(client, "thread-5") as log:
            tg.start_soon(second)
            await log.until(lambda e: e.event == "inbox/queued" and e.json()["data"]["kind"] == "steer")
        await served.open_gate()
    assert results["first"][0]["events"][-1]["outcome"]["type"] == "success"
    assert results["second"][0]["events"][-1]["outcome"]["type"] == "success"
    steering = [e for e in await served.events("thread-5") if e["type"] == "steering/message"]
    assert len(steering) == 1
    assert "go left" in str(served.model.requests[-1].messages)



async def test_steering_the_inbox_and_compaction_are_dsh_custom_events(served: Served) -> None:
    """What AG-UI has no event for comes as ``CUSTOM`` events named ``dsh.*``: the prompt queued for
    the running turn, the steering it became, and a compaction in the turn."""
    served.model.add(ScriptedModel.tool_call("wait_gate", {}), "steered reply")
    async with anyio.create_task_group() as tg:
        results: list[dict[str, Any]] = []

        async def run() -> None:
            results.extend(await agui(served, "thread-6", [{"message": "start"}]))

        tg.start_soon(run)
        await served.wait_gate_entered()
        async with served.client() as client:
            await client.post("/api/sessions/thread-6/steer", json={"content": "go right", "id": "steer-1"})
        compaction = await served.append_compaction("thread-6")
        await served.open_gate()
    (result,) = results
    assert "error" not in result, result
    custom = [(e["name"], e["value"]) for e in result["events"] if e["type"] == "CUSTOM"]
    assert ("dsh.inbox", {"id": "steer-1", "state": "queued", "kind": "steer", "text": "go right"}) in custom
    steering = [value for name, value in custom if name == "dsh.steering"]
    assert [(v["text"], v["queuedId"], v["source"]) for v in steering] == [("go right", "steer-1", "steering")]
    compacted = [value for name, value in custom if name == "dsh.compaction"]
    assert compacted == [
        {"id": f"compaction-{compaction}", "seq": compaction, "reason": "threshold", "turn": 1, "step": 1,
         "tokens_before": 9000, "tokens_after": 1200}
    ]
    assert result["events"][-1]["outcome"]["type"] == "success"


async def test_bad_input_is_a_json_error(served: Served) -> None:
    """A body that is not a RunAgentInput is a 422 naming the field; no token, a 401."""
    async with served.client() as client:
        missing = await client.post("/ag-ui", json={"threadId": "t"})
        resume = await client.post(
            "/ag-ui",
            json={"threadId": "t2", "runId": "r", "messages": [], "resume": [{"interruptId": "nope", "status": "resolved", "payload": {"approved": True}}]},
        )
    async with httpx.AsyncClient(base_url=served.url) as anonymous:
        refused = await anonymous.post("/ag-ui", json={})
    assert missing.status_code == 422
    assert "runId" in missing.json()["error"]["message"] or "run_id" in missing.json()["error"]["message"]
    assert resume.status_code == 409
    assert refused.status_code == 401
