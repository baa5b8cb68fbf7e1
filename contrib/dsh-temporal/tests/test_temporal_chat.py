"""``dsh chat --temporal`` in a real pseudo-terminal, driving a session that a ``dsh worker``
subprocess runs: a streamed answer, Ctrl-C cancelling a turn held on the worker, steering, and
``--resume`` showing the history. The chat has no access to the worker's store (its events come
through the worker)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from .temporal_kit import Cluster, stored_log

pexpect = pytest.importorskip("pexpect")
pytestmark = pytest.mark.anyio

DSH = str(Path(sys.executable).with_name("dsh"))


def _spawn(cluster: Cluster, *args: str) -> Any:
    """``dsh chat --temporal`` with the workers' configuration but a store of its own."""
    config = cluster.config_file({"persistence-jsonl": {"root": str(cluster.tmp / "chat-local-store")}})
    env = {"HOME": str(cluster.tmp), "PATH": "/usr/bin:/bin", "TERM": "xterm", "LANG": "C.UTF-8"}
    if "PYTHONPATH" in os.environ:  # the root conftest's way to the test plugins (``temporal-testkit``)
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    command = ["chat", "--temporal", "--config", str(config), "--model", "scripted/follow", *args]
    child = pexpect.spawn(
        DSH, command, cwd=str(cluster.tmp), env=env, dimensions=(40, 120), encoding="utf-8", timeout=30
    )
    child.linesep = "\r"
    return child


async def _in_thread(call: Callable[..., Any], *args: Any) -> Any:
    return await anyio.to_thread.run_sync(call, *args)


async def test_chat_drives_a_session_on_a_worker(cluster: Cluster) -> None:
    async with cluster.worker() as worker:
        child = _spawn(cluster)
        try:
            await _in_thread(child.expect, r"new session \S*?(\d{8}-\d{6}-[0-9a-f]{6})")
            session_id = child.match.group(1)
            child.sendline("say:hello from the worker")
            await _in_thread(child.expect, "hello from the worker")
            await _in_thread(child.expect, "done")

            child.sendline('tool:hold {"label": "chat"}')
            await worker.wait_for(f"HOLDING {session_id} chat")
            child.sendcontrol("c")
            await _in_thread(child.expect, "cancelled")

            child.sendline("tool:wait_for_steer {}")
            await worker.wait_for(f"WAITING {session_id}")
            child.sendline("look left")
            await _in_thread(child.expect, "steering: seen at the next step")
            await _in_thread(child.expect, "echo: look left")

            child.sendline("/exit")
            await _in_thread(child.expect, re.escape(f"dsh chat --temporal --resume {session_id}"))
            await _in_thread(child.expect, pexpect.EOF)
        except BaseException:
            print("CHAT OUTPUT:", child.before, child.buffer, "\nWORKER:", worker.lines, worker.stderr)
            raise
        finally:
            child.close(force=True)
        assert child.exitstatus == 0

        resumed = _spawn(cluster, "--resume", session_id)
        try:
            await _in_thread(resumed.expect, "hello from the worker")  # the history, read through the worker
            await _in_thread(resumed.expect, rf"resumed session \S*?{session_id}")
            resumed.sendline("say:and once more")
            await _in_thread(resumed.expect, "and once more")
            await _in_thread(resumed.expect, "done")
            resumed.sendline("/exit")
            await _in_thread(resumed.expect, pexpect.EOF)
        finally:
            resumed.close(force=True)
        assert resumed.exitstatus == 0

    log = stored_log(cluster, session_id)
    reasons = [e["data"]["reason"]["kind"] for e in log if e["type"] == "turn/end"]
    assert reasons == ["completed", "aborted", "completed", "completed"]
    assert [e["data"]["message"]["content"][0]["text"] for e in log if e["type"] == "steering/message"] == [
        "look left"
    ]
    assert not (cluster.tmp / "chat-local-store").exists() or not any(
        (cluster.tmp / "chat-local-store").iterdir()
    )
