"""The ``permissions`` plugin: modes, rules and the sandbox, wired into the tool pipeline.

* a **guard** (monotonic: no other plugin can re-allow what it denies) denies calls that a deny
  rule or the mode forbids, and ``bash`` calls when the sandbox is required but cannot be made;
* a ``tools/pre-execute`` listener, run last, answers ``Ask(reason)`` for calls an ask rule
  matches (the tool runtime takes that to the ``approval`` service; with none, it is a denial),
  and ``Deny`` early for what the guard will deny, so that nobody is asked in vain;
* services: ``permissions`` (modes and verdicts), ``workspace_policy`` (paths outside the
  workspace) and ``sandbox`` (bubblewrap for ``bash``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from dsh_core import Ask, ConfigError, Deny, hookimpl

from ._config import PermissionsConfig
from ._policy import Permissions
from ._rules import compile_rules
from ._sandbox import BwrapSandbox

if TYPE_CHECKING:
    from dsh_core import Allow, Context, ToolExecution, ToolResult

__all__ = ["PermissionsPlugin"]

#: the tools whose commands run in the sandbox
_SANDBOXED = frozenset({"bash"})


class PermissionsPlugin:
    """Tool permissions for every agent: a mode, allow/ask/deny rules, plan mode and a process sandbox."""

    name = "permissions"
    requires: ClassVar[tuple[str, ...]] = ("tools",)
    provides: ClassVar[tuple[str, ...]] = ("permissions", "workspace_policy", "sandbox")
    Config = PermissionsConfig

    def __init__(self, *, run_as: Sequence[str] = ()) -> None:
        """``run_as``: an argv prefix that runs bwrap as another user (``setpriv --reuid=...``).

        The entry point builds the plugin without it; dsh's tests pass one to run the sandbox
        as ``nobody`` from a harness running as root.
        """
        self._permissions: Permissions | None = None
        self._sandbox: BwrapSandbox | None = None
        self._run_as = tuple(run_as)

    def start(self, ctx: Context) -> None:
        config = ctx.config if isinstance(ctx.config, PermissionsConfig) else PermissionsConfig()
        try:
            rules = compile_rules(config.rules)
        except ValueError as exc:
            path = str(exc).partition(":")[0]
            raise ConfigError(str(exc), path=path) from None
        permissions = Permissions(ctx, config.mode, rules)
        sandbox = BwrapSandbox(
            config.sandbox,
            config.bwrap,
            permissions.mode_for,
            max_processes=config.max_processes,
            hidden=config.hidden_paths,
            read_only=config.read_only_paths,
            run_as=self._run_as,
        )
        ctx.effect(sandbox.close)
        sandbox.check_setting()  # a max_processes this host cannot enforce: refused (required) or warned about
        self._permissions, self._sandbox = permissions, sandbox
        ctx.provide("permissions", permissions)
        ctx.provide("workspace_policy", permissions)
        ctx.provide("sandbox", sandbox)
        ctx.tools.guard(self._guard)

    @property
    def permissions(self) -> Permissions:
        if self._permissions is None:
            msg = "the permissions plugin has not been started"
            raise RuntimeError(msg)
        return self._permissions

    async def _guard(self, execution: ToolExecution) -> str | None:
        """Deny what a deny rule or the mode forbids, and commands the required sandbox cannot confine."""
        verdict = await self.permissions.check(execution)
        if verdict.action == "deny":
            return verdict.reason
        sandbox = self._sandbox
        if (
            sandbox is not None
            and execution.name in _SANDBOXED
            and sandbox.setting == "required"
            and sandbox.confines(self.permissions.mode_for(execution.agent_id))
        ):
            status = await sandbox.status()
            if not status.available:
                return sandbox.refusal(status)
        return None

    @hookimpl(trylast=True)
    async def dsh_tools_pre_execute(
        self, execution: ToolExecution, decision: Allow | Deny | Ask
    ) -> Allow | Deny | Ask | None:
        """Ask about calls an ask rule matches; deny early what the guard will deny."""
        if isinstance(decision, Deny):
            return None
        verdict = await self.permissions.check(execution)
        if verdict.action == "deny":
            return Deny(verdict.reason or f"the permissions plugin denies tool {execution.name!r}")
        if verdict.action == "ask":
            self.permissions.note_asked(execution)
            if isinstance(decision, Ask):
                return None
            return Ask(verdict.reason or f"tool {execution.name!r} needs approval")
        return None

    @hookimpl
    def dsh_tools_result(self, execution: ToolExecution, result: ToolResult) -> None:
        self.permissions.note_done(execution)

    @hookimpl
    def dsh_agent_session_start(self, agent: Any) -> None:
        """Restore a mode switch recorded in the session (resumed, or inherited by a fork)."""
        self.permissions.restore(agent.id, agent.session.events)

    @hookimpl
    def dsh_agent_disposed(self, agent: Any) -> None:
        self.permissions.forget(agent.id)
