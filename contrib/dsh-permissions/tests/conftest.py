"""Fixtures: a workspace, a harness factory with workspace + permissions, and whether bwrap works here."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, TypeAlias

import pytest
from dsh_permissions import PermissionsPlugin
from dsh_permissions._sandbox import bwrap_argv
from dsh_workspace import WorkspacePlugin

from dsh_core import Context, Harness

#: ``async with start(mode=..., rules=[...], sandbox=..., plugins=[...]) as ctx:``
Start: TypeAlias = Callable[..., AbstractAsyncContextManager[Context]]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace (its real path), with a sibling ``outside`` directory holding a secret."""
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("top secret\n")
    return workspace


@pytest.fixture
def start() -> Start:
    """Start a harness with the workspace tools, the permissions plugin configured so, and ``plugins``."""

    @asynccontextmanager
    async def run(plugins: Sequence[object] = (), **permissions: Any) -> AsyncIterator[Context]:
        config = {"plugins": {"permissions": permissions}}
        async with Harness(
            config=config, plugins=[WorkspacePlugin, PermissionsPlugin, *plugins], autoload=False
        ) as ctx:
            yield ctx

    return run


@pytest.fixture(scope="session")
def bwrap_problem() -> str | None:
    """Why bubblewrap cannot confine commands on this machine, or ``None`` when it can."""
    executable = shutil.which("bwrap")
    if executable is None:
        return "bubblewrap (bwrap) is not installed"
    probe = subprocess.run(
        bwrap_argv(executable, ["true"], cwd="/", writable=False),
        capture_output=True,
        check=False,
        timeout=30,
    )
    if probe.returncode != 0:
        return f"bwrap failed its probe: {probe.stderr.decode(errors='replace').strip()}"
    return None


@pytest.fixture
def host_dir() -> Iterator[Path]:
    """A writable directory outside the workspace and outside /tmp (the sandbox hides /tmp)."""
    path = Path(tempfile.mkdtemp(prefix="dsh-permissions-test-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
