"""dsh-mcp: the tools of Model Context Protocol servers, registered as ``mcp__<server>__<tool>``."""

from ._config import McpConfig as McpConfig
from ._config import ServerConfig as ServerConfig
from ._plugin import McpPlugin as McpPlugin
from ._service import McpView as McpView
from ._status import Backoff as Backoff
from ._status import ServerState as ServerState
from ._status import ServerStatus as ServerStatus
from ._tools import dsh_tool_name as dsh_tool_name

__all__ = [
    "Backoff",
    "McpConfig",
    "McpPlugin",
    "McpView",
    "ServerConfig",
    "ServerState",
    "ServerStatus",
    "dsh_tool_name",
]
