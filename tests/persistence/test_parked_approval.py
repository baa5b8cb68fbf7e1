"""A parked turn survives a restart (SPEC §10.1), on every backend: a child process waits for approval and is
SIGKILLed; this process resumes the session, the same call is pending again, and once it is resolved the call
runs (once) and the turn goes on with no model call repeated. A turn that is not parked is repaired as before.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from dsh_core import Ask, Context, ToolExecution, hookimpl, tool
from dsh_core.testing import ScriptedModel

from .backends import MODEL, Backend

pytestmark = pytest.mark.anyio

#: runs an agent whose ``write`` call waits for approval, says ``PARKED <pid>`` once the request is durable,
#: then waits to be killed (no answerer is loaded)
CHILD = textwrap.dedent(
    """
    import importlib
    import json
    import os
    import sys

    import anyio
    from dsh_core import AgentOptions, Ask, Harness, hookimpl, tool
    from dsh_core.testing import ScriptedModel

    module, _, cls = sys.argv[1].partition(":")
    PLUGIN = getattr(importlib.import_module(module), cls)
    NAME, TABLE, MARKS = sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]

    @tool
    def write(text: str) -> str:
        \"\"\"Write text.\"\"\"
        with open(MARKS, "a") as marks:
            marks.write(text + "\\n")
        return "written"

    class Asking:
        name = "asking"

        def __init__(self):
            self.requested = anyio.Event()

        @hookimpl
        def dsh_tools_pre_execute(self, execution):
            return Ask("writing needs a yes") if execution.name == "write" else None

        @hookimpl
        def dsh_approval_answer(self, execution, request):
            self.requested.set()  # asked after the request is durable
            return None

    async def main():
        asking = Asking()
        model = ScriptedModel([ScriptedModel.tool_call("write", {"text": "hello"}, text="Writing.")])
        async with Harness(config={"plugins": {NAME: TABLE}}, plugins=[PLUGIN(), asking], autoload=False) as ctx:
            ctx.llm.register_adapter("scripted", model)
            ctx.tools.register(write)
            handle = await ctx.agents.create("parked", agent_options=AgentOptions(model="scripted/test"))
            handle.agent.send("write hello")
            await asking.requested.wait()
            os.write(1, f"PARKED {os.getpid()}\\n".encode())
            await anyio.sleep_forever()

    anyio.run(main, backend=sys.argv[5])
    """
)


class Asking:
    """Asks before every ``write``; counts what ran; sets ``requested`` when a request is logged."""

    name = "asking"

    def __init__(self, marks: Path) -> None:
        self.marks = marks
        self.requested = anyio.Event()

    def start(self, ctx: Context) -> None:
        @tool
        def write(text: str) -> str:
            """Write text."""
            with self.marks.open("a") as marks:
                marks.write(text + "\n")
            return "written"

        ctx.tools.register(write)

    @hookimpl
    def dsh_tools_pre_execute(self, execution: ToolExecution) -> Ask | None:
        return Ask("writing needs a yes") if execution.name == "write" else None

    @hookimpl
    def dsh_approval_answer(self, execution: ToolExecution, request: Any) -> None:
        self.requested.set()


async def park_and_kill(backend: Backend, marks: Path, anyio_backend: str) -> None:
    """Run the child until its call waits for approval, then SIGKILL it."""
    table = json.dumps(backend.table(batch_delay=5.0))  # a long window: only the §9.1 rule makes it durable
    command = [sys.executable, "-c", CHILD, backend.plugin_path, backend.name, table, str(marks), anyio_backend]
    async with await anyio.open_process(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE) as process:
        assert process.stdout is not None
        lines = BufferedByteReceiveStream(process.stdout)
        with anyio.fail_after(60):
            line = (await lines.receive_until(b"\n", 4096)).decode()
        kind, pid = line.split()
        assert kind == "PARKED"
        os.kill(int(pid), signal.SIGKILL)
        await process.wait()
    with anyio.fail_after(30):
        await backend.wait_released("parked")


async def test_a_parked_turn_survives_a_sigkill_and_goes_on_once_resolved(
    backend: Backend, anyio_backend: str, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    await park_and_kill(backend, marks, anyio_backend)
    stored = backend.stored("parked")
    assert [e.type for e in stored][-2:] == ["tool/call", "approval/requested"]  # durable despite the 5 s window
    model = ScriptedModel([ScriptedModel.text("Done.")])
    asking = Asking(marks)
    async with backend.harness(model, plugins=(asking,)) as ctx:
        loaded = await ctx.session_persistence.load("parked")
        assert [e.to_json() for e in loaded.events] == [e.to_json() for e in stored]  # nothing repaired
        ctx.session_persistence.release("parked")
        async with await ctx.agents.resume("parked", agent_options=MODEL) as handle:
            agent = handle.agent
            (pending,) = agent.pending_approvals()  # pending again at once, before anyone answers
            assert pending.call_id == "call_1"
            assert pending.tool == "write"
            assert dict(pending.arguments) == {"text": "hello"}
            assert pending.seq == stored[-1].seq
            with anyio.fail_after(10):
                await asking.requested.wait()  # asked again, for the same request
            assert not marks.exists()  # nothing ran while it was parked
            await agent.resolve_approval("call_1", "once")
            with anyio.fail_after(10):
                await agent.when_idle()
            events = list(agent.session.events)
    assert marks.read_text() == "hello\n"  # the call ran once
    assert len(model.requests) == 1  # no model call repeated: only the step after the tool result
    assert model.requests[0].messages[-1].call_id == "call_1"
    types = [e.type for e in events]
    assert types.count("turn/start") == 1
    assert types.count("approval/requested") == 1
    assert types.count("tool/call") == 1
    after = types[len(stored) :]
    assert after[:2] == ["approval/resolved", "tool/result"]
    assert events[-1].type == "turn/end"
    assert events[-1].data == {"turn": 1, "reason": {"kind": "completed"}}
    result = next(e for e in events if e.type == "tool/result")
    assert "error_code" not in result.data
    # and what the resumed agent lived is what is stored
    assert [e.to_json() for e in backend.stored("parked")] == [e.to_json() for e in events]


async def test_cancel_of_a_reopened_parked_turn_resolves_it_cancelled(
    backend: Backend, anyio_backend: str, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    await park_and_kill(backend, marks, anyio_backend)
    model = ScriptedModel()
    asking = Asking(marks)
    async with backend.harness(model, plugins=(asking,)) as ctx:
        async with await ctx.agents.resume("parked", agent_options=MODEL) as handle:
            agent = handle.agent
            with anyio.fail_after(10):
                await asking.requested.wait()
            agent.cancel()
            with anyio.fail_after(10):
                await agent.when_idle()
            events = list(agent.session.events)
    resolved = next(e for e in events if e.type == "approval/resolved")
    assert (resolved.data["decision"], resolved.data["by"]) == ("cancelled", "cancel")
    assert events[-1].data == {"turn": 1, "reason": {"kind": "aborted"}}
    assert model.requests == []
    assert not marks.exists()


async def test_a_turn_parked_when_the_harness_stops_is_reopened_by_the_next_one(
    backend: Backend, tmp_path: Path
) -> None:
    """A graceful stop while a call waits leaves the turn parked (no turn/end, the request unresolved)."""
    marks = tmp_path / "marks"
    asking = Asking(marks)
    first = ScriptedModel([ScriptedModel.tool_call("write", {"text": "later"})])
    async with backend.harness(first, plugins=(asking,)) as ctx:
        handle = await ctx.agents.create("parked", agent_options=MODEL)
        handle.agent.send("write later")
        with anyio.fail_after(10):
            await asking.requested.wait()
    stored = backend.stored("parked")
    assert [e.type for e in stored][-2:] == ["tool/call", "approval/requested"]
    assert "turn/end" not in [e.type for e in stored]
    model = ScriptedModel([ScriptedModel.text("Done.")])
    asking = Asking(marks)
    async with backend.harness(model, plugins=(asking,)) as ctx:
        async with await ctx.agents.resume("parked", agent_options=MODEL) as handle:
            agent = handle.agent
            assert [p.call_id for p in agent.pending_approvals()] == ["call_1"]
            await agent.resolve_approval("call_1", "once", by="serve")
            with anyio.fail_after(10):
                await agent.when_idle()
            events = list(agent.session.events)
    assert marks.read_text() == "later\n"
    assert len(model.requests) == 1
    assert events[-1].data == {"turn": 1, "reason": {"kind": "completed"}}
