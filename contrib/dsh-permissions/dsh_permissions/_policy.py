"""The ``permissions`` service: each agent's mode (plan mode), the verdict on a call, outside paths.

Modes set the baseline: ``read-only`` allows only the read tools (the built-in ``READ_TOOLS`` and
any tool registered with ``read_only=True``), ``workspace-write`` and
``full-access`` allow every tool. Rules then deny, ask or allow (see ``_rules``). Paths outside
the workspace are a second question, asked by the workspace tools through ``allows_outside``:
``full-access`` allows them, the other modes only when an allow rule (or an ask rule the call
was asked about) matches the resolved path.

``set_mode(agent_id, mode)`` switches one agent, e.g. to ``read-only`` for plan mode; the switch
is recorded in the agent's session as ``permissions/mode {mode}`` (``null``: back to the
configured mode) and restored when the session is resumed or forked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import anyio.to_thread
import attrs

from dsh_core.session_log import LogEvent, log_event

from ._config import MODES, Mode
from ._rules import (
    MAIN_ARGUMENTS,
    CompiledRule,
    MainArgument,
    PathRaceError,
    Subject,
    Unit,
    Verdict,
    argument_text,
    command_units,
    evaluate,
    path_units,
)

if TYPE_CHECKING:
    from dsh_core import Context, Tool, ToolExecution

__all__ = ["MODE_EVENT", "READ_TOOLS", "Permissions", "PermissionsModeEvent"]

#: the tools the read-only mode allows
READ_TOOLS: Final = frozenset({"read_file", "list_dir", "glob", "grep"})


@log_event("permissions/mode")
@attrs.frozen(kw_only=True)
class PermissionsModeEvent(LogEvent):
    """The agent's permission mode was switched to ``mode`` (``None``: back to the configured one)."""

    mode: str | None


#: the session event that records a mode switch
MODE_EVENT: Final = PermissionsModeEvent.type
_ALLOW: Final = Verdict("allow")


def _check_mode(mode: object, *, allow_none: bool = False) -> None:
    if mode is None and allow_none:
        return
    if not isinstance(mode, str):
        msg = f"a permission mode is a str, one of {', '.join(MODES)}; got {type(mode).__name__}"
        raise TypeError(msg)
    if mode not in MODES:
        msg = f"unknown permission mode {mode!r}; expected one of {', '.join(MODES)}"
        raise ValueError(msg)


