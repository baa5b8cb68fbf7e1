"""The default system prompt: named sections and variables in layers, assembled per agent, rendered.

A section or variable registered through a plugin's context lives in the global layer; one
registered through ``agent.ctx`` (or a context below it) lives in that agent's layer, shadows a
global one of the same name, and vanishes with the context. ``assemble`` resolves every text and
variable for one agent into a frozen ``Assembly``; ``render`` substitutes ``{{name}}`` references and
joins the non-empty sections with a blank line.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeAlias

import attrs

from dsh_core.services._prompt_errors import (
    MalformedPromptReferenceError,
    MissingPromptValueError,
    UnknownPromptVariableError,
)
from dsh_core.vocabulary._errors import DuplicateRegistrationError
from dsh_core.vocabulary._json import FrozenDict

if TYPE_CHECKING:
    from dsh_core.host._context import Context, Disposer
    from dsh_core.vocabulary._agent_types import Agent

__all__ = ["DEFAULT_PERSONA", "HARNESS_IDENTITY", "Assembly", "AssemblyContext", "PromptSection", "SectionText", "SystemPrompt", "SystemPromptConfig", "SystemPromptPlugin", "SystemPromptService", "SystemPromptView", "VariableProvider", "render_prompt"]

HARNESS_IDENTITY = "You are an AI agent running in dsh, an extensible agent harness."

DEFAULT_PERSONA = (
    "You are a careful, capable coding assistant. You read the code before changing it, make the "
    "smallest change that solves the problem, keep to the project's conventions, and check your work "
    "by running its tests. You say plainly what you did, what you could not do, and what you are "
    "unsure of, and you ask before doing anything destructive or irreversible."
)

_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@attrs.frozen(kw_only=True)
class AssemblyContext:
    """Whom a prompt is assembled for; section texts and variable providers receive it.

    ``agent_id`` selects the agent's layer (``None``: the global layer only); ``scope`` is the
    agent's context. Build one for an agent with ``AssemblyContext.for_agent(agent)``.
    """

    agent: Agent | None = attrs.field(default=None, eq=False)
    agent_id: str | None = None
    scope: Context | None = attrs.field(default=None, eq=False, repr=False)
    cwd: str | None = None
    model: str | None = None

    @classmethod
    def for_agent(cls, agent: Agent) -> AssemblyContext:
        """The context of ``agent``: its id and scope, its session's cwd and its model option."""
        meta = getattr(agent.session, "meta", None)
        cwd = meta.get("cwd") if isinstance(meta, Mapping) else getattr(meta, "cwd", None)
        return cls(
            agent=agent,
            agent_id=agent.id,
            scope=agent.ctx,
            cwd=None if cwd is None else str(cwd),
            model=agent.options.model,
        )


#: A section's text: a str, or computed per assembly (sync or async).
SectionText: TypeAlias = "str | Callable[[AssemblyContext], str | Awaitable[str]]"
#: A variable's value per assembly (sync or async); ``None`` means no value for this assembly.
VariableProvider: TypeAlias = "Callable[[AssemblyContext], str | Awaitable[str | None] | None]"


@attrs.frozen
class PromptSection:
    """One resolved section of an assembly, before variables are substituted."""

    name: str
    order: float
    text: str


@attrs.frozen
class Assembly:
    """The resolved prompt of one agent at one step: sections in order and every variable's value."""

    sections: tuple[PromptSection, ...]
    variables: Mapping[str, str | None] = attrs.field(factory=FrozenDict, converter=FrozenDict)
    #: the rendered text, once ``render_prompt`` made it (a frozen value renders the same every time)
    _rendered: str | None = attrs.field(default=None, init=False, eq=False, repr=False)


@attrs.frozen
class _Section:
    name: str
    order: float
    text: SectionText
    owner: str


@attrs.frozen
class _Variable:
    name: str
    provider: VariableProvider
    owner: str


def _where(scope: str | None) -> str:
    return "the global layer" if scope is None else f"the layer of agent {scope!r}"


class SystemPromptService(Protocol):
    """What ``ctx.system_prompt`` offers, and what a replacement must provide (after ``bind(ctx)``)."""

    def section(self, name: str, text: SectionText, order: float = 0) -> Disposer: ...

    def variable(self, name: str, provider: VariableProvider) -> Disposer: ...

    async def assemble(self, context: AssemblyContext | Agent | None = None) -> Assembly: ...

    def render(self, assembly: Assembly) -> str: ...


