"""Every async test runs on asyncio and on trio; a test may take a program off PATH (``path_without``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def path_without(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    """``path_without("bwrap")``: ``PATH`` becomes one directory of links to every program on it but those.

    This is how a test sees a machine where a tool is not installed, without uninstalling it.
    Returns the new ``PATH``; the old one comes back after the test.
    """

    def make(*missing: str) -> str:
        farm = tmp_path_factory.mktemp("path-without")
        for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
            try:
                entries = list(os.scandir(directory or "."))
            except OSError:
                continue
            for entry in entries:
                link = farm / entry.name
                # The first directory on PATH with a name wins, as for a lookup.
                if entry.name not in missing and not os.path.lexists(link):
                    link.symlink_to(Path(directory or ".").resolve() / entry.name)
        monkeypatch.setenv("PATH", str(farm))
        return str(farm)

    return make
