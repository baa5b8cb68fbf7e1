"""Fixtures: a workspace directory and a harness running the workspace plugin."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from dsh_workspace import WorkspacePlugin

from dsh_core import Context, Harness


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace directory (its real path), with a sibling ``outside`` directory next to it."""
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("top secret\n")
    return workspace


@pytest.fixture
def workspace_config() -> dict[str, Any]:
    """``[plugins.workspace]`` for ``ctx``; override in a module or with indirect parametrization."""
    return {}


@pytest.fixture
async def ctx(workspace_config: dict[str, Any]) -> AsyncIterator[Context]:
    """A running harness with the workspace tools and nothing else."""
    config = {"plugins": {"workspace": workspace_config}}
    async with Harness(config=config, plugins=[WorkspacePlugin], autoload=False) as root:
        yield root