class SystemPrompt:
    """The system prompt service: layered sections and variables, assembly and rendering.

    Seen through ``ctx.system_prompt`` as a ``SystemPromptView`` that scopes registrations to
    that context; ``add_section`` / ``add_variable`` here take the scope explicitly.
    """

    def __init__(self) -> None:
        self._sections: dict[str | None, dict[str, _Section]] = {None: {}}
        self._variables: dict[str | None, dict[str, _Variable]] = {None: {}}
        #: per layer seen (``None``: an agent without a layer of its own), until any registration changes
        self._plans: dict[str | None, _Plan] = {}

    def bind(self, ctx: Context) -> SystemPromptView:
        return SystemPromptView(self, ctx)

    # ------------------------------------------------------------------ registration

    def add_section(
        self, name: str, text: SectionText, order: float = 0, *, scope: str | None = None, owner: str = "?"
    ) -> Callable[[], None]:
        """Add a section to the layer ``scope``; returns an exact, idempotent remover.

        :raises DuplicateRegistrationError: when the layer already has a section of that name.
        :raises TypeError: for a text that is neither a str nor a callable, or an order that is not a number.
        """
        if not isinstance(name, str) or not name:
            msg = f"a prompt section needs a non-empty str name, got {name!r}"
            raise TypeError(msg)
        if not (isinstance(text, str) or callable(text)):
            msg = f"prompt section {name!r}: text must be a str or a callable of the assembly context, got {text!r}"
            raise TypeError(msg)
        if isinstance(order, bool) or not isinstance(order, int | float) or not math.isfinite(order):
            msg = f"prompt section {name!r}: order must be a finite number, got {order!r}"
            raise TypeError(msg)
        layer = self._sections.setdefault(scope, {})
        if (taken := layer.get(name)) is not None:
            msg = (
                f"prompt section {name!r} is already registered in {_where(scope)} by {taken.owner!r}; "
                "pick another name, or register it through an agent's context to shadow it there"
            )
            raise DuplicateRegistrationError(msg)
        entry = _Section(name, order, text, owner)
        layer[name] = entry
        self._plans.clear()

        def remove() -> None:
            if layer.get(name) is entry:
                del layer[name]
                if not layer and scope is not None and self._sections.get(scope) is layer:
                    del self._sections[scope]  # an agent's layer leaves with its last entry
                self._plans.clear()

        return remove

    def add_variable(
        self, name: str, provider: VariableProvider, *, scope: str | None = None, owner: str = "?"
    ) -> Callable[[], None]:
        """Add a variable provider to the layer ``scope``; returns an exact, idempotent remover.

        :raises ValueError: for a name that is not ``[A-Za-z_][A-Za-z0-9_]*``.
        :raises DuplicateRegistrationError: when the layer already has a variable of that name.
        """
        if not isinstance(name, str) or not _VARIABLE_NAME.fullmatch(name):
            msg = f"prompt variable name {name!r} must match [A-Za-z_][A-Za-z0-9_]* (it is written {{{{name}}}})"
            raise ValueError(msg)
        if not callable(provider):
            msg = f"prompt variable {name!r}: provider must be a callable of the assembly context, got {provider!r}"
            raise TypeError(msg)
        layer = self._variables.setdefault(scope, {})
        if (taken := layer.get(name)) is not None:
            msg = (
                f"prompt variable {name!r} is already registered in {_where(scope)} by {taken.owner!r}; "
                "pick another name, or register it through an agent's context to shadow it there"
            )
            raise DuplicateRegistrationError(msg)
        entry = _Variable(name, provider, owner)
        layer[name] = entry
        self._plans.clear()

        def remove() -> None:
            if layer.get(name) is entry:
                del layer[name]
                if not layer and scope is not None and self._variables.get(scope) is layer:
                    del self._variables[scope]
                self._plans.clear()

        return remove

    # ------------------------------------------------------------------ assembly

    async def assemble(self, context: AssemblyContext | Agent | None = None) -> Assembly:
        """Resolve the sections and variables seen by ``context``'s agent (global + its layer).

        Its layer shadows the global one by name; sections are sorted by order, then name. An
        agent may be given instead of its ``AssemblyContext``. A provider that raises propagates.

        :raises TypeError: when a text or provider yields something other than a str (or ``None``
            for a variable).
        """
        if context is None:
            context = AssemblyContext()
        elif not isinstance(context, AssemblyContext):
            context = AssemblyContext.for_agent(context)
        scope = context.agent_id
        if scope is None and context.scope is not None:
            scope = context.scope.agent_scope
        if scope not in self._sections and scope not in self._variables:
            scope = None  # no layer of its own: the global view (one plan for every such agent)
        plan = self._plans.get(scope)
        if plan is None:
            plan = self._plans[scope] = _Plan(self._sections, self._variables, scope)
        resolved = plan.fixed  # every section a str: the same PromptSections every time
        if resolved is None:
            resolved = []
            for section, fixed in plan.sections:
                if fixed is not None:
                    resolved.append(fixed)
                    continue
                text = await _call(section.text, context)  # type: ignore[arg-type]  # not a str: a callable
                if not isinstance(text, str):
                    msg = f"prompt section {section.name!r} (from {section.owner!r}) produced {type(text).__name__}, not a str"
                    raise TypeError(msg)
                resolved.append(PromptSection(section.name, section.order, text))
        values: list[str | None] = []
        for variable in plan.variables:
            value = variable.provider(context)
            if value is not None and value.__class__ is not str:
                if inspect.isawaitable(value):
                    value = await value
                if value is not None and not isinstance(value, str):
                    msg = (
                        f"prompt variable {variable.name!r} (from {variable.owner!r}) produced "
                        f"{type(value).__name__}; a provider returns a str, or None for no value"
                    )
                    raise TypeError(msg)
            values.append(value)
        # The same sections and values as the plan's last assembly (the usual step): that frozen
        # value again, with its rendered text (a fifth of a text step's cost when rebuilt).
        last = plan.last
        if last is not None and values == plan.last_values and (resolved is plan.fixed or _same(resolved, last.sections)):
            return last
        names = plan.variable_names
        assembly = Assembly(tuple(resolved), FrozenDict(zip(names, values, strict=True)))
        plan.last, plan.last_values = assembly, values
        return assembly

    def render(self, assembly: Assembly) -> str:
        """The prompt text of ``assembly``; see ``render_prompt``."""
        return render_prompt(assembly)

    def section_names(self, scope: str | None = None) -> tuple[str, ...]:
        """The names of the sections seen by the agent ``scope`` (or the global layer), sorted."""
        return tuple(sorted(_merge(self._sections, scope)))

    def variable_names(self, scope: str | None = None) -> tuple[str, ...]:
        """The names of the variables seen by the agent ``scope`` (or the global layer), sorted."""
        return tuple(sorted(_merge(self._variables, scope)))


