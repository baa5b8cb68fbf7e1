"""``dsh config init``: write a commented ``dsh.toml`` — the model to set, every plugin's settings as comments.

Only ``[plugins.cli] model`` is set; every other value is the installed plugin's default, commented
out, so the file changes nothing until a line is uncommented. It never overwrites a file unless
``--force`` is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._config import DEFAULT_MODEL
from ._errors import CliError
from ._exit import ExitCode
from ._inspect import plugin_defaults, toml_key, toml_value

__all__ = ["config_init", "template"]

_HEADER = f"""\
# dsh configuration for this project (dsh.toml). `dsh config` shows the effective values and
# where each came from; `dsh models` lists the models the providers are configured with.
#
# Layers, lowest precedence first: built-in defaults, ~/.config/dsh/config.toml, this file,
# the environment (DSH_MODEL, DSH_MODE, DSH_SESSIONS_DIR), then flags (--model, --mode, --set).
# API keys never go here: each provider reads its key from an environment variable
# (DEEPSEEK_API_KEY, OPENAI_API_KEY, or api_key_env in [plugins.openai.providers.NAME]).

[plugins.cli]
model = "{DEFAULT_MODEL}"
# a local OpenAI-compatible server instead (no key needed):
# model = "local/qwen3"
#
# [plugins.openai.providers.local]
# base_url = "http://127.0.0.1:8080/v1"
# models = {{ qwen3 = {{ context_window = 32768, max_output_tokens = 8192 }} }}
# what it costs per million tokens, to show a session's cost (built-in models have their prices):
# models = {{ qwen3 = {{ context_window = 32768, max_output_tokens = 8192, input_price = 0.2, output_price = 0.6 }} }}
"""


def template() -> str:
    """The text of a new ``dsh.toml``."""
    parts = [_HEADER]
    for plugin, table in sorted(plugin_defaults().items()):
        rows = [(key, value) for key, value in table.items() if not (plugin == "cli" and key == "model")]
        if not rows:
            continue
        parts.append(f"\n# [plugins.{toml_key(plugin)}]  (the defaults of plugin {plugin})\n")
        parts.extend(_commented(key, value) for key, value in rows)
    return "".join(parts)


def _commented(key: str, value: Any) -> str:
    if value is None:
        return f"# {toml_key(key)} =   (unset)\n"
    return f"# {toml_key(key)} = {toml_value(value)}\n"


def config_init(cwd: Path, *, force: bool = False) -> int:
    """Write ``cwd/dsh.toml``; refuses to replace one unless ``force``."""
    path = cwd / "dsh.toml"
    if path.exists() and not force:
        msg = f"{path} exists; `dsh config init --force` replaces it"
        raise CliError(msg, code=ExitCode.USAGE)
    path.write_text(template(), encoding="utf-8")
    print(f"wrote {path}; edit it, then `dsh config` shows the result")
    return int(ExitCode.OK)
