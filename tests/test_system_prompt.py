"""Tests for dsh_core.services.system_prompt: layers, shadowing, order, providers and rendering."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from dsh_core import Context, DuplicateRegistrationError, ScopeDisposedError
from dsh_core.services import (
    MalformedPromptReferenceError,
    MissingPromptValueError,
    PromptRenderError,
    UnknownPromptVariableError,
)
from dsh_core.services.system_prompt import (
    DEFAULT_PERSONA,
    HARNESS_IDENTITY,
    Assembly,
    AssemblyContext,
    PromptSection,
    render_prompt,
)

pytestmark = pytest.mark.anyio

#: The service alone: the agent loop plugin adds its own variables (model, cwd) to the global layer.
WITHOUT_LOOP: dict[str, Any] = {"plugins": {"disable": ["agent-loop"]}}


@pytest.fixture
def dsh_config() -> dict[str, Any]:
    return WITHOUT_LOOP


StartHarness = Callable[..., AbstractAsyncContextManager[Context]]


def _names(assembly: Assembly) -> list[str]:
    return [section.name for section in assembly.sections]


def _assembly(*texts: str, **variables: str | None) -> Assembly:
    sections = tuple(PromptSection(f"s{index}", index, text) for index, text in enumerate(texts))
    return Assembly(sections, variables)


async def test_builtin_sections_identity_then_persona(dsh_ctx: Context) -> None:
    """A fresh harness assembles the identity line and the default persona, in that order."""
    assembly = await dsh_ctx.system_prompt.assemble()
    assert [(s.name, s.order) for s in assembly.sections] == [
        ("harness:identity", -100),
        ("deployment:persona", -50),
    ]
    assert dsh_ctx.system_prompt.render(assembly) == f"{HARNESS_IDENTITY}\n\n{DEFAULT_PERSONA}"


async def test_persona_comes_from_config(start_harness: StartHarness) -> None:
    """[plugins.system-prompt] persona replaces the default persona section's text."""
    async with start_harness(
        config={"plugins": {"disable": ["agent-loop"], "system-prompt": {"persona": "Be terse."}}}
    ) as ctx:
        assembly = await ctx.system_prompt.assemble()
        assert render_prompt(assembly) == f"{HARNESS_IDENTITY}\n\nBe terse."


async def test_sections_sorted_by_order_then_name(dsh_ctx: Context) -> None:
    """Sections come out by order ascending, ties broken by name."""
    prompt = dsh_ctx.system_prompt
    prompt.section("tools:b", "B", order=100)
    prompt.section("tools:a", "A", order=100)
    prompt.section("early", "E", order=-75)
    assembly = await prompt.assemble()
    assert _names(assembly) == ["harness:identity", "early", "deployment:persona", "tools:a", "tools:b"]


async def test_agent_layer_shadows_global_and_is_private(dsh_ctx: Context) -> None:
    """An agent's section shadows the global one by name and is not seen by other agents."""
    dsh_ctx.system_prompt.section("rules", "global rules", order=10)
    a = dsh_ctx.child("agent:a", agent_id="a")
    a.system_prompt.section("rules", "rules for a", order=5)
    a.system_prompt.section("extra", "only a", order=20)

    for_a = await dsh_ctx.system_prompt.assemble(AssemblyContext(agent_id="a"))
    for_b = await dsh_ctx.system_prompt.assemble(AssemblyContext(agent_id="b"))
    assert [(s.name, s.text) for s in for_a.sections[2:]] == [("rules", "rules for a"), ("extra", "only a")]
    assert [(s.name, s.text) for s in for_b.sections[2:]] == [("rules", "global rules")]
    # the agent's own view assembles its layer by default
    assert _names(await a.system_prompt.assemble()) == _names(for_a)


async def test_agent_can_shadow_the_builtin_persona(dsh_ctx: Context) -> None:
    """A scoped deployment:persona replaces the deployment's persona for that agent only."""
    a = dsh_ctx.child("agent:a", agent_id="a")
    a.system_prompt.section("deployment:persona", "You review code.", order=-50)
    text = render_prompt(await a.system_prompt.assemble())
    assert text == f"{HARNESS_IDENTITY}\n\nYou review code."
    assert DEFAULT_PERSONA in render_prompt(await dsh_ctx.system_prompt.assemble())


async def test_scoped_sections_and_variables_vanish_with_the_context(dsh_ctx: Context) -> None:
    """Disposing the agent's context removes what it registered, and the global ones show again."""
    dsh_ctx.system_prompt.section("rules", "global", order=10)
    a = dsh_ctx.child("agent:a", agent_id="a")
    a.system_prompt.section("rules", "scoped", order=10)
    a.system_prompt.variable("who", lambda _: "a")
    await a.dispose()
    assembly = await dsh_ctx.system_prompt.assemble(AssemblyContext(agent_id="a"))
    assert assembly.sections[-1].text == "global"
    assert "who" not in assembly.variables


async def test_disposer_removes_exactly_and_is_idempotent(dsh_ctx: Context) -> None:
    """A section's disposer removes it once; a new section of the same name survives the stale one."""
    prompt = dsh_ctx.system_prompt
    dispose = prompt.section("x", "first")
    dispose()
    prompt.section("x", "second")
    dispose()
    assembly = await prompt.assemble()
    assert assembly.sections[-1].text == "second"


