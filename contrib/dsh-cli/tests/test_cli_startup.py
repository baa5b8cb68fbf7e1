"""What ``dsh`` imports to start: the modules kept lazy stay out of a process that does not need them.

Each test runs ``dsh`` in a fresh interpreter and reads ``sys.modules`` when the command is done
(so a module imported at any point of the run is seen). Timings are the benchmark's business
(``benchmarks/cli_startup.py``); these tests pin the module sets, so the gain cannot regress silently.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .cli_kit import FakeLlm

#: runs ``dsh_cli.main(argv)`` (``null``: only imports dsh_cli; ``"bare"``: nothing) and writes the
#: names of the modules imported to ``out``; it imports nothing itself before that
_PROBE = """
import sys
argv, out = sys.argv[1], sys.argv[2]
status = 0
if argv != '"bare"':
    import dsh_cli
if argv not in ('"bare"', "null"):
    import json
    status = dsh_cli.main(json.loads(argv))
modules = sorted(sys.modules)
with open(out, "w", encoding="utf-8") as file:
    file.write("\\n".join(modules))
sys.exit(status)
"""

#: the harness and the libraries the commands import when they run
_HARNESS = ("dsh_core", "anyio", "attrs", "rich", "prompt_toolkit", "httpx", "jsonschema")
#: what only a rendering terminal needs (a piped ``dsh run`` prints plain text; rich.syntax and
#: pygments are not listed: httpx's own command line imports them with httpx)
_MARKDOWN = ("rich.markdown", "markdown_it")
#: what only ``dsh chat`` (the input line) needs
_CHAT = ("prompt_toolkit",)
#: heavy dependencies a ``dsh run`` without their plugin's table does not use
_UNUSED = (
    "temporalio",  # dsh-temporal: its package front and worker command import it on first use
    "psycopg",  # dsh-persistence-postgres: imported when the plugin starts with a dsn
    "jsonschema",  # dsh_core: built only for a schema or arguments the fast acceptor cannot vouch for
)


def _imported(argv: list[str] | str | None, *, cwd: Path, env: dict[str, str], tmp_path: Path) -> set[str]:
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(argv), str(out)],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(out.read_text(encoding="utf-8").split("\n"))


def _present(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The modules of ``names`` (packages and their submodules) that were imported."""
    return sorted(m for m in modules if any(m == name or m.startswith(f"{name}.") for name in names))


def test_import_dsh_cli_imports_nothing_but_itself(tmp_path: Path, dsh_env: dict[str, str]) -> None:
    """``import dsh_cli`` adds only itself to what the interpreter had loaded (not even typing)."""
    bare = _imported("bare", cwd=tmp_path, env=dsh_env, tmp_path=tmp_path)
    modules = _imported(None, cwd=tmp_path, env=dsh_env, tmp_path=tmp_path)
    assert sorted(modules - bare) == ["dsh_cli"]


def test_dsh_version_imports_no_harness(tmp_path: Path, dsh_env: dict[str, str]) -> None:
    """``dsh --version`` answers from the standard library alone."""
    modules = _imported(["--version"], cwd=tmp_path, env=dsh_env, tmp_path=tmp_path)
    assert _present(modules, _HARNESS) == []


def test_piped_dsh_run_imports_only_what_it_prints_with(
    llm: FakeLlm, project: Path, dsh_env: dict[str, str], tmp_path: Path
) -> None:
    """A piped ``dsh run`` never imports the Markdown renderer, the chat's input line, or opt-in backends."""
    llm.text("hel", "lo")
    modules = _imported(["run", "hi"], cwd=project, env=dsh_env, tmp_path=tmp_path)
    assert "dsh_core" in modules
    assert "httpx" in modules
    assert _present(modules, _MARKDOWN) == []
    assert _present(modules, _CHAT) == []


@pytest.mark.parametrize("package", _UNUSED)
def test_dsh_run_leaves_out_what_no_configured_plugin_uses(
    package: str, llm: FakeLlm, project: Path, dsh_env: dict[str, str], tmp_path: Path
) -> None:
    """A ``dsh run`` with no Temporal or Postgres table and no tool call imports none of these."""
    llm.text("hello")
    modules = _imported(["run", "hi"], cwd=project, env=dsh_env, tmp_path=tmp_path)
    assert "dsh_temporal" in modules
    assert "dsh_persistence_postgres" in modules
    assert _present(modules, (package,)) == []


def test_commands_that_call_no_model_never_import_httpx(
    project: Path, dsh_env: dict[str, str], tmp_path: Path
) -> None:
    """``dsh plugins`` and ``dsh sessions list`` start the openai plugin, which makes no HTTP client."""
    for argv in (["plugins"], ["sessions", "list"], ["config"]):
        modules = _imported(argv, cwd=project, env=dsh_env, tmp_path=tmp_path)
        assert "dsh_harness_openai" in modules, argv
        assert _present(modules, ("httpx", "httpcore", "h11")) == [], argv
