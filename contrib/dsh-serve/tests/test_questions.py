"""ask_user's questions over the native API (SPEC §10.2, §10.6): listed while they wait, answered
once (logged server-side, by "serve"), refused answers keep them pending."""

from __future__ import annotations

import pytest

from dsh_core.testing import ScriptedModel

from .serve_kit import Served, SseEvent, follow, turn_ended

pytestmark = pytest.mark.anyio

QUESTIONS = [
    {"id": "db", "question": "Which database?", "options": ["postgres", "sqlite"]},
    {"id": "extras", "question": "Which extras?", "options": ["docs", "tests"], "multi_select": True},
]


def asked(event: SseEvent) -> bool:
    return event.event == "question/asked"


async def test_a_pending_question_is_listed_and_answered_once(served: Served) -> None:
    """GET lists the waiting call with its questions; the answers reach the tool (and the model);
    answering again is 409, a call that never asked is 404."""
    served.model.add(ScriptedModel.tool_call("ask_user", {"questions": QUESTIONS}), "thanks")
    async with served.client() as client:
        ident = (await client.post("/api/sessions", json={})).json()["id"]
        async with follow(client, ident) as stream:
            await client.post(f"/api/sessions/{ident}/send", json={"content": "set it up"})
            question = (await stream.until(asked))[-1].json()
            listed = (await client.get(f"/api/sessions/{ident}/questions")).json()
            answers = {"db": "sqlite", "extras": ["tests", "ci too"]}
            answered = await client.post(f"/api/sessions/{ident}/questions/call_1", json={"answers": answers})
            seen = await stream.until(turn_ended)
            again = await client.post(f"/api/sessions/{ident}/questions/call_1", json={"answers": answers})
            never = await client.post(f"/api/sessions/{ident}/questions/call_9", json={"answers": {}})
            after = (await client.get(f"/api/sessions/{ident}/questions")).json()
    assert listed == {"questions": [{"call_id": "call_1", "questions": QUESTIONS, "seq": question["seq"]}]}
    assert answered.status_code == 200
    record = answered.json()
    assert record["type"] == "question/answered"
    assert record["data"] == {"call_id": "call_1", "answers": answers, "by": "serve"}
    assert [e.json() for e in seen if e.event == "question/answered"] == [record]
    result = next(e.json() for e in seen if e.event == "tool/result")
    assert '"ci too"' in result["data"]["message"]["content"][0]["text"]
    assert seen[-1].json()["data"]["reason"]["kind"] == "completed"
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "conflict"
    assert never.status_code == 404
    assert after == {"questions": []}


async def test_malformed_answers_are_422_and_the_question_stays_pending(served: Served) -> None:
    """An unknown question id, a missing answer, a list for a single choice, or no object at all:
    each is refused and names what is wrong; the question still waits and can be answered."""
    served.model.add(ScriptedModel.tool_call("ask_user", {"questions": QUESTIONS}), "ok")
    async with served.client() as client:
        ident = (await client.post("/api/sessions", json={})).json()["id"]
        async with follow(client, ident) as stream:
            await client.post(f"/api/sessions/{ident}/send", json={"content": "go"})
            await stream.until(asked)
            url = f"/api/sessions/{ident}/questions/call_1"
            refused = [
                await client.post(url, json={"answers": {"db": "sqlite", "extras": [], "nope": "x"}}),
                await client.post(url, json={"answers": {"db": "sqlite"}}),
                await client.post(url, json={"answers": {"db": ["sqlite"], "extras": ["docs"]}}),
                await client.post(url, json={"answers": "sqlite"}),
                await client.post(url, json={"answer": {}}),
            ]
            pending = (await client.get(f"/api/sessions/{ident}/questions")).json()["questions"]
            good = await client.post(url, json={"answers": {"db": "postgres", "extras": ["docs"]}})
            await stream.until(turn_ended)
    assert [r.status_code for r in refused] == [422] * 5
    messages = [r.json()["error"]["message"] for r in refused]
    assert "nope" in messages[0]
    assert "extras" in messages[1]
    assert "db" in messages[2]
    assert "answers" in messages[3]
    assert "answer" in messages[4]
    assert [q["call_id"] for q in pending] == ["call_1"]
    assert good.status_code == 200
