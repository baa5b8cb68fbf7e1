"""THE concrete agent loop: the ``AgentLoop`` service, the agents factory, the driver.

The package root exports only the plugin, the service and the config; the ``Agent`` class, its
``Inbox`` and the run loop are private. Create agents through ``ctx.agents`` or ``ctx.agent_loop``.
"""

from ._plugin import AgentLoop as AgentLoop
from ._plugin import AgentLoopConfig as AgentLoopConfig
from ._plugin import AgentLoopPlugin as AgentLoopPlugin

__all__ = ["AgentLoop", "AgentLoopConfig", "AgentLoopPlugin"]
