"""The test kit that ships with dsh: a scripted model, an adapter conformance check, a persistence
backend conformance check (``check_session_store``), helpers for
tool plugins (one call through the real pipeline, processes that must be gone), the replay of a
recorded session as a test, and pytest fixtures."""

from dsh_core.testing._conformance import ConformanceScript as ConformanceScript
from dsh_core.testing._conformance import ScriptedConformance as ScriptedConformance
from dsh_core.testing._conformance import check_llm_adapter as check_llm_adapter
from dsh_core.testing._processes import is_alive as is_alive
from dsh_core.testing._processes import pids_running as pids_running
from dsh_core.testing._processes import read_fifo as read_fifo
from dsh_core.testing._processes import wait_gone as wait_gone
from dsh_core.testing._recording import RecordingError as RecordingError
from dsh_core.testing._replay import DEFAULT_MODEL_INFO as DEFAULT_MODEL_INFO
from dsh_core.testing._replay import ReplayReport as ReplayReport
from dsh_core.testing._replay import assert_replay_matches as assert_replay_matches
from dsh_core.testing._replay import replay_session as replay_session
from dsh_core.testing._replay_compare import Divergence as Divergence
from dsh_core.testing._scripted import Reply as Reply
from dsh_core.testing._scripted import ScriptedModel as ScriptedModel
from dsh_core.testing._store_kit import STORE_CASES as STORE_CASES
from dsh_core.testing._store_kit import check_session_store as check_session_store
from dsh_core.testing._tools import call_tool as call_tool
from dsh_core.testing._tools import result_text as result_text

__all__ = [
    "DEFAULT_MODEL_INFO",
    "STORE_CASES",
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
    "check_session_store",
    "is_alive",
    "pids_running",
    "read_fifo",
    "replay_session",
    "result_text",
    "wait_gone",
]
