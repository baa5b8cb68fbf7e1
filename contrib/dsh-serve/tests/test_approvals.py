"""Approvals over the native API: list what waits, answer it once, always, deny with a reason, edit
the arguments; answers are logged server-side and a pending one survives a server restart (SPEC §10.1, §10.2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_core.testing import ScriptedModel

from .serve_kit import Served, SseEvent, follow, serving_async, turn_ended

pytestmark = pytest.mark.anyio


def requested(event: SseEvent) -> bool:
    return event.event == "approval/requested"


async def test_a_pending_approval_is_listed_and_answered_once(served: Served) -> None:
    """GET lists the waiting call with its decoded arguments; allowing it once runs it and logs who answered."""
    served.model.add(ScriptedModel.tool_call("write_note", {"text": "hello"}), "written")
    async with served.client() as client:
        ident = (await client.post("/api/sessions", json={})).json()["id"]
        async with follow(client, ident) as stream:
            await client.post(f"/api/sessions/{ident}/send", json={"content": "note it"})
            asked = (await stream.until(requested))[-1].json()
            listed = (await client.get(f"/api/sessions/{ident}/approvals")).json()
            answered = await client.post(f"/api/sessions/{ident}/approvals/call_1", json={"decision": "once"})
            seen = await stream.until(turn_ended)
            again = await client.post(f"/api/sessions/{ident}/approvals/call_1", json={"decision": "once"})
            never = await client.post(f"/api/sessions/{ident}/approvals/call_9", json={"decision": "once"})
            after = (await client.get(f"/api/sessions/{ident}/approvals")).json()
    assert listed == {
        "approvals": [
            {"call_id": "call_1", "tool": "write_note", "arguments": {"text": "hello"}, "reason": "it writes a note", "seq": asked["seq"]}
        ]
    }
    assert answered.status_code == 200
    record = answered.json()
    assert record["type"] == "approval/resolved"
    assert record["data"] == {"call_id": "call_1", "decision": "once", "reason": None, "arguments": None, "by": "serve"}
    assert [e.json() for e in seen if e.event == "approval/resolved"] == [record]
    assert served.notes == ["hello"]
    assert seen[-1].json()["data"]["reason"]["kind"] == "completed"
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "conflict"
    assert never.status_code == 404
    assert never.json()["error"]["code"] == "not_found"
    assert after == {"approvals": []}


async def test_a_denial_tells_the_model_the_reason(served: Served) -> None:
    """deny with a reason: the call never runs, its result is DENIED and carries the words."""
    served.model.add(ScriptedModel.tool_call("write_note", {"text": "secret"}), "understood")
    async with served.client() as client:
        ident = (await client.post("/api/sessions", json={})).json()["id"]
        async with follow(client, ident) as stream:
            await client.post(f"/api/sessions/{ident}/send", json={"content": "note it"})
            await stream.until(requested)
            denied = await client.post(
                f"/api/sessions/{ident}/approvals/call_1", json={"decision": "deny", "reason": "not that one"}
            )
            seen = await stream.until(turn_ended)
    assert denied.status_code == 200
    assert denied.json()["data"]["decision"] == "deny"
    result = next(e.json()["data"] for e in seen if e.event == "tool/result")
    assert result["error_code"] == "DENIED"
    assert "not that one" in str(result["message"]["content"])
    assert served.notes == []
    assert "not that one" in str(served.model.requests[-1].messages[-1].content)


async def test_edited_arguments_replace_the_models_and_a_bad_edit_stays_pending(served: Served) -> None:
    """An edit that breaks the tool's schema is a 422 and the call still waits; a good edit runs."""
    served.model.add(ScriptedModel.tool_call("write_note", {"text": "draft"}), "done")
    async with served.client() as client:
        ident = (await client.post("/api/sessions", json={})).json()["id"]
        async with follow(client, ident) as stream:
            await client.post(f"/api/sessions/{ident}/send", json={"content": "note it"})
            await stream.until(requested)
            bad = await client.post(
                f"/api/sessions/{ident}/approvals/call_1", json={"decision": "once", "arguments": {"text": 5}}
            )
            still = (await client.get(f"/api/sessions/{ident}/approvals")).json()["approvals"]
            good = await client.post(
                f"/api/sessions/{ident}/approvals/call_1", json={"decision": "once", "arguments": {"text": "final"}}
            )
            await stream.until(turn_ended)
    assert bad.status_code == 422
    assert "pending" in bad.json()["error"]["message"]
    assert [a["call_id"] for a in still] == ["call_1"]
    assert good.status_code == 200
    assert good.json()["data"]["arguments"] == {"text": "final"}
    assert served.notes == ["final"]


