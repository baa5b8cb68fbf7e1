"""The sessions the server serves: live agents by id, stored ones resumed on first use.

A session is live when an agent for it runs in this process (created here, resumed here, or
created by anyone else on the same harness). A stored session (``ctx.session_persistence``) is
resumed the first time a request needs its agent, so a page that reconnects after a server restart
finds its session again. Two requests for the same stored session resume it once.
"""

from __future__ import annotations

import inspect
import secrets
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from dsh_core import AgentHandle, AgentOptions, Image, Text, UserMessage, hookimpl
from dsh_core.llm import LlmCallConfig
from dsh_core.persistence import SessionConflictError, SessionFencedError, SessionInUseError
from dsh_core.session_log import InboxQueuedEvent, UserMessageEvent

from ._errors import ApiError

if TYPE_CHECKING:
    from dsh_core import Context, Session
    from dsh_core.vocabulary import Agent

__all__ = ["SessionDesk", "content_of", "knows_message", "new_session_id", "stored_model"]

#: What a backend raises when another owner (process, host, harness) holds the session.
_HELD_ELSEWHERE = (SessionInUseError, SessionConflictError, SessionFencedError)


def new_session_id() -> str:
    """A fresh session id that sorts by creation time, like the CLI's: ``20260130-154501-3fa2c1``."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def content_of(raw: object, where: str) -> str | tuple[Text | Image, ...]:
    """A prompt's ``content`` from JSON: a non-empty string, or a list of text and image blocks.

    :raises ApiError: 422 naming ``where`` for anything else.
    """
    if isinstance(raw, str):
        if not raw.strip():
            raise ApiError(422, f"{where}: must not be empty")
        return raw
    if isinstance(raw, list) and raw:
        try:
            message = UserMessage.from_json({"role": "user", "id": "prompt", "content": raw})
        except (TypeError, ValueError) as exc:
            raise ApiError(422, f"{where}: {exc}") from exc
        blocks = tuple(block for block in message.content if isinstance(block, Text | Image))
        if len(blocks) != len(message.content):
            raise ApiError(422, f"{where}: a prompt holds only text and image blocks")
        return blocks
    raise ApiError(422, f"{where}: expected a non-empty string or a list of content blocks, got {raw!r:.80}")


def _title(session: Session) -> str:
    """The first prompt's text, on one line: what the sessions list shows."""
    for event in session.events:
        if event.type == UserMessageEvent.type:
            message: Any = event.data["message"]
            texts = [str(b["text"]) for b in message["content"] if b["type"] == "text"]
            return " ".join(" ".join(texts).split())[:200]
    return ""


def _live_summary(agent: Agent) -> dict[str, Any]:
    events = agent.session.events
    return {
        "id": agent.id,
        "title": _title(agent.session),
        "status": agent.status,
        "last_seq": len(events) - 1,
        "updated": events[-1].time if events else None,
    }


def _stored_summary(item: Any) -> dict[str, Any] | None:
    ident = item if isinstance(item, str) else getattr(item, "id", None)
    if not isinstance(ident, str):
        return None
    count = getattr(item, "events", None)
    updated = getattr(item, "modified", None) or getattr(item, "created", None)
    return {
        "id": ident,
        "title": " ".join(str(getattr(item, "title", None) or "").split()),
        "status": "stored",
        "last_seq": int(count) - 1 if isinstance(count, int) else None,
        "updated": updated,
    }


