"""Fixtures: the fake OpenAI-compatible server, an isolated environment and a project pointing at the server."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from .cli_kit import FakeLlm, project_toml


@pytest.fixture
def llm() -> Iterator[FakeLlm]:
    server = FakeLlm()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def free_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def dsh_env(tmp_path: Path) -> dict[str, str]:
    """An environment for ``dsh`` with HOME and the XDG directories in ``tmp_path``, and no API keys."""
    home = tmp_path / "home"
    home.mkdir()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.endswith("_API_KEY") and not key.startswith(("DSH_", "XDG_"))
    }
    # the host's own block list passes through: it is how a venv with a broken plugin is tested
    if "DSH_DISABLE_PLUGINS" in os.environ:
        env["DSH_DISABLE_PLUGINS"] = os.environ["DSH_DISABLE_PLUGINS"]
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        NO_COLOR="1",
        PROMPT_TOOLKIT_NO_CPR="1",
        TERM="xterm-256color",
        COLUMNS="120",
        LINES="40",
    )
    return env


@pytest.fixture
def project(tmp_path: Path, llm: FakeLlm) -> Path:
    """A workspace whose ``dsh.toml`` points the ``local`` provider at the fake server."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "dsh.toml").write_text(project_toml(llm.base_url, tmp_path / "sessions"), encoding="utf-8")
    (root / "notes.txt").write_text("bananas are yellow\n", encoding="utf-8")
    return root
