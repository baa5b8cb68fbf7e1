"""glob and grep: pattern syntax, both grep backends with the same output, caps and errors."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from dsh_workspace._walk import compile_glob

from dsh_core import Context

from .workspace_kit import call, text

pytestmark = pytest.mark.anyio

BACKENDS = [
    pytest.param({"search": "python"}, id="python"),
    pytest.param(
        {"search": "ripgrep"},
        id="ripgrep",
        marks=pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep (rg) is not installed"),
    ),
]


@pytest.fixture
def tree(ws: Path) -> Path:
    """src/app.py, src/util/helpers.py, docs/guide.md, README.md, .git/config, and a link out."""
    (ws / "src" / "util").mkdir(parents=True)
    (ws / "docs").mkdir()
    (ws / ".git").mkdir()
    (ws / "src" / "app.py").write_text("import util\n\ndef main():\n    return util.run()\n")
    (ws / "src" / "util" / "helpers.py").write_text("def run():\n    return 'RUN'\n")
    (ws / "docs" / "guide.md").write_text("# Guide\nCall main() to run.\n")
    (ws / "README.md").write_text("readme: run main\n")
    (ws / ".git" / "config").write_text("main = yes\n")
    (ws / "escape").symlink_to(ws.parent / "outside", target_is_directory=True)
    return ws


# ---------------------------------------------------------------------- glob


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("**/*.py", ".", ["src/app.py", "src/util/helpers.py"]),
        ("*.md", ".", ["README.md"]),
        ("**/*.md", ".", ["README.md", "docs/guide.md"]),
        ("src/*", ".", ["src/app.py", "src/util/"]),
        ("*.{py,md}", "src/util", ["src/util/helpers.py"]),
        ("**/*.{py,md}", ".", ["README.md", "docs/guide.md", "src/app.py", "src/util/helpers.py"]),
        ("docs/**", ".", ["docs/", "docs/guide.md"]),
        ("?EADME.*", ".", ["README.md"]),
        ("[rR]*", ".", ["README.md"]),
    ],
)
async def test_glob_patterns(ctx: Context, tree: Path, pattern: str, path: str, expected: list[str]) -> None:
    """glob matches '*' within a level, '**' across levels, '?', classes and braces; paths are relative."""
    result = await call(ctx, "glob", tree, pattern=pattern, path=path)
    assert text(result).splitlines() == expected


async def test_glob_skips_git_and_does_not_follow_links_out(ctx: Context, tree: Path) -> None:
    """glob never descends into .git or through a symlinked directory."""
    found = text(await call(ctx, "glob", tree, pattern="**")).splitlines()
    assert "escape/" in found
    assert not any(entry.startswith((".git", "escape/secret")) for entry in found)


@pytest.mark.parametrize("workspace_config", [{"max_results": 2}])
async def test_glob_caps_results(ctx: Context, tree: Path) -> None:
    """Beyond max_results matches, glob says how many it left out."""
    lines = text(await call(ctx, "glob", tree, pattern="**/*")).splitlines()
    assert len(lines) == 3
    assert lines[2].startswith("[")
    assert "more matches not shown" in lines[2]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"pattern": "*.rs"}, "No files match '*.rs' in the workspace."),
        ({"pattern": "/etc/*"}, "is absolute; patterns are relative"),
        ({"pattern": "../*"}, "contains '..'"),
        ({"pattern": " "}, "the glob pattern is empty"),
        ({"pattern": "*", "path": "README.md"}, "'README.md' is not a directory"),
    ],
)
async def test_glob_answers(ctx: Context, tree: Path, arguments: dict[str, Any], expected: str) -> None:
    """No match, absolute patterns, '..' and a file as the base each get a clear answer."""
    assert expected in text(await call(ctx, "glob", tree, **arguments))


def test_glob_helpers() -> None:
    """Braces nest, and a pattern without '**' bounds the walk's depth."""
    nested, _ = compile_glob("a{b,c{d,e}}f")
    assert [name for name in ("abf", "acdf", "acef", "af", "acf") if nested(name)] == ["abf", "acdf", "acef"]
    solo, _ = compile_glob("{solo}")
    assert solo("{solo}") or solo("solo")
    matches, depth = compile_glob("src/*.py")
    assert depth == 2
    assert matches("src/a.py")
    assert not matches("src/x/a.py")
    assert compile_glob("**/x")[1] is None


# ---------------------------------------------------------------------- grep


