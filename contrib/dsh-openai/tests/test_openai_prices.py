"""Prices on ModelInfo: the model table's (built in, or given key by key), else the genai-prices registry's."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from dsh_harness_openai import OpenAIPlugin

from dsh_core import ConfigError, Harness
from dsh_core.llm import Prices

pytestmark = pytest.mark.anyio


def _config(providers: dict[str, Any], **plugin: Any) -> dict[str, Any]:
    return {"plugins": {"openai": {"providers": providers, **plugin}}}


async def test_built_in_models_have_their_list_prices() -> None:
    """Every built-in model is priced from the table, in dollars per million tokens."""
    async with Harness(plugins=[OpenAIPlugin()], autoload=False) as ctx:
        assert ctx.llm.model_info("deepseek/deepseek-v4-flash").prices == Prices(0.15, 0.6, 0.003)
        assert ctx.llm.model_info("deepseek/deepseek-chat").prices == Prices(0.15, 0.6, 0.003)  # a retired alias
        assert ctx.llm.model_info("openai/gpt-5").prices == Prices(1.25, 10.0, 0.125)
        for model in ("deepseek/deepseek-v4-pro", "openai/gpt-5-mini", "openai/gpt-4.1"):
            assert ctx.llm.model_info(model).prices is not None


async def test_table_prices_override_key_by_key() -> None:
    """An output_price given for a built-in model replaces that price only; a new model gets its own."""
    providers = {
        "deepseek": {"models": {"deepseek-v4-flash": {"output_price": 0.5}}},
        "local": {
            "base_url": "http://127.0.0.1:9/v1",
            "models": {"qwen3": {"context_window": 32_768, "max_output_tokens": 8192, "input_price": 0.2, "output_price": 0.6}},
        },
    }
    async with Harness(config=_config(providers), plugins=[OpenAIPlugin()], autoload=False) as ctx:
        assert ctx.llm.model_info("deepseek/deepseek-v4-flash").prices == Prices(0.15, 0.5, 0.003)
        assert ctx.llm.model_info("local/qwen3").prices == Prices(0.2, 0.6)


async def test_a_model_with_no_table_price_is_priced_from_the_registry() -> None:
    """gpt-4o declared with limits only: its prices are genai-prices' for openai/gpt-4o, now."""
    from genai_prices import data_snapshot

    providers = {"openai": {"models": {"gpt-4o": {"context_window": 128_000, "max_output_tokens": 16_384}}}}
    async with Harness(config=_config(providers), plugins=[OpenAIPlugin()], autoload=False) as ctx:
        prices = ctx.llm.model_info("openai/gpt-4o").prices
    _, info = data_snapshot.get_snapshot().find_provider_model("gpt-4o", None, "openai", None)
    expected = info.get_prices(datetime.datetime.now(tz=datetime.UTC))
    assert prices == Prices(float(expected.input_mtok), float(expected.output_mtok), float(expected.cache_read_mtok))


async def test_the_registry_can_be_turned_off_and_never_guesses_a_local_model() -> None:
    """price_registry = false leaves a model unpriced; a local server's gpt-4o is not priced as OpenAI's."""
    limits = {"context_window": 128_000, "max_output_tokens": 16_384}
    off = _config({"openai": {"models": {"gpt-4o": limits}}}, price_registry=False)
    async with Harness(config=off, plugins=[OpenAIPlugin()], autoload=False) as ctx:
        assert ctx.llm.model_info("openai/gpt-4o").prices is None
    local = _config({"local": {"base_url": "http://127.0.0.1:9/v1", "models": {"gpt-4o": limits}}})
    async with Harness(config=local, plugins=[OpenAIPlugin()], autoload=False) as ctx:
        assert ctx.llm.model_info("local/gpt-4o").prices is None


@pytest.mark.parametrize(
    ("model", "path"),
    [
        ({"input_price": 1.0}, "plugins.openai.providers.local.models.m.output_price"),
        ({"output_price": 1.0}, "plugins.openai.providers.local.models.m.input_price"),
        ({"cached_input_price": 0.1}, "plugins.openai.providers.local.models.m.cached_input_price"),
        ({"input_price": -1.0, "output_price": 1.0}, "input_price"),
    ],
)
async def test_incomplete_or_negative_prices_are_refused_naming_the_key(model: dict[str, Any], path: str) -> None:
    """Prices go in pairs and are >= 0; a problem is a ConfigError naming the dotted key."""
    table = {"context_window": 1000, "max_output_tokens": 100, **model}
    providers = {"local": {"base_url": "http://127.0.0.1:9/v1", "models": {"m": table}}}
    with pytest.raises(ConfigError, match=path.replace(".", r"\.")):
        async with Harness(config=_config(providers), plugins=[OpenAIPlugin()], autoload=False):
            pass
