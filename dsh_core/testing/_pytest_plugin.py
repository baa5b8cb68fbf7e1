"""pytest fixtures for plugin authors: start a Harness with chosen plugins and no autoload.

Installed as a pytest plugin (entry point ``pytest11``). Override ``dsh_plugins`` and
``dsh_config`` in a test module, then take ``dsh_ctx``; or call ``start_harness(...)`` for
several harnesses in one test. Everything started is stopped at teardown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest

from dsh_core.host._context import Context
from dsh_core.host._harness import Harness


@pytest.fixture
def dsh_plugins() -> Sequence[object]:
    """Plugins for ``dsh_ctx`` besides the root distribution's; override in a test module."""
    return ()


@pytest.fixture
def dsh_config() -> Mapping[str, Any]:
    """Configuration for ``dsh_ctx``; override in a test module."""
    return {}


@pytest.fixture
def start_harness() -> Callable[..., AbstractAsyncContextManager[Context]]:
    """``async with start_harness(plugins=[...], config={...}) as ctx:`` — autoload off."""

    @asynccontextmanager
    async def start(
        plugins: Sequence[object] = (), config: Mapping[str, Any] | None = None, autoload: bool = False
    ) -> AsyncIterator[Context]:
        async with Harness(config=config, plugins=plugins, autoload=autoload) as ctx:
            yield ctx

    return start


@pytest.fixture
async def dsh_ctx(dsh_plugins: Sequence[object], dsh_config: Mapping[str, Any]) -> AsyncIterator[Context]:
    """A running Harness's root context with ``dsh_plugins`` and ``dsh_config``; stopped afterwards."""
    async with Harness(config=dsh_config, plugins=dsh_plugins, autoload=False) as ctx:
        yield ctx
