"""spill: large results stored with the session, a preview for the model, read_output exact, after a SIGKILL too."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from dsh_persistence_jsonl import PersistencePlugin
from dsh_spill import SpillPlugin, SpillStored
from dsh_workspace import WorkspacePlugin

from dsh_core import AgentOptions, Harness, ToolError, ToolExecution, tool
from dsh_core.testing import ScriptedModel, call_tool, kill_when_ready, result_text

pytestmark = pytest.mark.anyio

MODEL = AgentOptions(model="scripted/x")
#: 50,000 characters, many of them two or three bytes long in UTF-8: offsets count characters
BIG = "".join(f"line {n}: größe ≈ {n * 7}\n" for n in range(2000))


@tool
def dump(size: int = 0, fail: bool = False) -> str:
    """Print a lot."""
    text = BIG if not size else "x" * size
    if fail:
        raise ToolError(text)
    return text


def _results(events: Any) -> list[Any]:
    return [event for event in events if event.type == "tool/result"]


def _text(event: Any) -> str:
    return "".join(block["text"] for block in event.data["message"]["content"])


def _read(locator: str, **more: int) -> Any:
    return ScriptedModel.tool_call("read_output", {"locator": locator, **more})


async def _run(replies: list[Any], config: dict[str, Any] | None = None) -> tuple[list[Any], ScriptedModel]:
    model = ScriptedModel(replies)
    async with Harness(config=config, plugins=[SpillPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        ctx.tools.register(dump)
        async with await ctx.agents.create("spilly", agent_options=MODEL) as handle:
            await handle.agent.run("dump it")
            return list(handle.agent.session.events), model


async def test_a_large_result_is_stored_and_previewed() -> None:
    """The model sees head and tail naming the locator; the log keeps the text and the tool/result says where."""
    events, model = await _run([ScriptedModel.tool_call("dump"), ScriptedModel.text("seen")])
    (stored,) = [event for event in events if event.type == SpillStored.type]
    (result,) = _results(events)
    assert stored.seq < result.seq
    size = len(BIG.encode())
    assert size > 32 * 1024 > len(BIG) / 2
    locator = stored.data["locator"]
    assert dict(result.data["spilled"]) == {"locator": locator, "bytes": size}
    assert (stored.data["text"], stored.data["bytes"], stored.data["tool"]) == (BIG, size, "dump")
    shown = _text(result)
    assert len(shown.encode()) < 4000
    assert f'read_output with locator "{locator}"' in shown
    assert BIG[:1000] in shown
    assert shown.endswith(BIG[-1000:])
    assert model.requests[1].messages[-1].content[0].text == shown  # what the model saw


async def test_read_output_returns_exactly_the_characters_asked_for() -> None:
    """offset and limit count characters of the original text; the default is the first 32 KiB."""
    stored_events, _ = await _run([ScriptedModel.tool_call("dump"), ScriptedModel.text("stored")])
    locator = next(event.data["locator"] for event in stored_events if event.type == SpillStored.type)
    events, _ = await _run_reads(
        [
            _read(locator),
            _read(locator, offset=12345, limit=777),
            _read(locator, offset=len(BIG) - 10),
            _read(locator, offset=len(BIG) + 1),
            _read("nope"),
            _read(locator, offset=-1),
        ],
        stored_events=stored_events,
    )
    reads = _results(events)[1:]
    texts = [_text(event) for event in reads]
    codes = [event.data.get("error_code") for event in reads]
    assert texts[0] == BIG[:32768]
    assert texts[1] == BIG[12345 : 12345 + 777]
    assert texts[2] == BIG[-10:]
    assert codes == [None, None, None, "TOOL_ERROR", "TOOL_ERROR", "INVALID_ARGS"]
    assert f"that output has {len(BIG)} characters" in texts[3]
    assert f"The locators of this session: {locator}." in texts[4]
    assert all("spilled" not in event.data for event in reads)  # read_output is never spilled


async def _run_reads(reads: list[Any], stored_events: list[Any]) -> tuple[list[Any], ScriptedModel]:
    """Seed a session with ``stored_events`` (a spill and its result) and make the model read it back."""
    model = ScriptedModel([*reads, ScriptedModel.text("read")])
    async with Harness(plugins=[SpillPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        ctx.tools.register(dump)
        async with await ctx.agents.create("reader", agent_options=MODEL) as handle:
            session = handle.agent.session
            for event in stored_events:
                if event.type == SpillStored.type:
                    session.append(event.type, event.data)
            session.append(
                "tool/result", next(event for event in stored_events if event.type == "tool/result").data
            )
            await handle.agent.run("read it")
            return list(session.events), model


async def test_small_results_and_calls_outside_a_session_pass_untouched() -> None:
    """Under the limit nothing is stored; with no session the output stays whole."""
    events, _ = await _run([ScriptedModel.tool_call("dump", {"size": 32 * 1024}), ScriptedModel.text("ok")])
    (result,) = _results(events)
    assert "spilled" not in result.data
    assert _text(result) == "x" * 32 * 1024
    assert not [event for event in events if event.type == SpillStored.type]
    async with Harness(plugins=[SpillPlugin()], autoload=False) as ctx:
        ctx.tools.register(dump)
        whole = await call_tool(ctx, "dump")
        assert result_text(whole) == BIG


async def test_an_error_result_is_spilled_with_its_code() -> None:
    """A large error keeps is_error and its code; only the text is replaced."""
    events, _ = await _run([ScriptedModel.tool_call("dump", {"fail": True}), ScriptedModel.text("ok")])
    (result,) = _results(events)
    assert result.data["error_code"] == "TOOL_ERROR"
    assert result.data["message"]["is_error"] is True
    (stored,) = [event for event in events if event.type == SpillStored.type]
    assert stored.data["text"] == "Error: " + BIG
    assert result.data["spilled"]["locator"] == stored.data["locator"]


async def test_the_limit_comes_from_config() -> None:
    """``max_inline_bytes`` is the threshold, in UTF-8 bytes."""
    config = {"plugins": {"spill": {"max_inline_bytes": 1000, "preview_chars": 200}}}
    events, _ = await _run([ScriptedModel.tool_call("dump", {"size": 1001}), ScriptedModel.text("ok")], config)
    (result,) = _results(events)
    assert result.data["spilled"]["bytes"] == 1001


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ({"max_inline_bytes": 0}, "max_inline_bytes must be a whole number greater than 0"),
        ({"max_inline_bytes": 1000, "preview_chars": 300}, "preview_chars (300) may take up to 1200 bytes"),
    ],
)
async def test_bad_config_is_refused_at_start(table: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        async with Harness(config={"plugins": {"spill": table}}, plugins=[SpillPlugin()], autoload=False):
            pass


async def test_a_real_file_read_is_spilled_and_read_back(tmp_path: Path) -> None:
    """read_file of a large workspace file: the preview, then read_output gives the tool's text whole."""
    (tmp_path / "big.log").write_text(BIG)
    async with Harness(plugins=[SpillPlugin(), WorkspacePlugin()], autoload=False) as ctx:
        whole = result_text(await call_tool(ctx, "read_file", tmp_path, path="big.log"))
    assert len(whole.encode()) > 32 * 1024
    model = ScriptedModel([ScriptedModel.tool_call("read_file", {"path": "big.log"}), ScriptedModel.text("ok")])
    async with Harness(plugins=[SpillPlugin(), WorkspacePlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("files", agent_options=MODEL, meta={"cwd": str(tmp_path)}) as handle:
            await handle.agent.run("read the log")
            (result,) = _results(handle.agent.session.events)
            locator = result.data["spilled"]["locator"]
            reads = await _read_in_pieces(ctx, handle.agent, locator, len(whole))
    assert reads == whole


async def _read_in_pieces(ctx: Any, agent: Any, locator: str, length: int) -> str:
    """read_output through the pipeline as the agent's call, in pieces of 10,000 characters."""
    pieces = []
    for offset in range(0, length, 10_000):
        execution = ToolExecution(
            call_id=f"r{offset}",
            name="read_output",
            arguments=json.dumps({"locator": locator, "offset": offset, "limit": 10_000}),
            agent_id=agent.id,
            session_id=agent.session.id,
        )
        pieces.append(result_text(await ctx.tools.execute(execution)))
    return "".join(pieces)


#: a process that spills one output, then hangs in a tool until it is SIGKILLed
DOOMED = textwrap.dedent(
    """
    import sys
    import anyio
    from dsh_core import AgentOptions, Harness, ToolExecution, tool
    from dsh_core.testing import ScriptedModel
    from dsh_persistence_jsonl import PersistencePlugin
    from dsh_spill import SpillPlugin

    BIG = "".join(f"line {n}: größe ≈ {n * 7}\\n" for n in range(2000))

    @tool
    def dump() -> str:
        \"\"\"Print a lot.\"\"\"
        return BIG

    @tool
    async def hang(execution: ToolExecution) -> str:
        \"\"\"Hang until killed.\"\"\"
        await execution.ctx.sessions.flush(execution.ctx.sessions.get(execution.session_id))
        print("READY", flush=True)
        await anyio.sleep_forever()
        return "never"

    async def main(root: str) -> None:
        config = {"plugins": {"persistence-jsonl": {"root": root}}}
        model = ScriptedModel([ScriptedModel.tool_call("dump"), ScriptedModel.tool_call("hang")])
        async with Harness(config=config, plugins=[PersistencePlugin(), SpillPlugin()], autoload=False) as ctx:
            ctx.llm.register_adapter("scripted", model)
            ctx.tools.register(dump)
            ctx.tools.register(hang)
            handle = await ctx.agents.create("doomed", agent_options=AgentOptions(model="scripted/x"))
            await handle.agent.run("dump, then hang")

    anyio.run(main, sys.argv[1])
    """
)


async def test_a_spilled_output_survives_a_sigkill_and_resume(tmp_path: Path) -> None:
    """After a SIGKILL, the resumed session's read_output returns the original text exactly."""
    await kill_when_ready(DOOMED, str(tmp_path))
    config = {"plugins": {"persistence-jsonl": {"root": str(tmp_path)}}}
    async with Harness(config=config, plugins=[PersistencePlugin(), SpillPlugin()], autoload=False) as ctx:
        model = ScriptedModel()
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.resume("doomed", agent_options=MODEL) as handle:
            (result,) = [e for e in _results(handle.agent.session.events) if "spilled" in e.data]
            locator = result.data["spilled"]["locator"]
            model.add(_read(locator, offset=0, limit=len(BIG)), ScriptedModel.text("got it"))
            await handle.agent.run("read the dump back")
            last = _results(handle.agent.session.events)[-1]
            assert "error_code" not in last.data
            assert _text(last) == BIG