@pytest.mark.parametrize("workspace_config", BACKENDS)
async def test_grep_prints_path_line_and_text(ctx: Context, tree: Path) -> None:
    """Each matching line comes as path:line:text, relative to the workspace, in path order."""
    result = await call(ctx, "grep", tree, pattern=r"def \w+\(")
    assert text(result).splitlines() == ["src/app.py:3:def main():", "src/util/helpers.py:1:def run():"]


@pytest.mark.parametrize("workspace_config", BACKENDS)
async def test_grep_options(ctx: Context, tree: Path) -> None:
    """ignore_case, glob and a path narrow or widen the search the same way on both backends."""
    found = text(await call(ctx, "grep", tree, pattern="run", ignore_case=True, glob="*.py")).splitlines()
    assert found == [
        "src/app.py:4:    return util.run()",
        "src/util/helpers.py:1:def run():",
        "src/util/helpers.py:2:    return 'RUN'",
    ]
    in_docs = text(await call(ctx, "grep", tree, pattern="main", path="docs")).splitlines()
    assert in_docs == ["docs/guide.md:2:Call main() to run."]
    one_file = text(await call(ctx, "grep", tree, pattern="main", path="README.md")).splitlines()
    assert one_file == ["README.md:1:readme: run main"]


@pytest.mark.parametrize("workspace_config", BACKENDS)
async def test_grep_context_lines(ctx: Context, tree: Path) -> None:
    """context adds lines before and after, marked with '-' instead of ':'."""
    result = await call(ctx, "grep", tree, pattern="def main", path="src/app.py", context=1)
    assert text(result).splitlines() == [
        "src/app.py-2-",
        "src/app.py:3:def main():",
        "src/app.py-4-    return util.run()",
    ]


@pytest.mark.parametrize("workspace_config", BACKENDS)
async def test_grep_skips_git_binaries_and_links_out(ctx: Context, tree: Path) -> None:
    """.git, binary files and symlinked directories leading out are not searched."""
    (tree / "data.bin").write_bytes(b"secret\x00\x01")
    result = await call(ctx, "grep", tree, pattern="secret|main = yes")
    assert text(result) == "No matches for /secret|main = yes/ in the workspace."


@pytest.mark.parametrize("workspace_config", [{"search": "python", "max_results": 2}])
async def test_grep_caps_matches(ctx: Context, tree: Path) -> None:
    """After max_results matches the search stops and says so."""
    lines = text(await call(ctx, "grep", tree, pattern="r")).splitlines()
    assert len(lines) == 3
    assert lines[2] == "[stopped after 2 matches; narrow the pattern, the path or the glob]"


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep (rg) is not installed")
@pytest.mark.parametrize("workspace_config", [{"search": "ripgrep", "max_results": 2}])
async def test_grep_caps_matches_with_ripgrep(ctx: Context, tree: Path) -> None:
    """ripgrep is stopped after max_results matches too."""
    lines = text(await call(ctx, "grep", tree, pattern="r")).splitlines()
    assert len(lines) == 3
    assert lines[2].startswith("[stopped after 2 matches")


@pytest.mark.parametrize("workspace_config", BACKENDS)
async def test_grep_invalid_regex_is_an_error(ctx: Context, tree: Path) -> None:
    """A pattern that is not a regular expression is an error result naming it."""
    result = await call(ctx, "grep", tree, pattern="(unclosed")
    assert result.is_error
    assert result.error_code == "TOOL_ERROR"
    assert "(unclosed" in text(result)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"pattern": ""}, "the pattern is empty"),
        ({"pattern": "x", "path": "nowhere"}, "there is no file or directory 'nowhere' to search"),
        ({"pattern": "x", "context": 11}, "at arguments.context: 11 is greater than the maximum of 10"),
        ({"pattern": "x", "context": -1}, "at arguments.context: -1 is less than the minimum of 0"),
    ],
)
async def test_grep_argument_errors(
    ctx: Context, tree: Path, arguments: dict[str, Any], expected: str
) -> None:
    """An empty pattern, a missing path and too much context are refused."""
    assert expected in text(await call(ctx, "grep", tree, **arguments))


@pytest.mark.parametrize("workspace_config", [{"search": "ripgrep"}])
async def test_grep_ripgrep_required_but_missing(
    ctx: Context, tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """search = 'ripgrep' without rg on PATH is an error that says so."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    result = await call(ctx, "grep", tree, pattern="main")
    assert "configured to use ripgrep (search = 'ripgrep'), but 'rg' is not installed" in text(result)
