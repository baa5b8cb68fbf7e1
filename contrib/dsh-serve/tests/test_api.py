"""The native API over real HTTP: access, errors and limits, sessions, prompts, cancel (SPEC §10.2)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from dsh_core.testing import ScriptedModel

from .serve_kit import Served, follow, serving, turn_ended

pytestmark = pytest.mark.anyio


def error_of(response: httpx.Response) -> tuple[str, str]:
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message"}
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]
    return body["error"]["code"], body["error"]["message"]


# ---------------------------------------------------------------------- access


async def test_api_refuses_a_missing_or_wrong_token_with_json_401(served: Served) -> None:
    """No token and a wrong token are both a JSON 401; the right bearer token passes."""
    async with httpx.AsyncClient(base_url=served.url) as client:
        missing = await client.get("/api/sessions")
        wrong = await client.get("/api/sessions", headers={"Authorization": "Bearer nope"})
        right = await client.get("/api/sessions", headers=served.auth)
    assert missing.status_code == 401
    assert error_of(missing)[0] == "unauthorized"
    assert missing.headers["www-authenticate"] == "Bearer"
    assert wrong.status_code == 401
    assert error_of(wrong)[0] == "unauthorized"
    assert right.status_code == 200
    assert right.json() == {"sessions": []}


async def test_query_token_is_taken_only_on_the_sse_get(served: Served) -> None:
    """``?token=`` opens the live log (EventSource cannot send headers), but no other endpoint."""
    async with served.client() as client:
        ident = (await client.post("/api/sessions", json={})).json()["id"]
    async with httpx.AsyncClient(base_url=served.url) as anonymous:
        listing = await anonymous.get("/api/sessions", params={"token": served.token})
        send = await anonymous.post(f"/api/sessions/{ident}/send", params={"token": served.token}, json={"content": "x"})
        async with anonymous.stream("GET", f"/api/sessions/{ident}/events", params={"token": served.token}) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
    assert listing.status_code == 401
    assert send.status_code == 401


async def test_page_is_public_and_sets_a_strict_content_policy(served: Served) -> None:
    """``GET /`` needs no token (it holds no data) and forbids scripts and resources from elsewhere."""
    async with httpx.AsyncClient(base_url=served.url) as client:
        page = await client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "script-src 'self'" in policy
    assert "set-cookie" not in page.headers


# ---------------------------------------------------------------------- errors and limits


async def test_malformed_bodies_are_400_and_bad_fields_422(served: Served) -> None:
    """Not JSON, or not an object: 400; an object with a wrong field: 422 naming it; never a 500."""
    async with served.client() as client:
        not_json = await client.post("/api/sessions", content=b"{oops", headers={"Content-Type": "application/json"})
        array = await client.post("/api/sessions", json=[1, 2])
        empty = await client.post("/api/sessions", content=b"")
        bad_model = await client.post("/api/sessions", json={"model": "nobody/none"})
        model_type = await client.post("/api/sessions", json={"model": 3})
        unknown = await client.post("/api/sessions", json={"colour": "red"})
        ident = (await client.post("/api/sessions", json={})).json()["id"]
        no_content = await client.post(f"/api/sessions/{ident}/send", json={})
        blank = await client.post(f"/api/sessions/{ident}/send", json={"content": "   "})
        bad_blocks = await client.post(f"/api/sessions/{ident}/send", json={"content": [{"type": "video"}]})
        bad_after = await client.get(f"/api/sessions/{ident}/events", params={"after": "x"})
    for response in (not_json, array, empty):
        assert response.status_code == 400, response.text
        assert error_of(response)[0] == "bad_request"
    for response, field in (
        (bad_model, "model"),
        (model_type, "model"),
        (unknown, "colour"),
        (no_content, "content"),
        (blank, "content"),
        (bad_blocks, "content"),
        (bad_after, "after"),
    ):
        assert response.status_code == 422, response.text
        code, message = error_of(response)
        assert code == "invalid"
        assert field in message
    assert await served.events(ident) == []  # nothing refused was queued or logged


async def test_unknown_endpoints_and_methods_answer_json(served: Served) -> None:
    """Every /api error has the JSON shape: an unknown path is 404, a wrong method 405."""
    async with served.client() as client:
        missing = await client.get("/api/nothing/here")
        method = await client.put("/api/sessions")
    assert missing.status_code == 404
    assert error_of(missing)[0] == "not_found"
    assert method.status_code == 405
    assert error_of(method)[0] == "method_not_allowed"


async def test_a_body_over_the_limit_is_413_declared_or_streamed(tmp_path: Path) -> None:
    """A body over ``max_body_bytes`` is refused with 413, from its Content-Length or as it streams."""
    (tmp_path / "w").mkdir()
    with serving(tmp_path / "s", tmp_path / "w", max_body_bytes=1000) as served:
        async with served.client() as client:
            ident = (await client.post("/api/sessions", json={})).json()["id"]
            declared = await client.post(f"/api/sessions/{ident}/send", json={"content": "x" * 2000})

            async def chunks():  # no Content-Length: chunked transfer
                for _ in range(4):
                    yield b" " * 400

            streamed = await client.post(
                f"/api/sessions/{ident}/send", content=chunks(), headers={"Content-Type": "application/json"}
            )
            within = await client.post(f"/api/sessions/{ident}/inject", json={"content": "x" * 100})
        assert declared.status_code == 413
        assert error_of(declared)[0] == "payload_too_large"
        assert streamed.status_code == 413
        assert error_of(streamed)[0] == "payload_too_large"
        assert within.status_code == 202
        kinds = [event["type"] for event in await served.events(ident)]
        assert "inbox/queued" not in kinds  # the refused sends queued nothing


# ---------------------------------------------------------------------- sessions


async def test_create_list_get_and_delete_a_session(served: Served) -> None:
    """201 with the id; it is listed and shown; a taken id is 409; DELETE is 204, then 404."""
    async with served.client() as client:
        created = await client.post("/api/sessions", json={"id": "alpha"})
        again = await client.post("/api/sessions", json={"id": "alpha"})
        listing = (await client.get("/api/sessions")).json()
        shown = await client.get("/api/sessions/alpha")
        unknown = await client.get("/api/sessions/nobody")
        deleted = await client.delete("/api/sessions/alpha")
        gone = await client.get("/api/sessions/alpha")
        delete_again = await client.delete("/api/sessions/alpha")
    assert created.status_code == 201
    assert created.json() == {"id": "alpha"}
    assert again.status_code == 409
    assert error_of(again)[0] == "conflict"
    assert listing == {"sessions": [{"id": "alpha", "title": "", "status": "idle", "last_seq": -1, "updated": None}]}
    assert shown.status_code == 200
    assert shown.json()["id"] == "alpha"
    assert shown.json()["model"] == "scripted/any"
    assert unknown.status_code == 404
    assert error_of(unknown)[0] == "not_found"
    assert deleted.status_code == 204
    assert gone.status_code == 404
    assert delete_again.status_code == 404


async def test_send_runs_a_turn_and_is_idempotent_per_id(served: Served) -> None:
    """send is 202 with its inbox/queued id; the same id again queues nothing more."""
    served.model.add(ScriptedModel.text("Hello there.", chunks=3))
    async with served.client() as client:
        ident = (await client.post("/api/sessions", json={})).json()["id"]
        async with follow(client, ident) as stream:
            first = await client.post(f"/api/sessions/{ident}/send", json={"content": "hi", "id": "m-1"})
            again = await client.post(f"/api/sessions/{ident}/send", json={"content": "hi", "id": "m-1"})
            seen = await stream.until(turn_ended)
        listed = (await client.get("/api/sessions")).json()["sessions"]
    assert first.status_code == 202
    assert first.json() == {"id": "m-1"}
    assert again.status_code == 202
    assert again.json() == {"id": "m-1"}
    queued = [e.json()["data"] for e in seen if e.event == "inbox/queued"]
    assert [q["id"] for q in queued] == ["m-1"]
    user = next(e.json()["data"] for e in seen if e.event == "user/message")
    assert user["queued_id"] == "m-1"
    assert seen[-1].json()["data"]["reason"]["kind"] == "completed"
    answer = "".join(
        e.json()["data"]["chunk"].get("text", "") for e in seen if e.event == "assistant/chunk"
    )
    assert answer == "Hello there."
    assert listed[0]["title"] == "hi"
    assert listed[0]["last_seq"] == seen[-1].json()["seq"]


async def test_a_generated_id_is_returned_for_each_delivery(served: Served) -> None:
    """Without an id, send and inject each answer a fresh id, the one the log records."""
    served.model.add("ok")
    async with served.client() as client:
        ident = (await client.post("/api/sessions", json={})).json()["id"]
        injected = await client.post(f"/api/sessions/{ident}/inject", json={"content": "context first"})
        async with follow(client, ident) as stream:
            sent = await client.post(f"/api/sessions/{ident}/send", json={"content": [{"type": "text", "text": "go"}]})
            await stream.until(turn_ended)
    assert injected.status_code == 202
    assert sent.status_code == 202
    events = await served.events(ident)
    context = next(e for e in events if e["type"] == "context/message")
    assert context["data"]["message"]["id"] == injected.json()["id"]
    queued = next(e for e in events if e["type"] == "inbox/queued")
    assert queued["data"]["id"] == sent.json()["id"]


async def test_delivering_to_an_unknown_session_is_404(served: Served) -> None:
    """send, steer, inject, cancel and the live log of a session nobody has are 404."""
    async with served.client() as client:
        answers = [
            await client.post(f"/api/sessions/ghost/{verb}", json={"content": "x"})
            for verb in ("send", "steer", "inject", "cancel")
        ]
        answers.append(await client.get("/api/sessions/ghost/events"))
    for response in answers:
        assert response.status_code == 404, response.text
        assert error_of(response)[0] == "not_found"


async def test_cancel_ends_the_running_turn_aborted(served: Served) -> None:
    """cancel is 202 and the turn that hangs in the model ends ``aborted``."""
    served.model.add(ScriptedModel.hang("partial answer"))
    async with served.client() as client:
        ident = (await client.post("/api/sessions", json={})).json()["id"]
        async with follow(client, ident) as stream:
            await client.post(f"/api/sessions/{ident}/send", json={"content": "go"})
            await stream.until(lambda e: e.event == "assistant/chunk")
            cancelled = await client.post(f"/api/sessions/{ident}/cancel")
            seen = await stream.until(turn_ended)
    assert cancelled.status_code == 202
    assert seen[-1].json()["data"]["reason"]["kind"] == "aborted"


async def test_steer_reaches_the_running_turn(served: Served) -> None:
    """A steer sent while a tool runs is a steering/message the next step's request carries."""
    served.model.add(ScriptedModel.tool_call("wait_gate", {}), "steered answer")
    async with served.client() as client:
        ident = (await client.post("/api/sessions", json={})).json()["id"]
        async with follow(client, ident) as stream:
            await client.post(f"/api/sessions/{ident}/send", json={"content": "start"})
            await served.wait_gate_entered()
            steered = await client.post(f"/api/sessions/{ident}/steer", json={"content": "go left", "id": "s-1"})
            await served.open_gate()
            seen = await stream.until(turn_ended)
    assert steered.status_code == 202
    assert steered.json() == {"id": "s-1"}
    steering = [e.json()["data"] for e in seen if e.event == "steering/message"]
    assert [s["queued_id"] for s in steering] == ["s-1"]
    last_request = served.model.requests[-1]
    assert any("go left" in str(m.content) for m in last_request.messages)
    assert seen[-1].json()["data"]["reason"]["kind"] == "completed"