async def test_malformed_answers_are_422(served: Served) -> None:
    """An unknown decision, a reason or arguments of the wrong type: 422 naming the field."""
    served.model.add(ScriptedModel.tool_call("write_note", {"text": "x"}), "ok")
    async with served.client() as client:
        ident = (await client.post("/api/sessions", json={})).json()["id"]
        async with follow(client, ident) as stream:
            await client.post(f"/api/sessions/{ident}/send", json={"content": "note it"})
            await stream.until(requested)
            path = f"/api/sessions/{ident}/approvals/call_1"
            answers = {
                "decision": await client.post(path, json={"decision": "maybe"}),
                "reason": await client.post(path, json={"decision": "deny", "reason": 3}),
                "arguments": await client.post(path, json={"decision": "once", "arguments": [1]}),
            }
            await client.post(path, json={"decision": "once"})
            await stream.until(turn_ended)
    for field, response in answers.items():
        assert response.status_code == 422, response.text
        assert field in response.json()["error"]["message"]


async def test_always_lets_the_next_call_of_the_tool_run_unasked(served: Served) -> None:
    """After ``always``, the same tool runs in the session without another request."""
    served.model.add(
        ScriptedModel.tool_call("write_note", {"text": "one"}),
        ScriptedModel.tool_call("write_note", {"text": "two"}),
        "both written",
    )
    async with served.client() as client:
        ident = (await client.post("/api/sessions", json={})).json()["id"]
        async with follow(client, ident) as stream:
            await client.post(f"/api/sessions/{ident}/send", json={"content": "note twice"})
            await stream.until(requested)
            await client.post(f"/api/sessions/{ident}/approvals/call_1", json={"decision": "always"})
            seen = await stream.until(turn_ended)
    assert served.notes == ["one", "two"]
    assert [e for e in seen if e.event == "approval/requested"] == []


async def test_a_pending_approval_survives_a_server_restart(tmp_path: Path, anyio_backend: str) -> None:
    """Stopped while a call waits: the next server lists the same call; answering it runs the call
    and the turn goes on, with no model call repeated."""
    (tmp_path / "w").mkdir()
    first = ScriptedModel([ScriptedModel.tool_call("write_note", {"text": "kept"})], checkpoints=True)
    async with serving_async(tmp_path / "s", tmp_path / "w", backend=anyio_backend, model=first) as served:
        async with served.client() as client:
            ident = (await client.post("/api/sessions", json={})).json()["id"]
            async with follow(client, ident) as stream:
                await client.post(f"/api/sessions/{ident}/send", json={"content": "note it"})
                asked = (await stream.until(requested))[-1].json()
    second = ScriptedModel(["finished after the restart"], checkpoints=True)
    async with serving_async(tmp_path / "s", tmp_path / "w", backend=anyio_backend, model=second) as served:
        async with served.client() as client:
            listed = (await client.get(f"/api/sessions/{ident}/approvals")).json()["approvals"]
            async with follow(client, ident, params={"after": asked["seq"]}) as stream:
                answered = await client.post(f"/api/sessions/{ident}/approvals/call_1", json={"decision": "once"})
                seen = await stream.until(turn_ended)
        notes = served.notes
    assert [(a["call_id"], a["seq"]) for a in listed] == [("call_1", asked["seq"])]
    assert answered.status_code == 200
    assert notes == ["kept"]
    assert len(second.requests) == 1  # only the step after the call: the asking step was not repeated
    assert seen[-1].json()["data"]["turn"] == 1
    assert seen[-1].json()["data"]["reason"]["kind"] == "completed"
