"""Each core service has a Protocol a replacement must satisfy, and the defaults satisfy theirs.

This module is also in mypy's ``files``: the functions below are checked statically, so a default
view that drifts from its Protocol fails ``make test`` even before this test runs.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from dsh_persistence_jsonl import JsonlSessionStore
from dsh_persistence_postgres import PostgresSessionStore
from dsh_persistence_sqlite import SqliteSessionStore

from dsh_core import Context, Harness, SessionPersistence
from dsh_core.services import (
    AgentRegistry,
    AgentsService,
    LlmRuntime,
    LlmService,
    SessionsService,
    SessionStore,
    SubagentRegistry,
    SubagentRegistryPlugin,
    SubagentsService,
    SystemPrompt,
    SystemPromptService,
    ToolRuntime,
    ToolsService,
)

pytestmark = pytest.mark.anyio

PROTOCOL_OF = {
    "sessions": SessionsService,
    "llm": LlmService,
    "tools": ToolsService,
    "system_prompt": SystemPromptService,
    "agents": AgentsService,
    "subagents": SubagentsService,
}


def typed_services(ctx: Context) -> tuple[object, ...]:
    """mypy: ``ctx.<service>`` has its Protocol's type (no ``Any``)."""
    sessions: SessionsService = ctx.sessions
    llm: LlmService = ctx.llm
    tools: ToolsService = ctx.tools
    system_prompt: SystemPromptService = ctx.system_prompt
    agents: AgentsService = ctx.agents
    subagents: SubagentsService = ctx.subagents
    return sessions, llm, tools, system_prompt, agents, subagents


def default_views(ctx: Context) -> tuple[object, ...]:
    """mypy: each default implementation, bound to a context, satisfies its Protocol."""
    sessions: SessionsService = SessionStore(ctx.events).bind(ctx)
    llm: LlmService = LlmRuntime().bind(ctx)
    tools: ToolsService = ToolRuntime(ctx).bind(ctx)
    system_prompt: SystemPromptService = SystemPrompt().bind(ctx)
    agents: AgentsService = AgentRegistry(ctx).bind(ctx)
    subagents: SubagentsService = SubagentRegistry().bind(ctx)
    return sessions, llm, tools, system_prompt, agents, subagents


def persistence_backends(
    jsonl: JsonlSessionStore, postgres: PostgresSessionStore, sqlite: SqliteSessionStore
) -> tuple[SessionPersistence, ...]:
    """mypy: every persistence backend's store satisfies the one store Protocol, read and write sides."""
    return jsonl, postgres, sqlite


def members(protocol: type) -> dict[str, Any]:
    return {
        name: value
        for name, value in vars(protocol).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    }


def parameters(function: Any) -> list[tuple[str, Any, bool]]:
    signature = inspect.signature(function)
    return [(p.name, p.kind, p.default is inspect.Parameter.empty) for p in signature.parameters.values()]


@pytest.mark.parametrize("name", sorted(PROTOCOL_OF))
async def test_the_default_view_has_every_member_of_its_protocol(name: str) -> None:
    async with Harness(autoload=False, plugins=[SubagentRegistryPlugin()]) as ctx:
        view = getattr(ctx, name)
        protocol = PROTOCOL_OF[name]
        expected = members(protocol)
        assert expected, f"{protocol.__name__} declares nothing"
        for member, declared in expected.items():
            assert hasattr(type(view), member), f"{type(view).__name__} lacks {member} of {protocol.__name__}"
            actual = inspect.getattr_static(type(view), member)
            if isinstance(declared, property):
                assert isinstance(actual, property), f"{type(view).__name__}.{member} must be a property"
                continue
            assert parameters(actual) == parameters(declared), f"{type(view).__name__}.{member}"
            assert inspect.iscoroutinefunction(actual) == inspect.iscoroutinefunction(declared), member


async def test_the_context_is_typed_by_the_protocols() -> None:
    async with Harness(autoload=False, plugins=[SubagentRegistryPlugin()]) as ctx:
        assert len(typed_services(ctx)) == len(PROTOCOL_OF)
        assert len(default_views(ctx)) == len(PROTOCOL_OF)


async def test_a_replacement_that_satisfies_the_protocol_is_what_the_context_sees() -> None:
    """A plugin providing ``system_prompt`` replaces the default; contexts see its view."""

    class FixedPrompt:
        def section(self, name: str, text: object, order: float = 0) -> Any:
            return lambda: None

        def variable(self, name: str, provider: object) -> Any:
            return lambda: None

        async def assemble(self, context: object = None) -> Any:
            return "assembled"

        def render(self, assembly: object) -> str:
            return "You are fixed."

    class FixedPromptPlugin:
        name = "fixed-prompt"
        provides = ("system_prompt",)

        def start(self, ctx: Context) -> None:
            ctx.provide("system_prompt", FixedPrompt())

    config = {"plugins": {"disable": ["system-prompt"]}}
    async with Harness(config, autoload=False, plugins=[FixedPromptPlugin()]) as ctx:
        prompt: SystemPromptService = ctx.system_prompt
        assert prompt.render(await prompt.assemble()) == "You are fixed."


@pytest.mark.parametrize("store", [JsonlSessionStore, PostgresSessionStore, SqliteSessionStore])
def test_every_persistence_backend_has_every_member_of_the_store_protocol(store: type) -> None:
    """The read side and the write side, with the Protocol's parameters and the same async-ness."""
    expected = {name: value for side in SessionPersistence.__mro__[1:3] for name, value in members(side).items()}
    assert set(expected) >= {"load", "read", "list", "repair", "follow", "publish", "flush", "close"}
    for member, declared in expected.items():
        actual = inspect.getattr_static(store, member)
        assert parameters(actual) == parameters(declared), f"{store.__name__}.{member}"
        assert inspect.iscoroutinefunction(actual) == inspect.iscoroutinefunction(declared), member