class SystemPromptView:
    """``ctx.system_prompt``: the service seen from one context, which owns what is registered through it."""

    def __init__(self, service: SystemPrompt, ctx: Context) -> None:
        self._service = service
        self._ctx = ctx

    @property
    def service(self) -> SystemPrompt:
        return self._service

    def section(self, name: str, text: SectionText, order: float = 0) -> Disposer:
        """Add a section to this context's layer (an agent's, or global); undone with the context.

        ``text`` is a str or a callable of the ``AssemblyContext`` (sync or async); ``{{name}}``
        references in it are substituted at render time.

        :raises DuplicateRegistrationError: when this layer already has a section of that name.
        """
        remove = self._service.add_section(
            name, text, order, scope=self._ctx.agent_scope, owner=self._ctx.label
        )
        return _owned_by(self._ctx, remove)

    def variable(self, name: str, provider: VariableProvider) -> Disposer:
        """Add a variable to this context's layer; undone with the context.

        :raises ValueError: for a name that is not ``[A-Za-z_][A-Za-z0-9_]*``.
        :raises DuplicateRegistrationError: when this layer already has a variable of that name.
        """
        remove = self._service.add_variable(
            name, provider, scope=self._ctx.agent_scope, owner=self._ctx.label
        )
        return _owned_by(self._ctx, remove)

    async def assemble(self, context: AssemblyContext | Agent | None = None) -> Assembly:
        """Assemble for ``context`` (default: this context's own agent, or the global layer)."""
        if context is None:
            context = AssemblyContext(
                agent_id=self._ctx.agent_scope, scope=self._ctx if self._ctx.agent_scope else None
            )
        return await self._service.assemble(context)

    def render(self, assembly: Assembly) -> str:
        """The prompt text of ``assembly``; see ``render_prompt``."""
        return render_prompt(assembly)


def _owned_by(ctx: Context, remove: Callable[[], None]) -> Disposer:
    """Record ``remove`` as an effect of ``ctx``; if ``ctx`` is already disposed, undo and re-raise."""
    try:
        return ctx.effect(remove)
    except BaseException:
        remove()
        raise


class _Plan:
    """What ``assemble`` resolves for one layer: the sections in order (a str section's
    ``PromptSection`` made once), the variables by name, and the last assembly made from it."""

    __slots__ = ("fixed", "last", "last_values", "sections", "variable_names", "variables")

    def __init__(
        self,
        sections: Mapping[str | None, Mapping[str, _Section]],
        variables: Mapping[str | None, Mapping[str, _Variable]],
        scope: str | None,
    ) -> None:
        ordered = sorted(_merge(sections, scope).values(), key=lambda s: (s.order, s.name))
        self.sections: tuple[tuple[_Section, PromptSection | None], ...] = tuple(
            (section, PromptSection(section.name, section.order, section.text) if isinstance(section.text, str) else None)
            for section in ordered
        )
        #: the sections when every one is a str (then each assembly has exactly these)
        self.fixed: list[PromptSection] | None = (
            [fixed for _, fixed in self.sections] if all(fixed is not None for _, fixed in self.sections) else None  # type: ignore[misc]
        )
        merged = _merge(variables, scope)
        self.variable_names = tuple(sorted(merged))
        self.variables: tuple[_Variable, ...] = tuple(merged[name] for name in self.variable_names)
        self.last: Assembly | None = None
        self.last_values: list[str | None] = []


