"""Every async test runs on asyncio and on trio; a test may take a program off PATH (``path_without``);
the test suite's own plugins (``tests/plugins``) are discovered in the tests and the processes they start.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

#: where the Makefile installs ``tests/plugins`` (``example``, ``temporal-testkit``): apart from the
#: venv's site-packages, so a user's ``dsh plugins`` never lists them
TEST_PLUGINS = Path(sys.prefix) / "test-plugins"


def pytest_configure(config: pytest.Config) -> None:
    """Put the test plugins on the path, here and (``PYTHONPATH``) in every process a test starts."""
    folder = str(TEST_PLUGINS)
    if not TEST_PLUGINS.is_dir() or folder in sys.path:
        return
    sys.path.append(folder)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (folder, os.environ.get("PYTHONPATH"))))
    importlib.invalidate_caches()


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
