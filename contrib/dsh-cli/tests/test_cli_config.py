"""Configuration layering and provenance: defaults < user file < project file < environment < flags."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from dsh_cli._config import (
    DEFAULT_MODEL,
    Overrides,
    find_project_config,
    load_config,
    parse_assignment,
    user_config_path,
)

from dsh_core import ConfigError

from .cli_kit import run_dsh


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home")}


def test_defaults_alone(tmp_path: Path, home: dict[str, str]) -> None:
    """With no file, variable or flag, the model is the built-in default and says so."""
    config = load_config(cwd=tmp_path, environ=home)
    assert config.model == DEFAULT_MODEL
    assert config.origin("plugins.cli.model") == "default"
    assert config.layers == ("default",)


def test_each_layer_overrides_the_one_below(tmp_path: Path, home: dict[str, str]) -> None:
    """User file < project file < environment < flags, and each value remembers its layer."""
    user = _write(
        tmp_path / "home/.config/dsh/config.toml",
        '[plugins.cli]\nmodel = "openai/gpt-5"\n[plugins.retry]\nmax_attempts = 9\ninitial_delay = 2.0\n',
    )
    project = _write(tmp_path / "work/dsh.toml", "[plugins.retry]\nmax_attempts = 3\n")
    environ = {**home, "DSH_MODE": "read-only"}
    config = load_config(
        cwd=tmp_path / "work",
        environ=environ,
        overrides=Overrides(model="local/fake", assignments=(parse_assignment("retry.max_delay=4"),)),
    )
    assert config.model == "local/fake"
    assert config.origin("plugins.cli.model") == "--model"
    assert config.get("plugins.retry") == {"max_attempts": 3, "initial_delay": 2.0, "max_delay": 4}
    assert config.origin("plugins.retry.max_attempts") == str(project)
    assert config.origin("plugins.retry.initial_delay") == str(user)
    assert config.origin("plugins.retry.max_delay") == "--set plugins.retry.max_delay"
    assert config.get("plugins.permissions.mode") == "read-only"
    assert config.origin("plugins.permissions.mode") == "env DSH_MODE"
    assert config.layers == (
        "default",
        str(user),
        str(project),
        "env DSH_MODE",
        "--model",
        "--set plugins.retry.max_delay",
    )


def test_flags_beat_the_environment(tmp_path: Path, home: dict[str, str]) -> None:
    """--model wins over DSH_MODEL, --mode over DSH_MODE."""
    environ = {**home, "DSH_MODEL": "openai/gpt-5", "DSH_MODE": "read-only"}
    config = load_config(
        cwd=tmp_path, environ=environ, overrides=Overrides(model="local/x", mode="full-access")
    )
    assert config.model == "local/x"
    assert config.get("plugins.permissions.mode") == "full-access"
    assert config.origin("plugins.permissions.mode") == "--mode"


def test_xdg_config_home_is_respected(tmp_path: Path) -> None:
    """$XDG_CONFIG_HOME/dsh/config.toml is the user file; a relative XDG_CONFIG_HOME is ignored."""
    environ = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert user_config_path(environ) == tmp_path / "xdg/dsh/config.toml"
    assert (
        user_config_path({**environ, "XDG_CONFIG_HOME": "relative"})
        == tmp_path / "home/.config/dsh/config.toml"
    )
    _write(tmp_path / "xdg/dsh/config.toml", '[plugins.cli]\nmodel = "openai/gpt-5"\n')
    assert load_config(cwd=tmp_path, environ=environ).model == "openai/gpt-5"


def test_project_file_is_found_upward(tmp_path: Path) -> None:
    """The nearest dsh.toml or [tool.dsh] wins; a pyproject.toml without [tool.dsh] is passed over."""
    deep = tmp_path / "repo/src/pkg"
    deep.mkdir(parents=True)
    top = _write(tmp_path / "repo/pyproject.toml", '[tool.dsh.plugins.cli]\nmodel = "local/a"\n')
    _write(tmp_path / "repo/src/pyproject.toml", '[project]\nname = "x"\n')
    assert find_project_config(deep) == top
    config = load_config(cwd=deep, environ={"HOME": str(tmp_path)})
    assert config.model == "local/a"
    assert config.origin("plugins.cli.model") == str(top)
    same_dir = _write(tmp_path / "repo/dsh.toml", '[plugins.cli]\nmodel = "local/b"\n')
    assert find_project_config(deep) == same_dir


def test_config_flag_replaces_the_search(tmp_path: Path) -> None:
    """--config names the project file; the one the search would find is not read."""
    _write(tmp_path / "dsh.toml", '[plugins.cli]\nmodel = "local/found"\n')
    given = _write(tmp_path / "elsewhere.toml", '[plugins.cli]\nmodel = "local/given"\n')
    config = load_config(cwd=tmp_path, environ={"HOME": str(tmp_path)}, config_file=given)
    assert config.model == "local/given"
    with pytest.raises(ConfigError, match="no such configuration file"):
        load_config(cwd=tmp_path, environ={"HOME": str(tmp_path)}, config_file=tmp_path / "missing.toml")


def test_bad_toml_names_the_file(tmp_path: Path) -> None:
    """A file that is not TOML is refused with its path."""
    broken = _write(tmp_path / "dsh.toml", "[plugins.cli\n")
    with pytest.raises(ConfigError, match=str(broken)):
        load_config(cwd=tmp_path, environ={"HOME": str(tmp_path)})


def test_assignments_read_toml_values() -> None:
    """--set values are TOML when they parse (numbers, booleans, lists), else text; plugins. is implied."""
    assert parse_assignment("retry.max_attempts=3") == ("plugins.retry.max_attempts", 3)
    assert parse_assignment("plugins.cli.model=local/x") == ("plugins.cli.model", "local/x")
    assert parse_assignment('retry.codes=["SERVER"]') == ("plugins.retry.codes", ["SERVER"])
    assert parse_assignment("x.flag=true") == ("plugins.x.flag", True)
    for bad in ("no-equals", "=3", "a..b=1"):
        with pytest.raises(ValueError, match="KEY=VALUE"):
            parse_assignment(bad)


def test_a_refused_value_names_the_layer_that_set_it(tmp_path: Path, dsh_env: dict[str, str]) -> None:
    """A plugin refusing a value: the message names the flag (or file) that set it, exit 3."""
    done = run_dsh("run", "--set", "retry.max_attempts=0", "hi", cwd=tmp_path, env=dsh_env)
    assert done.returncode == 3
    assert "--set plugins.retry.max_attempts" in done.stderr
    assert "max_attempts" in done.stderr
    _write(tmp_path / "dsh.toml", "[plugins.retry]\nmax_attempts = -1\n")
    done = run_dsh("run", "hi", cwd=tmp_path, env=dsh_env)
    assert done.returncode == 3
    assert f"{tmp_path / 'dsh.toml'}: plugins.retry" in done.stderr


def test_dsh_config_shows_values_and_origins(tmp_path: Path, dsh_env: dict[str, str]) -> None:
    """`dsh config` prints each value with where it came from; --json gives the same as data."""
    _write(tmp_path / "dsh.toml", "[plugins.retry]\nmax_attempts = 2\n")
    env = {**dsh_env, "DSH_MODEL": "local/from-env"}
    done = run_dsh("config", "--mode", "read-only", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert 'model = "local/from-env"  # env DSH_MODEL' in done.stdout
    assert f"max_attempts = 2  # {tmp_path / 'dsh.toml'}" in done.stdout
    assert 'mode = "read-only"  # --mode' in done.stdout
    assert "initial_delay = 0.5  # default of plugin retry" in done.stdout
    parsed = tomllib.loads(done.stdout)  # the text output is itself a valid TOML file
    assert parsed["plugins"]["retry"]["max_attempts"] == 2
    assert "keep_recent_tokens" not in parsed["plugins"]["compaction"]  # unset: commented out
    as_json = json.loads(run_dsh("config", "--json", cwd=tmp_path, env=env).stdout)
    values = {row["path"]: row for row in as_json["values"]}
    assert values["plugins.cli.model"] == {
        "path": "plugins.cli.model",
        "value": "local/from-env",
        "origin": "env DSH_MODEL",
    }
    assert as_json["layers"] == ["default", str(tmp_path / "dsh.toml"), "env DSH_MODEL"]


def test_dsh_config_is_valid_toml_with_nested_tables(tmp_path: Path, dsh_env: dict[str, str]) -> None:
    """A table with keys and sub-tables ([plugins.openai] and [plugins.openai.providers.local]) is printed once."""
    _write(
        tmp_path / "dsh.toml",
        '[plugins.openai]\ntimeout = 30.0\n\n[plugins.openai.providers.local]\nbase_url = "http://127.0.0.1:9/v1"\n',
    )
    done = run_dsh("config", cwd=tmp_path, env=dsh_env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("[plugins.openai]\n") == 1, done.stdout
    parsed = tomllib.loads(done.stdout)
    assert parsed["plugins"]["openai"]["timeout"] == 30.0
    assert parsed["plugins"]["openai"]["providers"]["local"]["base_url"] == "http://127.0.0.1:9/v1"


def test_dsh_config_checks_the_values(tmp_path: Path, dsh_env: dict[str, str]) -> None:
    """`dsh config --set cli.reasoning=loud` shows the configuration, then names the bad value and exits 3."""
    done = run_dsh("config", "--set", "cli.reasoning=loud", cwd=tmp_path, env=dsh_env)
    assert done.returncode == 3, done.stdout
    assert 'reasoning = "loud"  # --set plugins.cli.reasoning' in done.stdout
    assert "--set plugins.cli.reasoning" in done.stderr
    assert "loud" in done.stderr
    malformed = run_dsh("config", "--set", "novalue", cwd=tmp_path, env=dsh_env)
    assert malformed.returncode == 2
    assert "expected KEY=VALUE" in malformed.stderr
