"""The glob tool and the permission rules read a path pattern the same way (one glob: wcmatch).

A rule ``write_file(docs/**)`` should cover exactly the paths that ``glob docs/**`` lists. Both
use wcmatch with the same flags; these tests hold them to it on generated patterns over a fixed
tree, and through the real tools.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from dsh_permissions._rules import PATH_GLOB_FLAGS, path_matcher
from dsh_workspace._walk import GLOB_FLAGS, compile_glob, walk
from hypothesis import given, settings
from hypothesis import strategies as st

from .conftest import Start
from .permissions_kit import call, text

TREE = [
    "a.py", "b.md", ".env", "x", "docs/a.md", "docs/b.py", "docs/deep/c.md", "docs/deep/.env",
    "src/a.ts", "src/a.tsx", "src/sub/b.ts", "ab/c", "b/a.py", "[x]", "a b/c.py",
]  # fmt: skip

segments = st.sampled_from(
    ["*", "**", "?", "a", "b", "docs", "src", "deep", "*.py", "*.md", ".env", "a.*", "[ab]*", "[!a]*",
     "{a,b}", "*.{ts,tsx}", "?.py", "a b", "\\[x\\]", "sub", "c*"]
)  # fmt: skip
patterns = st.lists(segments, min_size=1, max_size=4).map("/".join)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    for relative in TREE:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n")
    return root


def entries(root: Path) -> Iterator[str]:
    for relative, _, _ in walk(str(root)):
        yield relative


def test_one_glob_dialect() -> None:
    """Both sides use the same wcmatch flags."""
    assert PATH_GLOB_FLAGS == GLOB_FLAGS


@settings(max_examples=400, deadline=None)
@given(pattern=patterns)
def test_the_glob_tool_and_the_rules_agree_on_every_path(tree: Path, pattern: str) -> None:
    """For every path of the tree, the glob tool's matcher and a rule's pattern give the same answer."""
    matches, _ = compile_glob(pattern)
    rule = path_matcher(pattern)
    disagree = [path for path in entries(tree) if matches(path) != rule(path)]
    assert disagree == []


@pytest.mark.anyio
@pytest.mark.parametrize("pattern", ["docs/**", "**/*.py", "*.{ts,md}", "src/*", "**/.env", "[!a]*", "?.py"])
async def test_what_glob_lists_is_what_a_rule_covers(start: Start, tree: Path, pattern: str) -> None:
    """Through the real tools: the paths ``glob`` lists are exactly the tree's paths an allow rule covers."""
    async with start() as ctx:
        listed = await call(ctx, "glob", tree, pattern=pattern)
    lines = text(listed).splitlines()
    shown = {line.rstrip("/") for line in lines if not line.startswith("No files") and "more matches" not in line}
    rule = path_matcher(pattern)
    covered = {path for path in entries(tree) if rule(path)}
    assert shown == covered
