"""`dsh mcp`: the servers of the usual configuration layers, with their state and tools."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import DEMO


def _dsh(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.endswith("_API_KEY")}
    env.update(
        HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "config")
    )
    dsh = Path(sys.executable).with_name("dsh")
    return subprocess.run(
        [str(dsh), "mcp", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _config(tmp_path: Path, signals: Path, **extra: Any) -> Path:
    path = tmp_path / "dsh.toml"
    lines = [
        "[plugins.mcp.servers.demo]",
        f"command = {json.dumps(sys.executable)}",
        f"args = {json.dumps([DEMO, '--signals', str(signals)])}",
        'tools = ["echo", "fail"]',
    ]
    for name, table in extra.items():
        lines.append(f"[plugins.mcp.servers.{name}]")
        lines.extend(f"{key} = {json.dumps(value)}" for key, value in table.items())
    path.write_text("\n".join(lines) + "\n")
    return path


def test_dsh_mcp_lists_servers_state_and_tools(tmp_path: Path, signals: Path) -> None:
    """Each server with its transport, state and tools (read-only marked); a failed one with its cause: exit 1."""
    config = _config(
        tmp_path,
        signals,
        ghost={"command": "/nonexistent/mcp-ghost"},
        off={"url": "http://127.0.0.1:9/mcp", "enabled": False},
    )
    done = _dsh(tmp_path, "--config", str(config))
    lines = done.stdout.splitlines()
    assert done.returncode == 1, done.stderr
    assert lines[0].startswith("demo   stdio  running  2 tools  (demo 1.0, ")
    assert lines[1:3] == ["  mcp__demo__echo  (read-only)", "  mcp__demo__fail"]
    assert lines[3] == "ghost  stdio  failed"
    assert "FileNotFoundError" in lines[4]
    assert lines[5] == "off    http   disabled"
    assert len((signals / "starts").read_text().split()) == 1  # started once, and stopped again


def test_dsh_mcp_json_and_success(tmp_path: Path, signals: Path) -> None:
    """--json prints one object per server; with every server running the exit status is 0."""
    done = _dsh(tmp_path, "--config", str(_config(tmp_path, signals)), "--json")
    assert done.returncode == 0, done.stderr
    [demo] = [json.loads(line) for line in done.stdout.splitlines()]
    assert (demo["name"], demo["state"], demo["tools"]) == (
        "demo",
        "running",
        ["mcp__demo__echo", "mcp__demo__fail"],
    )
    assert demo["read_only_tools"] == ["mcp__demo__echo"]


@pytest.mark.anyio
async def test_run_directly(
    tmp_path: Path, signals: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command's run() works when called with the CLI's namespace."""
    import argparse

    from dsh_mcp import _command

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    args = argparse.Namespace(
        config=str(_config(tmp_path, signals)), assignments=["plugins.mcp.servers.demo.timeout=5"], json=True
    )
    status = await _command.run(args)
    [demo] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert status == 0
    assert demo["state"] == "running"
