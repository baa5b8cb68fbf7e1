"""Helpers for the workspace tests: run one tool call, read its text, and watch processes die.

They live in ``dsh_core.testing`` (shared with the permissions tests); re-exported under the names
these tests use.
"""

from __future__ import annotations

from dsh_core.testing import call_tool as call
from dsh_core.testing import is_alive, pids_running, read_fifo, wait_gone
from dsh_core.testing import result_text as text

__all__ = ["call", "is_alive", "pids_running", "read_fifo", "text", "wait_gone"]