async def test_cors_is_off_unless_origins_are_listed(tmp_path: Path, served: Served) -> None:
    """No CORS header by default; a listed origin gets its preflight answered and its header."""
    async with httpx.AsyncClient(base_url=served.url) as client:
        plain = await client.get("/api/sessions", headers={**served.auth, "Origin": "https://app.example"})
    assert "access-control-allow-origin" not in plain.headers
    (tmp_path / "w2").mkdir()
    with serving(tmp_path / "s2", tmp_path / "w2", allowed_origins=["https://app.example"]) as cors:
        async with httpx.AsyncClient(base_url=cors.url) as client:
            preflight = await client.options(
                "/api/sessions",
                headers={
                    "Origin": "https://app.example",
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "authorization,content-type",
                },
            )
            allowed = await client.get("/api/sessions", headers={**cors.auth, "Origin": "https://app.example"})
            other = await client.get("/api/sessions", headers={**cors.auth, "Origin": "https://evil.example"})
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "https://app.example"
    assert allowed.headers["access-control-allow-origin"] == "https://app.example"
    assert "access-control-allow-origin" not in other.headers
    assert "access-control-allow-credentials" not in allowed.headers


async def test_a_session_another_server_holds_is_409(tmp_path: Path) -> None:
    """Two servers on one store: the session the first runs is a 409 on the second (its owner holds it)."""
    (tmp_path / "w").mkdir()
    with serving(tmp_path / "s", tmp_path / "w", model=ScriptedModel(["held"])) as first:
        async with first.client() as client:
            ident = (await client.post("/api/sessions", json={})).json()["id"]
            async with follow(client, ident) as stream:
                await client.post(f"/api/sessions/{ident}/send", json={"content": "hold it"})
                await stream.until(turn_ended)
        with serving(tmp_path / "s", tmp_path / "w") as second:
            async with second.client() as other:
                listed = (await other.get("/api/sessions")).json()["sessions"]
                held = await other.post(f"/api/sessions/{ident}/send", json={"content": "mine now"})
    assert [s["id"] for s in listed] == [ident]
    assert held.status_code == 409
    assert error_of(held)[0] == "conflict"
    assert "in use elsewhere" in error_of(held)[1]
