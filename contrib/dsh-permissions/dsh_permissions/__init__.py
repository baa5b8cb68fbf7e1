"""dsh plugin for tool permissions: modes, allow/ask/deny rules, plan mode and a bubblewrap sandbox.

Load the ``permissions`` plugin (entry point) and set it up in ``[plugins.permissions]``. At run
time, ``ctx.permissions.set_mode(agent_id, "read-only")`` puts one agent in plan mode.
"""

from ._config import Action as Action
from ._config import Mode as Mode
from ._config import PermissionsConfig as PermissionsConfig
from ._config import Rule as Rule
from ._config import SandboxSetting as SandboxSetting
from ._plugin import PermissionsPlugin as PermissionsPlugin
from ._policy import Permissions as Permissions
from ._rules import Verdict as Verdict
from ._sandbox import BwrapSandbox as BwrapSandbox
from ._sandbox import Confinement as Confinement
from ._sandbox import SandboxStatus as SandboxStatus
from ._sandbox import SandboxUnavailableError as SandboxUnavailableError

__all__ = [
    "Action",
    "BwrapSandbox",
    "Confinement",
    "Mode",
    "Permissions",
    "PermissionsConfig",
    "PermissionsPlugin",
    "Rule",
    "SandboxSetting",
    "SandboxStatus",
    "SandboxUnavailableError",
    "Verdict",
]
