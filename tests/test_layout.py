"""The core's layout is its architecture: outside ``dsh_core`` only public modules are imported."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: code that builds on the core the way a third party would
OUTSIDE = ("dsh_agent_loop", "contrib", "docs/examples")


def private_core_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import of a ``dsh_core`` module with a private (``_``) part."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if parts[0] == "dsh_core" and any(part.startswith("_") for part in parts[1:]):
                found.append((node.lineno, module))
    return found


def outside_sources() -> list[pathlib.Path]:
    return sorted(path for folder in OUTSIDE for path in (ROOT / folder).rglob("*.py") if ".venv" not in path.parts)


def test_the_check_finds_private_imports() -> None:
    source = "import dsh_core.host._dispatch\nfrom dsh_core.vocabulary._json import x\nfrom dsh_core.llm import Usage\n"
    assert private_core_imports(source) == [(1, "dsh_core.host._dispatch"), (2, "dsh_core.vocabulary._json")]


def test_there_is_outside_code_to_check() -> None:
    names = {path.relative_to(ROOT).parts[0] for path in outside_sources()}
    assert names == {"dsh_agent_loop", "contrib", "docs"}


@pytest.mark.parametrize("path", outside_sources(), ids=lambda path: str(path.relative_to(ROOT)))
def test_no_private_core_import_outside_the_core(path: pathlib.Path) -> None:
    assert private_core_imports(path.read_text()) == []


def test_folders_name_the_parts() -> None:
    """The vocabulary, the session log, the host, tool definition, the services and what every persistence
    backend shares each have a folder."""
    core = ROOT / "dsh_core"
    folders = {path.name for path in core.iterdir() if (path / "__init__.py").is_file()}
    assert folders == {"vocabulary", "session_log", "host", "tools", "services", "persistence", "testing"}
    loose = {path.name for path in core.glob("*.py")}
    assert loose == {"__init__.py", "__main__.py", "_catalog_doc.py", "hookspecs.py", "llm.py"}
