"""The pure parts: the package front, tool names, result conversion, configuration errors, the listing."""

from __future__ import annotations

import io
import json
from typing import Any

import dsh_mcp
import mcp_types
import pytest
from dsh_mcp import ServerConfig, ServerStatus, dsh_tool_name
from dsh_mcp._command import render
from dsh_mcp._results import to_tool_result

from dsh_core import ConfigError, Harness, Image, Text


def test_front_is_exact() -> None:
    """__all__ lists exactly the package's public names."""
    public = {name for name in vars(dsh_mcp) if not name.startswith("_")} - {"annotations"}
    public -= {name for name in public if type(getattr(dsh_mcp, name)).__name__ == "module"}
    assert set(dsh_mcp.__all__) == public


def test_tool_names() -> None:
    """mcp__<server>__<tool>; characters models refuse become '_'; long names stay unique within 64."""
    assert dsh_tool_name("git", "git_status") == "mcp__git__git_status"
    assert dsh_tool_name("fs", "read.file/v2") == "mcp__fs__read_file_v2"
    long_a, long_b = dsh_tool_name("s", "x" * 80 + "a"), dsh_tool_name("s", "x" * 80 + "b")
    assert len(long_a) == len(long_b) == 64
    assert long_a != long_b


def _result(**fields: Any) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult.model_validate(fields)


def test_result_blocks_of_every_kind() -> None:
    """Text and images pass; audio, resources and links become one line of text each."""
    result = to_tool_result(
        _result(
            content=[
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "aGk=", "mimeType": "image/png"},
                {"type": "audio", "data": "aGk=", "mimeType": "audio/wav"},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside"}},
                {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "aGk=", "mimeType": "x/y"}},
                {"type": "resource_link", "uri": "file:///c", "name": "c"},
            ]
        ),
        "mcp__s__t",
    )
    assert result.content[:2] == (Text("hello"), Image(media_type="image/png", data="aGk="))
    texts = [block.text for block in result.content[2:] if isinstance(block, Text)]
    assert texts == [
        "[audio content of type audio/wav, 4 base64 characters, not shown]",
        "[resource file:///a.txt]\ninside",
        "[resource file:///b.bin: x/y, 4 base64 characters, not shown]",
        "[resource link file:///c: c]",
    ]
    assert not result.is_error


def test_structured_content_is_json_only_without_text() -> None:
    """structuredContent becomes JSON text when there is no text, and is left out when there is."""
    alone = to_tool_result(_result(content=[], structuredContent={"n": 1}), "t")
    beside = to_tool_result(
        _result(content=[{"type": "text", "text": "one"}], structuredContent={"n": 1}), "t"
    )
    assert [json.loads(b.text) for b in alone.content if isinstance(b, Text)] == [{"n": 1}]
    assert beside.content == (Text("one"),)


def test_an_error_without_text_says_so() -> None:
    """isError with no text still tells the model which tool failed."""
    result = to_tool_result(_result(content=[], isError=True), "mcp__s__t")
    assert result.error_code == "TOOL_ERROR"
    assert result.content == (Text("Error: tool 'mcp__s__t' failed; its server gave no message."),)


@pytest.mark.parametrize(
    ("servers", "problem"),
    [
        ({"bad name": {"command": "x"}}, "MCP server name 'bad name' must be letters, digits, '_' or '-'"),
        ({"s": {}}, "give either command, for a stdio server, or url"),
        ({"s": {"command": "x", "url": "http://h/mcp"}}, "give either command or url, not both"),
        ({"s": {"url": "ftp://h/mcp"}}, "url must start with http:// or https://"),
        ({"s": {"url": "http://h/mcp", "env": {"A": "b"}}}, "env apply to a stdio server"),
        ({"s": {"command": "x", "headers": {"A": "b"}}}, "headers apply to a streamable-HTTP server"),
        ({"s": {"command": "x", "timeout": 0}}, "timeout must be a positive, finite number of seconds"),
        ({"s": {"command": "x", "protocol": "v9"}}, "expected one of 'auto', 'legacy'"),
        ({"s": {"command": "x", "colour": "red"}}, "unknown key(s) colour"),
    ],
)
@pytest.mark.anyio
async def test_configuration_errors_name_the_problem(servers: dict[str, Any], problem: str) -> None:
    """A bad [plugins.mcp] table stops the harness with a ConfigError naming the key and the problem."""
    with pytest.raises(ConfigError) as raised:
        async with Harness(
            config={"plugins": {"mcp": {"servers": servers}}}, plugins=[dsh_mcp.McpPlugin()], autoload=False
        ):
            pass
    assert problem in str(raised.value)
    assert "plugins.mcp" in str(raised.value)


def test_server_config_in_code() -> None:
    """ServerConfig checks itself when built in code too."""
    assert ServerConfig(url="https://example.invalid/mcp").transport == "http"
    with pytest.raises(ValueError, match="give either command or url"):
        ServerConfig(command="x", url="http://h")


def test_listing() -> None:
    """`dsh mcp` prints each server's state, its tools (read-only ones marked) and any error."""
    statuses = [
        ServerStatus(
            name="git",
            transport="stdio",
            state="running",
            tools=("mcp__git__log", "mcp__git__commit"),
            error=None,
            agent_id=None,
            protocol_version="2026-07-28",
            server_info="mcp-git 1.0",
        ),
        ServerStatus(
            name="web",
            transport="http",
            state="failed",
            tools=(),
            error="ConnectError: refused",
            agent_id=None,
        ),
    ]
    out = io.StringIO()
    render(statuses, {"mcp__git__log"}, out)
    assert out.getvalue().splitlines() == [
        "git  stdio  running  2 tools  (mcp-git 1.0, 2026-07-28)",
        "  mcp__git__log  (read-only)",
        "  mcp__git__commit",
        "web  http   failed",
        "  ConnectError: refused",
    ]
    out = io.StringIO()
    render(statuses, {"mcp__git__log"}, out, as_json=True)
    first = json.loads(out.getvalue().splitlines()[0])
    assert (first["state"], first["read_only_tools"]) == ("running", ["mcp__git__log"])
