"""Configuration of the ``openai`` plugin: the ``[plugins.openai]`` table and the built-in providers.

The table (SPEC §8)::

    [plugins.openai]
    timeout = 300            # seconds without a byte from the server before a request times out
    connect_timeout = 10

    [plugins.openai.providers.local]           # any OpenAI-compatible server
    base_url = "http://127.0.0.1:8080/v1"
    models = { qwen3 = { context_window = 32768, max_output_tokens = 8192 } }

    [plugins.openai.providers.local.models.qwen3]   # prices per million tokens (optional)
    input_price = 0.2
    cached_input_price = 0.02
    output_price = 0.6

    [plugins.openai.providers.deepseek]        # a built-in provider, overridden key by key
    models = { deepseek-v4-pro = { max_output_tokens = 65536 } }

The user's table is deep-merged over the built-ins (``BUILTIN_PROVIDERS``): a key given replaces
that key only. ``resolve_providers`` turns the merged result into ``ProviderSettings``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, Literal, TypeAlias

import attrs

from dsh_core import ConfigError
from dsh_core.llm import ModelInfo, Prices

__all__ = [
    "BUILTIN_PROVIDERS",
    "Dialect",
    "HttpTransport",
    "ModelConfig",
    "OpenAIConfig",
    "ProviderConfig",
    "ProviderSettings",
    "resolve_providers",
]

#: How a provider deviates from plain OpenAI-compatible chat completions:
#: ``compatible`` (vLLM, llama.cpp, Ollama, ...): ``max_tokens``; reasoning a model produced is sent
#: back on its tool-call messages; ``deepseek``: the ``thinking`` switch, ``reasoning_content`` on
#: every tool-call message, no ``temperature`` while thinking, the retired model aliases;
#: ``openai``: ``max_completion_tokens``, and reasoning is never sent back.
Dialect: TypeAlias = Literal["compatible", "deepseek", "openai"]
#: ``auto``: aiohttp under httpx on asyncio (when ``httpx-aiohttp`` is installed), httpx's own on trio
HttpTransport: TypeAlias = Literal["auto", "httpx"]


def _positive_int(instance: object, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is not None and value <= 0:
        msg = f"{attribute.name} must be a positive number of tokens, got {value}"
        raise ValueError(msg)


def _price(instance: object, attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is not None and not 0 <= value < float("inf"):
        msg = f"{attribute.name} must be a price >= 0 per million tokens, got {value}"
        raise ValueError(msg)


def _positive_seconds(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value > 0:
        msg = f"{attribute.name} must be a positive number of seconds, got {value}"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class ModelConfig:
    """One model's limits in tokens (both required for a model that is not built in) and its prices.

    Prices are in currency units per million tokens (the built-in ones in US dollars);
    ``input_price`` and ``output_price`` go together; ``cached_input_price`` is optional.
    """

    #: tokens the model can attend to (prompt and output together)
    context_window: int | None = attrs.field(default=None, validator=_positive_int)
    #: the largest ``max_tokens`` the model accepts
    max_output_tokens: int | None = attrs.field(default=None, validator=_positive_int)
    #: what a million input tokens cost
    input_price: float | None = attrs.field(default=None, validator=_price)
    #: what a million cached input tokens cost (default: ``input_price``)
    cached_input_price: float | None = attrs.field(default=None, validator=_price)
    #: what a million output tokens cost
    output_price: float | None = attrs.field(default=None, validator=_price)


@attrs.frozen(kw_only=True)
class ProviderConfig:
    """One provider, as given in ``[plugins.openai.providers.<name>]``; absent keys are inherited."""

    #: the API root; requests go to ``{base_url}/chat/completions``
    base_url: str | None = None
    #: the environment variable holding the API key, read at each request; ``""`` means no key
    api_key_env: str | None = None
    #: the provider's flavour of the API (see ``Dialect``); default ``compatible``
    dialect: Dialect | None = None
    #: the models whose limits are known, by the name the provider uses
    models: dict[str, ModelConfig] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class OpenAIConfig:
    """The ``[plugins.openai]`` table."""

    #: extra providers, and overrides of the built-in ``deepseek`` and ``openai``
    providers: dict[str, ProviderConfig] = attrs.field(factory=dict)
    #: seconds to wait for the next bytes (response headers included) before failing ``TIMEOUT``
    timeout: float = attrs.field(default=300.0, validator=_positive_seconds)
    #: seconds to wait for the TCP/TLS connection
    connect_timeout: float = attrs.field(default=10.0, validator=_positive_seconds)
    #: look up the prices of a model with none in the table in the ``genai-prices`` registry
    #: (its data ships with the package: no network)
    price_registry: bool = True
    #: what carries the HTTP requests under httpx (see ``HttpTransport``)
    http_transport: HttpTransport = "auto"


@attrs.frozen(kw_only=True)
class ProviderSettings:
    """A provider after merging: everything its adapter needs, all of it checked."""

    name: str
    base_url: str
    api_key_env: str | None
    dialect: Dialect
    models: Mapping[str, ModelInfo]

    @property
    def endpoint(self) -> str:
        """The URL of the chat completions endpoint."""
        return f"{self.base_url.rstrip('/')}/chat/completions"


def _builtin(
    base_url: str, key: str, dialect: Dialect, models: dict[str, tuple[int, int, float, float, float]]
) -> ProviderConfig:
    return ProviderConfig(
        base_url=base_url,
        api_key_env=key,
        dialect=dialect,
        models={
            name: ModelConfig(
                context_window=c, max_output_tokens=o, input_price=i, output_price=out, cached_input_price=cached
            )
            for name, (c, o, i, out, cached) in models.items()
        },
    )


#: The providers every configuration starts from: (context window, max output tokens, and the list
#: prices in US dollars per million tokens: input, output, cached input), as the providers publish
#: them (checked against genai-prices' data of 2026-11). DeepSeek's peak-hour rates are not modelled.
BUILTIN_PROVIDERS: Final[Mapping[str, ProviderConfig]] = MappingProxyType(
    {
        "deepseek": _builtin(
            "https://api.deepseek.com",
            "DEEPSEEK_API_KEY",
            "deepseek",
            {
                "deepseek-v4-flash": (1_000_000, 384_000, 0.15, 0.6, 0.003),
                "deepseek-v4-pro": (1_000_000, 384_000, 0.66, 1.98, 0.022),
            },
        ),
        "openai": _builtin(
            "https://api.openai.com/v1",
            "OPENAI_API_KEY",
            "openai",
            {
                "gpt-5": (400_000, 128_000, 1.25, 10.0, 0.125),
                "gpt-5-mini": (400_000, 128_000, 0.25, 2.0, 0.025),
                "gpt-4.1": (1_047_576, 32_768, 2.0, 8.0, 0.5),
            },
        ),
    }
)


def _merge(base: ProviderConfig, override: ProviderConfig) -> ProviderConfig:
    models = dict(base.models)
    for name, given in override.models.items():
        known = models.get(name)
        models[name] = given if known is None else _merge_model(known, given)
    return ProviderConfig(
        base_url=override.base_url if override.base_url is not None else base.base_url,
        api_key_env=override.api_key_env if override.api_key_env is not None else base.api_key_env,
        dialect=override.dialect if override.dialect is not None else base.dialect,
        models=models,
    )


def _merge_model(known: ModelConfig, given: ModelConfig) -> ModelConfig:
    """``given``'s keys over ``known``'s, key by key."""
    values = {
        field.name: getattr(given, field.name) if getattr(given, field.name) is not None else getattr(known, field.name)
        for field in attrs.fields(ModelConfig)
    }
    return ModelConfig(**values)


def _prices(model: ModelConfig, at: str) -> Prices | None:
    """The table's prices of a model, or ``None`` when it gives none."""
    if model.input_price is None and model.output_price is None:
        if model.cached_input_price is not None:
            raise _refuse(f"{at}.cached_input_price", "needs input_price and output_price beside it")
        return None
    if model.input_price is None or model.output_price is None:
        missing = "input_price" if model.input_price is None else "output_price"
        raise _refuse(f"{at}.{missing}", "input_price and output_price go together; give both")
    return Prices(model.input_price, model.output_price, model.cached_input_price)


