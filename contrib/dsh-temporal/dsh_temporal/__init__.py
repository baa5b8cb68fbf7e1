"""dsh plugin that hosts sessions on Temporal: one workflow per session, each turn a heartbeating
activity on any worker, resumed from the shared session store.

``dsh worker`` serves sessions; ``TemporalAgents`` drives them with the verbs of a local agent.
"""

from ._client import RemoteSession as RemoteSession
from ._client import SessionNotFoundError as SessionNotFoundError
from ._client import TemporalAgents as TemporalAgents
from ._client import TemporalError as TemporalError
from ._config import TemporalConfig as TemporalConfig
from ._plugin import RemoteApprovalUnavailable as RemoteApprovalUnavailable
from ._plugin import TemporalPlugin as TemporalPlugin
from ._types import SessionStatus as SessionStatus
from ._types import workflow_id as workflow_id
from ._worker import WorkerSettings as WorkerSettings
from ._worker import serve as serve
from ._worker import worker_settings as worker_settings
from ._workflow import SessionWorkflow as SessionWorkflow

__all__ = [
    "RemoteApprovalUnavailable",
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
