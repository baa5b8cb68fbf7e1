"""`dsh sessions` works unchanged on this backend: list, show, repair and delete read the database file."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_core import AgentOptions
from dsh_core.testing import ScriptedModel

from .conftest import HarnessFactory

pytestmark = pytest.mark.anyio

DSH = str(Path(sys.executable).with_name("dsh"))


def dsh(project: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "XDG_")) and not k.endswith("_API_KEY")}
    env.update(HOME=str(home), NO_COLOR="1", COLUMNS="160")
    return subprocess.run([DSH, *args], cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False)


async def test_dsh_sessions_lists_shows_repairs_and_deletes(
    harness: HarnessFactory, database: Path, tmp_path: Path
) -> None:
    """A session stored by a harness is listed, shown, repaired and deleted by the `dsh` command, configured
    with nothing but ``[plugins.persistence-sqlite] path``."""
    async with harness(ScriptedModel(["forty-two"])) as ctx:
        async with await ctx.agents.create("cli-one", agent_options=AgentOptions(model="scripted/x")) as handle:
            await handle.agent.run("what is the answer?")
    project = tmp_path / "project"
    project.mkdir()
    (project / "dsh.toml").write_text(f'[plugins.persistence-sqlite]\npath = "{database}"\n', encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    listed = dsh(project, home, "sessions", "list")
    assert listed.returncode == 0, listed.stderr
    assert "cli-one" in listed.stdout
    assert "what is the answer?" in listed.stdout
    shown = dsh(project, home, "sessions", "show", "cli-one")
    assert shown.returncode == 0, shown.stderr
    assert "forty-two" in shown.stdout
    repaired = dsh(project, home, "sessions", "repair", "cli-one")
    assert repaired.returncode == 0, repaired.stderr
    assert "nothing to repair" in repaired.stdout
    deleted = dsh(project, home, "sessions", "delete", "cli-one")
    assert deleted.returncode == 0, deleted.stderr
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT count(*) FROM dsh_sessions").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM dsh_events").fetchone() == (0,)
    assert not (home / ".local" / "share" / "dsh" / "sessions").exists()  # persistence-jsonl stood aside
