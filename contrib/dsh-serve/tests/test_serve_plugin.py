"""The package's front, its entry points and its configuration table."""

from __future__ import annotations

import importlib.metadata as importlib_metadata
import os
import subprocess
import sys
import threading
from pathlib import Path

import dsh_serve
import pytest
from dsh_serve import ServeConfig, ServePlugin, open_app
from dsh_serve._server import bind, running_server

from dsh_core import ConfigError, Harness

pytestmark = pytest.mark.anyio


def test_front_is_exact() -> None:
    """The package exports the plugin, its config, and the app over a started harness."""
    assert dsh_serve.__all__ == ["ServeApp", "ServeConfig", "ServePlugin", "open_app"]
    assert dir(dsh_serve) == dsh_serve.__all__
    assert {name for name in vars(dsh_serve) if not name.startswith("_")} <= set(dsh_serve.__all__)
    assert all(getattr(dsh_serve, name) is not None for name in dsh_serve.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        dsh_serve.nothing  # noqa: B018


def test_loading_the_plugin_imports_no_web_stack() -> None:
    """Every harness loads the plugin (``dsh run`` too): it must not import Starlette or pydantic."""
    code = "import dsh_serve, sys; print(sorted(m for m in ('starlette', 'uvicorn', 'pydantic', 'ag_ui', 'sse_starlette') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_entry_points() -> None:
    """``serve`` in the ``dsh`` group; ``serve`` and ``web`` in ``dsh.commands``."""
    (plugin,) = [ep for ep in importlib_metadata.entry_points(group="dsh") if ep.name == "serve"]
    assert plugin.load() is ServePlugin
    commands = {ep.name: ep.load() for ep in importlib_metadata.entry_points(group="dsh.commands")}
    assert commands["serve"].opens_browser is False
    assert commands["web"].opens_browser is True
    assert all(isinstance(commands[name].help, str) for name in ("serve", "web"))


async def test_the_table_is_read_and_checked() -> None:
    """``[plugins.serve]`` fills ``ServeConfig``; a bad value is a ConfigError naming the key."""
    plugin = ServePlugin()
    table = {"token": "t0ken", "allowed_origins": ["https://app.example"], "max_body_bytes": 4096, "heartbeat": 5}
    async with Harness(config={"plugins": {"serve": table}}, plugins=[plugin], autoload=False):
        assert plugin.config == ServeConfig(
            token="t0ken", allowed_origins=("https://app.example",), max_body_bytes=4096, heartbeat=5
        )
    for bad, key in (({"heartbeat": 0}, "heartbeat"), ({"token": "has space"}, "token"), ({"allowed_origins": ["nope"]}, "allowed_origins"), ({"io_niceness": 20}, "io_niceness")):
        with pytest.raises(ConfigError, match=key):
            async with Harness(config={"plugins": {"serve": bad}}, plugins=[ServePlugin()], autoload=False):
                pass


async def test_the_socket_thread_runs_at_io_niceness_and_the_harness_thread_does_not(tmp_path: Path) -> None:
    """uvicorn's thread is not the harness's, and only it is niced (Linux sets nice per thread)."""
    own = os.getpriority(os.PRIO_PROCESS, 0)
    async with Harness(config={}, plugins=[], autoload=False) as ctx:
        config = ServeConfig(io_niceness=7)
        async with open_app(ctx, config=config, token="t", model="scripted/any", cwd=tmp_path) as app:
            with bind("127.0.0.1", 0) as sock:
                async with running_server(app, sock) as running:
                    assert running.thread_id is not None
                    assert running.thread_id != threading.get_native_id()
                    socket_thread = os.getpriority(os.PRIO_PROCESS, running.thread_id)
    assert socket_thread == max(7, own)  # raising one's own nice needs no privilege; lowering it does
    assert os.getpriority(os.PRIO_PROCESS, 0) == own