async def test_duplicate_in_the_same_layer_names_the_owner(dsh_ctx: Context) -> None:
    """Registering a taken name in the same layer raises, naming who has it."""
    owner = dsh_ctx.child("plugin:rules")
    owner.system_prompt.section("rules", "one")
    with pytest.raises(DuplicateRegistrationError, match="'plugin:rules'"):
        dsh_ctx.system_prompt.section("rules", "two")
    owner.system_prompt.variable("v", lambda _: "1")
    with pytest.raises(DuplicateRegistrationError, match=r"variable 'v'.*'plugin:rules'"):
        dsh_ctx.system_prompt.variable("v", lambda _: "2")


async def test_registering_through_a_disposed_context_leaves_nothing(dsh_ctx: Context) -> None:
    """A disposed context refuses the registration and the name stays free."""
    child = dsh_ctx.child("plugin:late")
    await child.dispose()
    with pytest.raises(ScopeDisposedError):
        child.system_prompt.section("late", "text")
    dsh_ctx.system_prompt.section("late", "text")


async def test_callable_texts_and_async_providers_get_the_context(dsh_ctx: Context) -> None:
    """Section texts and variable providers may be sync or async callables of the AssemblyContext."""
    seen: list[AssemblyContext] = []

    async def where(context: AssemblyContext) -> str:
        seen.append(context)
        return f"Work in {{{{cwd}}}} for {context.agent_id}."

    async def cwd(context: AssemblyContext) -> str | None:
        return context.cwd

    prompt = dsh_ctx.system_prompt
    prompt.section("where", where, order=1)
    prompt.section("model", lambda context: f"Model: {context.model}", order=2)
    prompt.variable("cwd", cwd)
    context = AssemblyContext(agent_id="a", cwd="/repo", model="p/m")
    assembly = await prompt.assemble(context)
    assert seen == [context]
    assert assembly.variables == {"cwd": "/repo"}
    assert render_prompt(assembly).endswith("Work in /repo for a.\n\nModel: p/m")


async def test_provider_returning_non_str_is_a_type_error(dsh_ctx: Context) -> None:
    """A provider must give a str or None; anything else names the variable."""
    dsh_ctx.system_prompt.variable("n", lambda _: 3)
    with pytest.raises(TypeError, match="prompt variable 'n'"):
        await dsh_ctx.system_prompt.assemble()


async def test_bad_variable_name_is_refused(dsh_ctx: Context) -> None:
    """A variable name must be letters, digits and underscores."""
    with pytest.raises(ValueError, match="must match"):
        dsh_ctx.system_prompt.variable("bad name", lambda _: "x")


async def test_assemble_accepts_an_agent() -> None:
    """AssemblyContext.for_agent reads the id, scope, cwd (session meta) and model of an agent."""

    class Options:
        model = "p/m"

    class Meta:
        cwd = "/w"

    class Session:
        id = "a"
        meta = Meta()

    class FakeAgent:
        id = "a"
        session = Session()
        options = Options()
        ctx: Any = None

    agent: Any = FakeAgent()
    context = AssemblyContext.for_agent(agent)
    assert (context.agent, context.agent_id, context.cwd, context.model) == (agent, "a", "/w", "p/m")


# ---------------------------------------------------------------------- rendering


def test_render_substitutes_and_does_not_rescan() -> None:
    """{{name}} is replaced by its value; a value that looks like a reference stays as it is."""
    assembly = _assembly("Hello {{who}}, {{who}}!", "", "  ", "Tail {{raw}}", who="Ann", raw="{{who}}")
    assert render_prompt(assembly) == "Hello Ann, Ann!\n\nTail {{who}}"


def test_unknown_variable_error() -> None:
    """A reference to an unregistered variable lists the registered ones."""
    with pytest.raises(
        UnknownPromptVariableError, match=r"unknown prompt variable '\{\{nope\}\}' in section 's0'.*who"
    ) as caught:
        render_prompt(_assembly("{{nope}}", who="x"))
    assert (caught.value.section, caught.value.reference) == ("s0", "{{nope}}")


def test_variable_without_value_error() -> None:
    """A registered variable whose provider returned None cannot be rendered."""
    with pytest.raises(MissingPromptValueError, match="has no value"):
        render_prompt(_assembly("{{cwd}}", cwd=None))


@pytest.mark.parametrize("text", ["{{ }}", "{{}}", "{{two words}}", "a {{ who }} b", "x {{who", "{{who}"])
def test_malformed_reference_error(text: str) -> None:
    """Empty, spaced or unclosed references are malformed, not unknown."""
    with pytest.raises(MalformedPromptReferenceError, match="malformed prompt variable reference"):
        render_prompt(_assembly(text, who="x"))


def test_render_errors_are_value_errors() -> None:
    """All three render errors share a base that is a ValueError."""
    for error in (UnknownPromptVariableError, MissingPromptValueError, MalformedPromptReferenceError):
        assert issubclass(error, PromptRenderError)
        assert issubclass(error, ValueError)
    assert len({UnknownPromptVariableError, MissingPromptValueError, MalformedPromptReferenceError}) == 3
