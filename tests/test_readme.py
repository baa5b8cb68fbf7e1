"""The README's promises: what ``make test`` needs, and where each figure of "What it costs" comes from."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: ``| a text step | 30 µs | 31 µs | `benchmarks/loop.py`: text step |``: the last cell names the
#: script and the label under which it prints the row's figures
SOURCE = re.compile(r"^`(?P<script>benchmarks/[\w.]+\.py)`(?: [\w-]+)*: (?P<label>.+)$")


def make_test_dry_run() -> subprocess.CompletedProcess[str]:
    """``make -n test``: what ``make test`` would do, stopping where it would stop, nothing built."""
    return subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.parametrize(("program", "package"), [("bwrap", "bubblewrap"), ("rg", "ripgrep"), ("ip", "iproute2")])
def test_make_test_stops_at_once_naming_a_missing_package(
    program: str, package: str, path_without: Callable[..., str]
) -> None:
    """Without a program the suite runs for real, ``make test`` builds nothing and says in one line what to install."""
    path_without(program)
    done = make_test_dry_run()
    assert done.returncode != 0
    assert done.stdout == ""  # not even the venv
    (line,) = done.stderr.splitlines()
    named = re.search(r"make test needs (?P<names>[\w -]+), .* apt-get install (?P=names) \(Debian/Ubuntu\)", line)
    assert named, line
    assert package in named.group("names").split(), line


def test_make_test_runs_when_every_package_is_there(
    path_without: Callable[..., str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every program present (stand-ins here), ``make test`` goes on to pytest, mypy and ruff."""
    farm = Path(path_without())
    for program in ("bwrap", "rg", "ip"):
        if not (farm / program).exists():
            (farm / program).write_text("#!/bin/sh\nexit 0\n")
            (farm / program).chmod(0o755)
    bindir = tmp_path / "postgres-bin"
    bindir.mkdir()
    for program in ("initdb", "postgres"):
        (bindir / program).write_text("")
    monkeypatch.setenv("DSH_POSTGRES_BINDIR", str(bindir))
    done = make_test_dry_run()
    assert done.returncode == 0, done.stderr
    assert "-m pytest" in done.stdout
    assert os.environ["PATH"] == str(farm)
