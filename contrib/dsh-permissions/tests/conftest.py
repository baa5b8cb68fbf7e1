"""Fixtures: a workspace, a harness factory with workspace + permissions, and whether bwrap works here."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, TypeAlias

import anyio
import pytest
from dsh_permissions import BwrapSandbox, PermissionsPlugin
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
    """Why the sandbox cannot give every guarantee on this machine, or ``None`` when it can."""
    sandbox = BwrapSandbox("required", "bwrap", lambda agent: "workspace-write")
    try:
        status = anyio.run(sandbox.status)
    finally:
        sandbox.close()
    if status.available:
        return None
    return f"{status.reason} (missing: {', '.join(status.missing)})"


@pytest.fixture
def host_dir() -> Iterator[Path]:
    """A writable directory outside the workspace and outside /tmp (the sandbox hides /tmp)."""
    path = Path(tempfile.mkdtemp(prefix="dsh-permissions-test-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
