"""The openai plugin: providers from config, API keys read late, clients closed with the plugin."""

from __future__ import annotations

import ssl
from typing import Any

import dsh_harness_openai
import dsh_harness_openai.testing
import httpx
import importlib_metadata
import pytest
from dsh_harness_openai import OpenAIAdapter, OpenAIPlugin
from dsh_harness_openai.testing import LlmServer, chunk
from httpx_aiohttp import AiohttpTransport

from dsh_core import ConfigError, Harness, Text, UserMessage
from dsh_core.llm import LlmRequest, ModelInfo

pytestmark = pytest.mark.anyio


def limits(info: ModelInfo) -> tuple[int, int]:
    return (info.context_window, info.max_output_tokens)


def hello(provider: str, model: str) -> LlmRequest:
    return LlmRequest(provider, model, [UserMessage((Text("hi"),))])


def test_front_is_exact() -> None:
    """The package exports the plugin, its config and the adapter; ``testing`` is a public submodule."""
    assert dsh_harness_openai.__all__ == ["OpenAIAdapter", "OpenAIConfig", "OpenAIPlugin"]
    names = {name for name, value in vars(dsh_harness_openai).items() if not name.startswith("_")}
    assert names - {"testing"} == set(dsh_harness_openai.__all__)
    assert dsh_harness_openai.testing.__all__ == ["LlmServer", "Recorded", "Reply", "chunk", "sse"]


def test_entry_point() -> None:
    """The distribution registers the plugin as `openai` in the `dsh` group."""
    (entry,) = [ep for ep in importlib_metadata.entry_points(group="dsh") if ep.name == "openai"]
    assert entry.load() is OpenAIPlugin
    assert OpenAIPlugin.name == "openai"


async def test_builtin_providers_and_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """deepseek and openai are registered out of the box with their models' limits."""
    async with Harness(plugins=[OpenAIPlugin()], autoload=False) as ctx:
        assert set(ctx.llm.providers) >= {"deepseek", "openai"}
        assert limits(ctx.llm.model_info("deepseek/deepseek-v4-flash")) == (1_000_000, 384_000)
        assert limits(ctx.llm.model_info("deepseek/deepseek-v4-pro")) == (1_000_000, 384_000)
        assert limits(ctx.llm.model_info("deepseek/deepseek-reasoner")) == (1_000_000, 384_000)
        assert ctx.llm.model_info("openai/gpt-5").context_window == 400_000


async def test_unknown_model_info_names_the_known_models() -> None:
    """model_info for an unlisted model raises a LookupError listing the known ones and the config key."""
    async with Harness(plugins=[OpenAIPlugin()], autoload=False) as ctx:
        with pytest.raises(LookupError) as caught:
            ctx.llm.model_info("deepseek/deepseek-v9")
    message = str(caught.value)
    assert "deepseek-v4-flash, deepseek-v4-pro" in message
    assert "plugins.openai.providers.deepseek.models.deepseek-v9" in message