class Permissions:
    """``ctx.permissions`` (also provided as ``ctx.workspace_policy``): modes and verdicts."""

    def __init__(self, ctx: Context, default_mode: Mode, rules: Sequence[CompiledRule]) -> None:
        self._ctx = ctx
        self._default: Mode = default_mode
        self._rules = tuple(rules)
        self._modes: dict[str, Mode] = {}
        #: calls this plugin answered with Ask, until their result: (agent id, call id)
        self._asked: set[tuple[str | None, str]] = set()

    # ------------------------------------------------------------------ modes

    @property
    def default_mode(self) -> Mode:
        """The configured mode, for agents that have not been switched."""
        return self._default

    @property
    def rules(self) -> tuple[CompiledRule, ...]:
        return self._rules

    def mode_for(self, agent_id: str | None) -> Mode:
        """The mode in force for ``agent_id`` (the configured one unless ``set_mode`` switched it)."""
        if agent_id is None:
            return self._default
        return self._modes.get(agent_id, self._default)

    def set_mode(self, agent_id: str, mode: Mode | None) -> None:
        """Switch one agent to ``mode`` from its next tool call on; ``None`` returns it to the configured mode.

        Plan mode is ``set_mode(agent_id, "read-only")``. Other agents are not affected. The
        switch is appended to the agent's session (when it is live) as ``permissions/mode``, and
        a live agent is told its new mode as injected context (``notice``).

        :raises TypeError: when ``agent_id`` is not a str or ``mode`` not a str or ``None``.
        :raises ValueError: for an unknown mode.
        """
        if not isinstance(agent_id, str):
            msg = f"set_mode takes the agent's id (a str), got {type(agent_id).__name__}"
            raise TypeError(msg)
        _check_mode(mode, allow_none=True)
        self._apply(agent_id, mode)
        sessions = self._ctx.get_service("sessions")
        session = sessions.get(agent_id) if sessions is not None else None
        if session is not None:
            session.append(PermissionsModeEvent(mode=mode))
        agents = self._ctx.get_service("agents")
        agent = agents.get(agent_id) if agents is not None else None
        if agent is not None and agent.status != "disposed":
            agent.inject(self.notice(agent_id), source={"kind": "plugin", "plugin": "permissions"})

    def notice(self, agent_id: str | None) -> str:
        """What the model is told when its mode changes: what it may do now."""
        mode = self.mode_for(agent_id)
        if mode == "read-only":
            return (
                "Permission mode is now read-only (plan mode): only the read tools "
                f"({', '.join(sorted(READ_TOOLS))}) will run; writing files and running commands will be "
                "denied. Investigate and propose changes instead of making them."
            )
        if mode == "workspace-write":
            return (
                "Permission mode is now workspace-write: you may change files in the workspace and run "
                "commands; paths outside the workspace are refused and commands may run in a sandbox "
                "without network access."
            )
        return "Permission mode is now full-access: you may change files anywhere and run any command."

    def _apply(self, agent_id: str, mode: Mode | None) -> None:
        if mode is None:
            self._modes.pop(agent_id, None)
        else:
            self._modes[agent_id] = mode

    def restore(self, agent_id: str, events: Sequence[Any]) -> None:
        """Take the last ``permissions/mode`` of a session's log as the agent's mode."""
        for event in reversed(events):
            if event.type == MODE_EVENT:
                mode = event.data.get("mode")
                if mode is None or mode in MODES:
                    self._apply(agent_id, mode)
                return

    def forget(self, agent_id: str) -> None:
        """Drop what is kept for an agent that is gone."""
        self._modes.pop(agent_id, None)
        self._asked = {key for key in self._asked if key[0] != agent_id}

    # ------------------------------------------------------------------ verdicts

    def _main_argument(self, execution: ToolExecution) -> MainArgument | None:
        known = MAIN_ARGUMENTS.get(execution.name)
        if known is not None:
            return known
        tools = self._ctx.get_service("tools")
        found: Tool | None = tools.get(execution.name, execution.agent_id) if tools is not None else None
        if found is None:
            return None
        parameters: Mapping[str, Any] = found.parameters
        properties = parameters.get("properties", {})
        for name in parameters.get("required", ()):
            if isinstance(properties.get(name), Mapping) and properties[name].get("type") == "string":
                return MainArgument(name, "text")
        return None

    async def subject(self, execution: ToolExecution) -> Subject:
        """The call's main argument as rule units (paths are resolved in a worker thread)."""
        main = self._main_argument(execution)
        if main is None:
            return Subject(None, ())
        text = argument_text(execution.parsed, main)
        if text is None:
            return Subject(main.kind, ())
        if main.kind == "command":
            return Subject("command", command_units(text), text)
        if main.kind == "path":
            units = await anyio.to_thread.run_sync(path_units, text, execution.cwd)
            return Subject("path", units, text)
        return Subject("text", (Unit((text,)),), text)

    def baseline(self, name: str, agent_id: str | None) -> Verdict:
        """What the agent's mode alone says about a call of tool ``name``."""
        mode = self.mode_for(agent_id)
        if mode != "read-only" or name in READ_TOOLS or self._declared_read_only(name, agent_id):
            return _ALLOW
        switched = " (switched for this agent, e.g. plan mode)" if agent_id in self._modes else ""
        reason = (
            f"the permission mode is read-only{switched}: only the read tools "
            f"({', '.join(sorted(READ_TOOLS))}) may run, and {name!r} is not one of them"
        )
        return Verdict("deny", reason)

    def _declared_read_only(self, name: str, agent_id: str | None) -> bool:
        """Whether the tool as this agent sees it is marked ``read_only`` (e.g. an MCP tool with readOnlyHint)."""
        tools = self._ctx.get_service("tools")
        found: Tool | None = tools.get(name, agent_id) if tools is not None else None
        return found is not None and found.read_only

    async def check(self, execution: ToolExecution) -> Verdict:
        """The verdict on one call: the mode's baseline with the rules applied."""
        try:
            subject = await self.subject(execution)
        except PathRaceError as exc:  # fail closed: a path that cannot be pinned down is not checked
            return Verdict("deny", f"{exc}; call again once it is stable")
        return evaluate(
            self._rules, execution.name, subject, self.baseline(execution.name, execution.agent_id)
        )

    # ------------------------------------------------------------------ the workspace policy

    def note_asked(self, execution: ToolExecution) -> None:
        self._asked.add((execution.agent_id, execution.call_id))

    def note_done(self, execution: ToolExecution) -> None:
        self._asked.discard((execution.agent_id, execution.call_id))

    async def allows_outside(self, execution: ToolExecution, path: str, access: str) -> bool:
        """May this call touch ``path`` (absolute, resolved), which lies outside the workspace?

        ``full-access``: yes, unless a deny rule matches the path. Other modes: only when an
        allow rule matches it, or an ask rule the call was asked about.
        """
        mode = self.mode_for(execution.agent_id)
        baseline = _ALLOW if mode == "full-access" else Verdict("deny", "outside the workspace")
        subject = Subject("path", (Unit((path,)),), path)
        verdict = evaluate(self._rules, execution.name, subject, baseline)
        if verdict.action == "ask":
            return (execution.agent_id, execution.call_id) in self._asked
        return verdict.action == "allow"
