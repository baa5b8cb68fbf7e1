"""The test kit that ships with dsh: a scripted model, an adapter conformance check, helpers for
tool plugins (one call through the real pipeline, processes that must be gone), the replay of a
recorded session as a test, and pytest fixtures."""

from ._conformance import ConformanceScript as ConformanceScript
from ._conformance import ScriptedConformance as ScriptedConformance
from ._conformance import check_llm_adapter as check_llm_adapter
from ._processes import is_alive as is_alive
from ._processes import pids_running as pids_running
from ._processes import read_fifo as read_fifo
from ._processes import wait_gone as wait_gone
from ._recording import RecordingError as RecordingError
from ._replay import ReplayReport as ReplayReport
from ._replay import assert_replay_matches as assert_replay_matches
from ._replay import replay_session as replay_session
from ._replay_compare import Divergence as Divergence
from ._scripted import Reply as Reply
from ._scripted import ScriptedModel as ScriptedModel
from ._tools import call_tool as call_tool
from ._tools import result_text as result_text

__all__ = [
    "ConformanceScript",
    "Divergence",
    "RecordingError",
    "ReplayReport",
    "Reply",
    "ScriptedConformance",
    "ScriptedModel",
    "assert_replay_matches",
    "call_tool",
    "check_llm_adapter",
    "is_alive",
    "pids_running",
    "read_fifo",
    "replay_session",
    "result_text",
    "wait_gone",
]
