"""The package's front, its entry point, its defaults, and the error when the SDK is missing."""

from __future__ import annotations

import sys

import dsh_otel
import importlib_metadata
import pytest
from dsh_otel import OtelConfig, OtelPlugin

from dsh_core import ConfigError, Harness

pytestmark = pytest.mark.anyio


def test_front_is_exact() -> None:
    """The package exports the plugin and its config, and nothing else."""
    assert dsh_otel.__all__ == ["OtelConfig", "OtelPlugin"]
    assert set(dsh_otel.__all__) == {name for name in vars(dsh_otel) if not name.startswith("_")}


def test_entry_point_is_registered() -> None:
    """The distribution registers `otel` in the `dsh` entry-point group."""
    [entry] = [ep for ep in importlib_metadata.entry_points(group="dsh") if ep.name == "otel"]
    assert entry.load() is OtelPlugin
    assert entry.dist is not None
    assert entry.dist.name == "dsh-harness-otel"


def test_only_the_api_is_a_hard_dependency() -> None:
    """opentelemetry-api is required; the SDK and the exporters come with extras."""
    requires = importlib_metadata.requires("dsh-harness-otel") or []
    plain = [req for req in requires if "extra ==" not in req]
    assert any(req.startswith("opentelemetry-api") for req in plain)
    assert not any(req.startswith(("opentelemetry-sdk", "opentelemetry-exporter")) for req in plain)
    extras = [req for req in requires if "extra ==" in req]
    assert any(req.startswith("opentelemetry-exporter-otlp-proto-http") and "'otlp'" in req for req in extras)


def test_defaults() -> None:
    """global exporter, no content, service dsh."""
    config = OtelConfig()
    assert (config.exporter, config.capture_content, config.service_name, config.endpoint) == (
        "global",
        False,
        "dsh",
        None,
    )


async def test_a_missing_sdk_is_a_config_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """exporter = "otlp" without the SDK installed: a ConfigError saying which extra to install."""
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.metrics", None)
    config = {"plugins": {"otel": {"exporter": "otlp"}}}
    with pytest.raises(ConfigError, match=r"pip install 'dsh-harness-otel\[otlp\]'") as caught:
        async with Harness(config=config, plugins=[OtelPlugin()], autoload=False):
            pass
    assert caught.value.path == "plugins.otel.exporter"