def _refuse(path: str, problem: str) -> ConfigError:
    return ConfigError(f"{path}: {problem}", path=path)


def resolve_providers(config: OpenAIConfig) -> dict[str, ProviderSettings]:
    """Merge ``config.providers`` over ``BUILTIN_PROVIDERS`` and check the result.

    :raises ConfigError: naming the dotted path of a bad or missing value: a provider name that
        cannot be a model-string prefix, a missing or non-HTTP ``base_url``, a model of a new
        provider (or a new model) without both limits, or ``max_output_tokens`` larger than
        ``context_window``.
    """
    merged = dict(BUILTIN_PROVIDERS)
    for name, given in config.providers.items():
        base = merged.get(name)
        merged[name] = given if base is None else _merge(base, given)
    resolved = {}
    for name, provider in merged.items():
        where = f"plugins.openai.providers.{name}"
        if not name or "/" in name or name.strip() != name:
            msg = "a provider name must be non-empty, without '/' or surrounding spaces (it prefixes 'name/model')"
            raise _refuse(where, msg)
        if provider.base_url is None:
            msg = "base_url is required for a provider that is not built in, e.g. 'http://127.0.0.1:8000/v1'"
            raise _refuse(f"{where}.base_url", msg)
        if not provider.base_url.startswith(("http://", "https://")):
            raise _refuse(
                f"{where}.base_url", f"expected an http:// or https:// URL, got {provider.base_url!r}"
            )
        models = {}
        for model, limits in provider.models.items():
            at = f"{where}.models.{model}"
            if not model:
                raise _refuse(at, "a model name must not be empty")
            if limits.context_window is None or limits.max_output_tokens is None:
                missing = "context_window" if limits.context_window is None else "max_output_tokens"
                raise _refuse(f"{at}.{missing}", "required for a model that is not built in")
            if limits.max_output_tokens > limits.context_window:
                msg = f"max_output_tokens ({limits.max_output_tokens}) exceeds context_window ({limits.context_window})"
                raise _refuse(at, msg)
            models[model] = ModelInfo(limits.context_window, limits.max_output_tokens, _prices(limits, at))
        resolved[name] = ProviderSettings(
            name=name,
            base_url=provider.base_url,
            api_key_env=provider.api_key_env or None,
            dialect=provider.dialect or "compatible",
            models=MappingProxyType(models),
        )
    return resolved
