"""``dsh serve`` and ``dsh web`` as a user runs them: a real process, its stderr, real HTTP (SPEC §10.2)."""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from dsh_serve._command import resolve_token, should_open_browser
from dsh_serve._server import is_loopback

pytestmark = pytest.mark.anyio

DSH = str(Path(sys.executable).with_name("dsh"))
URL = re.compile(r"^(http://127\.0\.0\.1:(\d+)/)(#token=(\S+))?$")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "dsh.toml").write_text(
        f'[plugins.persistence-jsonl]\nroot = "{tmp_path / "sessions"}"\n', encoding="utf-8"
    )
    return root


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "XDG_", "SSH_")) and k != "DISPLAY"}
    clean.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".data"))
    return clean


async def _url_line(process: Process) -> tuple[str, list[str]]:
    assert process.stderr is not None
    lines = BufferedByteReceiveStream(process.stderr)
    seen: list[str] = []
    with anyio.fail_after(30):
        while True:
            line = (await lines.receive_until(b"\n", 1 << 16)).decode()
            seen.append(line)
            if URL.match(line):
                return line, seen


async def test_serve_prints_a_token_url_and_stops_cleanly_on_sigterm(workspace: Path, env: dict[str, str]) -> None:
    """The generated token's URL is on stderr; the API answers with it, not without; SIGTERM exits 0."""
    async with await anyio.open_process([DSH, "serve", "--port", "0"], cwd=workspace, env=env) as process:
        line, seen = await _url_line(process)
        match = URL.match(line)
        assert match is not None, seen
        assert match.group(4), seen
        base, token = match.group(1), match.group(4)
        async with httpx.AsyncClient(base_url=base) as client:
            refused = await client.get("/api/sessions")
            created = await client.post("/api/sessions", json={}, headers={"Authorization": f"Bearer {token}"})
            listed = await client.get("/api/sessions", headers={"Authorization": f"Bearer {token}"})
            page = await client.get("/")
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(30):
            code = await process.wait()
    assert refused.status_code == 401
    assert created.status_code == 201
    assert [s["id"] for s in listed.json()["sessions"]] == [created.json()["id"]]
    assert page.status_code == 200
    assert code == 0


async def test_a_configured_token_is_used_and_not_printed(workspace: Path, env: dict[str, str]) -> None:
    """``DSH_SERVE_TOKEN`` is the token; the printed URL does not carry it."""
    env = {**env, "DSH_SERVE_TOKEN": "my-own-token"}
    async with await anyio.open_process([DSH, "web", "--no-open", "--port", "0"], cwd=workspace, env=env) as process:
        line, _ = await _url_line(process)
        match = URL.match(line)
        assert match is not None
        assert match.group(3) is None
        async with httpx.AsyncClient(base_url=match.group(1)) as client:
            ok = await client.get("/api/sessions", headers={"Authorization": "Bearer my-own-token"})
        process.send_signal(signal.SIGINT)
        with anyio.fail_after(30):
            code = await process.wait()
    assert ok.status_code == 200
    assert code == 0


async def test_a_non_loopback_bind_without_a_token_refuses_to_start(workspace: Path, env: dict[str, str]) -> None:
    """Listening on all interfaces with a generated token would hand the sessions to the network."""
    result = await anyio.run_process([DSH, "serve", "--host", "0.0.0.0", "--port", "0"], cwd=workspace, env=env, check=False)
    assert result.returncode == 3
    assert b"refusing to listen on 0.0.0.0" in result.stderr
    assert b"--token" in result.stderr


def test_tokens_come_from_the_flag_the_config_or_the_environment() -> None:
    """The first given wins; none given: a fresh random token, marked as generated."""
    assert resolve_token("flag", "config", {"DSH_SERVE_TOKEN": "env"}) == ("flag", True)
    assert resolve_token(None, "config", {"DSH_SERVE_TOKEN": "env"}) == ("config", True)
    assert resolve_token(None, None, {"DSH_SERVE_TOKEN": "env"}) == ("env", True)
    first, given = resolve_token(None, None, {})
    second, _ = resolve_token(None, None, {})
    assert not given
    assert len(first) >= 32
    assert first != second


def test_the_browser_opens_only_on_a_local_launch_with_a_display() -> None:
    """Over SSH, or on Linux without X11/Wayland, ``dsh web`` only prints the URL."""
    assert should_open_browser({"DISPLAY": ":0"}, "linux")
    assert should_open_browser({"WAYLAND_DISPLAY": "wayland-0"}, "linux")
    assert not should_open_browser({}, "linux")
    assert not should_open_browser({"DISPLAY": ":0", "SSH_CONNECTION": "1 2 3 4"}, "linux")
    assert should_open_browser({}, "darwin")
    assert not should_open_browser({"SSH_TTY": "/dev/pts/1"}, "darwin")


def test_loopback_addresses() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.8.0.1", "localhost", "::1", "[::1]"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.0.2.1", "example.com"))
