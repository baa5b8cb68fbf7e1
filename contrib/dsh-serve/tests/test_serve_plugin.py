"""The package's front, its entry points and its configuration table."""

from __future__ import annotations

import importlib.metadata as importlib_metadata
import subprocess
import sys

import dsh_serve
import pytest
from dsh_serve import ServeConfig, ServePlugin

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
