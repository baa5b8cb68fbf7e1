"""dsh plugin that hosts sessions on Temporal: one workflow per session, each turn a heartbeating
activity on any worker, resumed from the shared session store.

``dsh worker`` serves sessions; ``TemporalAgents`` drives them with the verbs of a local agent.

Names are imported on first use: the host loads the ``temporal`` entry point for every ``dsh``
command, and only a command that talks to Temporal should pay for importing temporalio.
"""

from importlib import import_module as _import_module
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

if _TYPE_CHECKING:
    from ._client import RemoteSession as RemoteSession
    from ._client import SessionNotFoundError as SessionNotFoundError
    from ._client import TemporalAgents as TemporalAgents
    from ._client import TemporalError as TemporalError
    from ._config import TemporalConfig as TemporalConfig
    from ._plugin import ParkRemoteAsks as ParkRemoteAsks
    from ._plugin import TemporalPlugin as TemporalPlugin
    from ._types import SessionStatus as SessionStatus
    from ._types import workflow_id as workflow_id
    from ._worker import WorkerSettings as WorkerSettings
    from ._worker import serve as serve
    from ._worker import worker_settings as worker_settings
    from ._workflow import SessionWorkflow as SessionWorkflow

__all__ = [
    "ParkRemoteAsks",
    "RemoteSession",
    "SessionNotFoundError",
    "SessionStatus",
    "SessionWorkflow",
    "TemporalAgents",
    "TemporalConfig",
    "TemporalError",
    "TemporalPlugin",
    "WorkerSettings",
    "serve",
    "worker_settings",
    "workflow_id",
]

_HOMES = {
    "RemoteSession": "._client",
    "SessionNotFoundError": "._client",
    "TemporalAgents": "._client",
    "TemporalError": "._client",
    "TemporalConfig": "._config",
    "ParkRemoteAsks": "._plugin",
    "TemporalPlugin": "._plugin",
    "SessionStatus": "._types",
    "workflow_id": "._types",
    "WorkerSettings": "._worker",
    "serve": "._worker",
    "worker_settings": "._worker",
    "SessionWorkflow": "._workflow",
}

def __getattr__(name: str) -> _Any:
    home = _HOMES.get(name)
    if home is None:
        msg = f"module 'dsh_temporal' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(_import_module(home, __name__), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
