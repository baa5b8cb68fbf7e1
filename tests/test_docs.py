"""A doc example that no longer runs is a bug: every ```python block in the docs runs as a script."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted(
    [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("docs/plugins/*.md"), *ROOT.glob("contrib/*/README.md")]
)
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for number, block in enumerate(BLOCK.findall(page.read_text(encoding="utf-8")), 1):
            found.append((f"{page.relative_to(ROOT)}#{number}", block))
    return found


@pytest.mark.parametrize(("where", "code"), _blocks(), ids=[where for where, _ in _blocks()])
def test_doc_block_runs(where: str, code: str, tmp_path: Path) -> None:
    """The block runs to completion offline, with no API keys, in an empty folder."""
    env = {key: value for key, value in os.environ.items() if not key.endswith("_API_KEY")}
    env["HOME"] = str(tmp_path)
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"{where} failed:\n{result.stdout}\n{result.stderr}"


def test_worked_plugin_file_matches_the_guide() -> None:
    """docs/examples/step_budget.py is the guide's worked plugin, byte for byte."""
    guide = (ROOT / "docs" / "plugin-guide.md").read_text(encoding="utf-8")
    assert BLOCK.findall(guide)[0] == (ROOT / "docs" / "examples" / "step_budget.py").read_text(encoding="utf-8")