async def test_a_missing_api_key_is_an_auth_failure_naming_the_variable(
    llm_server: LlmServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No key in the environment → AUTH naming DEEPSEEK_API_KEY, and nothing is sent."""
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    config = {"plugins": {"openai": {"providers": {"deepseek": {"base_url": llm_server.base_url}}}}}
    async with Harness(config=config, plugins=[OpenAIPlugin()], autoload=False) as ctx:
        (finish,) = [c async for c in ctx.llm.stream(hello("deepseek", "deepseek-v4-flash"))]
    assert finish.reason == "error"
    assert finish.error.code == "AUTH"
    assert "DEEPSEEK_API_KEY" in finish.error.message
    assert llm_server.requests == []


async def test_the_key_is_read_when_a_request_is_made(
    llm_server: LlmServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key set after the harness started is used: keys are read per request, not at start."""
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    config = {"plugins": {"openai": {"providers": {"deepseek": {"base_url": llm_server.base_url}}}}}
    llm_server.stream(chunk(content="hi", finish="stop"))
    async with Harness(config=config, plugins=[OpenAIPlugin()], autoload=False) as ctx:
        monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-late")
        chunks = [c async for c in ctx.llm.stream(hello("deepseek", "deepseek-v4-flash"))]
    assert chunks[-1].reason == "stop"
    assert llm_server.requests[0].headers["authorization"] == "Bearer sk-late"


async def test_clients_are_closed_and_adapters_removed_when_the_harness_stops() -> None:
    """Stopping the harness unregisters every adapter and closes its HTTP client."""
    harness = Harness(plugins=[OpenAIPlugin()], autoload=False)
    async with harness as ctx:
        adapters = [ctx.llm.resolve(f"{name}/m")[2] for name in ("deepseek", "openai")]
        llm = ctx.llm
        assert all(isinstance(a, OpenAIAdapter) and not a.client.is_closed for a in adapters)
        assert adapters[0].client is not adapters[1].client
    assert all(a.client.is_closed for a in adapters)
    assert llm.providers == ()


async def test_a_client_is_made_on_its_providers_first_request_only(
    llm_server: LlmServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Starting makes no client; the first request makes its provider's one; stopping closes it."""
    made: list[httpx.AsyncClient] = []
    real = httpx.AsyncClient

    def recording(*args: Any, **kwargs: Any) -> httpx.AsyncClient:
        client = real(*args, **kwargs)
        made.append(client)
        return client

    monkeypatch.setattr(httpx, "AsyncClient", recording)
    config = {"plugins": {"openai": {"providers": {"local": {"base_url": llm_server.base_url}}}}}
    llm_server.stream(chunk(content="hi", finish="stop"))
    llm_server.stream(chunk(content="again", finish="stop"))
    async with Harness(config=config, plugins=[OpenAIPlugin()], autoload=False) as ctx:
        assert made == []
        for _ in range(2):
            chunks = [c async for c in ctx.llm.stream(hello("local", "m"))]
            assert chunks[-1].reason == "stop"
        assert len(made) == 1
        assert not made[0].is_closed
        deepseek = ctx.llm.resolve("deepseek/deepseek-v4-flash")[2]
    assert made[0].is_closed
    assert len(made) == 1  # the providers nobody called never got a client
    with pytest.raises(RuntimeError, match="deepseek: the openai plugin has stopped"):
        deepseek.client  # noqa: B018 - the property makes the client


def ssl_context_of(client: httpx.AsyncClient) -> ssl.SSLContext:
    """The TLS context a client's transport connects with (aiohttp's on asyncio, httpx's on trio)."""
    transport = client._transport  # type: ignore[attr-defined]  # the client's default transport
    if isinstance(transport, AiohttpTransport):
        return transport.ssl_context
    return transport._pool._ssl_context  # type: ignore[no-any-return]  # httpx keeps it there


async def test_an_http_provider_trusts_no_certificate_and_https_ones_share_one_context() -> None:
    """A plain http:// provider's client gets a TLS context that verifies and trusts nobody."""
    config = {"plugins": {"openai": {"providers": {"local": {"base_url": "http://127.0.0.1:9/v1"}}}}}
    async with Harness(config=config, plugins=[OpenAIPlugin()], autoload=False) as ctx:
        contexts = {}
        for provider in ("local", "deepseek", "openai"):
            contexts[provider] = ssl_context_of(ctx.llm.resolve(f"{provider}/m")[2].client)
    assert contexts["deepseek"] is contexts["openai"]
    assert contexts["deepseek"].cert_store_stats()["x509_ca"] > 0
    local = contexts["local"]
    assert local.verify_mode == ssl.CERT_REQUIRED
    assert local.check_hostname
    assert local.cert_store_stats()["x509_ca"] == 0
    assert local.get_ca_certs() == []


@pytest.mark.parametrize("choice", ["auto", "httpx"])
async def test_the_transport_is_aiohttps_on_asyncio_and_httpxs_own_on_trio(
    llm_server: LlmServer, choice: str, anyio_backend: str
) -> None:
    """``http_transport = "auto"`` streams over aiohttp on asyncio; ``"httpx"``, and trio, over httpx's own."""
    config = {
        "plugins": {
            "openai": {"http_transport": choice, "providers": {"local": {"base_url": llm_server.base_url}}}
        }
    }
    llm_server.stream(chunk(content="hi"), chunk(finish="stop"))
    async with Harness(config=config, plugins=[OpenAIPlugin()], autoload=False) as ctx:
        chunks = [c async for c in ctx.llm.stream(hello("local", "m"))]
        transport = ctx.llm.resolve("local/m")[2].client._transport  # type: ignore[attr-defined]
    assert [type(c).__name__ for c in chunks] == ["TextDelta", "Finish"]
    expected = (
        AiohttpTransport if choice == "auto" and anyio_backend == "asyncio" else httpx.AsyncHTTPTransport
    )
    assert type(transport) is expected


async def test_an_unknown_transport_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="http_transport"):
        async with Harness(
            config={"plugins": {"openai": {"http_transport": "curl"}}},
            plugins=[OpenAIPlugin()],
            autoload=False,
        ):
            pass


async def test_a_builtin_provider_is_overridden_key_by_key(
    llm_server: LlmServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Overriding deepseek's base_url and one limit keeps its key variable, dialect and other models."""
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-x")
    config = {
        "plugins": {
            "openai": {
                "providers": {
                    "deepseek": {
                        "base_url": llm_server.base_url,
                        "models": {
                            "deepseek-v4-pro": {"max_output_tokens": 65_536},
                            "deepseek-v4-lite": {"context_window": 128_000, "max_output_tokens": 8_000},
                        },
                    }
                }
            }
        }
    }
    llm_server.stream(chunk(content="hi", finish="stop"))
    async with Harness(config=config, plugins=[OpenAIPlugin()], autoload=False) as ctx:
        assert limits(ctx.llm.model_info("deepseek/deepseek-v4-pro")) == (1_000_000, 65_536)
        assert limits(ctx.llm.model_info("deepseek/deepseek-v4-flash")) == (1_000_000, 384_000)
        assert ctx.llm.model_info("deepseek/deepseek-v4-lite") == ModelInfo(128_000, 8_000)  # no price known
        chunks = [c async for c in ctx.llm.stream(hello("deepseek", "deepseek-v4-pro"))]
    assert chunks[-1].reason == "stop"
    request = llm_server.requests[0]
    assert request.headers["authorization"] == "Bearer sk-x"
    assert request.body["thinking"] == {"type": "enabled"}  # still the deepseek dialect


async def test_a_custom_local_provider(llm_server: LlmServer) -> None:
    """Any OpenAI-compatible server by base URL: its models, no key, streaming."""
    config = {
        "plugins": {
            "openai": {
                "providers": {
                    "ollama": {
                        "base_url": llm_server.base_url + "/",
                        "models": {"qwen3:8b": {"context_window": 40_960, "max_output_tokens": 8_192}},
                    }
                }
            }
        }
    }
    llm_server.stream(chunk(content="hi", finish="stop"))
    async with Harness(config=config, plugins=[OpenAIPlugin()], autoload=False) as ctx:
        assert ctx.llm.model_info("ollama/qwen3:8b") == ModelInfo(40_960, 8_192)
        chunks = [c async for c in ctx.llm.stream(hello("ollama", "qwen3:8b"))]
    assert chunks[-1].reason == "stop"
    assert llm_server.requests[0].path == "/v1/chat/completions"
    assert "authorization" not in llm_server.requests[0].headers


async def test_the_builtin_key_can_be_switched_off(
    llm_server: LlmServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """api_key_env = "" on a built-in provider sends no key (a local proxy standing in for it)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = {
        "plugins": {"openai": {"providers": {"openai": {"base_url": llm_server.base_url, "api_key_env": ""}}}}
    }
    llm_server.stream(chunk(content="hi", finish="stop"))
    async with Harness(config=config, plugins=[OpenAIPlugin()], autoload=False) as ctx:
        chunks = [c async for c in ctx.llm.stream(hello("openai", "gpt-5"))]
    assert chunks[-1].reason == "stop"
    assert "authorization" not in llm_server.requests[0].headers


@pytest.mark.parametrize(
    ("provider", "path"),
    [
        ({"models": {}}, "plugins.openai.providers.mine.base_url"),
        ({"base_url": "ftp://x"}, "plugins.openai.providers.mine.base_url"),
        (
            {"base_url": "http://x", "models": {"m": {"context_window": 10}}},
            "plugins.openai.providers.mine.models.m.max_output_tokens",
        ),
        (
            {"base_url": "http://x", "models": {"m": {"context_window": 10, "max_output_tokens": 20}}},
            "plugins.openai.providers.mine.models.m",
        ),
    ],
)
async def test_bad_provider_config_is_refused_at_start(provider: dict[str, Any], path: str) -> None:
    """A provider without a usable base_url or with incomplete or impossible limits stops the start."""
    config = {"plugins": {"openai": {"providers": {"mine": provider}}}}
    with pytest.raises(ConfigError) as caught:
        async with Harness(config=config, plugins=[OpenAIPlugin()], autoload=False):
            pass
    assert caught.value.path == path
    assert str(caught.value).startswith(f"<config>: {path}")  # named like every config error


async def test_unknown_config_keys_are_refused() -> None:
    """A typo in the table is a ConfigError, not silently ignored."""
    config = {"plugins": {"openai": {"providers": {"deepseek": {"base_ulr": "http://x"}}}}}
    with pytest.raises(ConfigError, match="base_ulr"):
        async with Harness(config=config, plugins=[OpenAIPlugin()], autoload=False):
            pass


async def test_the_adapter_works_on_its_own() -> None:
    """OpenAIAdapter needs only a client: usable without the plugin (here over a MockTransport)."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}\n\ndata: [DONE]\n\n'
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        adapter = OpenAIAdapter(
            "vllm", client=client, base_url="http://gpu:8000/v1", models={"m": ModelInfo(100, 10)}
        )
        chunks = [c async for c in adapter.stream(hello("vllm", "m"))]
    assert [c.to_json()["type"] for c in chunks] == ["text-delta", "finish"]
    assert str(seen[0].url) == "http://gpu:8000/v1/chat/completions"
    assert adapter.model_info("m") == ModelInfo(100, 10)
    assert adapter.endpoint == "http://gpu:8000/v1/chat/completions"