class SessionDesk:
    """Finds, creates, resumes and deletes the sessions the API names."""

    def __init__(self, ctx: Context, *, model: str, cwd: Path) -> None:
        self._ctx = ctx
        self.model = model
        self.cwd = cwd
        self._handles: dict[str, AgentHandle] = {}
        self._locks: dict[str, anyio.Lock] = {}

    @property
    def _persistence(self) -> Any:
        return self._ctx.get_service("session_persistence")

    def live(self, session_id: str) -> Agent | None:
        """The live agent of ``session_id`` in this process, or ``None``."""
        agent: Agent | None = self._ctx.agents.get(session_id)
        return agent

    async def _stored(self, session_id: str) -> bool:
        persistence = self._persistence
        return persistence is not None and bool(await _maybe_await(persistence.exists(session_id)))

    def check_model(self, model: object) -> str:
        """``model`` when the harness can call it (a ``provider/model`` with an adapter). :raises ApiError: 422."""
        if not isinstance(model, str):
            raise ApiError(422, f"model: expected a 'provider/model' string, got {model!r:.80}")
        try:
            self._ctx.llm.resolve(model)
        except (TypeError, ValueError, LookupError) as exc:
            raise ApiError(422, f"model: {exc}") from exc
        return model

    async def create(self, session_id: str | None, model: str | None) -> Agent:
        """A new session in the workspace. :raises ApiError: 409 when the id is live or stored."""
        model = self.check_model(self.model if model is None else model)
        ident = session_id or new_session_id()
        async with self._lock(ident):
            if self.live(ident) is not None or await self._stored(ident):
                raise ApiError(409, f"session {ident!r} exists already; choose another id or omit it")
            try:
                meta = {"cwd": str(self.cwd), "extra": {"serve": {"model": model}}}
                handle = await self._ctx.agents.create(ident, meta=meta, agent_options=AgentOptions(model=model))
            except (TypeError, ValueError) as exc:
                raise ApiError(422, f"id: {exc}") from exc
        self._handles[ident] = handle
        agent: Agent = handle.agent
        return agent

    async def agent(self, session_id: str) -> Agent:
        """The live agent of ``session_id``, resuming the stored session when it is not live.

        :raises ApiError: 404 for an unknown session, 409 for one another process holds.
        """
        agent = self.live(session_id)
        if agent is not None:
            return agent
        async with self._lock(session_id):
            agent = self.live(session_id)
            if agent is not None:
                return agent
            if not await self._stored(session_id):
                raise ApiError(404, f"no session {session_id!r} (GET /api/sessions lists them)")
            try:
                handle = await self._ctx.agents.resume(
                    session_id, agent_options=AgentOptions(model=self.model), setup=_keep_stored_model
                )
            except _HELD_ELSEWHERE as exc:
                raise ApiError(409, f"session {session_id!r} is in use elsewhere: {exc}") from exc
            except LookupError as exc:
                raise ApiError(404, f"no session {session_id!r}: {exc}") from exc
        self._handles[session_id] = handle
        resumed: Agent = handle.agent
        return resumed

    async def agent_or_new(self, session_id: str) -> Agent:
        """The agent of ``session_id`` (resumed if stored), or a new session under that id: a
        protocol's thread or chat id names the session, which the first run creates."""
        try:
            return await self.agent(session_id)
        except ApiError as exc:
            if exc.status != 404:
                raise
        return await self.create(session_id, None)

    def _lock(self, session_id: str) -> anyio.Lock:
        lock = self._locks.get(session_id)
        if lock is None:
            lock = self._locks[session_id] = anyio.Lock()
        return lock

    async def summaries(self) -> list[dict[str, Any]]:
        """Every session, live or stored, newest first."""
        found: dict[str, dict[str, Any]] = {}
        persistence = self._persistence
        if persistence is not None:
            listed: Sequence[Any] = await _maybe_await(persistence.list())
            for item in listed:
                summary = _stored_summary(item)
                if summary is not None:
                    found[summary["id"]] = summary
        for agent in self._ctx.agents.list():
            if agent.status != "disposed":
                found[agent.id] = _live_summary(agent)
        return sorted(found.values(), key=lambda s: s["updated"] or 0.0, reverse=True)

    async def summary(self, session_id: str) -> dict[str, Any]:
        """One session's summary (without resuming it). :raises ApiError: 404."""
        agent = self.live(session_id)
        if agent is not None:
            return {**_live_summary(agent), **_details(agent)}
        if await self._stored(session_id):
            for item in await _maybe_await(self._persistence.list()):
                summary = _stored_summary(item)
                if summary is not None and summary["id"] == session_id:
                    return summary
            return {"id": session_id, "title": "", "status": "stored", "last_seq": None, "updated": None}
        raise ApiError(404, f"no session {session_id!r} (GET /api/sessions lists them)")

    async def delete(self, session_id: str) -> None:
        """Dispose the live agent and delete the stored log. :raises ApiError: 404."""
        async with self._lock(session_id):
            agent = self.live(session_id)
            stored = await self._stored(session_id)
            if agent is None and not stored:
                raise ApiError(404, f"no session {session_id!r} (GET /api/sessions lists them)")
            handle = self._handles.pop(session_id, None)
            if handle is not None:
                await handle.dispose()
            elif agent is not None:
                raise ApiError(409, f"session {session_id!r} is run by another part of this process; it cannot be deleted here")
            if stored:
                await _maybe_await(self._persistence.delete(session_id))
        self._locks.pop(session_id, None)

    async def aclose(self) -> None:
        """Dispose every agent this desk created or resumed (newest first)."""
        handles = list(self._handles.values())
        self._handles.clear()
        for handle in reversed(handles):
            await handle.dispose()


def knows_message(agent: Agent, message_id: str) -> bool:
    """Whether the session already has a prompt with this id (queued, or consumed as a user message):
    a protocol client re-sends the whole conversation, and only what is new is sent."""
    for event in agent.session.events:
        data: Any = event.data
        if event.type == InboxQueuedEvent.type and data["id"] == message_id:
            return True
        if event.type == UserMessageEvent.type and data["message"]["id"] == message_id:
            return True
    return False


def stored_model(agent: Agent) -> str | None:
    """The model a session was created with here (kept in its meta), if any."""
    serve: Any = agent.session.meta.extra.get("serve")
    model = serve.get("model") if isinstance(serve, Mapping) else None
    return model if isinstance(model, str) and "/" in model else None


class _StoredModel:
    """Keeps a resumed session on the model it was created with: the agent's options are the
    server's default (a resume cannot read the stored meta first), so each request is switched."""

    @hookimpl
    def dsh_agent_request(self, agent: Agent, config: LlmCallConfig) -> LlmCallConfig | None:
        model = stored_model(agent)
        if model is None or model == f"{config.provider}/{config.model}":
            return None
        provider, _, name = model.partition("/")
        return attrs.evolve(config, provider=provider, model=name)


def _keep_stored_model(agent_ctx: Context) -> None:
    agent_ctx.register_plugin(_StoredModel(), name="serve/stored-model")


def _details(agent: Agent) -> Mapping[str, Any]:
    return {"model": stored_model(agent) or agent.options.model, "cwd": agent.session.meta.cwd}