def _same(sections: list[PromptSection], last: tuple[PromptSection, ...]) -> bool:
    """Whether ``sections`` are those of ``last``: the same fixed ones, equal computed ones."""
    return len(sections) == len(last) and all(
        new is old or new == old for new, old in zip(sections, last, strict=True)
    )


_Entry = Any  # _Section | _Variable, for _merge


def _merge(layers: Mapping[str | None, Mapping[str, _Entry]], scope: str | None) -> dict[str, _Entry]:
    merged = dict(layers.get(None, {}))
    if scope is not None:
        merged.update(layers.get(scope, {}))
    return merged


async def _call(function: Callable[[AssemblyContext], Any], context: AssemblyContext) -> Any:
    result = function(context)
    if inspect.isawaitable(result):
        result = await result
    return result


# ---------------------------------------------------------------------- rendering


def render_prompt(assembly: Assembly) -> str:
    """Substitute ``{{name}}`` in every section and join the non-empty ones with a blank line.

    A reference is exactly ``{{name}}``; substituted values are not scanned again. Raises a
    distinct ``PromptRenderError`` for each way a reference can be wrong:

    :raises UnknownPromptVariableError: no variable of that name is registered.
    :raises MissingPromptValueError: the variable's provider returned ``None`` for this assembly.
    :raises MalformedPromptReferenceError: ``{{ }}``, ``{{not a name}}`` or a ``{{`` never closed.
    """
    text = assembly._rendered
    if text is None:
        rendered = (_substitute(section, assembly.variables) for section in assembly.sections)
        text = "\n\n".join(text for text in rendered if text.strip())
        _set_rendered(assembly, text)
    return text


_set_rendered = Assembly.__dict__["_rendered"].__set__  # a slot of a frozen class: the memo's one writer


def _substitute(section: PromptSection, variables: Mapping[str, str | None]) -> str:
    text = section.text
    start = text.find("{{")
    if start < 0:
        return text
    parts: list[str] = []
    position = 0
    while start >= 0:
        end = text.find("}}", start + 2)
        if end < 0:
            snippet = text[start : start + 20]
            msg = (
                f"malformed prompt variable reference {snippet!r} in section {section.name!r}: '{{{{' is "
                "never closed; write {{name}}, or remove the braces"
            )
            raise MalformedPromptReferenceError(msg, section=section.name, reference=snippet)
        name = text[start + 2 : end]
        reference = text[start : end + 2]
        if not _VARIABLE_NAME.fullmatch(name):
            msg = (
                f"malformed prompt variable reference {reference!r} in section {section.name!r}: a reference "
                "is {{name}} with a name of letters, digits and '_' and no spaces"
            )
            raise MalformedPromptReferenceError(msg, section=section.name, reference=reference)
        if name not in variables:
            known = ", ".join(sorted(variables)) or "none"
            msg = (
                f"unknown prompt variable {reference!r} in section {section.name!r}; "
                f"registered variables: {known} (register it with ctx.system_prompt.variable)"
            )
            raise UnknownPromptVariableError(msg, section=section.name, reference=reference)
        value = variables[name]
        if value is None:
            msg = (
                f"prompt variable {reference!r} has no value for this assembly (section {section.name!r}); "
                "its provider returned None"
            )
            raise MissingPromptValueError(msg, section=section.name, reference=reference)
        parts.append(text[position:start])
        parts.append(value)
        position = end + 2
        start = text.find("{{", position)
    parts.append(text[position:])
    return "".join(parts)


# ---------------------------------------------------------------------- the plugin


@attrs.frozen
class SystemPromptConfig:
    """``[plugins.system-prompt]``: the deployment's persona (a section at order -50)."""

    persona: str = DEFAULT_PERSONA


class SystemPromptPlugin:
    """Provides ``ctx.system_prompt`` with the built-in ``harness:identity`` and ``deployment:persona``."""

    name = "system-prompt"
    provides: ClassVar[tuple[str, ...]] = ("system_prompt",)
    Config = SystemPromptConfig

    def start(self, ctx: Context) -> None:
        config = ctx.config if isinstance(ctx.config, SystemPromptConfig) else SystemPromptConfig()
        service = SystemPrompt()
        ctx.provide("system_prompt", service)
        view = service.bind(ctx)
        view.section("harness:identity", HARNESS_IDENTITY, order=-100)
        view.section("deployment:persona", config.persona, order=-50)
